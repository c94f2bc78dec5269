r"""Optimisers as pure functions ``(params, grads, state) -> (params, state)``, and gradient clipping.

`params` and `grads` are trees of the same structure (nested dicts / NamedTuples of arrays; ``None`` leaves
are skipped). Nothing is mutated: every update returns new arrays and a new state. The step counter lives in
the state as a Python int (it drives bias correction, and a redraw policy can read it).

* **SGD** (momentum ``mu``, L2 weight decay ``lambda``, torch convention)::

      g = grad + lambda p;   v = mu v + g;   p = p - lr v

* **Adam** (Kingma & Ba 2015, Algorithm 1; ``weight_decay`` is L2 added to the gradient, as torch ``Adam``)::

      g = grad + lambda p;  m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
      p = p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)

* **AdamW** (Loshchilov & Hutter 2019, Algorithm 2 with schedule multiplier 1, torch ``AdamW``): decoupled
  decay ``p = p (1 - lr lambda)`` and then the Adam step without L2.

* :func:`clip_by_global_norm`: ``grads * min(1, max_norm / ||grads||)`` with the norm over all leaves.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from array_api_compat import array_namespace

from .._docs import fill_doc
from ..tree import is_leaf, tree_children, tree_map, tree_paths

__all__ = ["SGDState", "AdamState", "sgd_init", "sgd_update", "adam_init", "adam_update", "adamw_update",
           "global_norm", "clip_by_global_norm"]


class SGDState(NamedTuple):
    r"""SGD state: the step counter (a Python int) and the velocity tree (zeros at step 0)."""

    step: int
    velocity: Any  # tree like params (zeros at step 0)


class AdamState(NamedTuple):
    r"""Adam/AdamW state: the step counter (a Python int) and the first- and second-moment trees."""

    step: int
    m: Any  # first-moment tree
    v: Any  # second-moment tree


def _check_hyper(name, value, lo=0.0, hi=math.inf, lo_open=False, hi_open=False):
    ok = isinstance(value, (int, float)) and math.isfinite(value)
    ok = ok and (value > lo if lo_open else value >= lo) and (value < hi if hi_open else value <= hi)
    if not ok:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ValueError(f"{name}: expected a number in {lb}{lo}, {hi}{rb}; got {value!r}")


def _leaf_kind(name, a, xp):
    """``"float"`` (float32/float64) or ``"int"`` (an index leaf); anything else is a ``TypeError``."""
    if a.dtype in (xp.float32, xp.float64):
        return "float"
    if xp.isdtype(a.dtype, "integral") and a.dtype != xp.bool:
        return "int"
    raise TypeError(f"{name}: expected a float32/float64 array (or an integer index array without a "
                    f"gradient); got dtype {a.dtype}")


def _check_finite_leaf(name, a, xp):
    if not bool(xp.all(xp.isfinite(a))):
        raise ValueError(f"{name}: expected finite values; got a NaN or an infinity")


def _check_all_finite(named, xp):
    """Every array of `named` (``(name, array)`` pairs, float) finite, by one reduction over all of them; only
    after a failure is each array checked on its own, to name the first non-finite one."""
    flat = [xp.reshape(a, (-1,)) for _, a in named]
    if flat and not bool(xp.all(xp.isfinite(xp.concat(flat)))):
        for name, a in named:
            _check_finite_leaf(name, a, xp)


def _check_like(name, a, ref_name, ref):
    """`a` (a gradient or a state leaf) must be an array of exactly `ref`'s shape and dtype (finiteness:
    :func:`_check_all_finite`)."""
    if not is_leaf(a):
        raise TypeError(f"{name}: expected an array like {ref_name} (shape {tuple(ref.shape)}); "
                        f"got {type(a).__name__}")
    if tuple(a.shape) != tuple(ref.shape):
        raise ValueError(f"{name}: expected the shape of {ref_name} {tuple(ref.shape)}; got {tuple(a.shape)} "
                         "(no broadcasting)")
    if a.dtype != ref.dtype:
        raise TypeError(f"{name}: expected the dtype of {ref_name} ({ref.dtype}); got {a.dtype} "
                        "(refattn never casts parameters silently)")


def _zip_leaves(params, grads, states, path, out):
    """The one walk of an update: `params` with `grads` and the optimiser state trees `states` (``{name:
    tree}``), checking that they have the same containers and keys; appends ``(path, p, g, (s, ...))`` for
    every parameter leaf to `out` (``g`` and ``s`` may be ``None``). The leaves are checked by
    :func:`_check_leaf`."""
    where = f"[{path!r}]" if path else ""
    kids = tree_children(params)
    if kids is not None:
        keys = [k for k, _ in kids]
        children = {}                                          # name -> the children of that tree, in order
        for name, tree in (("grads", grads),) + tuple(states.items()):
            if tree is None:
                continue
            tkids = tree_children(tree)
            if tkids is None or [k for k, _ in tkids] != keys:
                got = "a leaf" if tkids is None else f"keys {[k for k, _ in tkids]}"
                raise ValueError(f"{name}{where}: expected the structure of params{where} (keys {keys}); "
                                 f"got {got}")
            children[name] = [c for _, c in tkids]
        for i, (k, child) in enumerate(kids):
            sub = {n: (None if t is None else children[n][i]) for n, t in states.items()}
            g = None if grads is None else children["grads"][i]
            _zip_leaves(child, g, sub, f"{path}/{k}" if path else str(k), out)
        return
    if not is_leaf(params):
        for name, tree in (("grads", grads),) + tuple(states.items()):
            if is_leaf(tree):
                raise ValueError(f"{name}{where}: params{where} is not an array ({params!r}); got an array")
        return
    out.append((path, params, grads, tuple(states.values())))


def _check_leaf(path, p, g, s, names, xp):
    """A parameter leaf float32/float64 (an integer index leaf only with a ``None`` gradient), its gradient
    and state leaves (named `names`) of exactly its shape and dtype; returns the ``(name, array)`` pairs of
    the float ones, whose finiteness the caller checks (integer leaves are finite)."""
    where = f"[{path!r}]" if path else ""
    pname = f"params{where}"
    if _leaf_kind(pname, p, xp) == "int":
        if g is not None:
            raise TypeError(f"grads{where}: params{where} is an integer (index) array, which takes no "
                            f"gradient; expected None, got {type(g).__name__}")
        return []
    named = [(pname, p)]
    if g is not None:
        _check_like(f"grads{where}", g, pname, p)
        named.append((f"grads{where}", g))
    for name, si in zip(names, s, strict=True):
        if si is not None:
            _check_like(f"{name}{where}", si, pname, p)
            named.append((f"{name}{where}", si))
    return named


def _checked_leaves(params, grads, states):
    """``(records, xp)``: the leaf records of :func:`_zip_leaves`, every leaf checked (:func:`_check_leaf`,
    then all of them finite: :func:`_check_all_finite`), and the namespace of the parameters, looked up once
    (``None`` for a tree without arrays)."""
    records = []
    _zip_leaves(params, grads, states, "", records)
    xp = array_namespace(*(p for _, p, _, _ in records)) if records else None
    names = tuple(states)
    named = [pair for path, p, g, s in records for pair in _check_leaf(path, p, g, s, names, xp)]
    _check_all_finite(named, xp)
    return records, xp


def _unflatten(params, leaves):
    """A tree of `params`' structure holding `leaves` (one per array leaf of `params`, in walk order)."""
    it = iter(leaves)
    return tree_map(lambda _: next(it), params)


def _update(params, grads, states, leaf_step):
    """The update: one checked walk (:func:`_checked_leaves`, one namespace lookup), then
    ``leaf_step(xp, p, g, *s) -> (p, *s)`` on every leaf that is not frozen (:func:`_frozen`); returns the new
    parameter tree and the new state trees (a tuple, in `states`' order), rebuilt in `params`' structure."""
    records, xp = _checked_leaves(params, grads, states)
    out = [(p, *s) if any(_frozen(g, si) for si in s) else leaf_step(xp, p, g, *s) for _, p, g, s in records]
    new = [_unflatten(params, [o[j] for o in out]) for j in range(1 + len(states))]
    return new[0], tuple(new[1:])


def _check_step(step):
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise TypeError(f"state.step: expected a non-negative int; got {step!r}")


def _zeros_like_tree(params):
    """Zeros for every real floating leaf; ``None`` for integer leaves (e.g. FastFood permutations)."""
    records, xp = _checked_leaves(params, None, {})
    return _unflatten(params, [p * 0 if xp.isdtype(p.dtype, "real floating") else None
                               for _, p, _, _ in records])


def _frozen(g, s) -> bool:
    """A leaf stays unchanged when its gradient is ``None`` (frozen by design) or has no state (integer)."""
    return g is None or s is None


def sgd_init(params) -> SGDState:
    r"""Initial SGD state (step 0, zero velocity).

    Parameters
    ----------
    params : tree
        Nested dicts / NamedTuples of parameter arrays: float32/float64 and finite (integer index leaves get
        no state; ``None`` leaves are skipped).

    Returns
    -------
    SGDState
        ``step=0`` and a velocity tree of zeros like `params`.

    Raises
    ------
    TypeError, ValueError
        A leaf that is not a real floating or integer array, or not finite, naming its path.
    """
    return SGDState(step=0, velocity=_zeros_like_tree(params))


def sgd_update(params, grads, state: SGDState, *, lr, momentum=0.0, weight_decay=0.0):
    r"""One SGD step with momentum and L2 weight decay (torch convention, module docstring).

    ``g = grad + lambda p;  v = mu v + g;  p = p - lr v``. Nothing is mutated.

    Parameters
    ----------
    params : tree
        Parameter arrays (float32/float64).
    grads : tree
        Same structure as `params`, every leaf its parameter's shape and dtype (no broadcasting, no up-cast),
        finite; a ``None`` leaf freezes that parameter.
    state : SGDState
        From :func:`sgd_init` or the previous step.
    lr : float
        Learning rate, > 0.
    momentum : float
        ``mu`` in [0, 1].
    weight_decay : float
        ``lambda`` >= 0 (L2, added to the gradient).

    Returns
    -------
    new_params : tree
        Updated parameters (leaves with a ``None`` gradient and integer leaves unchanged).
    new_state : SGDState
        ``step + 1`` and the new velocity.

    Raises
    ------
    ValueError, TypeError
        A bad hyperparameter, or a gradient/state tree that does not match `params` (naming the leaf's path).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.nn import sgd_init, sgd_update
    >>> params = {"w": np.ones(2)}
    >>> new, state = sgd_update(params, {"w": np.array([1.0, -1.0])}, sgd_init(params), lr=0.1)
    >>> new["w"], state.step
    (array([0.9, 1.1]), 1)
    """
    _check_hyper("lr", lr, lo_open=True)
    _check_hyper("momentum", momentum, 0.0, 1.0)
    _check_hyper("weight_decay", weight_decay)
    if not isinstance(state, SGDState):
        raise TypeError(f"state: expected SGDState (from sgd_init); got {type(state).__name__}")
    _check_step(state.step)

    def leaf_step(xp, p, g, v):                                # g = grad + lambda p;  v = mu v + g;  p - lr v
        v = momentum * v + (g + weight_decay * p)
        return p - lr * v, v

    new, (vel,) = _update(params, grads, {"state.velocity": state.velocity}, leaf_step)
    return new, SGDState(step=state.step + 1, velocity=vel)


def adam_init(params) -> AdamState:
    r"""Initial Adam/AdamW state (zero moments, step 0).

    Parameters
    ----------
    params : tree
        Parameter arrays, checked as in :func:`sgd_init`.

    Returns
    -------
    AdamState
        ``step=0`` and zero first- and second-moment trees like `params`.

    Raises
    ------
    TypeError, ValueError
        A leaf that is not a real floating or integer array, or not finite.
    """
    return AdamState(step=0, m=_zeros_like_tree(params), v=_zeros_like_tree(params))


def _adam(params, grads, state, lr, beta1, beta2, eps, l2, decoupled):
    t = state.step + 1
    c1 = 1.0 - beta1 ** t
    c2 = 1.0 - beta2 ** t

    # m = b1 m + (1 - b1) g,  v = b2 v + (1 - b2) g^2,  p = p - lr (m / c1) / (sqrt(v / c2) + eps)
    def leaf_step(xp, p, g, m, v):
        g = g + l2 * p                                         # L2 (Adam); l2 = 0 for AdamW
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * (g * g)
        base = p * (1.0 - lr * decoupled) if decoupled else p  # decoupled decay (AdamW)
        return base - lr * (m / c1) / (xp.sqrt(v / c2) + eps), m, v

    new, (m, v) = _update(params, grads, {"state.m": state.m, "state.v": state.v}, leaf_step)
    return new, AdamState(step=t, m=m, v=v)


def _check_adam(lr, beta1, beta2, eps, weight_decay):
    _check_hyper("lr", lr, lo_open=True)
    _check_hyper("beta1", beta1, 0.0, 1.0, hi_open=True)
    _check_hyper("beta2", beta2, 0.0, 1.0, hi_open=True)
    _check_hyper("eps", eps, lo_open=True)
    _check_hyper("weight_decay", weight_decay)


def _check_adam_state(state):
    if not isinstance(state, AdamState):
        raise TypeError(f"state: expected AdamState (from adam_init); got {type(state).__name__}")
    _check_step(state.step)


_ADAM = """
params : tree
    Parameter arrays (float32/float64).
grads : tree
    Same structure, shapes and dtypes as `params`; ``None`` leaves freeze their parameter.
state : AdamState
    From :func:`adam_init` or the previous step.
lr : float
    Learning rate, > 0.
beta1 : float
    First-moment decay in [0, 1).
beta2 : float
    Second-moment decay in [0, 1).
eps : float
    Denominator offset, > 0.
"""

_ADAM_RETURNS = """
new_params : tree
    Updated parameters (leaves with a ``None`` gradient and integer leaves unchanged).
new_state : AdamState
    ``step + 1`` and the new moments.

Raises
------
ValueError, TypeError
    A bad hyperparameter, or trees that do not match (naming the leaf's path).
"""


@fill_doc(adam=_ADAM, adam_returns=_ADAM_RETURNS)
def adam_update(params, grads, state: AdamState, *, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                weight_decay=0.0):
    r"""One Adam step (Kingma & Ba 2015, Algorithm 1), L2 weight decay added to the gradient (torch ``Adam``).

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``,
    ``p = p - lr (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)`` with ``g = grad + lambda p``.

    Parameters
    ----------
    {adam}
    weight_decay : float
        L2 coefficient ``lambda`` >= 0.

    Returns
    -------
    {adam_returns}

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.nn import adam_init, adam_update
    >>> params = {"w": np.zeros(2)}
    >>> new, state = adam_update(params, {"w": np.array([1.0, -1.0])}, adam_init(params), lr=0.1)
    >>> new["w"]                                   # the first step moves by lr in the sign of -grad
    array([-0.1,  0.1])
    """
    _check_adam(lr, beta1, beta2, eps, weight_decay)
    _check_adam_state(state)
    return _adam(params, grads, state, lr, beta1, beta2, eps, weight_decay, 0.0)


@fill_doc(adam=_ADAM, adam_returns=_ADAM_RETURNS)
def adamw_update(params, grads, state: AdamState, *, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
                 weight_decay=1e-2):
    r"""One AdamW step (Loshchilov & Hutter 2019, Algorithm 2; torch ``AdamW``): decoupled weight decay.

    ``p = p (1 - lr weight_decay)``, then the Adam step of :func:`adam_update` without L2 (module docstring).

    Parameters
    ----------
    {adam}
    weight_decay : float
        Decoupled decay coefficient >= 0.

    Returns
    -------
    {adam_returns}
    """
    _check_adam(lr, beta1, beta2, eps, weight_decay)
    _check_adam_state(state)
    return _adam(params, grads, state, lr, beta1, beta2, eps, 0.0, weight_decay)


def global_norm(grads) -> float:
    r"""The global gradient norm ``sqrt(sum over leaves of sum(g^2))``, overflow- and underflow-safe.

    Computed as ``2^e sqrt(sum (g / 2^e)^2)`` with ``2^e`` near the largest ``|g|``: exact scaling, so the
    result is the plain formula's wherever that is finite and does not underflow, and finite for every
    finite gradient (``|g| ~ 1e200`` in float64, ``~ 2e19`` in float32).

    Parameters
    ----------
    grads : tree
        Gradient arrays (float32/float64, finite); integer leaves are skipped, an empty tree has norm 0.

    Returns
    -------
    float
        A Python float.

    Raises
    ------
    ValueError, TypeError
        A non-finite or non-numeric leaf, naming its path.
    """
    pairs = tree_paths(grads)
    xp = array_namespace(*(g for _, g in pairs)) if pairs else None
    leaves = []
    for path, g in pairs:
        name = f"grads[{path!r}]" if path else "grads"
        if _leaf_kind(name, g, xp) == "int":
            continue
        _check_finite_leaf(name, g, xp)
        leaves.append(g)
    # scaled by a power of two near the largest |g| (exact: the result equals the unscaled sum wherever that
    # neither overflows nor underflows), so |g| ~ 1e200 in float64 or 2e19 in float32 gives a finite norm
    big = max((float(xp.max(xp.abs(g))) for g in leaves if g.size),
              default=0.0)
    if big == 0.0:
        return 0.0
    # 2^-e must be representable in every leaf's dtype (float32: |e| <= 120)
    lim = 120 if any(g.dtype == xp.float32 for g in leaves) else 1000
    e = min(max(math.frexp(big)[1], -lim), lim)
    total = 0.0
    for g in leaves:
        gs = g * math.ldexp(1.0, -e) if g.size else g
        total += float(xp.sum(gs * gs))
    return math.ldexp(math.sqrt(total), e)


def clip_by_global_norm(grads, max_norm):
    r"""Scale all gradients by ``min(1, max_norm / global_norm(grads))``.

    Parameters
    ----------
    grads : tree
        Gradient arrays (float32/float64, finite).
    max_norm : float
        The largest allowed global norm, > 0.

    Returns
    -------
    clipped : tree
        `grads` itself when no scaling is needed, else a new tree of scaled arrays.
    norm : float
        The global norm before clipping.

    Raises
    ------
    ValueError
        A bad `max_norm`, or a non-finite global norm (NaN/inf gradients are not clipped silently).

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.nn import clip_by_global_norm
    >>> clip_by_global_norm({"a": np.array([3.0]), "b": np.array([4.0])}, 1.0)
    ({'a': array([0.6]), 'b': array([0.8])}, 5.0)
    """
    _check_hyper("max_norm", max_norm, lo_open=True)
    norm = global_norm(grads)
    if not math.isfinite(norm):
        raise ValueError(f"grads: the global gradient norm is not finite ({norm}); refusing to clip NaN/inf")
    scale = min(1.0, max_norm / norm) if norm > 0 else 1.0
    if scale == 1.0:
        return grads, norm
    return tree_map(lambda g: g * scale, grads), norm
