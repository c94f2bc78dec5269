"""The augmented value ``[v, 1]`` and the normaliser checks shared by linear attention and the Toeplitz RPE.

Both compute ``numer_aug = A [v, 1]`` (one GEMM gives the numerator and the normaliser ``z``) and then check
``z``: non-finite values are traced to the input that caused them, and a non-positive normaliser raises a
``ValueError`` that says what happened -- an underflow to 0 in the dtype at hand (positive features of large
inputs), or negative estimates (trig features: :mod:`refattn.features.trig`) -- and the remedy;
``on_nonpositive="ignore"`` returns the output as computed. Each check is one reduction (a host sync on a
GPU); the slow diagnosis runs only after a failure.
"""

from __future__ import annotations

from .._xp import check_finite, device_of

__all__ = ["augment", "check_normaliser", "name_nonfinite"]


def augment(v, *, xp):
    """``[v, 1]``: ``(..., L, d_v)`` -> ``(..., L, d_v + 1)``."""
    ones = xp.ones(tuple(v.shape[:-1]) + (1,), dtype=v.dtype, device=device_of(v))
    return xp.concat([v, ones], axis=-1)                                          # (..., L, d_v + 1)


def name_nonfinite(xp, *, where="linear_attention", **arrays):
    """Called only after a non-finite normaliser or output: find and name the offending input, else raise."""
    for name, a in arrays.items():
        if a is not None:
            check_finite(name, a, xp=xp)
    raise ValueError(
        f"{where}: the normaliser or output is not finite although every input is: the features overflow in "
        "the products; pass stabilised features with k_log_scale (refattn.attention.linear, 'The "
        "stabiliser's frames')")


def check_normaliser(z, on_nonpositive, *, xp, inputs, where="linear_attention"):
    """Raise unless the normaliser `z` is finite and, with ``on_nonpositive="raise"``, positive.

    One reduction in the common case (``min(z) > 0`` and finite); the counts and the message are computed
    only after a failure.
    """
    if 0 in tuple(z.shape):  # an empty batch or sequence: no normaliser to check
        return
    finite = xp.isfinite(z)
    low = float(xp.min(xp.where(finite, z, xp.asarray(-1.0, dtype=z.dtype, device=device_of(z)))))
    if low > 0:  # the one sync of the good case
        return
    if not bool(xp.all(finite)):
        name_nonfinite(xp, where=where, **inputs)
    if on_nonpositive != "raise":
        return
    zmin = float(xp.min(z))
    negative = int(xp.sum(xp.astype(z < 0, xp.int64)))
    zero = int(xp.sum(xp.astype(z == 0, xp.int64)))
    if negative:
        raise ValueError(
            f"{where}: {negative + zero} non-positive normaliser(s) phi_q . sum_j phi_k_j "
            f"(minimum {zmin:.3e}, {negative} negative); trig features can give these (their estimates can "
            "be negative: refattn.features.trig). "
            "Pass on_nonpositive='ignore' to get the output as computed")
    raise ValueError(
        f"{where}: {zero} normaliser(s) underflowed to 0 in {z.dtype} although every input is finite: for "
        f"those queries every product phi_q . phi_k is below the smallest positive {z.dtype} number. Remedy: "
        "compute in float64, or use inputs of smaller norm, or give the keys per-feature frames "
        "(positive_key_features_stable with k_log_scale, as favor_attention does for positive and hyperbolic "
        "features); on_nonpositive='ignore' returns the output as computed")
