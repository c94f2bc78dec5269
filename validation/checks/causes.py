"""The catalogue of known defects: every failing check names its likely cause from this one table.

The built-in targets' findings (:mod:`validation.findings`) and a user's own target are diagnosed from the
same entries: a check that fails calls :func:`cause` with the entry its figures point to and the figure
itself (``cause("global-max-eps", "aligned later keys change the prefix outputs by 3.1e-03")``), or
:func:`unmatched` when no entry fits, which says so instead of guessing.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["Defect", "DEFECTS", "cause", "unmatched", "cause_key"]


@dataclasses.dataclass(frozen=True)
class Defect:
    """A known defect: its key, what it is, and the check that exposes it."""

    key: str
    what: str
    check: str


#: key -> the known defect (the numerical traps refattn's modules document, and what the cross-checks of
#: public code found)
DEFECTS: dict[str, Defect] = {d.key: d for d in (
    Defect("non-haar-qr", "non-Haar orthogonal draws: QR without the sign(diag R) correction", "haar"),
    Defect("non-haar-bias", "bias of the positive-feature estimate from non-Haar draws, direction-dependent",
           "unbiased"),
    Defect("zero-draw", "a degenerate draw (all zeros, or not finite)", "haar"),
    Defect("global-max-eps", "causal leak: a key stabiliser taken over all positions, plus an additive eps",
           "prefix_invariance"),
    Defect("global-max-underflow", "causal leak: a key stabiliser taken over all positions without eps "
                                   "(later keys push earlier ones' features to zero)", "prefix_invariance"),
    Defect("batch-max", "a stabiliser (maximum) taken over the whole batch: one batch element's keys change "
                        "another's output", "batch_independence"),
    Defect("no-stabiliser", "no stabiliser: raw exp features overflow or underflow to 0/0", "stability"),
    Defect("missing-d-quarter", "missing d^-1/4 scaling of q and k (estimates exp(q.k), not "
                                "exp(q.k/sqrt(d)))", "kernel"),
    Defect("extra-d-quarter", "an extra d^-1/4 scaling of x (the scaled family's map under the unscaled "
                              "name)", "kernel"),
    Defect("wrong-offset", "wrong feature offset: exp(x.w - |x|^2) (KL Eq. (9), a Gaussian kernel) for "
                           "exp(x.w - |x|^2/2)", "kernel"),
    Defect("gaussian-for-softmax", "Gaussian-kernel features where the softmax kernel is claimed (the "
                                   "exp(|x|^2/2) factor left out, or the maps swapped)", "kernel"),
    Defect("softmax-for-gaussian", "softmax-kernel features where the Gaussian kernel is claimed (an "
                                   "exp(|x|^2/2) factor too many)", "kernel"),
    Defect("normalisation", "a wrong normalisation constant (e.g. 1/m for 1/sqrt(m)): the estimate is a "
                            "constant multiple of the kernel", "kernel"),
    Defect("additive-eps", "an additive eps in the features (performer-pytorch's eps = 1e-4 relative to the "
                           "stabilising maximum)", "values"),
    Defect("row-scale", "a per-row stabiliser not undone: each row off by its own factor (return (phi, "
                        "log_scale) to keep the scale)", "values"),
    Defect("other-family", "the map of another family than the one claimed", "values"),
    Defect("separate-qk", "separate q/k draws: keys featurised with another omega than queries",
           "same_features"),
    Defect("upcast", "a silent cast of the output dtype (e.g. float32 in, float64 out)", "dtype"),
    Defect("detached-max", "the gradient is not the derivative of the candidate's own forward (a detached "
                           "stabiliser or a wrong custom backward)", "gradients"),
    Defect("not-finite", "non-finite outputs (NaN or inf) on ordinary inputs", "values"),
    Defect("causal-raises", "causal mode raises (no causal path)", "values"),
)}


def cause(key: str, figure: str) -> str:
    """The likely cause of a failure: the catalogue entry `key` and the figure that points to it."""
    return f"{DEFECTS[key].what} [{key}]: {figure}"


def unmatched(figure: str) -> str:
    """No catalogue entry fits the failure: say so, with what was measured."""
    return f"no known defect matches [unmatched]: {figure}"


def cause_key(text: str | None) -> str | None:
    """The catalogue key a cause text names (``None`` for no cause, ``"unmatched"`` when none fitted)."""
    m = re.search(r"\[([a-z0-9-]+)\]", text or "")
    return m.group(1) if m else None
