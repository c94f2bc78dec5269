"""Shared normalisation backward (layer norm and batch norm in training mode differ only in the reduced
axes)."""

from __future__ import annotations


def normalize_bwd(dxhat, xhat, rstd, axes, *, xp):
    r"""Gradient through ``xhat = (x - mean(x)) * rstd`` with ``rstd = 1/sqrt(var(x) + eps)`` (biased
    variance), both statistics over `axes`::

        dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat * xhat))

    (the mean and variance terms of the chain rule, simplified as in llm.c's layernorm derivation).
    """
    m1 = xp.mean(dxhat, axis=axes, keepdims=True)
    m2 = xp.mean(dxhat * xhat, axis=axes, keepdims=True)
    return rstd * (dxhat - m1 - xhat * m2)
