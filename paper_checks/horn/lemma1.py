"""Horn et al. Sec. 2.3 / App. A.1: Lemma 1 and its converse (shift invariance of the rotated product)."""

from __future__ import annotations

import math
import sys

import numpy as np

from ..mutations import mutation, patched, scaled, scaled_arg, wrapped
from ..registry import HORN, Context, Result, claim, must_fail, stat_evidence
from ..rules import value, with_rule

# mutations wrap the printed formulas this module uses
_HERE = sys.modules[__name__]
TOL = 1e-12                      # exact identities: rounding only

# ------------------------------------------------------------------------------------------------------
# Lemma 1


def _phi(z, omega):
    return np.stack([np.sin(omega * z), np.cos(omega * z)], -1)                   # (n, 2) row vectors


def _pair(z, zp, omega, Wq, Wk):
    return np.einsum("...i,...i->...", _phi(z, omega) @ Wq, _phi(zp, omega) @ Wk)


def printed_value(a, b, omega, delta):
    """Lemma 1's value: alpha cos(omega (z - z')) + beta sin(omega (z - z'))."""
    return a * np.cos(omega * delta) + b * np.sin(omega * delta)


def printed_line2(a, b, s, c):
    """App. A.1, the proof's second line as printed: phi(z) M = [a s + b c, b s + a c]."""
    return np.stack([a * s + b * c, b * s + a * c], -1)


def worded_pair(A_, R):
    """(W_q, W_k) with the text's condition 'W_q^T W_k = R' (of form (3)) met: W_q = A_, W_k = A_^{-T} R."""
    return A_, np.linalg.inv(A_).T @ R


def _lemma1(ctx: Context, beta_sign: float) -> dict:
    rng = ctx.rng()
    n = ctx.pick(200, 2000)
    omega, z, zp, tau = (3 * rng.standard_normal(n) for _ in range(4))
    fwd_err = 0.0
    for _ in range(20):
        a, b = rng.standard_normal(2)
        Wk = rng.standard_normal((2, 2))
        # W_q W_k^T = [[a, b], [-b, a]]
        Wq = np.array([[a, b], [-b, a]]) @ np.linalg.inv(Wk).T
        printed = printed_value(a, beta_sign * b, omega, z - zp)
        scale = 1 + abs(a) + abs(b)
        shifted = _pair(z - tau, zp - tau, omega, Wq, Wk)
        fwd_err = max(fwd_err, float(np.max(np.abs(shifted - printed))) / scale)
    # the text's condition "W_q^T W_k of the form (3)", row-vector convention: a counterexample
    A = np.diag([1.0, 2.0])
    R = np.array([[0.0, 1.0], [-1.0, 0.0]])
    # W_q^T W_k = R, W_q W_k^T is not
    Wq, Wk = worded_pair(A, R)
    moved = float(np.max(np.abs(_pair(z - tau, zp - tau, omega, Wq, Wk) - _pair(z, zp, omega, Wq, Wk))))
    # the proof's second line: printed [a s + b c, b s + a c] versus the true row vector
    # phi M = [a s - b c, ...]




    a, b = 0.7, -1.1
    M = np.array([[a, b], [-b, a]])
    s, c = np.sin(omega * z), np.cos(omega * z)
    line2_err = float(np.max(np.abs(printed_line2(a, b, s, c) - _phi(z, omega) @ M)))
    return {**stat_evidence(n=n, seed=ctx.seed, detectable=TOL), "max_rel_err_constrained_form": fwd_err,
            "tolerance": TOL, "max_change_under_shift_when_only_WqT_Wk_is_rotation_form": moved,
            "proof_line2_max_err": line2_err}


def _decide_lemma1(ev: dict) -> str:
    tol = value(ev, "tolerance")
    if value(ev, "max_rel_err_constrained_form") > tol:
        return "fails"
    ok_wording = value(ev, "max_change_under_shift_when_only_WqT_Wk_is_rotation_form") <= tol
    return "holds" if ok_wording and value(ev, "proof_line2_max_err") <= tol else "erratum"


def _lemma1_result(ctx: Context, ev: dict) -> Result:
    fwd_err = ev["max_rel_err_constrained_form"]
    moved = ev["max_change_under_shift_when_only_WqT_Wk_is_rotation_form"]
    verdict = ctx.decide(ev)
    if verdict != "erratum":
        return Result(verdict, ev, summary=f"constrained form err {fwd_err:.1e}, counterexample change "
                                           f"{moved:.1e}, proof line 2 err {ev['proof_line2_max_err']:.1e}")
    return Result(
        "erratum", ev,
        corrected=("Row-vector convention: <phi(z - tau) W_q, phi(z' - tau) W_k> = phi(z) M phi(z')^T is "
                   "shift invariant iff M = W_q W_k^T = [[alpha, beta], [-beta, alpha]] (the display, Eq. "
                   "(3)); the text's 'W_q^T W_k' is the condition for column vectors W phi (Appendix "
                   "statement). The value is alpha cos(omega (z - z')) + beta sin(omega (z - z')); the "
                   "proof's second line should read [alpha sin - beta cos, beta sin + alpha cos]."),
        summary=(f"holds for W_q W_k^T of form (3) (err {fwd_err:.0e}); 'W_q^T W_k' as worded is wrong "
                 f"(counterexample moves by {moved:.2f}); proof line 2 off by "
                 f"{ev['proof_line2_max_err']:.2f}"))


@claim("horn.lemma1", paper=HORN, section="Sec. 2.3, Lemma 1, Eq. (3); App. A.1",
       statement="<phi(z - tau) W_q, phi(z' - tau) W_k> = <phi(z) W_q, phi(z') W_k> if W_q^T W_k is of the "
                 "form "
                 "W_q W_k^T = [[alpha, beta], [-beta, alpha]]; the value is alpha cos(omega z - omega z') + "
                 "beta sin(omega z - omega z').",
       expected="erratum",
       derivation="phi(z) M phi(z')^T with M = [[a, b], [c, d]] equals (a+d)/2 cos(omega(z-z')) + (b-c)/2 "
                  "sin(omega(z-z')) + (d-a)/2 cos(omega(z+z')) + (b+c)/2 sin(omega(z+z')); for M of form (3) "
                  "the z+z' terms vanish, so the identity holds to rounding (an exact, not statistical, "
                  "check). The matrix sandwiched between the row vectors is W_q W_k^T, so the wording 'W_q^T "
                  "W_k' is wrong for the row convention used (a counterexample shows it), and the proof's "
                  "line 2 has +beta cos for -beta cos.",
       decide=with_rule(_decide_lemma1,
                        "fails iff the constrained form (W_q W_k^T of form (3)) deviates from alpha cos + "
                        "beta sin by more than 1e-12 (relative); otherwise holds iff the worded condition "
                        "W_q^T W_k of form (3) also gives shift invariance (counterexample change <= 1e-12) "
                        "and the proof's line 2 equals phi M (<= 1e-12), erratum iff either does not."))
def lemma1(ctx: Context) -> Result:
    return _lemma1_result(ctx, _lemma1(ctx, +1.0))


@must_fail("horn.lemma1")
def lemma1_wrong(ctx: Context) -> Result:
    """The same check with the sine term's sign flipped (Delta = z' - z) must fail."""
    return _lemma1_result(ctx, _lemma1(ctx, -1.0))


mutation("horn.lemma1", "printed value x 0.5")(lambda: scaled(_HERE, "printed_value", 0.5))
mutation("horn.lemma1", "printed value with omega x 2 pi")(
    lambda: scaled_arg(_HERE, "printed_value", 2, 2 * math.pi))


@mutation("horn.lemma1", "wording and proof line 2 as corrected (both neutralised)")
def _neutralised():
    import contextlib

    stack = contextlib.ExitStack()
    stack.enter_context(patched(_HERE, "printed_line2",
                                lambda a, b, s, c: np.stack([a * s - b * c, b * s + a * c], -1)))
    # W_q W_k^T = R
    stack.enter_context(patched(_HERE, "worded_pair", lambda A_, R: (A_, R.T @ np.linalg.inv(A_).T)))
    return stack


def four_terms(M, omega, z, zp, with_sum_terms=True):
    """phi(z) M phi(z')^T = (a+d)/2 cos(omega(z-z')) + (b-c)/2 sin(omega(z-z')) [+ (d-a)/2 cos(omega(z+z'))
    + (b+c)/2 sin(omega(z+z'))], M = [[a, b], [c, d]] (the companion drops the z + z' terms)."""
    a, b, c, d = np.asarray(M).ravel()
    dm, sm = omega * (z - zp), omega * (z + zp)
    out = (a + d) / 2 * np.cos(dm) + (b - c) / 2 * np.sin(dm)
    if with_sum_terms:
        out = out + (d - a) / 2 * np.cos(sm) + (b + c) / 2 * np.sin(sm)
    return out


def _converse(ctx: Context, with_sum_terms: bool) -> Result:
    rng = ctx.rng()
    n = ctx.pick(200, 2000)
    omega, z, zp = (3 * rng.standard_normal(n) for _ in range(3))
    decomp_err, min_amp_ratio = 0.0, np.inf
    taus = np.linspace(0, 2 * np.pi, 64)
    for _ in range(200):
        M = rng.standard_normal((2, 2))
        a, b, c, d = M.ravel()
        decomp = four_terms(M, omega, z, zp, with_sum_terms)
        decomp_err = max(decomp_err, float(np.max(np.abs(_pair(z, zp, omega, M, np.eye(2)) - decomp))))
        # over shifts, the z+z' part sweeps its full amplitude sqrt(((d-a)/2)^2 + ((b+c)/2)^2) (for omega = 1)
        amp = np.hypot((d - a) / 2, (b + c) / 2)
        vals = [_pair(np.array([0.3 - t]), np.array([-0.5 - t]), np.array([1.0]), M, np.eye(2))[0]
                for t in taus]
        min_amp_ratio = min(min_amp_ratio, (max(vals) - min(vals)) / (2 * amp))
    # the exceptions: omega = 0 (constant), and integer shifts with omega in pi Z
    M = np.array([[1.0, 0.4], [0.4, 2.0]])
    zero_change = abs(_pair(np.array([0.3]), np.array([1.2]), np.array([0.0]), M, np.eye(2))[0]
                      - _pair(np.array([5.3]), np.array([6.2]), np.array([0.0]), M, np.eye(2))[0])
    int_change = max(abs(_pair(np.array([2.0]), np.array([5.0]), np.array([np.pi]), M, np.eye(2))[0]
                         - _pair(np.array([2.0 + t]), np.array([5.0 + t]), np.array([np.pi]), M,
                                 np.eye(2))[0])
                     for t in range(1, 6))
    ev = {**stat_evidence(n=n, seed=ctx.seed, detectable=TOL), "decomposition_max_err": decomp_err,
          "tolerance": TOL,
          "min_over_M_of_observed_swing_over_predicted": float(min_amp_ratio),
          "omega_0_change": float(zero_change), "omega_pi_integer_shift_change": float(int_change)}
    verdict = ctx.decide(ev)
    if verdict != "erratum":
        return Result(verdict, ev, summary=f"decomposition error {decomp_err:.1e}, swing ratio "
                                           f"{min_amp_ratio:.3f}, exception changes "
                                           f"{zero_change:.1e}, {int_change:.1e}")
    return Result("erratum", ev,
                  corrected=("'iff' holds for omega != 0 and all real shifts tau: then W_q W_k^T must be "
                             "[[alpha, beta], [-beta, alpha]]. It fails for omega = 0 (everything constant) "
                             "and, for integer shifts only (pixels), when omega is a multiple of pi."),
                  summary=f"converse holds for omega != 0 (decomposition err {decomp_err:.0e}); exceptions "
                          f"omega = 0 and integer shifts with omega in pi Z (change {int_change:.0e})")


def _decide_converse(ev: dict) -> str:
    tol = value(ev, "tolerance")
    swing = value(ev, "min_over_M_of_observed_swing_over_predicted")
    if value(ev, "decomposition_max_err") > tol or swing < 0.99:
        return "fails"
    exception = min(value(ev, "omega_0_change"), value(ev, "omega_pi_integer_shift_change")) <= tol
    return "erratum" if exception else "holds"


@claim("horn.lemma1-converse", paper=HORN, section="App. A.1 (Lemma, 'iff')",
       statement="The inner product is shift invariant for z, z' iff W_q^T W_k is of the form (5).",
       expected="erratum",
       derivation="Every M gives the four-term decomposition (exact, not statistical); the z+z' terms have "
                  "amplitude sqrt(((d-a)/2)^2 + ((b+c)/2)^2), which is reached by some real shift whenever "
                  "omega != 0, so invariance forces d = a, c = -b. For omega = 0 or integer shifts with "
                  "omega in pi Z the z+z' terms are themselves invariant: the 'iff' needs that proviso.",
       decide=with_rule(_decide_converse,
                        "fails iff the four-term decomposition of phi(z) M phi(z')^T is off by > 1e-12 or a "
                        "shift fails to sweep the z + z' terms' full amplitude (ratio < 0.99); otherwise "
                        "erratum iff a matrix not of form (5) is still shift invariant in a listed case "
                        "(omega = 0, or integer shifts with omega in pi Z: change <= 1e-12), holds "
                        "iff none is."))
def lemma1_converse(ctx: Context) -> Result:
    return _converse(ctx, True)


@must_fail("horn.lemma1-converse")
def lemma1_converse_wrong(ctx: Context) -> Result:
    """Dropping the z + z' terms (claiming every M is shift invariant) must fail."""
    return _converse(ctx, False)


mutation("horn.lemma1-converse", "decomposition x 0.5")(lambda: scaled(_HERE, "four_terms", 0.5))
mutation("horn.lemma1-converse", "M transposed (W_k W_q^T for W_q W_k^T)")(
    lambda: wrapped(_HERE, "four_terms", lambda f: (lambda M, *a, **k: f(np.asarray(M).T, *a, **k))))
