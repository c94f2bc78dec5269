"""The normalisation backward shared by layer norm and batch norm (training mode): only the axes differ."""

from __future__ import annotations


def normalize_bwd(dxhat, xhat, rstd, axes, *, xp):
    r"""``dx = rstd (dxhat - mean(dxhat) - xhat mean(dxhat * xhat))``, the gradient through
    ``xhat = (x - mean(x)) rstd``, ``rstd = 1/sqrt(var(x) + eps)`` (biased), statistics over `axes`.
    """
    m1 = xp.mean(dxhat, axis=axes, keepdims=True)
    m2 = xp.mean(dxhat * xhat, axis=axes, keepdims=True)
    return rstd * (dxhat - m1 - xhat * m2)
