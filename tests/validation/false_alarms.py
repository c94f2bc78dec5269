"""The false-alarm record: refattn and one independent implementation per family, every check, seeds 0-19.

    python -m tests.validation.false_alarms [--out validation/records/false_alarms.json] [--seeds 20]

Independent implementations: the omega contract's draws, feature maps and attention are written here in plain
NumPy from the formulas (no refattn call; attention in the log domain, O(L^2 m), so that no stabiliser of
refattn's is shared); the papers' families use ``family_candidates.py`` (written from the contracts alone).
Every run uses ``--quick`` sizes, NumPy arrays (``gradients`` is skipped: NumPy has no autodiff) and the fixed
seeds 0..N-1. The record is written atomically; ``test_false_alarms.py`` re-reads it.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
import time

import numpy as np
import scipy.stats

from validation import check
from validation.checks.context import ALPHA
from validation.checks.favor import ATTENTION_FAMILIES, FEATURE_FAMILIES
from validation.families.catalog import FAMILIES

from . import family_candidates as fc

# ----------------------------------------------------------------------------------------------------------
# the omega contract, from the formulas


def haar_draw(seed, m, d):
    """Blocks of Haar-orthogonal rows (QR of a Gaussian matrix, columns signed by diag R), chi(d) norms."""
    rng = np.random.default_rng(seed)
    blocks = []
    for _ in range(-(-m // d)):
        qm, r = np.linalg.qr(rng.standard_normal((d, d)))
        blocks.append((qm * np.sign(np.diag(r))).T)
    rows = np.concatenate(blocks)[:m]
    return rows * np.sqrt(rng.chisquare(d, size=m))[:, None]


def _log_features(family, x, omega):
    """``(log|phi|, sign)`` per feature column, in the family's column order (before 1/sqrt(m))."""
    d = x.shape[-1]
    if family.endswith("-scaled"):
        x = x * d ** -0.25
    u = x @ omega.T
    n2 = np.sum(x * x, axis=-1, keepdims=True)
    one = np.ones_like(u)
    if family.startswith("positive"):
        return u - n2 / 2, one
    if family.startswith("hyperbolic"):
        la = np.concatenate([u - n2 / 2, -u - n2 / 2], -1) - 0.5 * math.log(2)       # 1/sqrt(2m) in all
        return la, np.concatenate([one, one], -1)
    if family == "gaussian-positive":
        return u - n2, one
    c, s = np.cos(u), np.sin(u)
    trig = np.concatenate([c, s], -1)
    with np.errstate(divide="ignore"):
        log_abs = np.log(np.abs(trig))
    if family == "softmax-trig":
        log_abs = log_abs + n2 / 2
    return log_abs, np.sign(trig)


def feature_map(family):
    def phi(x, omega):
        la, sg = _log_features(family, np.asarray(x, dtype=np.float64), np.asarray(omega, dtype=np.float64))
        return (sg * np.exp(la) / math.sqrt(omega.shape[0])).astype(x.dtype)
    phi.__name__ = f"independent_{family.replace('-', '_')}_features"
    return phi


def attention(family):
    """``out_i = sum_j a_ij v_j / sum_j a_ij``, ``a_ij = phi(q_i).phi(k_j)`` (j <= i when causal) with
    ``phi`` of ``d^{-1/4} q``, ``d^{-1/4} k``: positive maps summed in the log domain (no overflow, nothing
    shared across positions), trig maps directly."""
    fam = {"positive": "positive", "hyperbolic": "hyperbolic", "softmax-trig": "softmax-trig",
           "gaussian-trig": "gaussian-trig"}[family]

    def attend(q, k, v, omega, causal):
        dt = q.dtype
        q, k, v, omega = (np.asarray(a, dtype=np.float64) for a in (q, k, v, omega))
        s = q.shape[-1] ** -0.25
        lq, sq = _log_features(fam, q * s, omega)                          # (..., L, m')
        lk, sk = _log_features(fam, k * s, omega)
        L = q.shape[-2]
        terms = lq[..., :, None, :] + lk[..., None, :, :]                  # (..., L, L, m')
        sign = sq[..., :, None, :] * sk[..., None, :, :]
        if causal:
            terms = np.where(np.tril(np.ones((L, L), bool))[..., None], terms, -np.inf)
        top = np.max(terms, axis=(-2, -1), keepdims=True)                  # per query: cancels in the ratio
        a = np.sum(sign * np.exp(terms - top), axis=-1)                    # (..., L, L)
        out = (a @ v) / np.sum(a, axis=-1, keepdims=True)
        return out.astype(dt)
    attend.__name__ = f"independent_{family.replace('-', '_')}_attention"
    return attend


ATTENTION_CANDIDATES = {"gmm-rks": fc.gmm_rks_attention, "gmm-prf": fc.gmm_prf_attention,
                        "fastfood-rks": fc.fastfood_rks_attention, "fastfood-prf": fc.fastfood_prf_attention,
                        "generative-rks": fc.generative_rks_attention,
                        "generative-prf": fc.generative_prf_attention, "s1": fc.s1_attention, "s2": fc.s2,
                        "s2-grid": fc.s2_grid, "s2-grid-cls": fc.s2_grid, "flt": fc.flt_attention}
FEATURE_CANDIDATES = {"gmm-rks": fc.gmm_rks, "gmm-prf": fc.gmm_prf, "fastfood-rks": fc.fastfood_rks,
                      "fastfood-prf": fc.fastfood_prf, "generative-rks": fc.generative_rks,
                      "generative-prf": fc.generative_prf, "flt": fc.flt}


def runs():
    """``(implementation label, target, kind, family)`` for every run of one seed."""
    out = [("refattn", "refattn", "draw", None), ("independent", haar_draw, "draw", None)]
    for fam in FEATURE_FAMILIES:
        out += [("refattn", "refattn", "features", fam), ("independent", feature_map(fam), "features", fam)]
    for fam in ATTENTION_FAMILIES:
        out += [("refattn", "refattn", "attention", fam), ("independent", attention(fam), "attention", fam)]
    for fam, spec in FAMILIES.items():
        for kind, cands in (("features", FEATURE_CANDIDATES), ("attention", ATTENTION_CANDIDATES)):
            if kind in spec.kinds:
                out.append(("refattn", "refattn", kind, fam))
                if fam in cands:
                    out.append(("independent", cands[fam], kind, fam))
    return out


def bonferroni_tests(threshold: float | None) -> int | None:
    """The number n of z-scores for which `threshold` is ``zcrit(n)`` at ``ALPHA``, or None when it is not
    such a critical value (a deterministic tolerance)."""
    if threshold is None or threshold <= 1.0:
        return None
    n = ALPHA / (2 * scipy.stats.norm.sf(threshold))
    return round(n) if round(n) >= 1 and abs(n - round(n)) <= 1e-6 * n else None


COLUMNS = ["implementation", "kind", "family", "seed", "check", "verdict", "figure", "threshold"]


def rows(doc: dict) -> list[dict]:
    """The record's results as dicts (stored as lists under ``doc["columns"]``)."""
    return [dict(zip(doc["columns"], r, strict=True)) for r in doc["rows"]]


def write(doc: dict, path: str) -> None:
    """`doc` to `path` atomically, one result per line."""
    body = ",\n".join(json.dumps(r) for r in doc["rows"])
    head = json.dumps({k: v for k, v in doc.items() if k != "rows"})[:-1]
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(f'{head}, "rows": [\n{body}\n]}}\n')
    os.replace(tmp, path)


def tally(doc: dict) -> dict:
    """Per ``(check, statistical?)``: ``[results, failures]`` (skipped results left out; FAIL and
    inconclusive are failures), and the totals with the binomial 99% bound of the statistical failures."""
    per: dict[tuple[str, bool], list] = {}
    for r in rows(doc):
        if r["verdict"] != "skip":
            e = per.setdefault((r["check"], bonferroni_tests(r["threshold"]) is not None), [0, 0])
            e[0] += 1
            e[1] += r["verdict"] in ("FAIL", "inconclusive")
    n_stat = sum(n for (_, stat), (n, _) in per.items() if stat)
    return {"per_check": per, "stat": n_stat, "stat_failed": sum(f for (_, st), (_, f) in per.items() if st),
            "bound": int(scipy.stats.binom.ppf(0.99, n_stat, ALPHA)),
            "exact": sum(n for (_, stat), (n, _) in per.items() if not stat),
            "exact_failed": sum(f for (_, st), (_, f) in per.items() if not st)}


def summary(doc: dict) -> str:
    """The markdown table of the record that docs/guide/validation.md quotes."""
    t = tally(doc)
    runs = {(r["implementation"], r["kind"], r["family"]) for r in rows(doc)}
    out = [f"`{doc['command']}` ({doc['date']}): {len(runs)} runs (refattn and an independent implementation "
           f"per family and kind) x {len(doc['seeds'])} seeds, {doc['sizes']} sizes, {doc['framework']}.", "",
           "| check | threshold | stated false-alarm rate | results | failed |",
           "| --- | --- | --- | --- | --- |"]
    for (name, stat), (n, f) in sorted(t["per_check"].items()):
        kind = ("zcrit(n) at 1e-3", f"{ALPHA:g}") if stat else ("deterministic", "0")
        out.append(f"| `{name}` | {kind[0]} | {kind[1]} | {n} | {f} |")
    bound = f"{t['stat_failed']} (99% bound {t['bound']})"
    out += [f"| all statistical | | {ALPHA:g} each | {t['stat']} | {bound} |",
            f"| all deterministic | | 0 | {t['exact']} | {t['exact_failed']} |"]
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.validation.false_alarms",
                                description=__doc__.split("\n")[0])
    p.add_argument("--out", default="validation/records/false_alarms.json")
    p.add_argument("--seeds", type=int, default=20)
    args = p.parse_args(argv)
    t0, results = time.perf_counter(), []
    plan = runs()
    for i, (impl, target, kind, fam) in enumerate(plan):
        for seed in range(args.seeds):
            rep = check(target, kind=kind, family=fam, seed=seed, quick=True)
            for c in rep.checks:
                fig, thr = c.to_dict()["figure"], c.to_dict()["threshold"]
                fig = None if fig is None else float(f"{fig:.4g}")
                results.append([impl, kind, fam, seed, c.name, c.verdict, fig, thr])
        print(f"[{i + 1}/{len(plan)}] {impl} {kind} {fam}: {time.perf_counter() - t0:.0f} s", file=sys.stderr,
              flush=True)
    seeds = f" --seeds {args.seeds}" if args.seeds != 20 else ""
    doc = {"command": "python -m tests.validation.false_alarms" + seeds,
           "seeds": list(range(args.seeds)), "sizes": "quick", "framework": "numpy",
           "date": datetime.date.today().isoformat(), "seconds": round(time.perf_counter() - t0),
           "columns": COLUMNS, "rows": results}
    write(doc, args.out)
    print(f"wrote {args.out}: {len(results)} check results", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
