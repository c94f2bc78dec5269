r"""Rounding-error bounds for the exact comparisons of the analytic claims (float64).

An analytic claim compares two float64 computations of one exact quantity: an identity computed two ways, or
the mean of Monte Carlo replicates that all equal the target in exact arithmetic (the zero-SE entries of
:func:`validation.montecarlo.mean_test`). The difference is rounding alone, so its tolerance is a bound
derived from the computation, written beside the comparison, never a typed-in constant: a bound too loose
would hide a real error, one too tight would call rounding a refutation.

The model (Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., Secs. 2.2, 3.1, 4.2): every
operation rounds as ``fl(a op b) = (a op b)(1 + delta)``, ``|delta| <= u = 2^-53``, and k roundings in a row
give a relative error at most ``gamma_k = k u / (1 - k u)`` (with ``gamma_j + gamma_k <= gamma_{j+k}``).
Three consequences are used:

* a sum of n terms added one after another: ``|fl(sum x_i) - sum x_i| <= gamma_{n-1} sum |x_i|`` (numpy's
  reduction over axis 0 adds the rows in turn; pairwise summation, along the contiguous axis, only does
  better), so an inner product of length K is off by at most ``gamma_K sum |x_i y_i|``;
* a function of an argument t that is itself off by ``|t| gamma_k`` (``exp``, ``cos``, ``sin``: their
  derivative is at most their value, resp. 1): ``exp`` gains a relative error ``|t| gamma_k + u``, ``cos``
  and ``sin`` an absolute one: the argument's magnitude is the condition, counted here as ``|t|`` extra
  roundings per rounding of the argument;
* the mean of n replicates ``x_b = x (1 + d_b)``, ``|d_b| <= gamma_depth``, is off from x by at most
  ``gamma_n max|x_b| + gamma_depth |x| <= gamma_{n + depth} max|x_b|`` (:func:`mean_of_equal_replicates`).

Each call site states its ``depth`` (roundings along one replicate, conditions included) and the scale it
multiplies; the check records the bound beside the measured deviation, and its rule compares the two.
"""

from __future__ import annotations

import numpy as np

__all__ = ["U", "gamma", "mean_of_equal_replicates", "log_density_bound", "weight_depth"]

#: The float64 unit roundoff: ``fl(a op b) = (a op b)(1 + delta)``, ``|delta| <= U``.
U = 2.0 ** -53


def gamma(k: float) -> float:
    """Higham's ``gamma_k = k u / (1 - k u)``: the relative error bound of k roundings in a row (k u < 1)."""
    if not 0 <= k * U < 1:
        raise ValueError(f"k: expected 0 <= k u < 1; got k = {k!r}")
    return k * U / (1.0 - k * U)


def mean_of_equal_replicates(n: int, depth: float, scale: float) -> float:
    """Bound on ``|fl(mean of n replicates) - x|`` when every replicate equals x in exact arithmetic.

    Each computed replicate is ``x (1 + d_b)`` with ``|d_b| <= gamma_depth``; the mean adds the n of them in
    turn and divides once (``gamma_n``); `scale` bounds ``max |x_b|``. Returns ``gamma_{n + depth} scale``.
    """
    return gamma(n + depth) * float(scale)


def log_density_bound(eps, kind: str) -> float:
    """A bound E on ``|log p_0(eps)|`` over the rows of `eps` ``(r, D)`` for the standard density `kind`.

    The variable part (gaussian ``|eps|^2 / 2``, laplace ``|eps|_1``, cauchy ``sum_j log(1 + eps_j^2)``,
    mv_cauchy ``(D + 1)/2 log(1 + |eps|^2)``, uniform none) plus ``2 D``, which bounds every normalising
    constant for D <= 3 (``D log(2 pi)/2``, ``D log 2``, ``D log pi``, ``|log c_D|`` = 1.14, 1.84, 2.29). For
    a kernel under its own density ``log|g|`` at ``xi = loc + scale eps`` has the same magnitude up to the
    constant ``log C``.
    """
    e = np.asarray(eps, dtype=np.float64)
    e = e.reshape(e.shape[0], -1)
    D = e.shape[1]
    sq = np.sum(e * e, axis=1)
    var = {"gaussian": sq / 2, "laplace": np.sum(np.abs(e), axis=1),
           "cauchy": np.sum(np.log1p(e * e), axis=1), "mv_cauchy": (D + 1) / 2 * np.log1p(sq),
           "uniform": np.zeros_like(sq)}[kind]
    return float(np.max(var)) + 2.0 * D


def weight_depth(E: float) -> float:
    """Roundings (conditions included) of one FLT importance weight ``w = g(xi) exp(-log p(xi))``.

    ``log p`` and the exponent of g are each a short sum of terms of magnitude at most E (a squared norm, a
    scaling, a constant: at most 4 roundings each, so an absolute error at most ``4 E u``); each ``exp``
    turns that into a relative error ``4 E u + u``, and the prefactor and the product add 4 more: ``8 E + 6``.
    """
    return 8.0 * E + 6.0
