"""The built-in ``performer-pytorch`` target (optional ``crosscheck`` extra): lucidrains' performer-pytorch
in the candidate contracts, adapted without changing what it computes.

* ``draw``: ``gaussian_orthogonal_random_matrix(m, d)`` (its default ``scaling=0``: chi-distributed row
  norms) after ``torch.manual_seed(seed)``, inside ``torch.random.fork_rng`` (the global torch RNG is left as
  it was).
* ``features``: ``softmax_kernel(x, projection_matrix=omega, is_query=False)``, its key map, with the
  stabilising factor it divides out multiplied back: it returns ``m^{-1/2} (exp(u - |x'|^2/2 - M) + eps)``
  with ``x' = d^{-1/4} x``, ``u = x' omega^T`` and ``M`` the maximum of ``u`` over all positions and features
  (``amax(dim=(-1, -2))``); the adapter returns that times ``exp(M)``, i.e. ``m^{-1/2} (exp(u - |x'|^2/2) +
  eps exp(M))``. The factor ``exp(-M)`` is one number per call and cancels in attention; the additive ``eps``
  (1e-4 by default) does not. Family: ``positive-scaled`` (the d^{-1/4} is applied inside).
* ``attention``: ``FastAttention(dim_heads=d, nb_features=m, causal=causal)`` with its ``projection_matrix``
  buffer replaced by the given omega (so omega receives gradients). In causal mode without the optional CUDA
  kernel it uses ``causal_linear_attention_noncuda`` (its message on stdout is suppressed).

:func:`eps_effect` measures what the default ``eps`` does to the output against the same computation with
``eps = 0``, refattn's FAVOR+ on the same omega, and exact softmax attention.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math

import numpy as np

from refattn.attention import favor_attention, softmax_attention

from ..base import Target, UsageError

__all__ = ["available", "target", "draw", "features", "attention", "eps_effect"]


def available() -> bool:
    return all(importlib.util.find_spec(n) is not None for n in ("torch", "performer_pytorch"))


def _pp():
    with contextlib.redirect_stdout(io.StringIO()):
        import performer_pytorch.performer_pytorch as pp
    return pp


def draw(seed, m, d):
    import torch
    pp = _pp()
    with torch.random.fork_rng():
        torch.manual_seed(int(seed))
        return pp.gaussian_orthogonal_random_matrix(m, d)


def features(x, omega):
    import torch
    pp = _pp()
    phi = pp.softmax_kernel(x, projection_matrix=omega, is_query=False)
    dash = torch.einsum("...id,jd->...ij", x * x.shape[-1] ** -0.25, omega.type_as(x))
    M = torch.amax(dash, dim=(-1, -2), keepdim=True).detach()                            # its key stabiliser
    return phi * torch.exp(M)


_MODULES: dict = {}


def _module(m, d, causal):
    import torch
    key = (m, d, bool(causal))
    if key not in _MODULES:
        pp = _pp()
        with torch.random.fork_rng(), contextlib.redirect_stdout(io.StringIO()):
            _MODULES[key] = pp.FastAttention(dim_heads=d, nb_features=m, causal=bool(causal))
    return _MODULES[key]


def attention(q, k, v, omega, causal):
    fa = _module(omega.shape[0], omega.shape[1], causal)
    fa.projection_matrix = omega                      # the buffer is replaced by the given tensor
    return fa(q, k, v)


def target(kind: str, framework: str | None) -> Target:
    if not available():
        raise UsageError("target performer-pytorch: needs torch and performer-pytorch, which are not "
                         "installed (pip install 'refattn[crosscheck]')")
    if framework not in (None, "torch"):
        raise UsageError(f"target performer-pytorch takes torch tensors; got --framework {framework}")
    if kind == "draw":
        return Target(draw, "torch", None, "gaussian_orthogonal_random_matrix(m, d) after "
                                           "torch.manual_seed(seed)")
    if kind == "features":
        return Target(features, "torch", "positive-scaled",
                      "softmax_kernel(x, projection_matrix=omega, is_query=False) * exp(its global key max)")
    return Target(attention, "torch", "positive", "FastAttention(dim_heads=d, nb_features=m, causal) with "
                  "projection_matrix = omega")


def eps_effect(L: int = 1024, d: int = 64, m: int = 256, seed: int = 0, scale: float = 1.0) -> dict:
    """Relative RMS error ``|y - y_exact| / |y_exact|`` of performer-pytorch's defaults and of the same
    computation with ``eps = 0``, on the same omega (its own draw) and inputs (q, k entries N(0, scale^2), v
    N(0, 1), float64, B = 1, H = 2), for the bidirectional and the causal (non-CUDA) paths; refattn's FAVOR+
    on the same omega for comparison."""
    import torch
    pp = _pp()
    rng = np.random.default_rng(seed)
    q, k, v = (rng.standard_normal((1, 2, L, d)) for _ in range(3))
    q, k = scale * q, scale * k
    om = draw(seed, m, d).double()
    tq, tk, tv = (torch.from_numpy(a) for a in (q, k, v))
    out = {"L": L, "d": d, "m": m, "scale": scale}
    for causal in (False, True):
        exact = softmax_attention(q, k, v, causal=causal)
        with torch.no_grad():
            y_def = attention(tq, tk, tv, om, causal).numpy()
            fq = pp.softmax_kernel(tq, projection_matrix=om, is_query=True, eps=0.0)
            fk = pp.softmax_kernel(tk, projection_matrix=om, is_query=False, eps=0.0)
            y0 = (pp.causal_linear_attention_noncuda(fq, fk, tv, eps=0.0) if causal
                  else pp.linear_attention(fq, fk, tv)).numpy()
        y_ref = favor_attention(q, k, v, om.numpy(), causal=causal)
        nrm = float(np.linalg.norm(exact))
        tag = "causal" if causal else "bidirectional"
        out[tag] = {"default_eps": float(np.linalg.norm(y_def - exact) / nrm),
                    "eps_0": float(np.linalg.norm(y0 - exact) / nrm) if np.all(np.isfinite(y0)) else math.inf,
                    "refattn": float(np.linalg.norm(y_ref - exact) / nrm),
                    "default_vs_eps_0": float(np.linalg.norm(y_def - y0) / nrm)}
    return out
