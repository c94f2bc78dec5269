r"""Parameterisations that keep a kind's constrained learnable parameters in their domain.

A model learns an unconstrained *raw* array and its forward maps it to the constrained value, so no optimiser
step (any rate, any optimiser) can leave the domain:

* a positive parameter (a spectrum's widths ``sigma``, lengths ``length``, radii ``v``: the fields its family
  lists in ``Family.positive``) is stored as :class:`Log`, ``value = exp(log) + tiny``;
  ``d log = d value * exp(log)``;
* an FLT proposal's ``scale`` is stored as :class:`LogExcess`, ``scale = s_* (1 + 8 eps) + tiny +
  exp(log_excess)``, with ``s_*`` the floor the spectrum sets for finite-variance importance weights
  (:func:`refattn.rpe.spectra.scale_floor`; 0 where the pair sets none), so the pair stays accepted by
  :func:`refattn.rpe.spectra.check_proposal` while both are learned;
  ``d log_excess = d scale * exp(log_excess)``, and the spectrum's parameters gain
  ``(1 + 8 eps) sum(d scale) * d s_* / d parameters``.

``tiny`` and ``eps`` are the dtype's smallest normal number and machine epsilon: an ``exp`` that underflows to
0 (a raw value below about -745 in float64, after a diverging step) still leaves the value positive and the
scale strictly above the floor; they change no value a run reaches otherwise (``1e-308`` next to a width).
An ``exp`` that overflows gives ``inf``: a diverged run, which training reports as such.

The stored form keeps the spectrum's container type (its type names the family) with each positive field
holding a :class:`Log`: a parameter path reads ``.../spectrum/sigma/log``, ``.../proposal/scale/log_excess``.
Axes: ``T`` components, ``D`` position dimension (the shapes of :mod:`refattn.rpe.spectra`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from ..._xp import namespace
from ...rpe.spectra import Proposal
from ...rpe.spectra.core import family_of
from ...rpe.spectra.proposals import scale_floor_core

__all__ = ["Log", "LogExcess", "SpectralValuesCache", "store_spectral", "spectrum_values",
           "spectral_values_fwd", "spectral_values_bwd"]

Array = Any


class Log(NamedTuple):
    """A positive parameter stored as its logarithm: ``value = exp(log)``."""

    log: Array


class LogExcess(NamedTuple):
    """A proposal scale stored as the log of its excess over the spectrum's floor: ``scale = s_* +
    exp(log_excess)``."""

    log_excess: Array


class SpectralValuesCache(NamedTuple):
    """Cache of :func:`spectral_values_fwd` for :func:`spectral_values_bwd` (fields commented in source)."""

    spectrum: Any       # the constrained spectrum (values)
    excess: Array       # exp(log_excess): () or (D,)
    floor_grad: Any     # d s_* / d spectrum (spectrum container) or None
    kind: str           # the proposal's kind
    eps: float          # the dtype's machine epsilon (the floor's margin 1 + 8 eps)


def _positive(spectrum) -> tuple:
    return family_of(spectrum).positive


def store_spectral(spectrum, proposal, *, xp):
    """The stored (raw) form of a constrained spectrum and proposal: :class:`Log` positive fields, the
    proposal's scale as :class:`LogExcess` over the spectrum's floor.

    Raises ``ValueError`` (naming ``attention.proposal_scale``) if a scale is not above the floor: such a
    pair has importance weights of infinite variance and no valid raw value.
    """
    pos = _positive(spectrum)
    tiny, eps = _tiny_eps(proposal.loc, xp=xp)
    stored = spectrum._replace(**{n: Log(xp.log(getattr(spectrum, n) - tiny)) for n in pos})
    D = int(proposal.loc.shape[-1])
    floor, _ = scale_floor_core(spectrum, proposal.kind, D, xp=xp)
    excess = proposal.scale - (floor * (1.0 + 8.0 * eps) + tiny)
    low = float(xp.min(excess))
    if not low > 0:
        raise ValueError(f"attention.proposal_scale: the {proposal.kind!r} proposal's scale must exceed "
                         f"s_* = {float(floor):.6g}, the floor {type(spectrum).__name__} sets for "
                         f"finite-variance importance weights (refattn.rpe.spectra.scale_floor); got scale "
                         f"{float(xp.min(proposal.scale)):.6g}")
    return stored, proposal._replace(scale=LogExcess(xp.log(excess)))


def _tiny_eps(like, *, xp):
    fi = xp.finfo(like.dtype)
    return float(fi.smallest_normal), float(fi.eps)


def spectrum_values(stored, *, xp):
    """The constrained spectrum of a stored one (each :class:`Log` field ``exp(log) + tiny``)."""
    pos = _positive(stored)
    if not pos:
        return stored
    tiny, _ = _tiny_eps(getattr(stored, pos[0]).log, xp=xp)
    return stored._replace(**{n: xp.exp(getattr(stored, n).log) + tiny for n in pos})


# value = exp(log) + tiny per positive field;  scale = s_*(spectrum) (1 + 8 eps) + tiny + exp(log_excess)
def spectral_values_fwd(stored_spectrum, stored_proposal, *, xp):
    """``(spectrum, proposal, cache)``: the constrained values of a stored spectrum and proposal (module
    docstring), and the cache for :func:`spectral_values_bwd`."""
    spectrum = spectrum_values(stored_spectrum, xp=xp)
    D = int(stored_proposal.loc.shape[-1])
    floor, floor_grad = scale_floor_core(spectrum, stored_proposal.kind, D, xp=xp)
    tiny, eps = _tiny_eps(stored_proposal.loc, xp=xp)
    excess = xp.exp(stored_proposal.scale.log_excess)                                   # () or (D,)
    proposal = stored_proposal._replace(scale=excess + (floor * (1.0 + 8.0 * eps) + tiny))
    return spectrum, proposal, SpectralValuesCache(spectrum, excess, floor_grad, stored_proposal.kind, eps)


# d log = d value * (value - tiny);  d log_excess = d scale * exp(log_excess);
# d spectrum += (1 + 8 eps) sum(d scale) d s_*
def spectral_values_bwd(dspectrum, dproposal, cache):
    """``(dstored_spectrum, dstored_proposal)``: the chain rule of :func:`spectral_values_fwd` from the
    gradients of the constrained values (``dproposal`` a :class:`Proposal` of gradients)."""
    spectrum = cache.spectrum
    dscale = dproposal.scale
    if cache.floor_grad is not None:                                            # the floor moves with g
        total = namespace(dscale).sum(dscale) * (1.0 + 8.0 * cache.eps)          # the floor is scalar
        dspectrum = type(dspectrum)(*[d + total * f if hasattr(d, "shape") else d
                                      for d, f in zip(dspectrum, cache.floor_grad, strict=True)])
    pos = _positive(spectrum)
    tiny = _tiny_eps(getattr(spectrum, pos[0]), xp=namespace(dscale))[0] if pos else 0.0
    dstored = dspectrum._replace(**{n: Log(getattr(dspectrum, n) * (getattr(spectrum, n) - tiny))
                                    for n in pos})
    return dstored, Proposal(cache.kind, dproposal.loc, LogExcess(dscale * cache.excess))
