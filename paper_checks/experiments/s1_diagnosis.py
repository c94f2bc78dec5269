"""Why S1 on FAVOR+ learns no more than No-Pos on Fashion-MNIST (issue 24): one S1 model, three estimators.

At ``--size full`` (records in ``paper_checks/records/images-full``) Horn's S1 on FAVOR+ (m = 64) ends at the
No-Pos accuracy (0.513 vs 0.520, three seeds each) although, at initialisation, its output does depend on the
token positions. This script trains the *same* S1 model (same data, seed, schedule and budget as ``full``)
with the attention evaluated three ways and prints its test-accuracy curve:

- ``exact``: the S1 attention computed exactly (softmax of the augmented logits, Lemma 1; no random features);
- ``m64``: FAVOR+ positive features, m = 64, redrawn every step (the ``full`` configuration);
- ``m256``: the same with m = 256.

If ``exact`` learns positions and the FAVOR+ variants do not, the relative logits and their gradients are not
the problem (the FAVOR+ backward of S1 is also checked by finite differences in
``tests/rpe/test_s1_rotation.py``); the random-feature estimate of the attention is.

    python -m paper_checks.experiments.s1_diagnosis exact --steps 1500 --out DIR

NumPy edge: training and data loading; needs the real data (``apt-get install dataset-fashion-mnist``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from . import _harness as H  # noqa: N812 (the experiments' shared name)
from . import images as I  # noqa: N812

VARIANTS = ("exact", "m64", "m256")


def s1_config(variant: str, sz: dict) -> dict:
    """The ``full`` S1 model config with its attention evaluated as `variant` (see the module docstring)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}; got {variant!r}")
    cfg = I.model_config("s1", sz)
    att = dict(cfg["attention"])
    if variant == "exact":
        att["features"] = None
        att.pop("m", None)
    else:
        att["m"] = int(variant[1:])
    return {**cfg, "attention": att}


def run(variant: str, steps: int, *, seed: int = 0, n_test: int = 1000, every: int = 250) -> dict:
    """Train the S1 model of `variant` for `steps` steps (the ``full`` schedule rescaled to `steps`); the
    test-accuracy curve on the first `n_test` test images and the CPU time."""
    data_dir = I.data_for("full")
    if data_dir is None:
        raise SystemExit(f"s1_diagnosis needs the real data: {I.INSTALL_HINT}")
    data, desc = I._load(data_dir)
    sz = {**I.SIZES["full"], "steps": steps}
    cfg = s1_config(variant, sz)
    x_tr, y_tr = data.x_train.reshape(-1, 196), data.y_train
    x_te, y_te = data.x_test[:n_test].reshape(-1, 196), data.y_test[:n_test]
    curve = {"step": [], "test_acc": [], "cpu_seconds": []}
    t0 = time.process_time()

    def record(step, params):
        feats = H.draw_features(seed, 10**6, cfg)
        curve["step"].append(step)
        curve["test_acc"].append(H.accuracy(H.predict_logits(params, x_te, cfg, feats), y_te))
        curve["cpu_seconds"].append(round(time.process_time() - t0, 1))
        print(variant, step, curve["test_acc"][-1], flush=True)
        return False

    with H.single_thread():
        H.train_loop(cfg, x_tr, y_tr, seed=seed, steps=steps, batch=sz["batch"], lr=sz["lr"],
                     schedule=I.schedule(sz), callback=record, callback_every=every)
    return {"variant": variant, "attention": cfg["attention"], "steps": steps, "seed": seed,
            "n_test": n_test, "data": desc["name"], "curve": curve}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m paper_checks.experiments.s1_diagnosis", description=__doc__)
    p.add_argument("variant", choices=VARIANTS)
    p.add_argument("--steps", type=int, default=I.SIZES["full"]["steps"])
    p.add_argument("--out", type=Path, default=None, help="write <out>/s1-<variant>.json")
    a = p.parse_args(argv)
    if a.steps < 1:
        p.error(f"--steps: expected a positive integer; got {a.steps}")
    if a.out is not None and not a.out.is_dir():
        p.error(f"--out: expected an existing directory; got {a.out}")
    res = run(a.variant, a.steps)
    if a.out is not None:
        H.save_json(a.out / f"s1-{a.variant}.json", res)


if __name__ == "__main__":
    main()
