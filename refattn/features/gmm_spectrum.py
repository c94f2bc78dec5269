r"""GMM spectra: learnable Gaussian-mixture spectral densities, their frequencies (Chowdhury et al. Eqs. 4-5).

**Convention (the paper's text and its proofs differ; this is the proofs').** Component c has weight
``pi_c = softmax(logits)_c``, mean ``mu_c`` and a covariance factor ``S_c`` with

    Sigma_c = S_c S_c^T,        omega = mu_c + S_c n,        n ~ N(0, I_d).

The paper prints ``omega = Sigma n + mu`` (Eq. 5, which has covariance Sigma^2) and states Theorem 3 with
``Sigma = S^T S`` while its proof samples ``omega = S eta + mu`` (covariance S S^T); the convention here is
the proof's, so ``p^T Sigma p = ||S^T p||^2`` everywhere, including the MSE formulas of
:mod:`refattn.features.gmm`. A factor of shape (C, d) is a *diagonal* factor (standard deviations, ``Sigma_c =
diag(S_c^2)``, O(d) per component: the GMM-PRF setting of the paper's complexity analysis); shape (C, d, d) is
a full factor.

**Deterministic assignment.** A sampled component index is piecewise constant in the weights, so the weights
would get no gradient. Instead the M frequencies are split M/C per component (noise of shape (C, M/C, d),
``refattn.random.draw_gmm_noise``) and component c's features are scaled by ``sqrt(C pi_c)``: then

    phi(q) . phi(k) = sum_c pi_c (1 / (M/C)) sum_j f(omega_cj; q, k)

is unbiased for ``sum_c pi_c kappa_c`` and the weights get gradients through the scale. Storing logits keeps
every learning step on the simplex. The feature maps on these frequencies are in :mod:`refattn.features.gmm`.

Axes: ``C`` components, ``M`` frequencies (``Mc = M / C`` per component), ``d`` head width.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._docs import fill_doc
from .._xp import check_finite, check_shape, namespace
from .projection import check_cotangent

__all__ = ["GMMParams", "gmm_weights", "gmm_antithetic_params", "gmm_frequencies", "gmm_frequencies_fwd",
           "gmm_frequencies_bwd", "GMMFrequenciesGrads"]

Array = Any

#: The ``params`` entry of every GMM function's Parameters section.
GMM_PARAMS_DOC = """
params : GMMParams
    ``logits: (C,)``, ``mu: (C, d)`` and ``S``: ``(C, d, d)`` full factor (``Sigma_c = S_c S_c^T``) or ``(C,
    d)`` diagonal factor (``refattn.random.init_gmm``). Real floating, finite, C >= 1; same namespace and
    dtype as the other arrays.
"""
_NOISE_DOC = """
Parameters
----------
noise : (C, Mc, d) array
    ``N(0, I)`` draws (``refattn.random.draw_gmm_noise``), component-major. Real floating, finite.
"""
_RAISES_DOC = """
Raises
------
ValueError
    If the shapes disagree (C, d between `noise` and `params`), C = 0, or an input is not finite.
TypeError
    If `params` is not a :class:`GMMParams`, or the arrays differ in namespace or dtype.
"""


class GMMParams(NamedTuple):
    """Learnable GMM spectrum (initialise with ``refattn.random.init_gmm``)."""

    logits: Array  # (C,)        mixture weights pi = softmax(logits)
    mu: Array      # (C, d)      component means
    S: Array       # (C, d, d) full factor (Sigma = S S^T) or (C, d) diagonal factor (Sigma = diag(S^2))


class GMMFrequenciesGrads(NamedTuple):
    """Gradients of :func:`gmm_frequencies`: ``noise`` and ``params`` (a :class:`GMMParams` of gradients)."""

    noise: Array        # (C, Mc, d)
    params: GMMParams


class FrequenciesCache(NamedTuple):
    """What :func:`gmm_frequencies_bwd` needs from :func:`gmm_frequencies_fwd`."""

    noise: Array
    params: GMMParams
    pi: Array        # (C,)
    scale: Array     # (C,)   sqrt(C pi)
    diagonal: bool


def check_gmm_params(params: Any, *, d: int | None = None, sizes: dict | None = None) -> tuple[Any, bool,
dict]:
    """:func:`check_gmm_params_struct` and the parameters' finiteness; returns ``(xp, diagonal, sizes)``."""
    xp, diagonal, sizes = check_gmm_params_struct(params, d=d, sizes=sizes)
    check_finite("params.logits", params.logits, xp=xp)
    check_finite("params.mu", params.mu, xp=xp)
    check_finite("params.S", params.S, xp=xp)
    return xp, diagonal, sizes


def check_gmm_params_struct(params: Any, *, d: int | None = None, sizes: dict | None = None):
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


def gmm_weights_core(logits: Array, *, xp: Any) -> Array:
    """Unchecked core of :func:`gmm_weights`."""
    z = xp.exp(logits - xp.max(logits))                                              # (C,)
    return z / xp.sum(z)


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
    return gmm_weights_core(logits, xp=xp)


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


# omega_cj = mu_c + S_c n_cj,  scale_cj = sqrt(C pi_c),  pi = softmax(logits)                      (Eq. (5))
# dmu_c = sum_j domega_cj;  dS_c = sum_j domega_cj n_cj^T;  dn_cj = S_c^T domega_cj;  dlogits via softmax
def gmm_frequencies_fwd_core(noise, params, *, diagonal, xp):
    """Unchecked core of :func:`gmm_frequencies_fwd`."""
    C, Mc, d = noise.shape
    if diagonal:
        omega = xp.expand_dims(params.mu, axis=1) + noise * xp.expand_dims(params.S, axis=1)      # (C, Mc, d)
    else:
        omega = xp.expand_dims(params.mu, axis=1) + noise @ xp.matrix_transpose(params.S)        # (C, Mc, d)
    pi = gmm_weights_core(params.logits, xp=xp)                                      # (C,)
    scale_c = xp.sqrt(C * pi)                                                         # (C,)
    scale = xp.reshape(xp.broadcast_to(xp.expand_dims(scale_c, axis=1), (C, Mc)), (C * Mc,))  # (M,)
    return (xp.reshape(omega, (C * Mc, d)), scale), FrequenciesCache(noise, params, pi, scale_c, diagonal)


def gmm_frequencies_bwd_core(dout, cache, *, xp):
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


@fill_doc(noise=_NOISE_DOC, params=GMM_PARAMS_DOC, raises=_RAISES_DOC)
def gmm_frequencies(noise: Array, params: GMMParams) -> tuple[Array, Array]:
    """Frequencies ``omega = mu_c + S_c n`` and feature scales ``sqrt(C pi_c)`` of a GMM spectrum.

    The reparameterisation of Chowdhury et al. Eq. (5) in the convention of the module docstring
    (``Sigma_c = S_c S_c^T``), with the M frequencies split M/C per component (deterministic assignment).
    Backward: ``dmu_c = sum_j domega_cj``, ``dS_c = sum_j domega_cj noise_cj^T`` (diagonal: elementwise),
    ``dnoise_cj = S_c^T domega_cj``, and ``dlogits`` through ``scale = sqrt(C pi)`` and the softmax.

    {noise}
    {params}

    Returns
    -------
    omega : (M, d) array
        ``omega[c * Mc + j] = mu_c + S_c noise[c, j]``, M = C Mc.
    scale : (M,) array
        ``sqrt(C pi_c)`` for every frequency of component c.

    {raises}

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


@fill_doc(noise=_NOISE_DOC, params=GMM_PARAMS_DOC)
def gmm_frequencies_fwd(noise: Array, params: GMMParams) -> tuple[tuple[Array, Array], FrequenciesCache]:
    """:func:`gmm_frequencies` and the cache for its backward (equations, shapes and errors there).

    {noise}
    {params}

    Returns
    -------
    (omega, scale) : ((M, d), (M,)) arrays
    cache : FrequenciesCache
        For :func:`gmm_frequencies_bwd`.
    """
    xp, diagonal, sizes = check_gmm_params(params)
    namespace(noise, params.mu, names=("noise", "params.mu"))
    check_shape("noise", noise, "C, Mc, d", sizes)
    check_finite("noise", noise, xp=xp)
    return gmm_frequencies_fwd_core(noise, params, diagonal=diagonal, xp=xp)


def gmm_frequencies_bwd(dout: tuple[Array, Array | None], cache: FrequenciesCache) -> GMMFrequenciesGrads:
    """Gradients of :func:`gmm_frequencies` (equations there) from ``(domega, dscale)``.

    Parameters
    ----------
    dout : tuple of ((M, d) array, (M,) array or None)
        ``(domega, dscale)``; ``dscale`` may be ``None`` (then ``dlogits`` is zero). Same namespace and dtype
        as the cache, finite.
    cache : FrequenciesCache
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
    check_cotangent("domega", domega, (C * Mc, d), xp=xp)
    if dscale is not None:
        check_cotangent("dscale", dscale, (C * Mc,), xp=xp)
    return gmm_frequencies_bwd_core(dout, cache, xp=xp)
