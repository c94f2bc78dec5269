r"""NumPy-only complex reference of FLT Theorem 4.1, exactly as printed (docs/guide/flt.md: not in the core).

    phi(z) = r^{-1/2} [e^{2 pi i z.xi_k} sqrt(g(xi_k)/p(xi_k))]_k,   psi(z) = r^{-1/2} [e^{-2 pi i z.xi_k}
    sqrt(g(xi_k)/p(xi_k))]_k,   N_hat = N1 N2^T (bilinear; psi already carries the conjugate).

``sqrt`` is the principal complex square root, so sqrt(w)^2 = w for every complex (or negative) weight. The
core's real features must reproduce ``Re N_hat`` draw by draw; Theorem 4.1 says ``E[N_hat] = N``.
"""

from __future__ import annotations

import numpy as np


def complex_features(pos: np.ndarray, xi: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(N1, N2)`` complex, ``(..., L, r)``, for positions ``(..., L, D)``, frequencies ``(r, D)`` and
    importance weights ``w = g(xi)/p(xi): (r,)`` (complex or real)."""
    pos = np.asarray(pos, dtype=np.float64)
    r = xi.shape[0]
    root = np.sqrt(np.asarray(w, dtype=np.complex128)) / np.sqrt(r)          # (r,) principal branch
    phase = 2j * np.pi * (pos @ xi.T)                                        # (..., L, r)
    return np.exp(phase) * root, np.exp(-phase) * root


def complex_mask_estimate(pos, xi, w) -> np.ndarray:
    """``N_hat = N1 N2^T: (..., L, L)`` complex."""
    N1, N2 = complex_features(pos, xi, w)
    return N1 @ np.swapaxes(N2, -1, -2)


def complex_single_sample(delta: np.ndarray, xi: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The single-frequency estimator of Lemma A.2, ``e^{2 pi i delta.xi} g(xi)/p(xi)``: ``(r, ...)`` for
    offsets ``delta: (..., D)``."""
    w_b = np.reshape(w, (-1,) + (1,) * (delta.ndim - 1))                          # (r, 1, ...)
    return np.exp(2j * np.pi * np.einsum("rd,...d->r...", xi, delta)) * w_b
