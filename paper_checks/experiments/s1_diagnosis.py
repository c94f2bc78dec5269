"""S1 on FAVOR+ against exact S1 attention on Fashion-MNIST: one S1 model, three estimators.

With refattn's earlier image settings (records in ``paper_checks/records/images-full/previous-settings``)
Horn's S1 on FAVOR+ (m = 64) ended at the No-Pos accuracy (0.513 vs 0.520, three seeds each) although, at
initialisation, its output does depend on the token positions; with the authors' settings it does not (the
current ``images-full`` record; what each setting does: :mod:`paper_checks.experiments.images_ablation`).
This script trains the *same* S1 model (same data, seed, schedule and budget as ``full``)
with the attention evaluated three ways and prints its test-accuracy curve:

- ``exact``: the S1 attention computed exactly (softmax of the augmented logits, Lemma 1; no random features);
- ``m64``: FAVOR+ positive features, m = 64 (the ``full`` configuration, with the image experiments' settings
  ``images.SETTINGS``: redraw interval, S1 and query/key initialisation, betas, clipping);
- ``m256``: the same with m = 256.

If ``exact`` learns positions and the FAVOR+ variants do not, the relative logits and their gradients are not
the problem (the FAVOR+ backward of S1 is also checked by finite differences in
``tests/rpe/test_s1_rotation.py``); the random-feature estimate of the attention is.

    python -m paper_checks.experiments.s1_diagnosis exact --steps 1500 --out DIR
    python -m paper_checks.experiments.s1_diagnosis errors --out DIR

The committed records (``records/images-full/s1-diagnosis``) were made before the image experiments took the
authors' settings: features redrawn every step, refattn's S1 initialisation, Glorot query/key weights, betas
(0.9, 0.999), no clipping.

``errors`` measures the other half of the explanation without training: the relative error of the FAVOR+
attention output against the exact one, for S1 and for plain softmax attention, on queries, keys and values
with i.i.d. N(0, s^2) entries (s = 1 is the models' initial scale: LayerNorm output times W_q with
N(0, 1/width) entries), on the 14x14 grid, at m = 64, 256, 1024. Positive random features estimate
exp(q.k / sqrt(d)) with log-weights of variance ~ |q + k|^2 / sqrt(d); when that is several units the
estimate is dominated by rare large weights and its error falls far slower than 1/sqrt(m).

NumPy edge: training and data loading; needs the real data (``apt-get install dataset-fashion-mnist``).
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from . import harness as H  # noqa: N812 (the experiments' shared name)
from . import images as I  # noqa: N812

VARIANTS = ("exact", "m64", "m256")
ERROR_SCALES = (1.0, 0.5, 0.25)
ERROR_MS = (64, 256, 1024)


def estimator_errors(*, seed: int = 0, draws: int = 5, batch: int = 8, d: int = 16) -> dict:
    """Mean over `draws` FAVOR+ draws of ``|y_favor - y_exact| / |y_exact|`` (Frobenius) for S1 (2-D grid
    positions, S1 parameters at their initial values) and for plain softmax attention, per entry scale
    ``s`` of q, k, v (``ERROR_SCALES``) and m (``ERROR_MS``); L = 196, d = `d` (the models' head width)."""
    import numpy as np

    from refattn.attention import favor_attention, softmax_attention
    from refattn.random import draw_orthogonal, init_s1_params
    from refattn.rpe.s1_rotation import s1_attention

    rng = np.random.default_rng([seed, 11])
    grid = np.stack(np.meshgrid(np.arange(14), np.arange(14), indexing="ij"), -1).reshape(-1, 2)
    pos = grid.astype(np.float64)                                                    # (196, 2)
    par = init_s1_params(rng, 2, 4)
    P = 2 * 2 * 4
    base = rng.standard_normal((3, batch, 196, d))

    def rel(a, b):
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    out = {"scales": list(ERROR_SCALES), "m": list(ERROR_MS), "draws": draws, "d": d, "L": 196,
           "s1": {}, "softmax": {}}
    for s in ERROR_SCALES:
        q, k, v = s * base[0], s * base[1], base[2]
        exact_s1, exact_sm = s1_attention(q, k, v, pos, par), softmax_attention(q, k, v)
        for m in ERROR_MS:
            e1 = [rel(s1_attention(q, k, v, pos, par, omega=draw_orthogonal(np.random.default_rng([seed, t]),
                                                                             m, d + P)), exact_s1)
                  for t in range(draws)]
            e0 = [rel(favor_attention(q, k, v, draw_orthogonal(np.random.default_rng([seed, t]), m, d)),
                      exact_sm) for t in range(draws)]
            out["s1"][f"{s}/{m}"] = float(np.mean(e1))
            out["softmax"][f"{s}/{m}"] = float(np.mean(e0))
            print(f"s = {s:<5} m = {m:<5} rel. error: softmax {np.mean(e0):.3f}   S1 {np.mean(e1):.3f}",
                  flush=True)
    return out


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
    data, desc = I.load_tokens(data_dir)
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
                     beta1=I.SETTINGS["beta1"], beta2=I.SETTINGS["beta2"], clip_norm=I.SETTINGS["clip_norm"],
                     schedule=I.schedule(sz), callback=record, callback_every=every)
    return {"variant": variant, "attention": cfg["attention"], "steps": steps, "seed": seed,
            "n_test": n_test, "data": desc["name"], "curve": curve}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m paper_checks.experiments.s1_diagnosis", description=__doc__)
    p.add_argument("variant", choices=VARIANTS + ("errors",))
    p.add_argument("--steps", type=int, default=I.SIZES["full"]["steps"])
    p.add_argument("--out", type=Path, default=None, help="write <out>/s1-<variant>.json")
    a = p.parse_args(argv)
    if a.steps < 1:
        p.error(f"--steps: expected a positive integer; got {a.steps}")
    if a.out is not None and not a.out.is_dir():
        p.error(f"--out: expected an existing directory; got {a.out}")
    if a.variant == "errors":
        res = estimator_errors()
        if a.out is not None:
            H.save_json(a.out / "favor-errors.json", res)
        return
    res = run(a.variant, a.steps)
    if a.out is not None:
        H.save_json(a.out / f"s1-{a.variant}.json", res)


if __name__ == "__main__":
    main()
