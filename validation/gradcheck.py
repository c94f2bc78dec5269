"""NumPy-only edge: gradient checks of forward/backward pairs by central finite differences (float64).

:func:`check_vjp` tests a pair ``fwd(**args) -> (y, cache)``, ``bwd(dy, cache) -> grads`` the way JAX's
``check_vjp`` does: for a random cotangent c and random directions t, the directional derivative
``<c, (f(x + eps t) - f(x - eps t)) / (2 eps)>`` must equal ``<t, vjp(c)>``. Directions perturb one argument
at a time (and then all together), so a failure names the argument whose gradient is wrong. Gradient fields
are looked up by the argument's name (``grads.phi_q`` for ``phi_q``); nested parameter containers (dicts,
tuples, NamedTuples) are walked leaf by leaf.

A container argument (a parameter dict) is also checked leaf by leaf, so that a wrong gradient of a small
leaf (mixture logits beside large weight matrices) cannot hide inside the container's summed tolerance.
`alone` narrows which leaves get their own directions (the container's joint directions still move every
leaf): a test that varies one sub-layer of a model whose other layers are checked leaf by leaf elsewhere
perturbs that sub-layer's leaves alone, and the input-side leaves through which its input gradient flows.

Tolerance: ``|fd - an| <= rtol * sum_i <|t_i|, |g_i|> + 8 eps_machine sum |c| |y| / eps`` -- relative to the
scale of the terms (robust to cancellation) plus the rounding error of the difference quotient itself.
"""

from __future__ import annotations

from typing import Any, Callable

import array_api_compat
import numpy as np

from refattn.tree import is_leaf, tree_get, tree_paths, tree_replace

from .assertions import to_numpy

__all__ = ["check_vjp", "jacobian_fd", "float_leaves"]


def _is_float_array(x: Any) -> bool:
    if not is_leaf(x):
        return False
    xp = array_api_compat.array_namespace(x)
    return xp.isdtype(x.dtype, "real floating")


def float_leaves(tree: Any) -> list[tuple[str, Any]]:
    """``[(path, leaf)]`` for every real floating array leaf of a nested container (refattn.tree paths)."""
    return [(p, leaf) for p, leaf in tree_paths(tree) if _is_float_array(leaf)]


def _get(tree: Any, path: str) -> Any:
    try:
        return tree_get(tree, path)
    except (KeyError, IndexError, AttributeError):
        return None


def _label(name: str, path: str) -> str:
    return f"{name}[{path!r}]" if path else name


def _inner(a_tree: Any, b_tree: Any, absolute: bool = False) -> float:
    total = 0.0
    for path, a in float_leaves(a_tree):
        b = _get(b_tree, path)
        an, bn = to_numpy(a).astype(np.float64), to_numpy(b).astype(np.float64)
        total += float(np.sum(np.abs(an) * np.abs(bn))) if absolute else float(np.sum(an * bn))
    return total


def _random_like(tree: Any, rng: np.random.Generator) -> Any:
    for path, leaf in float_leaves(tree):
        xp = array_api_compat.array_namespace(leaf)
        draw = rng.standard_normal(tuple(leaf.shape))
        tree = tree_replace(
            tree, path, xp.asarray(draw, dtype=leaf.dtype, device=array_api_compat.device(leaf))
        )
    return tree


def check_vjp(
    fwd: Callable[..., Any],
    bwd: Callable[[Any, Any], Any],
    args: dict,
    *,
    kwargs: dict | None = None,
    wrt: tuple[str, ...] | None = None,
    seed: int = 0,
    n_directions: int = 3,
    eps: float = 1e-6,
    rtol: float = 1e-6,
    output: Callable[[Any], Any] | None = None,
    alone: Callable[[str, str], bool] | None = None,
) -> dict[str, float]:
    """Check ``bwd`` against central differences of ``fwd`` for every real floating argument in `wrt`.

    Parameters
    ----------
    fwd : callable
        ``fwd(**args, **kwargs) -> (y, cache)``; ``y`` is an array or a container of arrays.
    bwd : callable
        ``bwd(dy, cache) -> grads``, a NamedTuple or dict with one field per argument name (nested like the
        argument for parameter containers).
    args : dict
        Differentiable arguments by name (arrays or containers of arrays), float64.
    kwargs : dict, optional
        Further arguments passed unchanged (flags, integer positions).
    wrt : tuple of str, optional
        Arguments to check (default: every entry of `args` holding a real floating array).
    seed : int
        Seed of the random cotangent and directions.
    n_directions : int
        Random directions per argument (plus the same number perturbing all arguments together).
    eps, rtol : float
        Step and relative tolerance.
    output : callable, optional
        Selects the differentiated part of ``y`` (e.g. ``lambda y: y[0]``); the cotangent then matches it and
        ``bwd`` receives it as given.
    alone : callable, optional
        ``alone(argument name, leaf path) -> bool``: which leaves of a container argument also get their own
        directions (default: every leaf). The container's joint directions always move every leaf.

    Returns
    -------
    dict
        The worst relative error per argument (for reports).

    Raises
    ------
    AssertionError
        Naming the argument, the finite-difference and the analytic directional derivatives, the tolerance
        and the seed; or when the backward returns no gradient, or one of the wrong shape, for an argument.
    ValueError
        If `wrt` names something that is not in `args`.
    TypeError
        If a checked argument is not float64.

    Examples
    --------
    >>> import numpy as np
    >>> from refattn.layers import DenseParams, dense_bwd, dense_fwd
    >>> from validation import check_vjp
    >>> rng = np.random.default_rng(0)
    >>> args = {"x": rng.standard_normal((4, 3)),
    ...         "params": DenseParams(W=rng.standard_normal((3, 2)), b=rng.standard_normal(2))}
    >>> worst = check_vjp(dense_fwd, dense_bwd, args)      # passes: returns the worst relative errors
    >>> sorted(worst)
    ['params', "params['W']", "params['b']", 'x', 'x+params']
    >>> def wrong_bwd(dy, cache):                          # a backward off by 0.1 % in dx
    ...     grads = dense_bwd(dy, cache)
    ...     return grads._replace(x=1.001 * grads.x)
    >>> check_vjp(dense_fwd, wrong_bwd, args)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    AssertionError: check_vjp: gradient for x disagrees with central differences: ...
    """
    kwargs = dict(kwargs or {})
    rng = np.random.default_rng(seed)
    if wrt is None:
        wrt = tuple(n for n, a in args.items() if float_leaves(a))
    for n in wrt:
        if n not in args:
            raise ValueError(f"wrt: {n!r} is not an argument (arguments: {sorted(args)})")
        for path, leaf in float_leaves(args[n]):
            if to_numpy(leaf).dtype != np.float64:
                raise TypeError(f"check_vjp: {_label(n, path)} must be float64; got {leaf.dtype}")

    select = output or (lambda y: y)

    def f(a: dict) -> Any:
        return select(fwd(**a, **kwargs)[0])

    y, cache = fwd(**args, **kwargs)
    c = _random_like(select(y), rng)
    grads = bwd(c, cache)
    y_scale = _inner(select(y), c, absolute=True)

    worst: dict[str, float] = {}
    leaves = {n: [path for path, _ in float_leaves(args[n])] for n in wrt}
    groups: list[tuple[str, list[tuple[str, str]]]] = []
    for n in wrt:
        if len(leaves[n]) > 1:  # each leaf alone, so that a small wrong leaf cannot hide behind large ones
            groups += [(_label(n, p), [(n, p)]) for p in leaves[n] if alone is None or alone(n, p)]
        groups.append((n, [(n, p) for p in leaves[n]]))
    if len(wrt) > 1:
        groups.append(("+".join(wrt), [(n, p) for n in wrt for p in leaves[n]]))
    for name, members in groups:
        for _ in range(n_directions):
            plus, minus = dict(args), dict(args)
            an, scale = 0.0, 0.0
            for n, path in members:
                x = _get(args[n], path)
                xp = array_api_compat.array_namespace(x)
                t = xp.asarray(rng.standard_normal(tuple(x.shape)), dtype=x.dtype,
                               device=array_api_compat.device(x))
                plus[n] = tree_replace(plus[n], path, x + eps * t)
                minus[n] = tree_replace(minus[n], path, x - eps * t)
                g = grads.get(n) if isinstance(grads, dict) else getattr(grads, n, None)
                if g is None:
                    raise AssertionError(f"check_vjp: the backward returned no gradient for {n!r}")
                gl = _get(g, path)
                label = _label(n, path)
                if gl is None:
                    raise AssertionError(f"check_vjp: no gradient for {label}")
                if tuple(gl.shape) != tuple(t.shape):
                    raise AssertionError(
                        f"check_vjp: gradient for {label} has shape {tuple(gl.shape)}; "
                        f"the argument has shape {tuple(t.shape)}")
                an += _inner(t, gl)
                scale += _inner(t, gl, absolute=True)
            fd = (_inner(f(plus), c) - _inner(f(minus), c)) / (2 * eps)
            tol = rtol * scale + 8 * np.finfo(np.float64).eps * y_scale / eps
            err = abs(fd - an)
            worst[name] = max(worst.get(name, 0.0), err / max(scale, 1e-300))
            if not err <= tol:
                raise AssertionError(
                    f"check_vjp: gradient for {name} disagrees with central differences: "
                    f"finite difference {fd:.12e}, backward {an:.12e}, |diff| {err:.3e} > tol {tol:.3e} "
                    f"(rtol {rtol:g}, eps {eps:g}, seed {seed})"
                )
    return worst


def jacobian_fd(f: Callable[[Any], Any], x: Any, *, eps: float = 1e-6) -> np.ndarray:
    """Full Jacobian of ``f`` at `x` by central differences, shape ``(f(x).size, x.size)`` (tiny inputs only).

    Used to find which entry of a gradient is wrong once :func:`check_vjp` has failed:
    ``J[i, j] = (f(x + eps e_j)_i - f(x - eps e_j)_i) / (2 eps)`` over the flattened entries, computed in
    float64 (2 ``x.size`` evaluations of `f`).

    Parameters
    ----------
    f : callable
        ``f(x) -> y``, an array of `x`'s namespace (any shape).
    x : (...) array
        The point, real floating; perturbed copies keep its dtype and namespace.
    eps : float, default 1e-6
        Step of the central differences.

    Returns
    -------
    J : (f(x).size, x.size) numpy.ndarray
        float64, rows over the flattened output, columns over the flattened input.

    Examples
    --------
    >>> import numpy as np
    >>> from validation import jacobian_fd
    >>> jacobian_fd(lambda t: t ** 2, np.array([1.0, 2.0])).round(6)
    array([[2., 0.],
           [0., 4.]])
    """
    xp = array_api_compat.array_namespace(x)
    x0 = to_numpy(x).astype(np.float64)
    y0 = to_numpy(f(x)).ravel()
    J = np.empty((y0.size, x0.size))
    for i in range(x0.size):
        e = np.zeros(x0.size)
        e[i] = eps
        xp_ = xp.asarray((x0.ravel() + e).reshape(x0.shape), dtype=x.dtype)
        xm_ = xp.asarray((x0.ravel() - e).reshape(x0.shape), dtype=x.dtype)
        J[:, i] = (to_numpy(f(xp_)).ravel() - to_numpy(f(xm_)).ravel()) / (2 * eps)
    return J
