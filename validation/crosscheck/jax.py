"""JAX adapter: conversions and ``jax.vjp`` gradients. JAX is optional: when it is not installed,
``JaxFramework().available()`` is False and ``--framework jax`` exits with status 2 naming the missing
package."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..base import Framework

__all__ = ["JaxFramework"]


class JaxFramework(Framework):
    name = "jax"
    autograd = True
    module = "jax"
    mutable = False                                       # JAX arrays are immutable

    def asarray(self, a: np.ndarray) -> Any:
        import jax
        import jax.numpy as jnp
        if a.dtype == np.float64:
            jax.config.update("jax_enable_x64", True)   # float64 candidates need x64 mode
        return jnp.asarray(a)

    def to_numpy(self, x: Any) -> np.ndarray:
        return np.asarray(x)

    def is_array(self, x: Any) -> bool:
        import jax
        return isinstance(x, jax.Array)

    def copy(self, x: Any) -> Any:
        return x                                          # JAX arrays are immutable

    def vjp(self, fn, args, cotangent, *extra):
        import jax
        xs = [self.asarray(a) for a in args]
        y, pullback = jax.vjp(lambda *t: fn(*t, *extra), *xs)
        grads = pullback(self.asarray(np.asarray(cotangent, dtype=np.asarray(y).dtype)))
        return self.to_numpy(y), [self.to_numpy(g) for g in grads]
