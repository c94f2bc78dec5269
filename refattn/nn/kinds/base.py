r"""What an attention kind is: one declaration (:class:`AttentionKind`) holding its forward, backward, options
and the arrays it needs drawn, plus the adapters several kinds share.

An adapter sees the per-head ``q, k, v: (..., H, L, d)``, the kind's learnable parameters ``attn_params`` (a
dict, possibly empty), its drawn, non-learnable ``features`` (a dict, possibly empty) and the token
``positions`` (``(L, P)`` coordinates or ``None``), and returns the per-head output and a cache; its backward
returns ``(dq, dk, dv, dattn_params)``.

**A class token** (the model's ``readout="class-token"``): with ``class_token=True`` token 0 of ``q, k, v``
is a learned token without a position, and ``positions`` (or the kind's default coordinates) describe the
other ``L - 1`` tokens. A kind that reads no positions treats it as any token. A kind that reads positions
places it itself: S1 and FLT give it zero positional features (:func:`with_class_token`: a zero coordinate
row with weight 0, so every pair it is in has the content logit alone), S2 places it as Horn et al.'s code
does (:mod:`refattn.nn.kinds.s2`); a kind that cannot place it (``toeplitz``: a mask indexed by offsets)
declares ``class_token=False`` (:class:`AttentionKind`), and the configuration check refuses the
combination.

The arrays a kind needs are *declared*, not drawn, here (the core never draws):
``params(att, d_head=, n_heads=)`` and ``features(att, d_head=, n_heads=)`` return
``{name: Draw(sampler, args)}``, and the NumPy edge :mod:`refattn.nn.init` runs each ``Draw`` with the
``refattn.random`` primitive its ``sampler`` names.

``omega`` says what happens to a kind's random projection ``omega``: ``"none"`` (the kind has none),
``"redrawn"`` (drawn at initialisation or per the redraw policy, never learned: its gradient is not computed,
style.md's computed-only-on-request rule) or ``"learnable"`` (a parameter: its gradient is returned).
"""

from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ..._xp import check_shape, device_of, namespace
from ...attention.linear import DEFAULT_CHUNK_SIZE, linear_attention_bwd_core, linear_attention_fwd_core
from ...tree import tree_map

__all__ = ["AttentionKind", "Draw", "no_draws", "projection", "linear_kind", "check_omega", "spectral_kind",
           "grid_positions", "pos_dim", "token_positions", "with_class_token", "COMMON_OPTIONS",
           "resolve_on_nonpositive"]


class Draw(NamedTuple):
    """A declared draw: the sampler's name (:data:`refattn.nn.init.SAMPLERS`) and its keyword arguments."""

    sampler: str   # a sampler of refattn.nn.init.SAMPLERS (a refattn.random primitive or a fixed init)
    args: dict     # its keyword arguments (sizes, laws), without rng and dtype


class AttentionKind(NamedTuple):
    """One attention kind's declaration: forward, backward, options and the arrays it needs drawn.

    The fields are commented in the source; the registry is :data:`refattn.nn.kinds.ATTENTION_KINDS`.
    """

    name: str
    #: ``(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
    #: options) -> (o, cache)``
    fwd: Callable
    bwd: Callable       # (do, cache) -> (dq, dk, dv, dattn_params)
    options: dict       # option name -> default value
    choices: dict       # option name -> tuple of allowed values (options not listed: checked by the config)
    params: Callable    # (att, *, d_head, n_heads) -> {name: Draw}: learnable parameters, drawn at init
    features: Callable  # (att, *, d_head, n_heads) -> {name: Draw}: drawn arrays ({}: the kind draws nothing)
    omega: str          # "none" | "redrawn" | "learnable" (module docstring)
    check: Callable | None = None   # (att, *, d_head, n_heads) -> att: kind-specific option checks/defaults
    #: ``(att, *, d_head, n_heads) -> {name: Draw}``: learnable parameters shared by all layers of a model
    #: (``params["shared"]["attn"]``), merged into each layer's
    shared: Callable | None = None
    #: (cache) -> {param name: new value}: non-learnable parameters a training forward updates (running
    #: statistics); written back after the optimiser step (refattn.nn.transformer.parameter_updates)
    updates: Callable | None = None
    #: (attn params) -> attn params: the drawn (constrained) values in the stored form the kind learns them in
    #: (an unconstrained parameterisation, refattn.nn.kinds.domains); applied by refattn.nn.init after drawing
    store: Callable | None = None
    #: whether the kind takes a class token (token 0 without a position, module docstring): every kind that
    #: reads no positions does; a positional kind only if it defines where the token sits
    class_token: bool = True


#: options every kind accepts: the redraw policy of its drawn features (refattn.random.rng_for_step)
COMMON_OPTIONS = {"redraw_every": None}


def resolve_on_nonpositive(att, nonpositive: bool, what: str) -> dict:
    """The option ``on_nonpositive`` of a kind's configuration, resolved: a map that can give a non-positive
    normaliser (`nonpositive`, `what` naming it) needs it set explicitly (``"ignore"`` to train: under
    ``"raise"`` the first non-positive normaliser stops the run), else a ``ValueError`` naming the option; a
    positive map's unset option becomes ``"raise"`` (it never fires)."""
    if att["on_nonpositive"] is None:
        if nonpositive:
            raise ValueError(f"attention.on_nonpositive: {what} can give non-positive normalisers "
                             f"phi(q_i) . sum_j phi(k_j) (typically from the first forward), so this "
                             f"configuration needs on_nonpositive set: 'ignore' to train (the division may "
                             f"change sign), or 'raise' to stop at the first one")
        att = {**att, "on_nonpositive": "raise"}
    return att


def no_draws(att, *, d_head, n_heads) -> dict:
    """The declaration of a kind that needs nothing drawn."""
    return {}


def projection(att, cols) -> dict:
    """``{"omega": (m, cols)}`` drawn with the law ``att["draw"]`` ("iid" Gaussian or "orthogonal")."""
    return {"omega": Draw("projection", {"rows": att["m"], "cols": cols, "law": att["draw"]})}


def linear_kind(feat_fwd, feat_bwd):
    """Adapter pair for linear attention with a deterministic feature map (``elu``, ``relu``)."""

    def fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
            options):
        xp = namespace(q)
        phi_q, cq = feat_fwd(q, xp=xp)                                              # (..., H, L, d)
        phi_k, ck = feat_fwd(k, xp=xp)                                              # (..., H, L, d)
        o, ca = _linear_fwd(phi_q, phi_k, v, causal=causal, xp=xp, keep=train)     # (..., H, L, d)
        return o, (cq, ck, ca)

    def bwd(do, cache):
        cq, ck, ca = cache
        xp = namespace(do)
        g = linear_attention_bwd_core(do, ca, xp=xp)
        return feat_bwd(g.phi_q, cq, xp=xp).x, feat_bwd(g.phi_k, ck, xp=xp).x, g.v, {}

    return fwd, bwd


def _linear_fwd(phi_q, phi_k, v, *, causal, k_log_scale=None, on_nonpositive="raise", xp, keep=True):
    """:func:`refattn.attention.linear_attention_fwd`'s unchecked core on features the model derived from
    checked arrays (the result checks stay: normaliser and output, one reduction each); ``keep=False`` (an
    evaluation forward) keeps no causal states for a backward."""
    return linear_attention_fwd_core(phi_q, phi_k, v, causal, k_log_scale, DEFAULT_CHUNK_SIZE, on_nonpositive,
                                     xp=xp, inputs={"phi_q": phi_q, "phi_k": phi_k, "v": v,
                                                    "k_log_scale": k_log_scale}, keep=keep)


def check_omega(x, omega):
    """Structural checks of a kind's drawn projections ``omega: (m, d)`` against ``x: (..., L, d)``
    (namespace, dtype, shape, m >= 1), as the feature maps make them: no data read (the model checked the
    values once)."""
    namespace(x, omega, names=("x", "omega"))
    check_shape("omega", omega, "m, d", check_shape("x", x, "..., L, d"))
    if omega.shape[0] < 1:
        raise ValueError(f"omega: expected at least one projection row, shape (m, d) with m >= 1; "
                         f"got {tuple(omega.shape)}")


def _first(out: Any) -> Any:
    """The features of a map that returns ``phi`` or ``(phi, state)``."""
    return out[0] if isinstance(out, tuple) else out


def spectral_kind(stable_fwd, stable_bwd, rks_fwd, rks_bwd, args_of, key, check):
    r"""Adapter pair for a learnable-spectrum map of the KL-Transformer (Chowdhury et al.): GMM, FastFood,
    generative.

    Features are computed on ``d^{-1/4} q`` and ``d^{-1/4} k``, as FAVOR does, so that at initialisation
    (mu = 0, S = I) the PRF maps estimate the Gaussian kernel ``exp(-|q - k|^2 / (2 sqrt(d)))`` of the scaled
    inputs. PRF maps are row-stabilised (keys' log-scales go to linear attention); RKS maps can give
    non-positive normalisers (option ``on_nonpositive``, as for trig FAVOR).
    ``args_of(attn_params, features, options, train) -> (args, kwargs)`` gives the map's arguments after
    ``x``; the map's gradients carry ``.x`` and ``.params``, returned under ``attn_params[key]``. A map that
    returns a new state beside its features (the generator's batch-norm statistics) has it kept as the cache's
    last entry (``None`` otherwise). The maps given are the unchecked cores (the model checked its arrays'
    values once); ``check(attn_params, features, options, q, train) -> xp`` runs the map's structural
    checks on the queries (the keys share their shape) and the value checks the model's tree check cannot
    make (an integer permutation's, a variance's sign), once per forward rather than per map, and returns
    the namespace the cores are called with.
    """

    def fwd(q, k, v, attn_params, features, *, positions=None, class_token=False, train=True, causal,
            options):
        scale = float(q.shape[-1]) ** -0.25
        xp = check(attn_params, features, options, q, train)
        args, kw = args_of(attn_params, features, options, train)
        if options["features"] == "prf":
            outq, cq = stable_fwd(q * scale, *args, **kw, xp=xp)
            outk, ck = stable_fwd(k * scale, *args, **kw, xp=xp)
            phi_q, phi_k, k_ls = outq[0], outk[0], outk[1]                       # (..., H, L, M), (..., H, L)
            state = outk[2] if len(outk) > 2 else None                           # same noise: same new state
            o, ca = _linear_fwd(phi_q, phi_k, v, causal=causal, k_log_scale=k_ls, xp=xp, keep=train)
        else:
            outq, cq = rks_fwd(q * scale, *args, **kw, xp=xp)                       # (..., H, L, 2M)
            outk, ck = rks_fwd(k * scale, *args, **kw, xp=xp)
            phi_q, phi_k = _first(outq), _first(outk)
            state = outk[1] if isinstance(outk, tuple) else None
            o, ca = _linear_fwd(phi_q, phi_k, v, causal=causal, on_nonpositive=options["on_nonpositive"],
                                xp=xp, keep=train)
        return o, (cq, ck, ca, scale, options["features"], state)

    def bwd(do, cache):
        cq, ck, ca, scale, feats, _ = cache
        xp = namespace(do)
        g = linear_attention_bwd_core(do, ca, xp=xp)
        if feats == "prf":
            gq = stable_bwd((g.phi_q, None), cq, xp=xp)                             # query log-scale dropped
            gk = stable_bwd((g.phi_k, g.k_log_scale), ck, xp=xp)
        else:
            gq, gk = rks_bwd(g.phi_q, cq, xp=xp), rks_bwd(g.phi_k, ck, xp=xp)
        dparams = tree_map(lambda a, b: a + b, gq.params, gk.params)                # queries' + keys' share
        return gq.x * scale, gk.x * scale, g.v, {key: dparams}

    return fwd, bwd


def pos_dim(att) -> int:
    """Dimension D of a kind's token coordinates: ``att["pos_dim"]``, else 2 with a ``grid``, else 1."""
    if att.get("pos_dim") is not None:
        return att["pos_dim"]
    return 1 if att.get("grid") is None else 2


def token_positions(positions, L, options, like, *, xp, kind):
    """The ``(L, D)`` token coordinates a positional kind uses: the caller's `positions` (checked against
    ``L`` and ``D = pos_dim(options)``), or the default of :func:`grid_positions` (D = 1 or 2 only)."""
    D = pos_dim(options)
    if positions is None:
        if D > 2:
            raise ValueError(f"attention kind {kind!r}: pos_dim = {D} needs per-token coordinates; pass "
                             f"positions: (L, {D}) array to the model (transformer_fwd(..., positions=...))")
        return grid_positions(L, options.get("grid"), like, xp=xp, kind=kind)
    if positions.ndim != 2 or tuple(positions.shape) != (L, D):
        raise ValueError(f"positions: expected shape (L, D) = ({L}, {D}) for attention kind {kind!r} "
                         f"(pos_dim = {D}); got {tuple(positions.shape)}")
    return positions


def with_class_token(pos, *, xp):
    """The coordinates ``(L + 1, D)`` and per-token positional weights ``(L + 1,)`` of a sequence whose token
    0 is a class token before the `pos` ``(L, D)`` ones: a zero coordinate row and weight 0 for it (its
    positional features vanish: Horn et al.'s zero positional encoding of the class token, ``train.py``
    l. 88-117), weight 1 for the others."""
    coords = xp.concat([xp.zeros_like(pos[:1, :]), pos], axis=0)                   # (L + 1, D)
    weight = xp.concat([xp.zeros_like(pos[:1, 0]), xp.ones_like(pos[:, 0])], axis=0)   # (L + 1,)
    return coords, weight


def grid_positions(L, grid, like, *, xp, kind=""):
    """Default token coordinates ``(L, D)``: ``0..L-1`` (``grid=None``, D = 1), or the row-major (row, column)
    of an ``(H, W)`` grid (D = 2). Coordinates are indices by nature, held in `like`'s float dtype."""
    idx = xp.arange(L, dtype=like.dtype, device=device_of(like))                   # (L,)
    if grid is None:
        return xp.reshape(idx, (L, 1))                                              # (L, 1)
    H, W = grid
    if H * W != L:
        raise ValueError(f"attention kind {kind!r}: grid {tuple(grid)} has H * W = {H * W} positions; "
                         f"the sequence has L = {L}")
    row = xp.floor(idx / W)
    return xp.stack([row, idx - W * row], axis=-1)                                  # (L, 2)
