"""PyTorch adapter (optional ``crosscheck`` extra): conversions, autograd VJPs, and refattn as a torch
function.

:class:`TorchFramework` converts NumPy inputs to CPU tensors of the same dtype, outputs back, and computes a
candidate's gradients with ``torch.autograd``. :func:`refattn_function` turns a refattn forward/backward pair
into a ``torch.autograd.Function``: the forward runs refattn's array-API core on the tensors themselves
(through array-api-compat), the backward is refattn's manual backward -- this is how refattn is cross-checked
"through the torch adapter" (``python -m validation check refattn --framework torch``).
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import numpy as np

from ..base import Framework

__all__ = ["TorchFramework", "refattn_function"]


class TorchFramework(Framework):
    name = "torch"
    autograd = True
    module = "torch"

    @contextlib.contextmanager
    def session(self):
        import torch
        n = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            yield
        finally:
            torch.set_num_threads(n)

    def asarray(self, a: np.ndarray) -> Any:
        import torch
        return torch.from_numpy(np.array(a, copy=True))

    def to_numpy(self, x: Any) -> np.ndarray:
        import torch
        if isinstance(x, torch.Tensor):
            return x.detach().cpu().numpy()
        return np.asarray(x)

    def is_array(self, x: Any) -> bool:
        import torch
        return isinstance(x, torch.Tensor)

    def copy(self, x: Any) -> Any:
        return x.clone()

    def vjp(self, fn, args, cotangent, *extra):
        import torch
        ts = [self.asarray(a).requires_grad_(True) for a in args]
        y = fn(*ts, *extra)
        c = self.asarray(np.asarray(cotangent)).to(y.dtype)
        grads = torch.autograd.grad((y * c).sum(), ts, allow_unused=True)
        return self.to_numpy(y), [None if g is None else self.to_numpy(g) for g in grads]


def refattn_function(fwd: Callable[..., Any], bwd: Callable[[Any, Any], Any], names: tuple[str, ...],
                     **static: Any) -> Callable[..., Any]:
    """A torch callable ``f(*tensors)`` running refattn's ``fwd(**dict(zip(names, tensors)), **static)`` with
    refattn's ``bwd`` as its gradient (field names = argument names)."""
    import torch

    class _Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, *tensors):
            y, cache = fwd(**dict(zip(names, tensors, strict=True)), **static)
            ctx.cache = cache
            return y

        @staticmethod
        def backward(ctx, dy):
            g = bwd(dy.contiguous(), ctx.cache)
            return tuple(getattr(g, n) for n in names)

    def f(*tensors):
        return _Fn.apply(*tensors)

    return f
