r"""GMM spectra: learnable Gaussian-mixture spectral densities for RKS and PRF (Chowdhury et al.
Eqs. 4-5, 10).

**Convention (design.md trap 5).** Component c has weight ``pi_c = softmax(logits)_c``, mean ``mu_c`` and a
covariance factor ``S_c`` with

    Sigma_c = S_c S_c^T,        omega = mu_c + S_c n,        n ~ N(0, I_d).

The paper prints ``omega = Sigma n + mu`` (Eq. 5, which has covariance Sigma^2) and states Theorem 3 with
``Sigma = S^T S`` while its proof samples ``omega = S eta + mu`` (covariance S S^T); the convention here is
the proof's, so ``p^T Sigma p = ||S^T p||^2`` everywhere, including the MSE formulas below. A factor of shape
(C, d) is a *diagonal* factor (standard deviations, ``Sigma_c = diag(S_c^2)``, O(d) per component: the GMM-PRF
setting of the paper's complexity analysis); shape (C, d, d) is a full factor.

**Deterministic assignment.** A sampled component index is piecewise constant in the weights, so the weights
would get no gradient. Instead the M frequencies are split M/C per component (noise of shape (C, M/C, d),
``refattn.random.draw_gmm_noise``) and component c's features are scaled by ``sqrt(C pi_c)``: then

    phi(q) . phi(k) = sum_c pi_c (1 / (M/C)) sum_j f(omega_cj; q, k)

is unbiased for ``sum_c pi_c kappa_c`` and the weights get gradients through the scale. Storing logits keeps
every learning step on the simplex.

**Kernels** (closed forms, :func:`gmm_rks_kernel`, :func:`gmm_prf_kernel`), with p = q - k and o = q + k:

    RKS (Eq. 4):            sum_c pi_c exp(-||S_c^T p||^2 / 2) cos(mu_c^T p)
    PRF (Eq. 9 offset):     sum_c pi_c exp(-|q|^2 - |k|^2 + mu_c^T o + ||S_c^T o||^2 / 2)

(PRF: the Gaussian kernel exp(-|q - k|^2 / 2) at mu = 0, S = I.)

**Mean squared error** (Theorem 3 re-derived for this estimator; the printed Eqs. 13-14 are checked in
``paper_checks/chowdhury/spectra.py``). With s_c = ||S_c^T p||^2 and t_c = ||S_c^T o||^2:

    MSE_RKS = sum_c (C pi_c^2 / M) [ (1 + cos(2 mu_c^T p) e^{-2 s_c}) / 2 - cos^2(mu_c^T p) e^{-s_c} ]
    MSE_RKS (antithetic C = 2, mu_2 = -mu_1, S_1 = S_2, same noise) = (1/M) cos^2(mu^T p) (1 - e^{-s})^2
    MSE_PRF = sum_c (C pi_c^2 / M) e^{-2(|q|^2 + |k|^2 - mu_c^T o)} (e^{2 t_c} - e^{t_c})

Axes: ``...`` batch and heads, ``L`` positions, ``d`` head width, ``C`` components, ``M`` frequencies
(``Mc = M / C`` per component), ``Lq``/``Lk`` query/key positions.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._xp import check_finite, check_shape, namespace
from .positive import (_stable_bwd, _stable_fwd, gaussian_positive_features_bwd,
                       gaussian_positive_features_fwd, positive_features_stable_bwd,
                       positive_features_stable_fwd)
from .trig import _check_qk, _trig_bwd_core, _trig_core, trig_features_bwd, trig_features_fwd

__all__ = [
    "GMMParams", "gmm_weights", "gmm_antithetic_params",
    "gmm_frequencies", "gmm_frequencies_fwd", "gmm_frequencies_bwd", "GMMFrequenciesGrads",
    "gmm_rks_features", "gmm_rks_features_fwd", "gmm_rks_features_bwd",
    "gmm_prf_features", "gmm_prf_features_fwd", "gmm_prf_features_bwd",
    "gmm_prf_features_stable", "gmm_prf_features_stable_fwd", "gmm_prf_features_stable_bwd",
    "GMMFeaturesGrads",
    "gmm_rks_kernel", "gmm_prf_kernel", "gmm_rks_mse", "gmm_rks_antithetic_mse", "gmm_prf_mse",
]

Array = Any


class GMMParams(NamedTuple):
    """Learnable GMM spectrum (initialise with ``refattn.random.init_gmm``)."""

    logits: Array  # (C,)        mixture weights pi = softmax(logits)
    mu: Array      # (C, d)      component means
    S: Array       # (C, d, d) full factor (Sigma = S S^T) or (C, d) diagonal factor (Sigma = diag(S^2))


class GMMFrequenciesGrads(NamedTuple):
    """Gradients of :func:`gmm_frequencies`: ``noise`` and ``params`` (a :class:`GMMParams` of gradients)."""

    noise: Array        # (C, Mc, d)
    params: GMMParams


class GMMFeaturesGrads(NamedTuple):
    """Gradients of the GMM feature maps: ``x``, ``noise`` and ``params`` (a :class:`GMMParams`)."""

    x: Array            # (..., L, d)
    noise: Array        # (C, Mc, d)
    params: GMMParams


class _FreqCache(NamedTuple):
    noise: Array
    params: GMMParams
    pi: Array        # (C,)
    scale: Array     # (C,)   sqrt(C pi)
    diagonal: bool


def _check_cotangent(name, a, shape, *, xp):
    """A backward's incoming gradient: exactly the forward output's `shape` (never broadcast), finite."""
    if tuple(a.shape) != tuple(shape):
        raise ValueError(f"{name}: expected the forward output's shape {tuple(shape)}; got {tuple(a.shape)}")
    check_finite(name, a, xp=xp)


def _check_params(params: Any, *, d: int | None = None, sizes: dict | None = None) -> tuple[Any, bool, dict]:
    xp, diagonal, sizes = _check_params_struct(params, d=d, sizes=sizes)
    check_finite("params.logits", params.logits, xp=xp)
    check_finite("params.mu", params.mu, xp=xp)
    check_finite("params.S", params.S, xp=xp)
    return xp, diagonal, sizes


def _check_params_struct(params: Any, *, d: int | None = None, sizes: dict | None = None):
    """Structural checks of :class:`GMMParams` (type, namespaces, dtypes, shapes): no data read. Returns
    ``(xp, diagonal, sizes)``."""
    if not isinstance(params, GMMParams):
        raise TypeError(f"params: expected GMMParams(logits, mu, S); got {type(params).__name__}")
    xp = namespace(params.logits, params.mu, params.S, names=("params.logits", "params.mu", "params.S"))
    sizes = {} if sizes is None else sizes
    if d is not None:
        sizes.setdefault("d", (d, "x"))
    check_shape("params.logits", params.logits, "C", sizes)
    if params.logits.shape[0] < 1:
        raise ValueError("params.logits: expected at least one component, shape (C,) with C >= 1; got (0,)")
    check_shape("params.mu", params.mu, "C, d", sizes)
    if params.S.ndim == 2:
        check_shape("params.S", params.S, "C, d", sizes)
        diagonal = True
    else:
        check_shape("params.S", params.S, "C, d, d", sizes)
        diagonal = False
    return xp, diagonal, sizes


def gmm_weights(logits: Array) -> Array:
    """The mixture weights ``pi = softmax(logits)`` of a GMM spectrum (Chowdhury et al. Eq. (4)).

    Max-subtracted, so no logit overflows; storing logits keeps every learning step on the simplex.

    Parameters
    ----------
    logits : (C,) array
        Real floating, finite, C >= 1.

    Returns
    -------
    pi : (C,) array
        Positive weights summing to 1; same namespace and dtype as `logits`.

    Raises
    ------
    ValueError
        If `logits` is not 1-D, is empty or is not finite.
    TypeError
        If `logits` is not a real floating array.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gmm_weights
    >>> gmm_weights(np.array([0.0, np.log(3.0)]))
    array([0.25, 0.75])
    """
    xp = namespace(logits, names=("logits",))
    check_shape("logits", logits, "C")
    if logits.shape[0] == 0:
        raise ValueError("logits: expected at least one mixture component; got shape (0,)")
    check_finite("logits", logits, xp=xp)
    return _gmm_weights(logits, xp=xp)


def _gmm_weights(logits: Array, *, xp: Any) -> Array:
    """Unchecked core of :func:`gmm_weights` (params already validated)."""
    z = xp.exp(logits - xp.max(logits))                                              # (C,)
    return z / xp.sum(z)


def gmm_antithetic_params(mu: Array, S: Array) -> GMMParams:
    """The antithetic GMM of Chowdhury et al. Theorem 3: C = 2, means ``+-mu``, shared ``S``, equal weights.

    Use with ``refattn.random.draw_gmm_antithetic_noise`` (both components driven by the same noise); its MSE
    is :func:`gmm_rks_antithetic_mse`.

    Parameters
    ----------
    mu : (d,) array
        Mean of the first component. Real floating, finite.
    S : (d, d) or (d,) array
        Shared covariance factor, full or diagonal; same namespace and dtype as `mu`, finite.

    Returns
    -------
    GMMParams
        ``logits = (0, 0)``, ``mu = [mu; -mu]`` (2, d), ``S = [S; S]`` (2, d, d) or (2, d).

    Raises
    ------
    ValueError
        If the widths of `mu` and `S` disagree, or an input is not finite.
    TypeError
        If `mu` and `S` differ in namespace or dtype, or are not real floating.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import gmm_antithetic_params
    >>> params = gmm_antithetic_params(np.array([0.5, 1.0]), np.array([1.0, 0.5]))
    >>> params.mu
    array([[ 0.5,  1. ],
           [-0.5, -1. ]])
    >>> params.S.shape
    (2, 2)
    """
    xp = namespace(mu, S, names=("mu", "S"))
    sizes = check_shape("mu", mu, "d")
    check_shape("S", S, "d, d" if S.ndim == 2 else "d", sizes)
    check_finite("mu", mu, xp=xp)
    check_finite("S", S, xp=xp)
    return GMMParams(logits=xp.zeros(2, dtype=mu.dtype), mu=xp.stack((mu, -mu)), S=xp.stack((S, S)))


def gmm_frequencies_fwd(noise: Array, params: GMMParams) -> tuple[tuple[Array, Array], _FreqCache]:
    r"""The reparameterised frequencies and per-frequency feature scales (Eq. 5, convention above).

    Parameters
    ----------
    noise : (C, Mc, d) array
        ``N(0, I)`` draws (``refattn.random.draw_gmm_noise``), component-major. Real floating, finite.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Same namespace and dtype as `noise`, finite,
        C >= 1.

    Returns
    -------
    omega : (M, d) array
        ``omega[c * Mc + j] = mu_c + S_c noise[c, j]``, M = C Mc.
    scale : (M,) array
        ``sqrt(C pi_c)`` for every frequency of component c.
    cache : NamedTuple
        Opaque, for :func:`gmm_frequencies_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.
    """
    xp, diagonal, sizes = _check_params(params)
    namespace(noise, params.mu, names=("noise", "params.mu"))
    check_shape("noise", noise, "C, Mc, d", sizes)
    check_finite("noise", noise, xp=xp)
    return _freq_core(noise, params, diagonal, xp=xp)


def _freq_core(noise, params, diagonal, *, xp):
    """Unchecked core of :func:`gmm_frequencies_fwd`."""
    C, Mc, d = noise.shape
    if diagonal:
        omega = xp.expand_dims(params.mu, axis=1) + noise * xp.expand_dims(params.S, axis=1)      # (C, Mc, d)
    else:
        omega = xp.expand_dims(params.mu, axis=1) + noise @ xp.matrix_transpose(params.S)        # (C, Mc, d)
    pi = _gmm_weights(params.logits, xp=xp)                                                  # (C,)
    scale_c = xp.sqrt(C * pi)                                                         # (C,)
    scale = xp.reshape(xp.broadcast_to(xp.expand_dims(scale_c, axis=1), (C, Mc)), (C * Mc,))  # (M,)
    return (xp.reshape(omega, (C * Mc, d)), scale), _FreqCache(noise, params, pi, scale_c, diagonal)


def gmm_frequencies_bwd(dout: tuple[Array, Array | None], cache: _FreqCache) -> GMMFrequenciesGrads:
    """Backward of :func:`gmm_frequencies` (Chowdhury et al. Eq. (5), reparameterised).

    ``dmu_c = sum_j domega_cj``, ``dS_c = sum_j domega_cj noise_cj^T`` (diagonal: elementwise), ``dnoise_cj =
    S_c^T domega_cj``, and ``dlogits`` through ``scale = sqrt(C pi)`` and the softmax.

    Parameters
    ----------
    dout : tuple of ((M, d) array, (M,) array or None)
        ``(domega, dscale)``; ``dscale`` may be ``None`` (then ``dlogits`` is zero). Same namespace and dtype
        as the cache, finite.
    cache : NamedTuple
        From :func:`gmm_frequencies_fwd`.

    Returns
    -------
    GMMFrequenciesGrads
        ``noise : (C, Mc, d)`` and ``params`` as a :class:`GMMParams` of gradients.

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    domega, dscale = dout
    c = cache
    xp = namespace(domega, c.noise, dscale, names=("domega", "cache", "dscale"))
    C, Mc, d = c.noise.shape
    _check_cotangent("domega", domega, (C * Mc, d), xp=xp)
    if dscale is not None:
        _check_cotangent("dscale", dscale, (C * Mc,), xp=xp)
    return _freq_bwd_core(dout, cache, xp=xp)


def _freq_bwd_core(dout, cache, *, xp):
    """Unchecked core of :func:`gmm_frequencies_bwd`."""
    domega, dscale = dout
    c = cache
    C, Mc, d = c.noise.shape
    dom = xp.reshape(domega, (C, Mc, d))                                             # (C, Mc, d)
    dmu = xp.sum(dom, axis=1)                                                         # (C, d)
    if c.diagonal:
        dS = xp.sum(dom * c.noise, axis=1)                                            # (C, d)
        dnoise = dom * xp.expand_dims(c.params.S, axis=1)                             # (C, Mc, d)
    else:
        dS = xp.matrix_transpose(dom) @ c.noise                   # (C, d, d)  dS_ab = sum_j dw_a n_b
        dnoise = dom @ c.params.S                                                     # (C, Mc, d)
    if dscale is None:
        dlogits = xp.zeros_like(c.params.logits)
    else:
        ds_c = xp.sum(xp.reshape(dscale, (C, Mc)), axis=1)                            # (C,)
        dpi = ds_c * (C / (2.0 * c.scale))                                            # d sqrt(C pi) / d pi
        dlogits = c.pi * (dpi - xp.sum(c.pi * dpi))                                   # softmax backward
    return GMMFrequenciesGrads(noise=dnoise, params=GMMParams(logits=dlogits, mu=dmu, S=dS))


def gmm_frequencies(noise: Array, params: GMMParams) -> tuple[Array, Array]:
    """Frequencies ``omega = mu_c + S_c n`` and feature scales ``sqrt(C pi_c)`` of a GMM spectrum.

    The reparameterisation of Chowdhury et al. Eq. (5) in the convention of the module docstring
    (``Sigma_c = S_c S_c^T``), with the M frequencies split M/C per component (deterministic assignment).

    Parameters
    ----------
    noise : (C, Mc, d) array
        ``N(0, I)`` draws (``refattn.random.draw_gmm_noise``), component-major. Real floating, finite.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Same namespace and dtype as `noise`, finite,
        C >= 1.

    Returns
    -------
    omega : (M, d) array
        ``omega[c * Mc + j] = mu_c + S_c noise[c, j]``, M = C Mc.
    scale : (M,) array
        ``sqrt(C pi_c)`` for every frequency of component c.

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.

    See Also
    --------
    gmm_frequencies_fwd, gmm_frequencies_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import GMMParams, gmm_frequencies
    >>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
    ...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
    ...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
    >>> noise = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])                 # (C, Mc, d) = (2, 1, 2)
    >>> omega, scale = gmm_frequencies(noise, params)
    >>> omega
    array([[ 1.5,  0. ],
           [ 0. , -0.6]])
    >>> scale                                                           # sqrt(C pi_c)
    array([0.70710678, 1.22474487])
    """
    return gmm_frequencies_fwd(noise, params)[0]


# ------------------------------------------------------------------------------------------------------------
# GMM-RKS and GMM-PRF feature maps
# ------------------------------------------------------------------------------------------------------------

class _FeatCache(NamedTuple):
    freq: _FreqCache
    inner: Any          # cache of the trig / positive map
    phi0: Array         # (..., L, width) the unweighted features
    col_scale: Array    # (width,)
    x: Array | None     # (..., L, d) (stable PRF: for the -|x|^2/2 log-scale shift)


def _check_x(x: Array, params: GMMParams) -> None:
    if not isinstance(params, GMMParams):
        raise TypeError(f"params: expected GMMParams(logits, mu, S); got {type(params).__name__}")
    namespace(x, params.mu, names=("x", "params.mu"))
    sizes = check_shape("x", x, "..., L, d")
    _check_params(params, sizes={"d": sizes["d"]})


def _weighted_bwd(dphi: Array, cache: _FeatCache, *, xp: Any) -> tuple[Array, Array]:
    """(dphi0, dcol_scale) of phi = phi0 * col_scale."""
    red = tuple(range(dphi.ndim - 1))
    return dphi * cache.col_scale, xp.sum(dphi * cache.phi0, axis=red)


def gmm_rks_features_fwd(x: Array, noise: Array, params: GMMParams) -> tuple[Array, _FeatCache]:
    r"""GMM-RKS (Eqs. 3-5): ``phi(x) = [cos(x omega^T), sin(x omega^T)] * sqrt(C pi_c) / sqrt(M)``.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `params`.
    noise : (C, Mc, d) array
        ``N(0, I)`` draws, component-major (``refattn.random.draw_gmm_noise``, or
        ``draw_gmm_antithetic_noise`` for Theorem 3's case); same namespace and dtype as `params`.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Real floating, finite, C >= 1.

    Returns
    -------
    phi : (..., L, 2M) array
        Cosines then sines; ``E[phi(q) . phi(k)] = gmm_rks_kernel(q, k, params)`` (the Eq. 4 kernel).
    cache : NamedTuple
        Opaque, for :func:`gmm_rks_features_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `x`, `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype or are not real
        floating.
    """
    _check_x(x, params)
    (omega, scale), fc = gmm_frequencies_fwd(noise, params)
    xp = namespace(x)
    phi0, tc = trig_features_fwd(x, omega)                                           # (..., L, 2M)
    col = xp.concat((scale, scale))                                                   # (2M,)
    return phi0 * col, _FeatCache(fc, tc, phi0, col, None)


def _rks_core(x, noise, params):
    """Unchecked core of :func:`gmm_rks_features_fwd`: its structural checks (no data read), no value
    checks."""
    xp, diagonal = _check_struct(x, noise, params)
    (omega, scale), fc = _freq_core(noise, params, diagonal, xp=xp)
    phi0, tc = _trig_core(x, omega, xp=xp)                                           # (..., L, 2M)
    col = xp.concat((scale, scale))                                                   # (2M,)
    return phi0 * col, _FeatCache(fc, tc, phi0, col, None)


def _check_struct(x, noise, params):
    """The structural checks of the GMM feature maps (``_check_x`` and the frequencies' shapes), no data
    read; returns ``(xp, diagonal)``."""
    if not isinstance(params, GMMParams):
        raise TypeError(f"params: expected GMMParams(logits, mu, S); got {type(params).__name__}")
    namespace(x, params.mu, names=("x", "params.mu"))
    sizes = check_shape("x", x, "..., L, d")
    xp, diagonal, sizes = _check_params_struct(params, sizes={"d": sizes["d"]})
    namespace(noise, params.mu, names=("noise", "params.mu"))
    check_shape("noise", noise, "C, Mc, d", sizes)
    return xp, diagonal


def gmm_rks_features_bwd(dphi: Array, cache: _FeatCache) -> GMMFeaturesGrads:
    """Backward of :func:`gmm_rks_features` (Chowdhury et al. Eqs. (3)-(5)).

    The column scales' gradient goes to the logits, the RKS backward's ``domega`` to ``mu``, ``S`` and the
    noise (:func:`gmm_frequencies_bwd`).

    Parameters
    ----------
    dphi : (..., L, 2M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`gmm_rks_features_fwd`.

    Returns
    -------
    GMMFeaturesGrads
        ``x : (..., L, d)``, ``noise : (C, Mc, d)`` and ``params`` as a :class:`GMMParams` of gradients
        (``logits (C,)``, ``mu (C, d)``, ``S`` with the factor's shape).

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    xp = namespace(dphi, cache.phi0, names=("dphi", "cache"))
    _check_cotangent("dphi", dphi, cache.phi0.shape, xp=xp)
    dphi0, dcol = _weighted_bwd(dphi, cache, xp=xp)
    M = dcol.shape[0] // 2
    g = trig_features_bwd(dphi0, cache.inner)
    gf = gmm_frequencies_bwd((g.omega, dcol[:M] + dcol[M:]), cache.freq)
    return GMMFeaturesGrads(x=g.x, noise=gf.noise, params=gf.params)


def _rks_bwd_core(dphi, cache):
    """Unchecked core of :func:`gmm_rks_features_bwd`."""
    xp = namespace(dphi, cache.phi0, names=("dphi", "cache"))
    dphi0, dcol = _weighted_bwd(dphi, cache, xp=xp)
    M = dcol.shape[0] // 2
    g = _trig_bwd_core(dphi0, cache.inner, xp=xp)
    gf = _freq_bwd_core((g.omega, dcol[:M] + dcol[M:]), cache.freq, xp=xp)
    return GMMFeaturesGrads(x=g.x, noise=gf.noise, params=gf.params)


def gmm_rks_features(x: Array, noise: Array, params: GMMParams) -> Array:
    """GMM-RKS features: the RKS map on GMM frequencies, scaled by ``sqrt(C pi_c)`` (Chowdhury et al. Eq. 5).

    ``phi(x) = [cos(x omega^T), sin(x omega^T)] * sqrt(C pi_c) / sqrt(M)``: the RKS map (Eq. (3)) on
    frequencies drawn from a learnable Gaussian mixture (Eq. (5), convention of the module docstring),
    unbiased for :func:`gmm_rks_kernel` (Eq. (4)), MSE :func:`gmm_rks_mse`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `params`.
    noise : (C, Mc, d) array
        ``N(0, I)`` draws, component-major (``refattn.random.draw_gmm_noise``, or
        ``draw_gmm_antithetic_noise`` for Theorem 3's case); same namespace and dtype as `params`.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Real floating, finite, C >= 1.

    Returns
    -------
    phi : (..., L, 2M) array
        Cosines then sines; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `x`, `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype or are not real
        floating.

    See Also
    --------
    gmm_rks_features_fwd, gmm_rks_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import GMMParams, gmm_rks_features
    >>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
    ...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
    ...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
    >>> noise = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])                 # (C, Mc, d) = (2, 1, 2)
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])                          # (L, d)
    >>> gmm_rks_features(x, noise, params)                              # (L, 2M)
    array([[ 0.5       ,  0.8660254 ,  0.        ,  0.        ],
           [ 0.0353686 ,  0.82734567,  0.49874749, -0.25592801]])
    """
    return gmm_rks_features_fwd(x, noise, params)[0]


def gmm_prf_features_fwd(x: Array, noise: Array, params: GMMParams) -> tuple[Array, _FeatCache]:
    r"""GMM-PRF (Eqs. 9-10): ``phi(x) = exp(x omega^T - |x|^2) * sqrt(C pi_c) / sqrt(M)``, unstabilised.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `params`.
    noise : (C, Mc, d) array
        ``N(0, I)`` draws, component-major (``refattn.random.draw_gmm_noise``, or
        ``draw_gmm_antithetic_noise`` for Theorem 3's case); same namespace and dtype as `params`.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Real floating, finite, C >= 1.

    Returns
    -------
    phi : (..., L, M) array
        Positive; ``E[phi(q) . phi(k)] = gmm_prf_kernel(q, k, params)``. Overflows for large inputs: attention
        should use :func:`gmm_prf_features_stable`.
    cache : NamedTuple
        Opaque, for :func:`gmm_prf_features_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `x`, `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype or are not real
        floating.
    """
    _check_x(x, params)
    (omega, scale), fc = gmm_frequencies_fwd(noise, params)
    phi0, pc = gaussian_positive_features_fwd(x, omega)                              # (..., L, M)  Eq. 9
    return phi0 * scale, _FeatCache(fc, pc, phi0, scale, None)


def gmm_prf_features_bwd(dphi: Array, cache: _FeatCache) -> GMMFeaturesGrads:
    """Backward of :func:`gmm_prf_features` (Chowdhury et al. Eqs. (9)-(10)).

    Parameters
    ----------
    dphi : (..., L, M) array
        Cotangent of the features; same namespace and dtype as the cache, finite.
    cache : NamedTuple
        From :func:`gmm_prf_features_fwd`.

    Returns
    -------
    GMMFeaturesGrads
        ``x : (..., L, d)``, ``noise : (C, Mc, d)`` and ``params`` as a :class:`GMMParams` of gradients
        (``logits (C,)``, ``mu (C, d)``, ``S`` with the factor's shape).

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    xp = namespace(dphi, cache.phi0, names=("dphi", "cache"))
    _check_cotangent("dphi", dphi, cache.phi0.shape, xp=xp)
    dphi0, dscale = _weighted_bwd(dphi, cache, xp=xp)
    g = gaussian_positive_features_bwd(dphi0, cache.inner)
    gf = gmm_frequencies_bwd((g.omega, dscale), cache.freq)
    return GMMFeaturesGrads(x=g.x, noise=gf.noise, params=gf.params)


def gmm_prf_features(x: Array, noise: Array, params: GMMParams) -> Array:
    """GMM-PRF features ``exp(x omega^T - |x|^2) * sqrt(C pi_c) / sqrt(M)`` (Chowdhury et al. Eq. (10)).

    The PRF map of Eq. (9) (offset ``|x|^2``) on frequencies drawn from a learnable Gaussian mixture:
    unbiased for :func:`gmm_prf_kernel` (the Gaussian kernel at mu = 0, S = I), MSE :func:`gmm_prf_mse`.
    Unstabilised: overflows for large inputs; attention should use :func:`gmm_prf_features_stable`.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `params`.
    noise : (C, Mc, d) array
        ``N(0, I)`` draws, component-major (``refattn.random.draw_gmm_noise``, or
        ``draw_gmm_antithetic_noise`` for Theorem 3's case); same namespace and dtype as `params`.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Real floating, finite, C >= 1.

    Returns
    -------
    phi : (..., L, M) array
        Positive; same namespace, dtype and device as `x`.

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `x`, `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype or are not real
        floating.

    See Also
    --------
    gmm_prf_features_fwd, gmm_prf_features_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import GMMParams, gmm_prf_features
    >>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
    ...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
    ...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
    >>> noise = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])                 # (C, Mc, d) = (2, 1, 2)
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])                          # (L, d)
    >>> gmm_prf_features(x, noise, params)                              # (L, M)
    array([[0.5       , 0.8660254 ],
           [0.64201271, 0.18381214]])
    """
    return gmm_prf_features_fwd(x, noise, params)[0]


def gmm_prf_features_stable_fwd(x: Array, noise: Array, params: GMMParams
                                ) -> tuple[tuple[Array, Array], _FeatCache]:
    r"""Row-stabilised GMM-PRF ``(phi, log_scale)``, ``phi * exp(log_scale) = gmm_prf_features``; and cache.

    Built on ``positive_features_stable`` (offset ``|x|^2/2``) with the extra ``-|x|^2/2`` of Eq. 9 moved
    into the log-scale.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `params`.
    noise : (C, Mc, d) array
        ``N(0, I)`` draws, component-major (``refattn.random.draw_gmm_noise``, or
        ``draw_gmm_antithetic_noise`` for Theorem 3's case); same namespace and dtype as `params`.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Real floating, finite, C >= 1.

    Returns
    -------
    (phi, log_scale) : ((..., L, M), (..., L)) arrays
        ``phi = exp(x omega^T - max_row) * sqrt(C pi_c)``, never overflowing; ``log_scale``: pass as
        ``k_log_scale`` for keys, drop for queries.
    cache : NamedTuple
        Opaque, for :func:`gmm_prf_features_stable_bwd`.

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `x`, `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype or are not real
        floating.
    """
    _check_x(x, params)
    (omega, scale), fc = gmm_frequencies_fwd(noise, params)
    xp = namespace(x)
    (phi0, ls0), pc = positive_features_stable_fwd(x, omega)                        # (..., L, M), (..., L)
    log_scale = ls0 - 0.5 * xp.sum(x * x, axis=-1)                                    # (..., L)  offset |x|^2
    return (phi0 * scale, log_scale), _FeatCache(fc, pc, phi0, scale, x)


def _prf_stable_core(x, noise, params):
    """Unchecked core of :func:`gmm_prf_features_stable_fwd`: its structural checks (no data read), no value
    checks."""
    xp, diagonal = _check_struct(x, noise, params)
    (omega, scale), fc = _freq_core(noise, params, diagonal, xp=xp)
    (phi0, ls0), pc = _stable_fwd(x, omega, None)                                   # (..., L, M), (..., L)
    log_scale = ls0 - 0.5 * xp.sum(x * x, axis=-1)                                    # (..., L)  offset |x|^2
    return (phi0 * scale, log_scale), _FeatCache(fc, pc, phi0, scale, x)


def gmm_prf_features_stable_bwd(dout: tuple[Array, Array | None], cache: _FeatCache) -> GMMFeaturesGrads:
    """Backward of :func:`gmm_prf_features_stable` from ``(dphi, dlog_scale)``.

    Parameters
    ----------
    dout : tuple of ((..., L, M) array, (..., L) array or None)
        ``(dphi, dlog_scale)``; ``dlog_scale`` may be ``None`` (queries). Same namespace and dtype as the
        cache, finite.
    cache : NamedTuple
        From :func:`gmm_prf_features_stable_fwd`.

    Returns
    -------
    GMMFeaturesGrads
        ``x : (..., L, d)``, ``noise : (C, Mc, d)`` and ``params`` as a :class:`GMMParams` of gradients
        (``logits (C,)``, ``mu (C, d)``, ``S`` with the factor's shape).

    Raises
    ------
    ValueError
        If a cotangent's shape differs from its output's or a cotangent is not finite.
    TypeError
        If the cotangents and the cache differ in namespace or dtype.
    """
    dphi, dls = dout
    xp = namespace(dphi, cache.phi0, dls, names=("dphi", "cache", "dlog_scale"))
    _check_cotangent("dphi", dphi, cache.phi0.shape, xp=xp)
    if dls is not None:
        _check_cotangent("dlog_scale", dls, cache.phi0.shape[:-1], xp=xp)
    dphi0, dscale = _weighted_bwd(dphi, cache, xp=xp)
    g = positive_features_stable_bwd((dphi0, dls), cache.inner)
    dx = g.x if dls is None else g.x - xp.expand_dims(dls, axis=-1) * cache.x          # d(-|x|^2/2) = -x
    gf = gmm_frequencies_bwd((g.omega, dscale), cache.freq)
    return GMMFeaturesGrads(x=dx, noise=gf.noise, params=gf.params)


def _prf_stable_bwd_core(dout, cache):
    """Unchecked core of :func:`gmm_prf_features_stable_bwd`."""
    dphi, dls = dout
    xp = namespace(dphi, cache.phi0, dls, names=("dphi", "cache", "dlog_scale"))
    dphi0, dscale = _weighted_bwd(dphi, cache, xp=xp)
    g = _stable_bwd(dphi0, dls, cache.inner, omega_grad=True, xp=xp)
    dx = g.x if dls is None else g.x - xp.expand_dims(dls, axis=-1) * cache.x          # d(-|x|^2/2) = -x
    gf = _freq_bwd_core((g.omega, dscale), cache.freq, xp=xp)
    return GMMFeaturesGrads(x=dx, noise=gf.noise, params=gf.params)


def gmm_prf_features_stable(x: Array, noise: Array, params: GMMParams) -> tuple[Array, Array]:
    """Row-stabilised GMM-PRF features: :func:`gmm_prf_features` as ``phi * exp(log_scale)``.

    Chowdhury et al. Eq. (10) with the row maximum of the exponent, the ``|x|^2`` offset of Eq. (9) and the
    ``1/sqrt(M)`` factored into ``log_scale`` (design.md trap 3); never overflows.

    Parameters
    ----------
    x : (..., L, d) array
        Queries or keys. Real floating (float32 or float64), finite; same namespace and dtype as `params`.
    noise : (C, Mc, d) array
        ``N(0, I)`` draws, component-major (``refattn.random.draw_gmm_noise``, or
        ``draw_gmm_antithetic_noise`` for Theorem 3's case); same namespace and dtype as `params`.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Real floating, finite, C >= 1.

    Returns
    -------
    phi : (..., L, M) array
        ``exp(x omega^T - max_row) * sqrt(C pi_c)``; same namespace, dtype and device as `x`.
    log_scale : (..., L) array
        Keys: pass as ``linear_attention(..., k_log_scale=...)``; queries: drop it (it cancels per row).

    Raises
    ------
    ValueError
        If the shapes disagree (C, d between `x`, `noise` and `params`), C = 0, or an input is not finite.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype or are not real
        floating.

    See Also
    --------
    gmm_prf_features_stable_fwd, gmm_prf_features_stable_bwd : the differentiable pair.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import GMMParams, gmm_prf_features, gmm_prf_features_stable
    >>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
    ...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
    ...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
    >>> noise = np.array([[[1.0, 0.0]], [[0.0, 2.0]]])                 # (C, Mc, d) = (2, 1, 2)
    >>> x = np.array([[0.0, 0.0], [1.0, 0.5]])                          # (L, d)
    >>> phi, log_scale = gmm_prf_features_stable(x, noise, params)
    >>> bool(np.allclose(phi * np.exp(log_scale)[:, None], gmm_prf_features(x, noise, params)))
    True
    """
    return gmm_prf_features_stable_fwd(x, noise, params)[0]


# ------------------------------------------------------------------------------------------------------------
# Closed forms: kernels and mean squared errors
# ------------------------------------------------------------------------------------------------------------

def _pairs(q: Array, k: Array, params: GMMParams, sign: float):
    """``q_i + sign k_j``: (..., Lq, Lk, d), after validation."""
    xp = namespace(q, k, params.mu, names=("q", "k", "params.mu"))
    sizes = check_shape("q", q, "..., Lq, d")
    check_shape("k", k, "..., Lk, d", sizes)
    _check_qk(q, k, extra=max(1, q.shape[-1]))  # finite q, k; the (..., Lq, Lk, d) pairs within the bound
    _, diagonal, _ = _check_params(params, sizes={"d": sizes["d"]})  # params finite
    v = xp.expand_dims(q, axis=-2) + sign * xp.expand_dims(k, axis=-3)              # (..., Lq, Lk, d)
    return xp, v, diagonal


def _quad(v: Array, S_c: Array, diagonal: bool, *, xp: Any) -> Array:
    """``||S_c^T v||^2 = v^T Sigma_c v`` over the last axis."""
    w = v * S_c if diagonal else v @ S_c                                 # (..., d)  (S^T v)^T = v^T S
    return xp.sum(w * w, axis=-1)


def gmm_rks_kernel(q: Array, k: Array, params: GMMParams) -> Array:
    r"""The GMM-RKS kernel (Eq. 4): ``sum_c pi_c exp(-||S_c^T p||^2 / 2) cos(mu_c^T p)``, p = q - k.

    Materialises ``(..., Lq, Lk, d)``: for tests and small inputs.

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating, finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Same namespace and dtype as `q`, finite.

    Returns
    -------
    K : (..., Lq, Lk) array
        What :func:`gmm_rks_features` estimates without bias.

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, or the ``(..., Lq, Lk, d)`` intermediate exceeds
        ``refattn.limits``.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import GMMParams, gmm_rks_kernel
    >>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
    ...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
    ...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> gmm_rks_kernel(q, k, params)
    array([[0.79692256, 0.85882653],
           [0.73310337, 0.50677159]])
    """
    xp, p, diagonal = _pairs(q, k, params, -1.0)
    pi = _gmm_weights(params.logits, xp=xp)
    out = 0.0
    for c in range(params.logits.shape[0]):
        s = _quad(p, params.S[c, ...], diagonal, xp=xp)                               # (..., Lq, Lk)
        out = out + pi[c] * xp.exp(-0.5 * s) * xp.cos(xp.sum(p * params.mu[c, :], axis=-1))
    return out


def gmm_prf_kernel(q: Array, k: Array, params: GMMParams) -> Array:
    r"""The GMM-PRF kernel: ``sum_c pi_c exp(-|q|^2 - |k|^2 + mu_c^T o + ||S_c^T o||^2 / 2)``, o = q + k.

    What GMM-PRF (Chowdhury et al. Eqs. (9)-(10)) estimates; the Gaussian kernel at mu = 0, S = I.
    Materialises ``(..., Lq, Lk, d)``: for tests and small inputs.

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating, finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Same namespace and dtype as `q`, finite.

    Returns
    -------
    K : (..., Lq, Lk) array
        What :func:`gmm_prf_features` estimates without bias.

    Raises
    ------
    ValueError
        If the shapes disagree, an input is not finite, or the ``(..., Lq, Lk, d)`` intermediate exceeds
        ``refattn.limits``.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import GMMParams, gmm_prf_kernel
    >>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
    ...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
    ...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> gmm_prf_kernel(q, k, params)
    array([[0.82376107, 0.66535022],
           [0.19274192, 0.14307969]])
    """
    xp, o, diagonal = _pairs(q, k, params, 1.0)
    pi = _gmm_weights(params.logits, xp=xp)
    qq = xp.sum(q * q, axis=-1, keepdims=True)                                        # (..., Lq, 1)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)                              # (..., 1, Lk)
    out = 0.0
    for c in range(params.logits.shape[0]):
        t = _quad(o, params.S[c, ...], diagonal, xp=xp)                               # (..., Lq, Lk)
        out = out + pi[c] * xp.exp(-qq - kk + xp.sum(o * params.mu[c, :], axis=-1) + 0.5 * t)
    return out


def _check_M(M: Any, C: int) -> int:  # noqa: N802  paper notation (M frequencies)
    if isinstance(M, bool) or not isinstance(M, int) or M <= 0 or M % C:
        raise ValueError(f"M: expected a positive multiple of C = {C}; got {M!r}")
    return M


def gmm_rks_mse(q: Array, k: Array, params: GMMParams, M: int) -> Array:
    r"""MSE of GMM-RKS with independent noise per component, ``(..., Lq, Lk)`` (derived in the module doc).

    ``sum_c (C pi_c^2 / M) [(1 + cos(2 mu_c^T p) e^{-2 s_c}) / 2 - cos^2(mu_c^T p) e^{-s_c}]``,
    ``s_c = ||S_c^T p||^2``: each component contributes M/C iid cosines ``Var cos(omega^T p)``, weighted
    ``(C pi_c / M)^2``: Chowdhury et al. Theorem 3 re-derived for this estimator (the printed Eq. (13) is the
    antithetic case, :func:`gmm_rks_antithetic_mse`).

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating, finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Same namespace and dtype as `q`, finite.
    M : int
        Total number of frequencies, a positive multiple of C (M/C frequencies per component).

    Returns
    -------
    mse : (..., Lq, Lk) array
        ``E[(phi(q) . phi(k) - gmm_rks_kernel(q, k))^2]`` for :func:`gmm_rks_features` with M frequencies.

    Raises
    ------
    ValueError
        If `M` is not a positive multiple of C, the shapes disagree, an input is not finite, or the
        ``(..., Lq, Lk, d)`` intermediate exceeds ``refattn.limits``.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.
    """
    xp, p, diagonal = _pairs(q, k, params, -1.0)
    C = params.logits.shape[0]
    _check_M(M, C)
    pi = _gmm_weights(params.logits, xp=xp)
    out = 0.0
    for c in range(C):
        s = _quad(p, params.S[c, ...], diagonal, xp=xp)
        a = xp.sum(p * params.mu[c, :], axis=-1)
        var = 0.5 * (1.0 + xp.cos(2.0 * a) * xp.exp(-2.0 * s)) - xp.cos(a) ** 2 * xp.exp(-s)
        out = out + (C * pi[c] ** 2 / M) * var
    return out


def gmm_rks_antithetic_mse(q: Array, k: Array, mu: Array, S: Array, M: int) -> Array:
    r"""MSE of GMM-RKS in Theorem 3's antithetic case (C = 2, +-mu, shared S and noise, equal weights).

    It is::

        (1 / M) cos^2(mu^T p) (1 - exp(-||S^T p||^2))^2,     p = q - k,  M = total frequencies = 2 x pairs.

    Derivation: ``phi(q).phi(k) = (2/M) sum_{j<=M/2} cos(mu^T p) cos(eta_j^T S^T p)`` and
    ``Var cos(eta^T a) = (1 - e^{-|a|^2})^2 / 2``. The printed Eq. 13 has 2/m (a factor 4
    larger with m = pairs).

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating, finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.
    mu : (d,) array
        Mean of the first component (the second is ``-mu``); same namespace and dtype as `q`.
    S : (d, d) or (d,) array
        Shared covariance factor, full or diagonal.
    M : int
        Total number of frequencies, a positive multiple of C (2 x the number of antithetic pairs).

    Returns
    -------
    mse : (..., Lq, Lk) array
        MSE of :func:`gmm_rks_features` with :func:`gmm_antithetic_params` and antithetic noise.

    Raises
    ------
    ValueError
        If `M` is not a positive even integer, the shapes disagree, an input is not finite, or the
        ``(..., Lq, Lk, d)`` intermediate exceeds ``refattn.limits``.
    TypeError
        If the arrays differ in namespace or dtype.
    """
    params = gmm_antithetic_params(mu, S)
    xp, p, diagonal = _pairs(q, k, params, -1.0)
    _check_M(M, 2)
    s = _quad(p, S, diagonal, xp=xp)
    return xp.cos(xp.sum(p * mu, axis=-1)) ** 2 * (1.0 - xp.exp(-s)) ** 2 / M


def gmm_prf_mse(q: Array, k: Array, params: GMMParams, M: int) -> Array:
    r"""MSE of GMM-PRF, ``(..., Lq, Lk)`` (derived; see module docstring).

    It is
    ``sum_c (C pi_c^2 / M) exp(-2(|q|^2 + |k|^2 - mu_c^T o)) (exp(2 ||S_c^T o||^2) - exp(||S_c^T o||^2))``,
    o = q + k. The printed Eq. 14 has unsquared norms in the last factor.

    Parameters
    ----------
    q : (..., Lq, d) array
        Queries. Real floating, finite.
    k : (..., Lk, d) array
        Keys, with the batch axes and width of `q`; same namespace and dtype.
    params : GMMParams
        ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or
        ``(C, d)`` diagonal factor (``refattn.random.init_gmm``). Same namespace and dtype as `q`, finite.
    M : int
        Total number of frequencies, a positive multiple of C (M/C frequencies per component).

    Returns
    -------
    mse : (..., Lq, Lk) array
        ``E[(phi(q) . phi(k) - gmm_prf_kernel(q, k))^2]`` for :func:`gmm_prf_features` with M frequencies.

    Raises
    ------
    ValueError
        If `M` is not a positive multiple of C, the shapes disagree, an input is not finite, or the
        ``(..., Lq, Lk, d)`` intermediate exceeds ``refattn.limits``.
    TypeError
        If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.features import GMMParams, gmm_prf_mse
    >>> params = GMMParams(logits=np.array([0.0, np.log(3.0)]),           # pi = (1/4, 3/4)
    ...                    mu=np.array([[0.5, 0.0], [0.0, -1.0]]),        # (C, d) = (2, 2)
    ...                    S=np.array([[1.0, 0.5], [0.2, 0.2]]))          # diagonal factors (C, d)
    >>> q, k = np.array([[0.5, -0.5], [0.0, 1.0]]), np.array([[0.3, 0.2], [1.0, 0.0]])
    >>> gmm_prf_mse(q, k, params, M=64)
    array([[0.00252434, 0.04032799],
           [0.00025637, 0.00084916]])
    """
    xp, o, diagonal = _pairs(q, k, params, 1.0)
    C = params.logits.shape[0]
    _check_M(M, C)
    pi = _gmm_weights(params.logits, xp=xp)
    qq = xp.sum(q * q, axis=-1, keepdims=True)
    kk = xp.expand_dims(xp.sum(k * k, axis=-1), axis=-2)
    out = 0.0
    for c in range(C):
        t = _quad(o, params.S[c, ...], diagonal, xp=xp)
        a = xp.sum(o * params.mu[c, :], axis=-1)
        out = out + (C * pi[c] ** 2 / M) * xp.exp(-2.0 * (qq + kk - a)) * (xp.exp(2.0 * t) - xp.exp(t))
    return out
