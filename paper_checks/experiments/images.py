"""Horn et al. (Table 1, Fig. 1) and FLT's image classification on Fashion-MNIST: one grid, three claims.

**Data.** Fashion-MNIST (or any MNIST-format directory: ``python -m paper_checks --data DIR``) read by
:mod:`.idx`; each 28x28 image is 2x2 mean-pooled to 14x14 (L = 196 tokens) and each pooled pixel becomes a
token id: 0 for an exact-zero (background) pixel, else ``1 + floor(16 v / 256)`` (17 ids). Pooling commutes
with shifts by an even number of pixels, so a shift by ``s`` tokens is a shift by ``2 s`` pixels of the
original image, and a token-shiftable image is exactly a pixel-shiftable one (791 of the 1000 test trousers
can be shifted 8 px both ways; Horn et al. Sec. 3). Without the real data the experiments fall back to a
**stand-in** (scikit-learn's 8x8 digits centred on a 14x14 canvas, label 1 in the role of "trouser") and every
record and summary says so; ``--size full`` then reports not-checkable with the install command.

**Models** (float32, AdamW with linear warm-up and cosine decay, features redrawn every step): ``no-pos``
(FAVOR+, no positions), ``absolute`` (FAVOR+ + learned absolute positions), ``s1`` (Horn's S1 on FAVOR+, 2-D
grid positions when the model's S1 kind takes them, else 1-D raster positions: with a zero background a
horizontal shift of the image is a shift of the raster sequence, so S1 stays exactly equivariant to it either
way; the record says which), ``s2`` (Horn's S2 on FAVOR+, 2-D Manhattan distances on the 14x14 grid as in the
paper), ``flt-gm`` (FLT RPE with a learnable 2-D Gaussian-mixture spectrum on FAVOR+ features, the FAVOR+ map
rather than the paper's learnable phi(x) = Wx). Mean-pool readout, 10 classes.

**The grid** of (method, seed) training runs goes through ``ctx.map`` (serial at tiny, 2 local processes
otherwise unless the context brings its own executor); every run is a pure function of its task (method, run
seed = ``1000 * ctx.seed + s``, size, data directory), so the claims share runs: an in-process memo and, with
``--report``, a cache file per run under ``<report>/experiments/images/runs``.

Each run records its learning curve (train/test accuracy vs step and wall time), its final test accuracy on
the whole test set, and its accuracy on the shiftable test images of label 1 at every shift in tokens.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from ..registry import Result, stat_evidence
from . import harness as H  # noqa: N812 (the experiments' shared name)
from .data import digits_on_canvas, shift_horizontal, shiftable
from .idx import DATA_ENV, INSTALL_HINT, ImageData, find_real_data, load_mnist_format

NAME = "images"
TROUSER = 1                      # Fashion-MNIST label 1 ("Trouser", Horn's "pants"); digit 1 in the stand-in
N_IDS = 17

SIZES = {
    "tiny": dict(d_model=16, n_heads=2, n_layers=1, m=8, steps=4, batch=8, lr=3e-3, warmup=2, seeds=1,
                 n_train=64, n_test=32, n_eval=32, eval_every=2, max_shift=4, workers=0),
    "small": dict(d_model=32, n_heads=4, n_layers=2, m=32, steps=600, batch=32, lr=2e-3, warmup=60, seeds=2,
                  n_train=12000, n_test=2000, n_eval=500, eval_every=100, max_shift=4, workers=2),
    "full": dict(d_model=64, n_heads=4, n_layers=2, m=64, steps=1500, batch=32, lr=1e-3, warmup=150, seeds=3,
                 n_train=None, n_test=None, n_eval=500, eval_every=250, max_shift=4, workers=2),
}
# ``full``: the largest grid (4 Horn methods x 3 seeds, plus FLT with No-Pos shared) that runs in about an
# hour on 2 cores.
SHIFT_CHECK = 2                  # tokens (= 4 px of the 28x28 image): the pre-registered shift
FLOOR_SLACK = 0.02               # a model within this of the histogram floor counts as having learned it


# ---- data --------------------------------------------------------------------------------------------------
def pool_tokens(images: np.ndarray) -> np.ndarray:
    """``(N, 28, 28)`` uint8 -> ``(N, 14, 14)`` int64 token ids: 2x2 mean pooling, 0 for an exact-zero pooled
    pixel, ``1 + floor(16 v / 256)`` (1..16) otherwise."""
    x = np.asarray(images)
    if x.ndim != 3 or x.shape[1] % 2 or x.shape[2] % 2:
        raise ValueError(f"images: expected (N, H, W) with even H and W; got shape {x.shape}")
    N, Hh, Ww = x.shape
    p = x.reshape(N, Hh // 2, 2, Ww // 2, 2).astype(np.float64).mean(axis=(2, 4))   # (N, H/2, W/2)
    return np.where(p > 0, 1 + np.floor(16 * p / 256.0), 0).astype(np.int64)


def _digits_standin() -> ImageData:
    """scikit-learn's 8x8 digits on a 14x14 canvas of zeros (intensities 0..16 as token ids), split 80/20."""
    x, y = digits_on_canvas((14, 14))
    x = np.rint(16 * x).astype(np.int64)                                             # (N, 14, 14) ids 0..16
    perm = np.random.default_rng(99).permutation(x.shape[0])
    k = int(0.8 * x.shape[0])
    return ImageData(x[perm[:k]], y[perm[:k]], x[perm[k:]], y[perm[k:]],
                     source="stand-in: scikit-learn digits 8x8 on a 14x14 canvas (no MNIST-format data "
                            "found)")


@functools.lru_cache(maxsize=4)
def load_tokens(data_dir: str | None) -> tuple[ImageData, dict]:
    """(token data, description): the real data of `data_dir` pooled to 14x14 tokens, or the stand-in."""
    if data_dir is None:
        d = _digits_standin()
        return d, {"name": "digits stand-in", "source": d.source, "stand_in": True,
                   "install": INSTALL_HINT}
    raw = load_mnist_format(data_dir)
    d = ImageData(pool_tokens(raw.x_train), raw.y_train, pool_tokens(raw.x_test), raw.y_test, raw.source)
    name = "Fashion-MNIST" if "fashion" in data_dir.lower() else "MNIST-format data"
    return d, {"name": name, "source": raw.source, "stand_in": False,
               "n_train": int(raw.x_train.shape[0]), "n_test": int(raw.x_test.shape[0]),
               "tokens": "2x2 mean-pooled to 14x14, 17 intensity ids"}


def shift_tokens(x: np.ndarray, s: int) -> np.ndarray:
    """Shift ``(N, H, W)`` token images ``s`` columns right (left when negative), zeros entering; raises
    ``ValueError`` if a non-zero token would leave the grid (select with :func:`shiftable_tokens`)."""
    return shift_horizontal(x, s)


def shiftable_tokens(x: np.ndarray, max_shift: int) -> np.ndarray:
    return shiftable(x, max_shift)


def histogram_floor(data: ImageData, n_train: int | None, n_test: int | None) -> float:
    """Test accuracy of a logistic regression on each image's token-id histogram: what a model that ignores
    positions can reach from the intensities alone (No-Pos's natural level)."""
    from sklearn.linear_model import LogisticRegression

    def hist(x):
        flat = x.reshape(x.shape[0], -1)
        return np.stack([np.bincount(r, minlength=N_IDS) for r in flat]) / flat.shape[1]

    xtr, ytr = data.x_train[:n_train], data.y_train[:n_train]
    xte, yte = data.x_test[:n_test], data.y_test[:n_test]
    clf = LogisticRegression(max_iter=2000, C=10.0).fit(hist(xtr), ytr)
    return float(np.mean(clf.predict(hist(xte)) == yte))


# ---- one training run (a ctx.map task) ---------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Task:
    method: str
    run_seed: int
    size: str
    data_dir: str | None

    def key(self) -> str:
        sz = json.dumps(SIZES[self.size], sort_keys=True)
        h = hashlib.sha1(f"{self.method}|{self.run_seed}|{sz}|{self.data_dir}".encode()).hexdigest()[:12]
        return f"{self.method}-s{self.run_seed}-{self.size}-{h}"


def schedule(sz: dict) -> dict:
    """The learning-rate schedule of a size (``refattn.nn.schedules``): linear warm-up over ``warmup`` steps,
    then cosine decay to lr / 10 at the last step."""
    return {"warmup_steps": sz["warmup"], "decay": "cosine", "total_steps": sz["steps"],
            "min_lr": sz["lr"] / 10}


def model_config(method: str, sz: dict) -> dict:
    base = "favor+" if method in ("no-pos", "absolute") else method
    # 2-D grid positions for S2 (Manhattan, as in the paper), FLT, and S1 when the kind takes them (this
    # project's extension; attention_config drops the option for a kind without it: 1-D raster positions)
    extra = {"grid": [14, 14]} if method in ("s1", "s2", "flt-gm") else {}
    return dict(task="classify", input="tokens", vocab_size=N_IDS, d_model=sz["d_model"],
                n_heads=sz["n_heads"], n_layers=sz["n_layers"], d_ff=2 * sz["d_model"], max_len=196,
                position="learned" if method == "absolute" else "none", readout="mean", n_classes=10,
                attention=H.attention_config(base, m=sz["m"], **extra), dtype="float32")


def s1_positions(sz: dict) -> str:
    """Which positions the S1 model uses (the record says it)."""
    grid = model_config("s1", sz)["attention"].get("grid")
    return "2-D (row, column) of the 14x14 grid" if grid else "1-D raster (row-major) positions"


def train_one(task: Task) -> dict:
    """Train one (method, seed) model and measure it: learning curve, test accuracy, trouser shifts."""
    sz = SIZES[task.size]
    data, _ = load_tokens(task.data_dir)
    cfg = model_config(task.method, sz)
    x_tr = data.x_train[:sz["n_train"]].reshape(-1, 196) if sz["n_train"] else data.x_train.reshape(-1, 196)
    y_tr = data.y_train[:x_tr.shape[0]]
    n_test = sz["n_test"] or data.x_test.shape[0]
    x_te, y_te = data.x_test[:n_test].reshape(-1, 196), data.y_test[:n_test]
    ev = np.random.default_rng([task.run_seed, 7]).permutation(x_tr.shape[0])[:sz["n_eval"]]
    feats = H.draw_features(task.run_seed, 10**6, cfg)                              # one evaluation draw
    curve = {"step": [], "seconds": [], "cpu_seconds": [], "train_acc": [], "test_acc": []}
    # training time only (evaluation excluded); CPU time is what a step costs on an idle core (wall time grows
    # with the machine's load)
    clock = {"wall": 0.0, "cpu": 0.0}
    mark = [time.perf_counter(), time.process_time()]
    t0 = mark[0]

    def record(step, params):
        clock["wall"] += time.perf_counter() - mark[0]
        clock["cpu"] += time.process_time() - mark[1]
        curve["step"].append(step)
        curve["seconds"].append(round(clock["wall"], 2))
        curve["cpu_seconds"].append(round(clock["cpu"], 2))
        curve["train_acc"].append(H.accuracy(H.predict_logits(params, x_tr[ev], cfg, feats), y_tr[ev]))
        curve["test_acc"].append(H.accuracy(H.predict_logits(params, x_te[:sz["n_eval"]], cfg, feats),
                                            y_te[:sz["n_eval"]]))
        mark[:] = [time.perf_counter(), time.process_time()]
        return False

    with H.single_thread():
        params = H.train_loop(cfg, x_tr, y_tr, seed=task.run_seed, steps=sz["steps"], batch=sz["batch"],
                              lr=sz["lr"], schedule=schedule(sz), callback=record,
                              callback_every=sz["eval_every"])
        test_acc = H.accuracy(H.predict_logits(params, x_te, cfg, feats), y_te)
        trousers = data.x_test[data.y_test == TROUSER]
        trousers = trousers[shiftable_tokens(trousers, sz["max_shift"])]
        shifts = list(range(-sz["max_shift"], sz["max_shift"] + 1))
        shift_acc = [H.accuracy(H.predict_logits(params, shift_tokens(trousers, s).reshape(-1, 196), cfg,
                                                 feats), np.full(trousers.shape[0], TROUSER)) for s in shifts]
    steps = max(sz["steps"], 1)
    return {"method": task.method, "run_seed": task.run_seed, "curve": curve, "test_acc": test_acc,
            "n_test": int(n_test), "shifts": shifts, "shift_acc": shift_acc,
            "n_trousers": int(trousers.shape[0]), "train_seconds": round(clock["wall"], 1),
            "train_cpu_seconds": round(clock["cpu"], 1), "seconds": round(time.perf_counter() - t0, 1),
            "seconds_per_step": clock["wall"] / steps, "cpu_seconds_per_step": clock["cpu"] / steps}


# ---- the grid, shared by the claims ------------------------------------------------------------------------
_MEMO: dict[str, dict] = {}


def _cached(task: Task, cache_dir: Path | None) -> dict | None:
    if task.key() in _MEMO:
        return _MEMO[task.key()]
    if cache_dir is not None and (cache_dir / f"{task.key()}.json").is_file():
        _MEMO[task.key()] = json.loads((cache_dir / f"{task.key()}.json").read_text())
        return _MEMO[task.key()]
    return None


def run_grid(ctx, methods, *, data_dir: str | None) -> list[dict]:
    """Train every (method, seed) of ``SIZES[ctx.size]`` that is not cached, through ``ctx.map``."""
    H.require_kinds(*["favor+" if m in ("no-pos", "absolute") else m for m in methods])
    sz = SIZES[ctx.size]
    tasks = [Task(m, 1000 * ctx.seed + s, ctx.size, data_dir) for m in methods for s in range(sz["seeds"])]
    cache_dir = None
    if ctx.report_dir is not None:
        cache_dir = Path(ctx.report_dir) / "experiments" / NAME / "runs"
        cache_dir.mkdir(parents=True, exist_ok=True)
    todo = [t for t in tasks if _cached(t, cache_dir) is None]
    if todo:
        if ctx.executor is None and sz["workers"] > 1 and len(todo) > 1:
            with ProcessPoolExecutor(max_workers=min(sz["workers"], len(todo))) as pool:
                results = dataclasses.replace(ctx, executor=pool).map(train_one, todo)
        else:
            results = ctx.map(train_one, todo)
        for t, r in zip(todo, results, strict=True):
            _MEMO[t.key()] = r
            if cache_dir is not None:
                tmp = cache_dir / f"{t.key()}.json.tmp"
                H.save_json(tmp, r)
                tmp.replace(cache_dir / f"{t.key()}.json")
    return [_MEMO[t.key()] for t in tasks]


def _stats(runs: list[dict], methods) -> dict:
    """Per method: mean and sample SD over seeds of the test accuracy, and the seed-mean shift curve."""
    out = {}
    for m in methods:
        acc = np.array([r["test_acc"] for r in runs if r["method"] == m])
        sh = np.array([r["shift_acc"] for r in runs if r["method"] == m])             # (seeds, shifts)
        out[m] = {"test_acc": acc.tolist(), "mean": float(acc.mean()),
                  "sd": float(acc.std(ddof=1)) if acc.size > 1 else float("nan"),
                  "shift_mean": sh.mean(axis=0).tolist(), "shift_sd": sh.std(axis=0).tolist()}
    return out


def extrapolated_steps(curve: dict, target: float) -> float | None:
    """Steps at which the test accuracy of `curve` would reach `target`, extrapolating its last half linearly
    in log(step); None when it does not rise there (no extrapolation is honest then)."""
    s = np.asarray(curve["step"], dtype=float)
    a = np.asarray(curve["test_acc"], dtype=float)
    half = s.size // 2
    if s.size < 3 or a[-1] >= target:
        return float(s[-1]) if s.size and a[-1] >= target else None
    slope, icpt = np.polyfit(np.log(s[half:]), a[half:], 1)
    if slope <= 1e-6:
        return None
    return float(math.exp((target - icpt) / slope))


def learning_figure(runs: list[dict], out: Path, title: str) -> Path:
    methods = list(dict.fromkeys(r["method"] for r in runs))
    fig, (ax1, ax2) = H.new_figure(2, width=4.6)
    for i, m in enumerate(methods):
        for r in (r for r in runs if r["method"] == m):
            c = r["curve"]
            ax1.plot(c["step"], c["train_acc"], color=f"C{i}", ls="--", alpha=0.6)
            ax1.plot(c["step"], c["test_acc"], color=f"C{i}", label=m if r["run_seed"] % 1000 == 0 else None)
            ax2.plot(r["shifts"], r["shift_acc"], color=f"C{i}", alpha=0.4)
        st = _stats([r for r in runs if r["method"] == m], [m])[m]
        mu, sd = np.array(st["shift_mean"]), np.array(st["shift_sd"])
        sh = runs[0]["shifts"]
        ax2.plot(sh, mu, color=f"C{i}", marker="o", label=m)
        ax2.fill_between(sh, mu - sd, mu + sd, color=f"C{i}", alpha=0.15)
    ax1.set_xlabel("training step")
    ax1.set_ylabel("accuracy (solid: test, dashed: train)")
    ax2.set_xlabel("horizontal shift (tokens; 1 token = 2 px)")
    ax2.set_ylabel("trouser accuracy")
    ax2.set_ylim(0, 1.02)
    ax1.legend(fontsize=7)
    ax2.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    return H.save_figure(fig, out)


# ---- the claims' side: evidence, decision rules, results ---------------------------------------------------
CLAIM_METHODS = {"table1": ("no-pos", "absolute", "s1", "s2"), "shift": ("no-pos", "absolute", "s1", "s2"),
                 "flt": ("no-pos", "flt-gm")}

CRITERIA = {
    "table1": "gain(X) = mean test accuracy of X minus that of No-Pos over seeds (FAVOR+ for all); holds iff "
              "gain(S1) >= 0.10 and gain(S2) >= 0.10; fails otherwise.",
    "shift": f"retention(X) = mean trouser accuracy at a {SHIFT_CHECK}-token (4 px) shift, both directions "
             "and all seeds, / centred trouser accuracy; holds iff retention(Absolute) <= 0.3 and "
             "retention(S1) >= 0.8 and retention(S2) >= 0.8; fails otherwise.",
    "flt": "gain = mean test accuracy of FLT (2-D Gaussian-mixture RPE) minus that of No-Pos; spread = "
           "sqrt(sd_FLT^2 + sd_NoPos^2) of the seed-to-seed sample SDs; holds iff gain > spread; fails "
           "otherwise.",
}
GUARD = ("not-checkable when the data are a stand-in at size full (install the real data), at size tiny "
         "(a smoke run), or when some model's test accuracy is below the histogram floor (a logistic "
         f"regression on the token-id histogram) by more than {FLOOR_SLACK}: that model has not learned "
         "what a position-blind model learns, so the budget is too small for the comparison (the evidence "
         "gives the steps it would need, extrapolated from its learning curve).")


def _guard_verdict(ev: dict) -> str | None:
    if ev["size"] == "tiny" or (ev["size"] == "full" and ev["data_stand_in"]):
        return "not-checkable"
    if not float(ev["min_margin_over_floor"]) >= -FLOOR_SLACK:
        return "not-checkable"
    return None


def decide_table1(ev: dict) -> str:
    g = _guard_verdict(ev)
    if g:
        return g
    return "holds" if float(ev["gain_s1"]) >= 0.10 and float(ev["gain_s2"]) >= 0.10 else "fails"


def decide_shift(ev: dict) -> str:
    g = _guard_verdict(ev)
    if g:
        return g
    r = ev["retention"]
    ok = float(r["absolute"]) <= 0.3 and float(r["s1"]) >= 0.8 and float(r["s2"]) >= 0.8
    return "holds" if ok else "fails"


def decide_flt(ev: dict) -> str:
    g = _guard_verdict(ev)
    if g:
        return g
    return "holds" if float(ev["gain_flt"]) > float(ev["spread"]) else "fails"


DECIDE = {"table1": decide_table1, "shift": decide_shift, "flt": decide_flt}


def data_for(size: str) -> str | None:
    """The data directory the claims use at `size`: the real data when present (at tiny only when ``--data``
    or ``$PAPER_CHECKS_DATA`` names it: the smoke run never reads the installed data on its own), else None
    (the stand-in)."""
    real = find_real_data()
    if size == "tiny" and not os.environ.get(DATA_ENV):
        return None
    return None if real is None else str(real)


def evidence(ctx, which: str) -> tuple[dict, list[dict]]:
    """Train (or reuse) the grid of claim `which` at ``ctx.size``; its evidence and the runs."""
    sz = SIZES[ctx.size]
    data_dir = data_for(ctx.size)
    data, desc = load_tokens(data_dir)
    methods = CLAIM_METHODS[which]
    base = {"size": ctx.size, "data": desc, "data_stand_in": bool(desc["stand_in"]),
            "criterion": CRITERIA[which], "guard": GUARD,
            "scale": {k: v for k, v in sz.items() if k != "workers"} | {
                "L": 196, "dtype": "float32", "lr_schedule": schedule(sz),
                "s1_positions": s1_positions(sz), "paper_scale": "32x32 images, depth 6, width 256, 8 heads"}}
    if ctx.size == "full" and desc["stand_in"]:
        return {**stat_evidence(n=0, seed=ctx.seed, detectable=float("nan")), **base,
                "min_margin_over_floor": float("nan"),
                "reason": f"size full needs the real data: {INSTALL_HINT}"}, []
    t0 = time.perf_counter()
    runs = run_grid(ctx, methods, data_dir=data_dir)
    st = _stats(runs, methods)
    floor = histogram_floor(data, sz["n_train"], sz["n_test"])
    margins = {m: st[m]["mean"] - floor for m in methods}
    need = {}
    for m in methods:
        if margins[m] < -FLOOR_SLACK:
            c = [r["curve"] for r in runs if r["method"] == m]
            mean_curve = {"step": c[0]["step"],
                          "test_acc": np.mean([x["test_acc"] for x in c], axis=0).tolist()}
            need[m] = extrapolated_steps(mean_curve, floor - FLOOR_SLACK)
    sps = {m: float(np.mean([r["seconds_per_step"] for r in runs if r["method"] == m])) for m in methods}
    cps = {m: float(np.mean([r["cpu_seconds_per_step"] for r in runs if r["method"] == m])) for m in methods}
    sd_nopos = st["no-pos"]["sd"]
    ev = {**stat_evidence(n=sz["seeds"], seed=ctx.seed,
                          detectable=float(np.hypot(np.nanmax([st[m]["sd"] for m in methods]), sd_nopos))
                          if sz["seeds"] > 1 else float("nan")),
          **base, "histogram_floor": floor, "min_margin_over_floor": min(margins.values()),
          "margin_over_floor": margins, "steps_needed_to_reach_floor": need,
          "accuracy": {m: {"mean": st[m]["mean"], "sd": st[m]["sd"], "per_seed": st[m]["test_acc"]}
                       for m in methods},
          "seconds_per_step": sps, "cpu_seconds_per_step": cps,
          "grid_seconds": round(time.perf_counter() - t0, 1),
          "train_seconds_total": round(sum(r["train_seconds"] for r in runs), 1)}
    if which == "table1":
        ev["gain_s1"] = st["s1"]["mean"] - st["no-pos"]["mean"]
        ev["gain_s2"] = st["s2"]["mean"] - st["no-pos"]["mean"]
    elif which == "flt":
        ev["gain_flt"] = st["flt-gm"]["mean"] - st["no-pos"]["mean"]
        ev["spread"] = float(np.hypot(st["flt-gm"]["sd"], sd_nopos))
    else:
        shifts = runs[0]["shifts"]
        i0 = shifts.index(0)
        ipm = [shifts.index(SHIFT_CHECK), shifts.index(-SHIFT_CHECK)]
        centred = {m: st[m]["shift_mean"][i0] for m in methods}
        ev["shifts_tokens"] = shifts
        ev["trouser_accuracy"] = {m: {"mean": st[m]["shift_mean"], "sd": st[m]["shift_sd"]} for m in methods}
        ev["centred_trouser_accuracy"] = centred
        ev["retention"] = {m: float(np.mean([st[m]["shift_mean"][i] for i in ipm]) / max(centred[m], 1e-12))
                           for m in methods}
        ev["n_trousers"] = runs[0]["n_trousers"]
    return ev, runs


def summary(which: str, ev: dict) -> str:
    data = ev["data"]["name"] + (" [STAND-IN: no real data]" if ev["data_stand_in"] else "")
    if "reason" in ev:
        return f"{data}: {ev['reason']}"
    acc = ", ".join(f"{m} {a['mean']:.3f}" for m, a in ev["accuracy"].items())
    txt = f"{data}; test acc {acc}; floor {ev['histogram_floor']:.3f}"
    if which == "table1":
        txt += f"; gain S1 {ev['gain_s1']:+.3f}, S2 {ev['gain_s2']:+.3f}"
    elif which == "flt":
        txt += f"; gain FLT {ev['gain_flt']:+.3f} vs spread {ev['spread']:.3f}"
    else:
        r = ev["retention"]
        txt += (f"; retention at {SHIFT_CHECK} tokens: Abs {r['absolute']:.2f}, S1 {r['s1']:.2f}, "
                f"S2 {r['s2']:.2f}, No-Pos {r['no-pos']:.2f}")
    if ev["steps_needed_to_reach_floor"]:
        txt += "; below floor: " + ", ".join(
            f"{m} (needs ~{n:.0f} steps)" if n else f"{m} (not rising)"
            for m, n in ev["steps_needed_to_reach_floor"].items())
    return txt


def claim_result(ctx, which: str):
    """The Result of claim `which` ("table1", "shift", "flt") at ``ctx.size``; the verdict is ``ctx.decide``
    applied to the evidence (the registered rule is :data:`DECIDE` [which])."""
    try:
        ev, runs = evidence(ctx, which)
    except H.MissingPiece as exc:
        ev = {"size": ctx.size, "data_stand_in": True, "min_margin_over_floor": float("nan"),
              "reason": str(exc)}
        return Result(ctx.decide(ev), ev, summary=f"{exc} (not run; no number produced)")
    figures = []
    if runs and ctx.report_dir is not None:
        out = H.out_dir_for(ctx.report_dir, NAME)
        sz = SIZES[ctx.size]
        png = learning_figure(runs, out / f"{which}.png",
                              f"{ev['data']['name']}, size {ctx.size}: {sz['steps']} steps, width "
                              f"{sz['d_model']}, {sz['n_layers']} layers, {sz['seeds']} seed(s)")
        dest = ctx.figure_path(which)
        dest.write_bytes(png.read_bytes())
        figures.append(str(dest))
        H.save_json(out / f"{which}.json", {"evidence": ev, "runs": runs})
    return Result(ctx.decide(ev), ev, figures=figures, summary=f"[{ctx.size}] {summary(which, ev)}")
