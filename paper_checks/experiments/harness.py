"""Shared machinery of the experiments: sizes, output files (JSON + PNG), the model adapter, a training loop.

Every experiment module exposes

* ``SIZES = {"tiny": {...}, "small": {...}, "full": {...}}`` -- the scale knob. ``tiny`` is a smoke run for
  the test suite (seconds), ``small`` is what ``python -m paper_checks --all`` runs (minutes on 2 cores),
  ``full`` the largest scale that runs in about an hour here. Every saved number carries the scale it was
  measured at; none is the paper's own number.
* ``run(size, seed, out_dir) -> dict`` -- trains and measures; writes ``<name>.json`` and ``<name>*.png`` into
  ``out_dir`` and returns the JSON record.
* ``decide(record) -> (verdict, summary)`` -- the pre-registered criterion (written in the claim's statement
  and derivation before any run), applied to the record. At ``tiny`` size the claim reports
  ``not-checkable``: the smoke run is too small for the criterion to mean anything (its values are still in
  the evidence).

A model piece that has not landed yet (an attention kind missing from ``refattn.nn.kinds.ATTENTION_KINDS``)
raises :class:`MissingPiece`; the claim then reports ``not-checkable`` with the reason ``needs <piece>`` --
never a made-up result.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np

from refattn.files import write_text_atomic

from .. import figures
from ..registry import Result
from ..report import json_safe
from ..rules import trained, with_rule

__all__ = ["MissingPiece", "require_kinds", "ensure_dir", "available", "attention_config", "METHODS",
           "out_dir_for", "save_json", "copy_cached_runs", "initial_params",
           "new_figure", "save_figure", "single_thread", "train_loop", "predict_logits", "accuracy",
           "draw_features", "claim_result", "warmup_cosine", "Curve", "run_grid", "extrapolated_steps",
           "budget_note", "guard_note", "grid_if_done", "decay_only_factor", "experiment_rule",
           "PAPER_COMPUTE", "compute_proxy", "budget_fraction", "budget_record"]


class MissingPiece(RuntimeError):  # noqa: N818 (a missing piece, not an error of the caller)
    """A model piece the experiment needs is not available yet (the message names it)."""


# ---- attention methods: the experiments' names -> the transformer's attention configuration ----------------
#: method name -> (attention kind in refattn.nn.kinds.ATTENTION_KINDS, options). :func:`attention_config`
#: drops the options (and extras such as ``m``) that the kind does not take.
METHODS: dict[str, tuple[str, dict]] = {
    "softmax": ("softmax", {}),
    "favor+": ("favor", {"features": "positive", "draw": "orthogonal"}),
    "favor-trig": ("favor", {"features": "trig", "draw": "iid", "on_nonpositive": "ignore"}),
    "elu": ("elu", {}),
    # KL maps: RKS normalisers can be <= 0 (refattn.features.trig): computed faithfully ("ignore" = no raise)
    "gmm-rks": ("gmm", {"features": "rks", "covariance": "full", "on_nonpositive": "ignore"}),
    "gmm-prf": ("gmm", {"features": "prf", "covariance": "full"}),
    "fastfood-rks": ("fastfood", {"features": "rks", "on_nonpositive": "ignore"}),
    "fastfood-prf": ("fastfood", {"features": "prf"}),
    "generative-rks": ("generative", {"features": "rks", "on_nonpositive": "ignore"}),
    "generative-prf": ("generative", {"features": "prf"}),
    # Horn et al.'s relative strategies on Performer (positive random features)
    "s1": ("s1", {"features": "positive"}),
    "s2": ("s2", {"features": "positive"}),
    "flt-gm": ("flt", {}),
}


def _kinds() -> dict:
    from refattn.nn.kinds import ATTENTION_KINDS

    return ATTENTION_KINDS


def require_kinds(*methods: str) -> None:
    """Raise :class:`MissingPiece` naming every method whose attention kind is not in the kind table yet."""
    known = _kinds()
    missing = [m for m in methods if METHODS[m][0] not in known]
    if missing:
        kinds = ", ".join(f"attention kind {METHODS[m][0]!r} ({m})" for m in missing)
        raise MissingPiece(f"needs {kinds} in refattn.nn.kinds.ATTENTION_KINDS")


def available(methods) -> list[str]:
    """The subset of `methods` whose attention kind exists now."""
    known = _kinds()
    return [m for m in methods if METHODS[m][0] in known]


def attention_config(method: str, **extra: Any) -> dict:
    """The ``config["attention"]`` dict of `method`, features redrawn every step (``redraw_every=1``) for the
    random-feature kinds, plus `extra` options (e.g. ``m``)."""
    kind, opts = METHODS[method]
    spec = _kinds()[kind]
    out = {"kind": kind, **opts, **extra}
    if "redraw_every" not in extra:
        out["redraw_every"] = 1
    # drop options the kind does not take (e.g. m for softmax), so one call site serves every method
    return {k: v for k, v in out.items() if k in ("kind", "redraw_every") or k in spec.options}


# ---- files -------------------------------------------------------------------------------------------------
def out_dir_for(report_dir: Path | None, name: str) -> Path:
    """``<report_dir>/experiments/<name>`` when a report was asked for, else a fresh temporary directory."""
    if report_dir is not None:
        d = Path(report_dir) / "experiments" / name
        d.mkdir(parents=True, exist_ok=True)
        return d
    return Path(tempfile.mkdtemp(prefix=f"refattn-{name}-"))


def ensure_dir(out_dir, name: str) -> Path:
    """`out_dir` created if needed, or a fresh temporary directory when None."""
    if out_dir is None:
        return out_dir_for(None, name)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return out_dir


def save_json(path: Path, record: dict) -> Path:
    path = Path(path)
    write_text_atomic(path, json.dumps(json_safe(record), indent=1))      # never a half-written record
    return path


def copy_cached_runs(cache: Path, dest: Path, tasks) -> dict[str, dict]:
    """The finished runs among `tasks` (found in the run cache directory `cache` by their ``key()``), each
    copied into ``dest/runs`` (written atomically; runs of other tasks in the cache are left out):
    ``{key: result}`` in the order of `tasks`, each key once. What a ``--collect`` commits while a grid
    still trains."""
    (Path(dest) / "runs").mkdir(parents=True, exist_ok=True)
    runs = {}
    for k in dict.fromkeys(t.key() for t in tasks):
        src = Path(cache) / f"{k}.json"
        if src.is_file():
            text = src.read_text()
            write_text_atomic(Path(dest) / "runs" / src.name, text)
            runs[k] = json.loads(text)
    return runs


def new_figure(n_panels: int = 1, *, width: float = 4.2, height: float = 3.4):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n_panels, figsize=(width * n_panels, height), squeeze=False)
    return fig, list(axes[0])


def save_figure(fig, path: Path) -> Path:
    """:func:`paper_checks.figures.save_figure` at 110 dpi (atomic: an interrupted write keeps the previous
    PNG), returning the path."""
    return Path(figures.save_figure(fig, path, dpi=110))


@contextlib.contextmanager
def single_thread():
    """Pin BLAS to one thread (small GEMMs are several times slower multi-threaded on a shared 2-core box)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # optional nicety
        yield
        return
    with threadpool_limits(1):
        yield


# ---- model adapter -----------------------------------------------------------------------------------------
def draw_features(seed: int, step: int, config: dict):
    """The attention features of `step` (``refattn.nn.init.features_for_step``; ``None`` list for softmax)."""
    from refattn.nn.init import features_for_step

    return features_for_step(seed, step, config)


def _nonfinite_error(exc: Exception) -> bool:
    """True for refattn's error about a non-finite normaliser or output (RKS normalisers can be ~0 and their
    products overflow float32: refattn.attention.normaliser), which the experiments record instead of
    crashing."""
    return isinstance(exc, ValueError) and "not finite" in str(exc)


def predict_logits(params, inputs: np.ndarray, config: dict, features, *, batch: int = 256) -> np.ndarray:
    """Logits of the model on `inputs` (NumPy, first axis examples), in batches, with fixed `features`. A
    batch whose attention output is not finite (an RKS normaliser at ~0) gives NaN logits (counted wrong by
    :func:`accuracy`, as a failed pass by the variance metrics) instead of raising."""
    from refattn.nn.transformer import transformer

    outs = []
    for i in range(0, inputs.shape[0], batch):
        try:
            outs.append(np.asarray(transformer(params, inputs[i:i + batch], features, config=config)))
        except ValueError as exc:
            if not _nonfinite_error(exc):
                raise
            shape = (inputs[i:i + batch].shape[0], config["n_classes"])
            outs.append(np.full(shape, np.nan, dtype=np.float32))
    return np.concatenate(outs, axis=0)


def predictions(logits: np.ndarray) -> np.ndarray:
    """argmax over the last axis, -1 where a row is not finite (a failed pass: never a class)."""
    ok = np.all(np.isfinite(logits), axis=-1)
    return np.where(ok, np.argmax(np.where(np.isfinite(logits), logits, -np.inf), axis=-1), -1)


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(predictions(logits) == labels))


def _finite_tree(tree) -> bool:
    from refattn.tree import tree_leaves

    return all(np.all(np.isfinite(np.asarray(g))) for g in tree_leaves(tree)
               if g is not None and np.issubdtype(np.asarray(g).dtype, np.floating))


def initial_params(config: dict, seed: int) -> dict:
    """The parameters :func:`train_loop` starts from for run seed `seed` (drawn from
    ``default_rng([seed, 0])``)."""
    from refattn.nn.init import init_transformer

    return init_transformer(np.random.default_rng([seed, 0]), config)


def train_loop(config: dict, x: np.ndarray, y: np.ndarray, *, seed: int, steps: int, batch: int, lr: float,
               weight_decay: float = 0.0, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8,
               clip_norm: float | None = None,
               schedule: dict | None = None, callback: Callable[[int, dict], bool] | None = None,
               callback_every: int = 0, stats: dict | None = None) -> dict:
    """AdamW on cross-entropy, minibatches drawn from ``default_rng([seed, 2])``, attention features redrawn
    per the config's policy from ``(seed, step)``, the rate of each step from
    ``refattn.nn.schedules.learning_rate(step, lr=lr, schedule=schedule)`` (None: constant `lr`), gradients
    clipped to global norm `clip_norm` first (``refattn.nn.optim.clip_by_global_norm``, as torch's
    ``clip_grad_norm_``; None: no clipping).
    ``callback(step, params)`` runs every `callback_every` steps and after the last one; returning True stops
    training. A step whose loss or gradients are not finite (an RKS normaliser at ~0) is
    skipped (no update, as a loss-scaling trainer skips an overflowing step) and counted in
    ``stats["skipped_steps"]`` (with the first such steps in ``stats["skipped_at"]``); more than a tenth of
    the steps skipped stops the run (``stats["diverged_at"]``). Returns the final parameters."""
    from refattn.nn.optim import adam_init, adamw_update, clip_by_global_norm
    from refattn.nn.transformer import loss_and_grads
    from refattn.nn.schedules import learning_rate

    stats = {} if stats is None else stats
    stats.setdefault("skipped_steps", 0)
    params = initial_params(config, seed)
    state = adam_init(params)
    rng = np.random.default_rng([seed, 2])
    n = x.shape[0]
    order = rng.permutation(n)
    pos = 0
    for step in range(steps):
        if pos + batch > n:
            order, pos = rng.permutation(n), 0
        idx = order[pos:pos + batch]
        pos += batch
        try:
            loss, grads = loss_and_grads(params, x[idx], y[idx], draw_features(seed, step, config),
                                         config=config)
            ok = bool(np.isfinite(float(loss))) and _finite_tree(grads)
        except ValueError as exc:
            if not _nonfinite_error(exc):
                raise
            ok = False
        if ok:
            rate = lr if schedule is None else learning_rate(step, lr=lr, schedule=schedule)
            if clip_norm is not None:
                grads, _ = clip_by_global_norm(grads, clip_norm)
            params, state = adamw_update(params, grads, state, lr=rate, beta1=beta1, beta2=beta2, eps=eps,
                                         weight_decay=weight_decay)
        else:
            stats["skipped_steps"] = stats.get("skipped_steps", 0) + 1
            stats.setdefault("skipped_at", [])
            if len(stats["skipped_at"]) < 20:
                stats["skipped_at"].append(step)
            if stats["skipped_steps"] > max(10, steps // 10):
                stats["diverged_at"] = step
                break
        last = step == steps - 1
        if callback is not None and ((callback_every and (step + 1) % callback_every == 0) or last):
            if callback(step + 1, params):
                break
    return params


# ---- learning-rate schedule, learning curves, the (model x seed) grid -------------------------------------
def warmup_cosine(steps: int, lr: float, warmup_frac: float = 0.1) -> dict:
    """The schedule of the trained claims (``refattn.nn.schedules``): linear warm-up over ``warmup_frac`` of
    the `steps`, then cosine decay to ``lr / 10`` at the last step."""
    warm = max(1, int(round(warmup_frac * steps)))
    if steps <= warm:
        return {"warmup_steps": warm}
    return {"warmup_steps": warm, "decay": "cosine", "total_steps": int(steps), "min_lr": lr / 10}


def decay_only_factor(steps: int, lr: float, weight_decay: float, schedule: dict | None) -> float:
    """``prod_t (1 - lr_t weight_decay)``: what decoupled weight decay alone (a zero gradient) makes of a
    parameter after `steps` AdamW steps at the rates of `schedule`."""
    from refattn.nn.schedules import learning_rate

    out = 1.0
    for t in range(steps):
        out *= 1.0 - (lr if schedule is None else learning_rate(t, lr=lr, schedule=schedule)) * weight_decay
    return out


class Curve:
    """A learning curve recorded from a training callback: step, training wall/CPU seconds (evaluation
    excluded: CPU time is what a step costs on an idle core), and the metrics ``measure(params)`` returns.
    With `stop`, training ends early once ``stop(metrics)`` is true (the callback returns True)."""

    def __init__(self, measure: Callable[[dict], dict], stop: Callable[[dict], bool] | None = None):
        self.measure = measure
        self.stop = stop
        self.data: dict[str, list] = {"step": [], "seconds": [], "cpu_seconds": []}
        self.wall = self.cpu = 0.0
        self._mark = (time.perf_counter(), time.process_time())

    def __call__(self, step: int, params) -> bool:
        self.wall += time.perf_counter() - self._mark[0]
        self.cpu += time.process_time() - self._mark[1]
        self.data["step"].append(int(step))
        self.data["seconds"].append(round(self.wall, 2))
        self.data["cpu_seconds"].append(round(self.cpu, 2))
        metrics = self.measure(params)
        for k, v in metrics.items():
            self.data.setdefault(k, []).append(v)
        self._mark = (time.perf_counter(), time.process_time())
        return bool(self.stop is not None and self.stop(metrics))


_MEMO: dict[str, Any] = {}


def _cache_dir(ctx, name: str) -> Path | None:
    if ctx.report_dir is None:
        return None
    cache = Path(ctx.report_dir) / "experiments" / name / "runs"
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def _cached(task, cache: Path | None):
    k = task.key()
    if k not in _MEMO and cache is not None and (cache / f"{k}.json").is_file():
        _MEMO[k] = json.loads((cache / f"{k}.json").read_text())
    return _MEMO.get(k)


def _call_and_cache(call: tuple) -> dict:
    """``fn(task)``, also written to the cache directory (when there is one) as soon as it is done, so that
    an interrupted grid keeps its finished runs (a worker on another machine may fail to write: ignored)."""
    fn, task, cache = call
    result = fn(task)
    if cache is not None:
        with contextlib.suppress(OSError):
            tmp = Path(cache) / f"{task.key()}.json.part"
            save_json(tmp, result)
            tmp.replace(Path(cache) / f"{task.key()}.json")
    return result


def grid_if_done(ctx, tasks: list, *, name: str) -> list[dict] | None:
    """The results of `tasks` when every one is memoised or cached already (see :func:`run_grid`), else
    None: nothing is trained."""
    cache = _cache_dir(ctx, name)
    out = [_cached(t, cache) for t in tasks]
    return None if any(r is None for r in out) else out


def run_grid(ctx, fn: Callable[[Any], dict], tasks: list, *, name: str, workers: int = 2) -> list[dict]:
    """``[fn(t) for t in tasks]`` through ``ctx.map``, each result memoised in-process and, with
    ``--report``, cached as ``<report>/experiments/<name>/runs/<t.key()>.json`` (a rerun, or another claim
    that needs the same run, reuses it). Without an executor of its own the context gets a pool of
    `workers` local processes (serial at 1 worker or for one task). Every task is a frozen dataclass with a
    ``key()`` naming everything its result depends on, so the cache never serves a different run."""
    cache = _cache_dir(ctx, name)
    todo = [t for t in dict.fromkeys(tasks) if _cached(t, cache) is None]
    if todo:
        calls = [(fn, t, None if cache is None else str(cache)) for t in todo]
        if ctx.executor is None and workers > 1 and len(todo) > 1:
            with ProcessPoolExecutor(max_workers=min(workers, len(todo))) as pool:
                results = dataclasses.replace(ctx, executor=pool).map(_call_and_cache, calls)
        else:
            results = ctx.map(_call_and_cache, calls)
        for t, r in zip(todo, results, strict=True):
            _MEMO[t.key()] = r
            if cache is not None:
                tmp = cache / f"{t.key()}.json.tmp"
                save_json(tmp, r)
                tmp.replace(cache / f"{t.key()}.json")
                _MEMO[t.key()] = json.loads((cache / f"{t.key()}.json").read_text())   # one form either way
    return [_MEMO[t.key()] for t in tasks]


def extrapolated_steps(steps, values, target: float) -> float | None:
    """Steps at which `values` (a learning curve) would reach `target`, extrapolating its last half linearly
    in log(step); the last step when reached already; None when it does not rise there (no extrapolation is
    honest then)."""
    s = np.asarray(steps, dtype=float)
    a = np.asarray(values, dtype=float)
    if s.size and a[-1] >= target:
        return float(s[-1])
    if s.size < 3:
        return None
    half = s.size // 2
    slope, icpt = np.polyfit(np.log(s[half:]), a[half:], 1)
    if not slope > 1e-6:
        return None
    return float(math.exp(min((target - icpt) / slope, 700.0)))


def guard_note(record: dict) -> str:
    """'; below the learning guard: <model> (<budget note>), ...' from ``record["learning"]["below_guard"]``
    (empty when the record has none: the decision rule applied to bare evidence)."""
    below = (record.get("learning") or {}).get("below_guard")
    if not below:
        return ""
    if isinstance(below, dict):
        return "; below the learning guard: " + ", ".join(f"{k} ({v['note']})" for k, v in below.items())
    return "; below the learning guard: " + ", ".join(map(str, below))


def budget_note(steps_needed: float | None, cpu_per_step: float, runs: int = 1) -> str:
    """'needs ~N steps (~H CPU-hours for `runs` runs)' or 'not rising (no honest extrapolation)'."""
    if steps_needed is None:
        return "not rising (no honest extrapolation)"
    return f"needs ~{steps_needed:.0f} steps (~{steps_needed * cpu_per_step * runs / 3600:.1f} CPU-h)"


# ---- compute against the paper's ------------------------------------------------------------------------
#: The papers' stated training compute per experiment: steps, batch, sequence length, layers, width, and the
#: source of each. Where the paper gives no step count, the smallest count its text allows is used, so the
#: fraction computed from it is an upper bound.
PAPER_COMPUTE = {
    "horn-images": {"steps": 52_500, "batch": 22, "L": 1025, "n_layers": 6, "d_model": 256,
                    "source": "Horn et al.'s runs (results/model_evaluations.csv: batch_size 22, depth 6, "
                              "dim 256; 32x32 images + a class token = 1025 tokens); steps: early stopping "
                              "with patience 20 epochs (train.py line 516) of 55,000 training images at "
                              "batch 22 = 2,500 steps per epoch, so at least 21 epochs = 52,500 steps"},
    "kl-sparse-task": {"steps": 400, "batch": 400, "L": 200, "n_layers": 3, "d_model": 64,
                       "source": "KL paper App. E.1-E.2: 200K sequences of length 200, 80% for training, "
                                 "batch 400, 3 layers of width 64; steps not stated: one epoch (160K / 400 = "
                                 "400 steps) is the least, so the fraction is an upper bound"},
    "kl-listops": {"steps": 10_000, "batch": 32, "L": 2000, "n_layers": 6, "d_model": 512,
                   "source": "KL paper App. C.3 (hyperparameters for LRA): ListOps 10K steps, batch 32, "
                             "length 2000, 6 layers, embedding 512"},
}


def compute_proxy(*, steps: int, batch: int, L: int, n_layers: int, d_model: int) -> float:
    """``steps * batch * L * n_layers * d_model^2``: the dense (projection and feed-forward) work of a run up
    to a constant factor shared by both sides of a comparison; attention's own cost is linear in L for every
    model compared, so it scales the same way."""
    return float(steps) * batch * L * n_layers * float(d_model) ** 2


def budget_fraction(ours: dict, paper: str) -> float:
    """Our run's :func:`compute_proxy` over the paper's (:data:`PAPER_COMPUTE` [paper])."""
    p = PAPER_COMPUTE[paper]
    keys = ("steps", "batch", "L", "n_layers", "d_model")
    return compute_proxy(**{k: ours[k] for k in keys}) / compute_proxy(**{k: p[k] for k in keys})


def budget_record(ours: dict, paper: str) -> dict:
    """``{"budget_fraction": f, "budget": {...}}`` for a record: our run's compute against the paper's, with
    the numbers of both sides and the paper side's source."""
    keys = ("steps", "batch", "L", "n_layers", "d_model")
    return {"budget_fraction": budget_fraction(ours, paper),
            "budget": {"ours": {k: ours[k] for k in keys}, "paper": dict(PAPER_COMPUTE[paper]),
                       "proxy": "steps * batch * L * n_layers * d_model^2"}}


# ---- the claim side ----------------------------------------------------------------------------------------
def claim_result(ctx, name: str, run: Callable, decide: Callable, *, scale_note: str):
    """Run experiment `name` at ``ctx.size`` and turn its record into a claim Result (module docstring)."""
    out = out_dir_for(ctx.report_dir, name)
    t0 = time.perf_counter()
    try:
        with single_thread():
            record = run(size=ctx.size, seed=ctx.seed, out_dir=out, ctx=ctx)
    except MissingPiece as exc:
        return Result("not-checkable", {"reason": str(exc), "size": ctx.size},
                      summary=f"{exc} (not run; no number produced)")
    seconds = time.perf_counter() - t0
    verdict, summary = decide(record)
    note = guard_note(record)
    if note and note not in summary:
        summary += note
    evidence = {"size": ctx.size, "scale": record.get("scale"), "seconds": round(seconds, 1),
                "json": str(out / f"{name}.json"), "criterion": record.get("criterion"),
                "criterion_values": record.get("criterion_values"), "results": record.get("summary"),
                "learning": record.get("learning"), "budget_fraction": record.get("budget_fraction"),
                "budget": record.get("budget"), "provenance": record.get("provenance")}
    figures = []
    for png in record.get("figures", []):
        figures.append(png)
        dest = ctx.figure_path(Path(png).stem)
        if dest is not None and Path(png) != dest:
            dest.write_bytes(Path(png).read_bytes())
            figures[-1] = str(dest)
    if ctx.size == "tiny":
        return Result("not-checkable", evidence, figures=figures,
                      summary=f"tiny smoke run ({scale_note}); criterion needs size small or full "
                              f"[would read: {verdict}: {summary}]")
    final = ctx.decide(evidence)                    # the registered rule: the criterion under the taxonomy
    if final != verdict:
        summary = (f"{final} (the criterion reads {verdict} at {evidence['budget_fraction']:.2g} of the "
                   f"paper's compute): {summary}")
    return Result(final, evidence, figures=figures, summary=f"[{ctx.size}: {scale_note}] {summary}")


def experiment_rule(exp_decide: Callable[[dict], tuple], criterion: str) -> Callable[[dict], str]:
    """An experiment's ``decide(record) -> (verdict, summary)`` as a claim's decision rule on the evidence of
    :func:`claim_result`: not-checkable at size tiny or without criterion values, else the criterion, under
    the verdict taxonomy (:func:`paper_checks.rules.trained`: the criterion's fails stands only at the
    paper's compute, ``evidence["budget_fraction"] >= 1``, or on a budget ladder; else not-reproduced)."""
    def at_budget(ev: dict) -> str:
        if "criterion_values" not in ev or ev.get("size") == "tiny":
            return "not-checkable"
        return exp_decide({"criterion_values": ev["criterion_values"], "scale": ev.get("scale")})[0]

    at_budget = with_rule(at_budget, "not-checkable at size tiny (a smoke run) or when a model piece is "
                                     "missing; otherwise the pre-registered criterion: " + criterion)
    return trained(at_budget)
