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
import json
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from ..report import _plain

__all__ = ["MissingPiece", "require_kinds", "ensure_dir", "available", "attention_config", "METHODS",
           "out_dir_for", "save_json",
           "new_figure", "save_figure", "single_thread", "train_loop", "predict_logits", "accuracy",
           "draw_features", "claim_result"]


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
    # KL maps: RKS normalisers can be <= 0 (design.md trap 4): computed faithfully ("ignore" = do not raise)
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
    path.write_text(json.dumps(_plain(record), indent=1))                          # report._plain: JSON-safe
    return path


def new_figure(n_panels: int = 1, *, width: float = 4.2, height: float = 3.4):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, n_panels, figsize=(width * n_panels, height), squeeze=False)
    return fig, list(axes[0])


def save_figure(fig, path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return Path(path)


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


def predict_logits(params, inputs: np.ndarray, config: dict, features, *, batch: int = 256) -> np.ndarray:
    """Logits of the model on `inputs` (NumPy, first axis examples), in batches, with fixed `features`."""
    from refattn.nn.transformer import transformer

    outs = [np.asarray(transformer(params, inputs[i:i + batch], features, config=config))
            for i in range(0, inputs.shape[0], batch)]
    return np.concatenate(outs, axis=0)


def accuracy(logits: np.ndarray, labels: np.ndarray) -> float:
    return float(np.mean(np.argmax(logits, axis=-1) == labels))


def train_loop(config: dict, x: np.ndarray, y: np.ndarray, *, seed: int, steps: int, batch: int, lr: float,
               weight_decay: float = 0.0, beta2: float = 0.999, eps: float = 1e-8,
               schedule: dict | None = None, callback: Callable[[int, dict], bool] | None = None,
               callback_every: int = 0) -> dict:
    """AdamW on cross-entropy, minibatches drawn from ``default_rng([seed, 2])``, attention features redrawn
    per the config's policy from ``(seed, step)``, the rate of each step from
    ``refattn.nn.schedules.learning_rate(step, lr=lr, schedule=schedule)`` (None: constant `lr`).
    ``callback(step, params)`` runs every `callback_every` steps and after the last one; returning True stops
    training. Returns the final parameters."""
    from refattn.nn.optim import adam_init, adamw_update
    from refattn.nn.transformer import loss_and_grads
    from refattn.nn.init import init_transformer
    from refattn.nn.schedules import learning_rate

    params = init_transformer(np.random.default_rng([seed, 0]), config)
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
        _, grads = loss_and_grads(params, x[idx], y[idx], draw_features(seed, step, config), config=config)
        rate = lr if schedule is None else learning_rate(step, lr=lr, schedule=schedule)
        params, state = adamw_update(params, grads, state, lr=rate, beta2=beta2, eps=eps,
                                     weight_decay=weight_decay)
        last = step == steps - 1
        if callback is not None and ((callback_every and (step + 1) % callback_every == 0) or last):
            if callback(step + 1, params):
                break
    return params


# ---- the claim side ----------------------------------------------------------------------------------------
def claim_result(ctx, name: str, run: Callable, decide: Callable, *, scale_note: str):
    """Run experiment `name` at ``ctx.size`` and turn its record into a claim Result (module docstring)."""
    from paper_checks._claims import Result

    out = out_dir_for(ctx.report_dir, name)
    t0 = time.perf_counter()
    try:
        with single_thread():
            record = run(size=ctx.size, seed=ctx.seed, out_dir=out)
    except MissingPiece as exc:
        return Result("not-checkable", {"reason": str(exc), "size": ctx.size},
                      summary=f"{exc} (not run; no number produced)")
    seconds = time.perf_counter() - t0
    verdict, summary = decide(record)
    evidence = {"size": ctx.size, "scale": record.get("scale"), "seconds": round(seconds, 1),
                "json": str(out / f"{name}.json"), "criterion": record.get("criterion"),
                "criterion_values": record.get("criterion_values"), "results": record.get("summary")}
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
    return Result(verdict, evidence, figures=figures, summary=f"[{ctx.size}: {scale_note}] {summary}")
