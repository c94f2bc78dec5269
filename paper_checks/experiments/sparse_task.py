"""Chowdhury et al. Sec. 4.2 and Appendix E at laptop scale: the sparse sum task, GMM-RKS vs GMM-PRF.

Data (E.1, :func:`data.sparse_sum_task`): pairs ``(v_i, a_i)``, label ``sum_i v_i a_i`` in -4..4 (9 classes,
balanced), ``a_i ~ Bernoulli(p)`` for ``p`` in {0.1, 0.5, 0.9} (the paper's dataset labels), 80/20 split.

Model (E.2): the 3-d many-hot input ``(v=1, v=-1, a)`` through a dense embedding (``input="patches"`` with an
``(1, L, 3)`` "image", ``patch=1``) plus learned positions, a 3-layer pre-LN transformer with
``d_model = d_ff = 64`` and 4 heads of width 16, readout at position 0, a 9-way softmax; 64 random samples,
AdamW (beta2 0.98, eps 1e-9, weight decay 0.1). Deviations: E.2 puts a 64-unit hidden layer between the
readout and the 9-way layer; refattn's classifier head is one dense layer on the 64-wide readout, so the "64
neurons of the classifier layer" below are the head's 64 inputs. Training is float32 with a learning-rate
warm-up and cosine decay (:func:`harness.warmup_cosine`) at a rate our step budget needs (the paper: lr
5e-6 with 200K sequences, batch 400). At ``small`` and ``full`` both GMM models start from the KL
authors' code's random start (the gmm kind's ``init="authors"``, :func:`refattn.random.init_gmm_authors`;
the paper does not state its initialisation); ``tiny`` keeps ``S = I``.

Settings (:data:`PROVENANCE`, every row with its source): where the paper is silent and the KL authors'
code fixes a budget-free setting, the code's is run (query/key scaling, features redrawn at every forward
call, evaluation included, AdamW betas (0.9, 0.98) and no gradient clipping as in their ListOps training);
where the paper's text and the code disagree the paper's is run and the row shows both (a per-layer
mixture of C = 2 full-covariance components against the code's one Gaussian per head; no constant RKS
feature against the code's +1). The GMM start is the code's (xavier-uniform factors for GMM-RKS, a
uniform log-variance for GMM-PRF, uniform means). The budget-coupled rate, schedule and steps are scaled.

Every (rung, model, p, seed) run is one task of a grid that goes through ``ctx.map`` (2 local processes by
default; per-run cache under ``--report``) and records its learning curve (train and validation accuracy vs
step, CPU seconds), the Table 14 gradient statistics, the Sec. 4.1 variance metrics of the trained model
(:mod:`.variance_metrics` reads them) and the eigenvalues of its learnt GMM covariances
(:mod:`.eigenvalues` reads them, with a weight-decay-0 ablation run on the same grid).

**The budget ladder**: each size's grid is trained at the rungs :data:`LADDER` (1/4, 1/2 and 1 of its
steps, the cheapest first), each rung a separate run (:func:`rung_size`: steps and evaluation interval
times the fraction; the same data, peak rate, schedule shape and early stop), named in its cache key; rung
1 is the size itself (:meth:`Run.key`: its name has no rung tag, and the hash covers the size's settings, so
the ``kl-full/previous-settings`` runs, trained with ``S = 0.25 I``, are not the current settings' rung 1:
they are that earlier setting's record). Steps are what scales, not data: the paper's
compute is set by its steps (one epoch of 160K sequences at the least) and our runs see every training
sequence several times already, so fewer steps are a smaller budget on the same task, while fewer sequences
would change the task (how much there is to generalise from) along with the budget. The claims decide on
rung 1 and read the ladder (``criterion_values["ladder"]``, each rung's effect, SE and compute against the
paper's: :mod:`.sparse_rules`) under the verdict taxonomy. ``python -m
paper_checks.experiments.sparse_ladder --size full --report DIR [--workers N] [--collect DEST]`` trains the
ladder into a report's cache, cheapest rung first, and collects its runs for a record; at ``full`` every
rung is trained: about 7,000 CPU-s (~2 CPU-hours, ~1 hour wall on 2 idle cores) from an empty cache,
estimated from the ``kl-full/previous-settings`` runs' costs (:mod:`.sparse_ladder`).

Gradient statistics (E.3, Table 14): when a run first reaches 20/40/60/80 % validation accuracy, the first 50
validation points are passed ``repeats`` times (fresh random features each time) and the gradient of the mean
cross-entropy with respect to the classifier layer's 64 inputs is recorded: ``g_r = sum_n dlogits_n W^T``.
Per neuron: mean over repeats of ``|g_r|`` and standard deviation over repeats of ``g_r``; reported as the
average over the 64 neurons.

Paper scale: 200K sequences of length 200, AdamW lr 5e-6, batch 400. Scales used here: :data:`SIZES`; each
record and ladder rung states its compute against the paper's (:func:`budget`: ``full`` is at most 0.12 of
it, its rungs 0.03 and 0.06).
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import time
from fractions import Fraction
from pathlib import Path

import numpy as np

from ..registry import Context
from . import harness, measures
from .sparse_rules import ladder_text, sparsity_rung
from .data import SPARSE_CLASSES, sparse_features, sparse_sum_task
from .provenance import Setting, rows

NAME = "sparse_task"
METHODS = ("gmm-rks", "gmm-prf")
THRESHOLDS = (0.2, 0.4, 0.6, 0.8)
T_CONV = 0.4   # steps to this validation accuracy = "convergence time" (criterion part B; the learning guard)

SIZES = {
    "tiny": dict(L=12, n=270, ps=(0.1, 0.9), d_model=16, n_heads=2, n_layers=1, m=8, steps=4, batch=32,
                 lr=3e-3, eval_every=2, repeats=3, n_grad=20, n_val_eval=54, seeds=1, passes=5, n_vm=20,
                 stop_at=0.9, workers=0),
    "small": dict(L=24, n=4500, ps=(0.1, 0.5, 0.9), d_model=64, n_heads=4, n_layers=3, m=64, steps=600,
                  batch=32, lr=2e-3, gmm_init="authors", eval_every=50, repeats=20, n_grad=50,
                  n_val_eval=300, seeds=1, passes=50, n_vm=200, stop_at=0.9, workers=2),
    "full": dict(L=48, n=18000, ps=(0.1, 0.5, 0.9), d_model=64, n_heads=4, n_layers=3, m=64, steps=2500,
                 batch=32, lr=5e-4, gmm_init="authors", eval_every=50, repeats=50, n_grad=50,
                 n_val_eval=400, seeds=2, passes=100, n_vm=300, stop_at=0.9, workers=2),
}
# ``full``: the random-feature models need several times the steps of softmax, so L = 48 with up to 2500
# steps, early stop at 0.9 (a run past the last Table 14 checkpoint frees its CPU for the others) and 2 seeds;
# the paper's L = 200 would cost about 5x per step and more steps. Initialisation: with ``S = I`` the kernel
# ``exp(-|q - k|^2 / (2 sqrt(d)))`` is ~e^-4 per pair at the models' initial scale, below the RKS estimator's
# noise (~1/sqrt(M) per pair), so the normaliser sum_j phi(q).phi(k_j) crosses zero and GMM-RKS learns
# nothing; a narrower initial spectrum (wider kernel), ``s_init`` 0.25 (~e^-0.25 per pair), with lr 5e-4 lets
# it learn (records/kl-full/previous-settings ran it). ``gmm_init="authors"`` (small, full) runs the KL
# authors' code's start instead, whose GMM-RKS spectrum is of that order (E[S S^T] = 2 / (d + H) I = 0.1 I
# at d 16, H 4); tiny keeps S = I (its tests check the pipeline, not learning). One rate for both models.
#: the weight-decay setting of E.2 (Table 6 for LRA as well); the eigenvalue ablation adds 0
WEIGHT_DECAY = 0.1

#: The budget ladder: every size trains its grid at these fractions of its ``steps`` (cheapest first), each
#: rung a separate run whose budget-coupled settings are scaled as the size's own are (:func:`rung_size`).
LADDER = ("1/4", "1/2", "1")
#: The settings that scale with a rung's budget; every other entry of a size is the same on every rung.
RUNG_SCALED = ("steps", "eval_every")


def rung_size(size: str, rung: str) -> dict:
    """``SIZES[size]`` at `rung` (a fraction such as ``"1/4"``) of its budget: ``steps`` and ``eval_every``
    times the fraction (rounded; at least 1 step and 1 between evaluations). The schedule is the size's shape
    on the rung's steps (:func:`harness.warmup_cosine`: warm-up over a tenth of them, cosine decay to lr / 10
    at the rung's last step), so the number of learning-curve points is the size's; the peak learning rate,
    model, batch, data (the same sequences: the rungs see fewer passes over them, not fewer of them), the
    early stop at ``stop_at`` and the seeds are unchanged, so the rungs differ in training length alone. At
    rung ``"1"`` it is ``SIZES[size]`` itself."""
    if size not in SIZES:
        raise ValueError(f"size: expected one of {sorted(SIZES)}; got {size!r}")
    try:
        f = Fraction(rung)
    except (TypeError, ValueError):
        raise ValueError(f"rung: expected a fraction in (0, 1] such as '1/4'; got {rung!r}") from None
    if not 0 < f <= 1:
        raise ValueError(f"rung: expected a fraction in (0, 1] such as '1/4'; got {rung!r}")
    sz = dict(SIZES[size])
    return {**sz, "steps": max(1, round(sz["steps"] * f)), "eval_every": max(1, round(sz["eval_every"] * f))}

CRITERION = ("Two parts, both needed for holds. (A) gradients: over the (p, checkpoint) cells reached by "
             "both models, the ratio std(GMM-PRF)/std(GMM-RKS) of the classifier-layer gradient exceeds 1 in "
             "at least 75% of the cells (Table 14's reading: PRF's gradients vary more). (B) convergence: "
             "with T = steps to 40% validation accuracy (censored at the step budget), "
             "T_PRF(p=0.9)/T_PRF(p=0.1) > T_RKS(p=0.9)/T_RKS(p=0.1) (PRF slows down as sparsity decreases, "
             "RKS much less). fails if either part is contradicted; not-checkable if fewer than 4 cells are "
             "reached by both models, or (learning guard) if part B is needed and a model's seed-mean "
             "validation accuracy never reaches 40% at p=0.1 or p=0.9 within the budget (its T is censored: "
             "the evidence gives the steps it would need, extrapolated from its learning curve).")


# the GMM start of the authors' code: their xavier-uniform S_h on (H, d, d) has entries of variance
# bound^2 / 3 = 2 / (d^2 + H d), so E[S_h^T S_h] = d * 2 / (d^2 + H d) I = 2 / (d + H) I; GMM-PRF's
# log-variance U(+-b), b = sqrt(6 / (d + H)), gives standard deviations exp(+-b / 2)
_HEADS = SIZES["full"]["n_heads"]
_D_HEAD = SIZES["full"]["d_model"] // _HEADS
_CODE_SIGMA = 2 / (_D_HEAD + _HEADS)
_PRF_B = (6 / (_D_HEAD + _HEADS)) ** 0.5
#: the start refattn ran at full before the authors' (records/kl-full/previous-settings): S_c = 0.25 I
EARLIER_S_INIT = 0.25

#: The feature-map files of the KL authors' code (:data:`published.KL_REPO` at :data:`published.KL_COMMIT`),
#: cited by the provenance tables of the KL experiments.
FOURIER = "fast_transformers/feature_maps/fourier_features.py"
#: The repository has no sparse-task code (its README lists text, retrieval and ListOps only); what it fixes
#: for this experiment is the feature maps' conventions, read in its ListOps model (listops/model.py), and
#: the training loop's budget-free settings, read in its ListOps training script (:data:`TRAIN`).
NO_TASK_CODE = "no sparse-task code (README.md l. 3-8: text, retrieval, listops)"
#: The KL authors' ListOps training script (the optimiser, clipping, schedule and evaluation rows cite it).
TRAIN = "listops/train.py"

#: Where every setting comes from (:mod:`.provenance`): the paper's Appendix E, and for the feature maps the
#: KL authors' ListOps code (:data:`published.KL_REPO` at :data:`published.KL_COMMIT`; it holds no sparse-task
#: code). Where the code and this run differ, the row says so and which was run.
PROVENANCE = (
    Setting("data", "Appendix E.1's pairs (v_i, a_i), a_i ~ Bernoulli(p), p in (0.1, 0.5, 0.9), 9 balanced "
            "classes, 80/20 split; " + "; ".join(f"{n}: L {SIZES[n]['L']}, {SIZES[n]['n']} sequences"
                                                 for n in ("small", "full")),
            "scaled to the budget", paper="App. E.1: 200K sequences of length 200, 80% for training",
            code=NO_TASK_CODE, note="full: L 4x shorter, 11x fewer sequences"),
    Setting("model", "3 pre-LN layers, d_model = d_ff = 64, 4 heads, learned positions, readout at "
            "position 0, one dense 9-way layer", "paper", paper="App. E.2: 3 layers, d_model = d_ff = 64, "
            "d_query = d_value = 16, learnable position embeddings, the final embedding of position 0 "
            "through a 64-unit hidden layer to a 9-way softmax", code=NO_TASK_CODE,
            note="E.2's 64-unit hidden layer before the 9-way layer is not built; the paper's position-0 "
            "readout is run, not the class token of the authors' ListOps code (listops/model.py l. 67-70, "
            "318-326) or of their LRA table (Table 6: pooling CLS)"),
    Setting("feature count", "64 samples", "paper", paper="App. E.2: 64 random samples", code=NO_TASK_CODE),
    Setting("query/key scaling", "q and k scaled by d_head^(-1/4) before the map (kernel of |q - k|^2 / "
            "sqrt(d_head))", "authors' code", code=f"{FOURIER} l. 832, 999 (GMM-RKS: x * sqrt(softmax_temp), "
            "softmax_temp = 1/sqrt(d_query)), l. 530-533, 611 (GMM-PRF)"),
    Setting("GMM parameters", "C = 2 components (weights, means, full factors S_c) per layer, shared by "
            "its heads", "paper",
            paper="Sec. 2.1, Eqs. 5, 10: sum_c pi_c N(mu_c, Sigma_c), Sigma_c in R^(d^2) (Table 1's GMM-PRF "
            "cost has no d^2 term, as for a diagonal one); App. C.3 notes: C = 2",
            code=f"{FOURIER} l. 980-986 (GMM-RKS), l. 551-556 (GMM-PRF): one (mu_h, S_h) per head; the RKS "
            "features at S_h^T z + mu_h and S_h^T z - mu_h (l. 1009-1010: two components +-mu_h with one "
            "covariance and equal weights); GMM-PRF's covariance diagonal, exp(sigma_h) (l. 615-617), "
            "features at +mu_h only",
            note="paper and code disagree (per-layer mixture of C = 2 against one Gaussian per head, "
            "symmetrised for RKS; full against diagonal for PRF); the paper's Eqs. 5 and 10 with a full "
            "Sigma_c are run"),
    Setting("GMM initialisation", "the authors' code's start (gmm init='authors', small and full): GMM-RKS "
            "S_c entries U(+-sqrt(6 / (d^2 + H d))), H the model's heads, mu_c ~ U(+-1/d); GMM-PRF S_c = "
            "diag(exp(s / 2)), log-variance s ~ U(+-sqrt(6 / (d + H))), mu_c ~ U(+-1/sqrt(d)); equal "
            "weights; each of the C = 2 components of a layer drawn from the law of one head",
            "authors' code", paper="not stated (App. E.2 gives no initialisation)",
            code=f"{FOURIER} l. 980-996 (GMM-RKS: sigma (H, d, d) xavier-uniform, fan-in d^2, fan-out H d: "
            f"U(+-sqrt(6 / (d^2 + H d))), so E[S_h^T S_h] = 2 / (d + H) I = {_CODE_SIGMA:.2g} I at "
            f"d {_D_HEAD}, H {_HEADS}; mean U(+-1 / sqrt(fan-in)) = U(+-1/d)), l. 551-566 and 615-616 "
            "(GMM-PRF: sigma (H, d) xavier-uniform, U(+-sqrt(6 / (d + H))), used as exp(sigma / 2) on the "
            f"noise, so a log-variance: standard deviations in exp(+-{_PRF_B / 2:.2f}) at d {_D_HEAD}, "
            f"H {_HEADS}; mean U(+-1/sqrt(d)))",
            note="the paper is silent and the code fixes it, so the code's is run. The earlier refattn "
            f"choice S_c = {EARLIER_S_INIT} I (Sigma_c = {EARLIER_S_INIT ** 2:g} I, means 0), picked from "
            "probe runs (with S = I GMM-RKS stays at chance at this scale: "
            "records/kl-full/sparse-task-s_init-1), is what records/kl-full/previous-settings ran; tiny "
            "keeps S = I"),
    Setting("RKS constant feature", "none: the RKS attention normalises the estimated kernel itself",
            "refattn's choice",
            code=f"{FOURIER} l. 1026-1051 (SmoothedGaussianMixtureFourierFeatures: a constant feature 1.0 "
            "appended, smoothing=1.0, so the attention uses the estimate + 1); listops/model.py l. 247-257",
            note="the paper (Eqs. 3, 5) has no constant feature; the paper's map is run. The code's +1 keeps "
            "the RKS normaliser away from zero, the failure that keeps GMM-RKS at chance with S = I here; "
            "its GMM-RKS features estimate twice the kernel (validation/records/conformance.md): weights "
            "2 k + 1"),
    Setting("PRF map", "exp(x omega^T - |x|^2) / sqrt(M) (offset |x|^2: a Gaussian kernel), one-sided; "
            "row-max stabilised", "paper", paper="Eq. 9 (offset |x|^2)",
            code=f"{FOURIER} l. 610-632 (exp(u - |x|^2 - log(M) / 2)); listops/model.py l. 131 "
            "(stabilize=False)", note="the stabiliser changes no value, only the range of the exponent"),
    Setting("redraw", "every training step; each validation evaluation on one fresh draw, each "
            "gradient-statistics repeat on its own", "authors' code",
            code=f"{FOURIER} l. 848-871, 568-591 (a new draw when calls % redraw == 0, redraw=1 by default, "
            "deterministic_eval=False: also at evaluation); fast_transformers/attention/linear_attention.py "
            "l. 57 (new_feature_map on every forward)",
            note="the code draws anew at every forward call, evaluation batches included"),
    Setting("optimiser", f"AdamW, betas (0.9, 0.98), eps 1e-9, weight decay {WEIGHT_DECAY}", "paper",
            paper="App. E.2: AdamW, beta2 0.98, eps 1e-9, weight decay 0.1",
            code=f"{TRAIN} l. 173-178 (ListOps: AdamW, betas (0.9, 0.98), eps 1e-9, weight_decay 0.1)",
            note="paper and code agree; beta1 0.9: E.2's 'all other parameters set to default' (torch's "
            "AdamW) and the code"),
    Setting("gradient clipping", "none", "authors' code", code=f"{TRAIN} l. 193-218 (ListOps: zero_grad, "
            "backward, optimizer.step, scheduler.step: no clipping)"),
    Setting("learning rate and schedule", "; ".join(f"{n}: lr {SIZES[n]['lr']}" for n in ("small", "full"))
            + "; linear warm-up over a tenth of the steps, cosine decay to lr / 10", "scaled to the budget",
            paper="App. E.2: lr 5e-6, no schedule stated",
            code=f"{TRAIN} l. 29-30, 32-60 (ListOps: lr 5e-3 times min(1, t / 1000) / sqrt(max(t, 1000)))",
            note="5e-6 with 200K sequences; a rate the step budget can use (budget-coupled)"),
    Setting("batch and steps", "; ".join(f"{n}: batch {SIZES[n]['batch']}, {SIZES[n]['steps']} steps"
                                         for n in ("small", "full"))
            + f"; budget ladder: {', '.join(LADDER)} of the steps (rung_size), early stop at "
            f"{SIZES['full']['stop_at']:.0%} validation accuracy", "scaled to the budget",
            paper="App. E.2: batch 400; steps not stated", code=NO_TASK_CODE,
            note="compute fraction of each rung in the evidence (budget_fraction, an upper bound: the "
            "paper's steps are taken as one epoch)"),
    Setting("evaluation protocol", "validation accuracy every eval_every steps on the first n_val_eval "
            "validation sequences, each evaluation on one fresh draw of the features; the final model (no "
            "model selection)", "authors' code",
            code=f"{FOURIER} l. 848-871 (deterministic_eval=False: a new draw at evaluation too); "
            f"{TRAIN} l. 62-81, 83-109 (evaluate, predict: model.eval, no_grad)",
            paper="App. E, Fig. 6: validation accuracy against training", note="Table 14's checkpoints are "
            "the first evaluations at or above 20/40/60/80 %"),
    Setting("gradient statistics", "first 50 validation points, repeats with fresh features at 20/40/60/80 "
            "% validation accuracy", "paper", paper="App. E.3, Table 14", code=NO_TASK_CODE),
)


# ---- one run -----------------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Run:
    """One training run of the grid: model, Bernoulli p, run seed, size, weight decay, and the ladder rung
    (a fraction of the size's budget, :func:`rung_size`)."""

    method: str
    p: float
    run_seed: int
    data_seed: int
    size: str
    weight_decay: float = WEIGHT_DECAY
    # out of the repr, which the cache key hashes: a rung-1 run's name is the size's own
    rung: str = dataclasses.field(default="1", repr=False)

    def key(self) -> str:
        """The cache name: method, p, seed, weight decay, size, the rung in words below rung 1, and a hash of
        the run's fields and its rung's scaled size (:func:`rung_size`). At rung 1 the scaled size is the
        size and the repr omits the rung, so the name is the size's own; below it the scaled size differs, so
        no two rungs share a name. A change of the size's settings (its GMM start) changes every name."""
        f = Fraction(self.rung)
        sz = json.dumps(rung_size(self.size, self.rung), sort_keys=True)
        h = hashlib.sha1(f"{NAME}|{self}|{sz}".encode()).hexdigest()[:10]
        tag = "" if f == 1 else f"-r{f.numerator}of{f.denominator}"
        return f"{self.method}-p{self.p}-s{self.run_seed}-wd{self.weight_decay}-{self.size}{tag}-{h}"


def config_for(method: str, sz: dict) -> dict:
    """The transformer configuration of `method` at size `sz`: the GMM kinds start from the KL authors' draw
    when the size sets ``gmm_init="authors"`` (the gmm kind's ``init``), from ``S = s_init I`` when it sets
    ``s_init``, and from ``S = I`` otherwise."""
    extra = {"s_init": sz["s_init"]} if "s_init" in sz else {}
    if "gmm_init" in sz:
        extra["init"] = sz["gmm_init"]
    return dict(task="classify", input="patches", patch=1, image_shape=(1, sz["L"], 3), d_model=sz["d_model"],
                n_heads=sz["n_heads"], n_layers=sz["n_layers"], d_ff=sz["d_model"], max_len=sz["L"],
                position="learned", readout="first", n_classes=SPARSE_CLASSES,
                attention=harness.attention_config(method, m=sz["m"], **extra), dtype="float32")


@functools.lru_cache(maxsize=8)
def dataset(size: str, data_seed: int, p: float):
    """``(x_tr, y_tr, x_va, y_va)`` of the sparse task at `p` (80/20 split, float32 many-hot inputs)."""
    sz = SIZES[size]
    i = SIZES[size]["ps"].index(p) if p in sz["ps"] else int(round(100 * p))
    task = sparse_sum_task(np.random.default_rng([data_seed, 7, i]), sz["n"], sz["L"], p)
    x = sparse_features(task, dtype=np.float32)[:, None]                            # (n, 1, L, 3)
    k = int(0.8 * sz["n"])
    return x[:k], task.y[:k], x[k:], task.y[k:]


def classifier_input_grad(logits: np.ndarray, labels: np.ndarray, W_head: np.ndarray) -> np.ndarray:
    """Gradient of the mean cross-entropy w.r.t. the classifier layer's inputs, summed over the batch:
    ``sum_n (softmax(z_n) - onehot(y_n)) / N @ W^T``. ``logits (N, K)``, ``W_head (D, K)`` -> ``(D,)``."""
    z = np.asarray(logits, dtype=np.float64)
    z = z - z.max(axis=-1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=-1, keepdims=True)                                              # (N, K)
    p[np.arange(labels.shape[0]), labels] -= 1.0
    return (p / labels.shape[0]).sum(axis=0) @ np.asarray(W_head, dtype=np.float64).T   # (D,)


def gradient_stats(grads: np.ndarray) -> dict:
    """Table 14's two numbers from ``grads (repeats, neurons)``: per-neuron mean |g| and std g, averaged."""
    return {"abs_mean": float(np.mean(np.mean(np.abs(grads), axis=0))),
            "std": float(np.mean(np.std(grads, axis=0, ddof=1)))}


def train_one(run: Run) -> dict:
    """Train one (model, p, seed, rung) run; its learning curve, Table 14 cells, variance metrics,
    eigenvalues."""
    sz = rung_size(run.size, run.rung)
    cfg = config_for(run.method, sz)
    x_tr, y_tr, x_va, y_va = dataset(run.size, run.data_seed, run.p)
    seed = run.run_seed
    xg, yg = x_va[:sz["n_grad"]], y_va[:sz["n_grad"]]
    xe, ye = x_va[:sz["n_val_eval"]], y_va[:sz["n_val_eval"]]
    xt, yt = x_tr[:sz["n_val_eval"]], y_tr[:sz["n_val_eval"]]
    cells: dict = {}
    t0 = time.perf_counter()

    def measure(params):
        step = len(curve.data["step"])
        feats = harness.draw_features(seed, 10**6 + step, cfg)
        acc = harness.accuracy(harness.predict_logits(params, xe, cfg, feats), ye)
        for t in THRESHOLDS:
            if acc >= t and t not in cells:
                W = np.asarray(params["head"].W)
                g = np.stack([classifier_input_grad(
                    harness.predict_logits(params, xg, cfg,
                                           harness.draw_features(seed, 2 * 10**6 + 1000 * step + r, cfg)),
                    yg, W) for r in range(sz["repeats"])])                          # (repeats, D)
                ok = np.all(np.isfinite(g), axis=1)                 # a draw with a ~0 RKS normaliser: NaN
                cells[t] = {"val_acc": acc, **gradient_stats(g[ok]), "repeats": int(ok.sum()),
                            "nonfinite_repeats": int((~ok).sum())}
        return {"train_acc": harness.accuracy(harness.predict_logits(params, xt, cfg, feats), yt),
                "val_acc": acc}

    # early stop once the last checkpoint is passed with room (Table 14 needs up to 80%): the CPU it frees
    # goes to the grid's other runs
    curve = harness.Curve(measure, stop=lambda mt: mt["val_acc"] >= sz["stop_at"])
    schedule = harness.warmup_cosine(sz["steps"], sz["lr"])
    stats: dict = {}
    with harness.single_thread():
        params = harness.train_loop(cfg, x_tr, y_tr, seed=seed, steps=sz["steps"], batch=sz["batch"],
                                    lr=sz["lr"], weight_decay=run.weight_decay, beta2=0.98, eps=1e-9,
                                    schedule=schedule, callback=curve, callback_every=sz["eval_every"],
                                    stats=stats)
        if "diverged_at" in stats or not curve.data["step"]:
            curve(stats.get("diverged_at", 0), params)
        steps_at = curve.data["step"]
        for t, c in cells.items():                      # the step of each checkpoint (found by the callback)
            c["step"] = steps_at[[i for i, a in enumerate(curve.data["val_acc"]) if a >= t][0]]
        vm = measures.passes_metrics(params, cfg, x_va[:sz["n_vm"]], y_va[:sz["n_vm"]],
                                             seed=seed, passes=sz["passes"])
        eig = measures.spectrum(params, cfg, np.random.default_rng([seed, 5]),
                                initial_params=harness.initial_params(cfg, seed))
    reached = [s for s, a in zip(steps_at, curve.data["val_acc"], strict=True) if a >= T_CONV]
    trained = curve.data["step"][-1] if curve.data["step"] else 0
    steps = max(trained, 1)
    return {"method": run.method, "p": run.p, "run_seed": seed, "weight_decay": run.weight_decay,
            "rung": run.rung, "steps": sz["steps"], "steps_trained": trained,
            "stopped_early": trained < sz["steps"], "training": stats,
            "curve": curve.data, "checkpoints": {f"{int(t * 100)}%": c for t, c in cells.items()},
            "steps_to_40": reached[0] if reached else None, "final_val_acc": curve.data["val_acc"][-1],
            "variance": vm, "eigenvalues": eig,
            "decay_only_eigenvalue": harness.decay_only_factor(trained, sz["lr"], run.weight_decay,
                                                               schedule) ** 2,
            "train_cpu_seconds": round(curve.cpu, 1), "train_seconds": round(curve.wall, 1),
            "seconds": round(time.perf_counter() - t0, 1), "cpu_seconds_per_step": curve.cpu / steps,
            "seconds_per_step": curve.wall / steps}


def runs_for(size: str, seed: int, *, ps=None, weight_decay: float = WEIGHT_DECAY, rungs=("1",)) -> list[Run]:
    """The grid's runs: every (rung, model, p, seed) of `size` (the ps given, or all of the size; the
    `rungs` given, the cheapest first: by default the whole size only)."""
    sz = SIZES[size]
    return [Run(m, p, 1000 * seed + 10 * i + s, seed, size, weight_decay, r)
            for r in rungs for i, p in enumerate(sz["ps"]) if ps is None or p in ps
            for m in METHODS for s in range(sz["seeds"])]


def at_rung(runs: list[dict], rung: str) -> list[dict]:
    """The runs of ladder rung `rung` (a run without a ``rung`` entry was trained at the whole size)."""
    return [r for r in runs if Fraction(r.get("rung", "1")) == Fraction(rung)]


def grid(ctx, runs: list[Run]) -> list[dict]:
    """The results of `runs` through :func:`harness.run_grid` (memoised, cached under ``--report``)."""
    return harness.run_grid(ctx, train_one, runs, name=NAME, workers=SIZES[ctx.size]["workers"])


# ---- the claim ---------------------------------------------------------------------------------------------
def _mean_curve(rs: list[dict], key: str = "val_acc") -> tuple[list, list]:
    """The seed-mean curve over the steps every run recorded (a diverged run's curve is shorter)."""
    n = min(len(r["curve"]["step"]) for r in rs)
    return rs[0]["curve"]["step"][:n], np.mean([r["curve"][key][:n] for r in rs], axis=0).tolist()


def budget(size: str, rung: str = "1") -> dict:
    """The compute of `size` at ladder rung `rung` against the paper's (:func:`harness.budget_record`; the
    paper's step count is a lower bound, so the fraction is an upper bound)."""
    return harness.budget_record(rung_size(size, rung), "kl-sparse-task")


def criterion_values(results: list[dict], sz: dict) -> tuple[dict, dict]:
    """The criterion's numbers from one rung's `results` (every (model, p, seed) of the size `sz`): the
    criterion values (Table 14's cells reached by both models, the steps to 40%, the slowdowns) and the
    learning-guard part (the steps a model below 40% would need, CPU seconds per step)."""
    by = {(m, p): [x for x in results if x["method"] == m and x["p"] == p] for m in METHODS for p in sz["ps"]}
    ratios = []
    for p in sz["ps"]:
        for t in THRESHOLDS:
            key = f"{int(t * 100)}%"
            a = [r["checkpoints"][key] for r in by[("gmm-rks", p)] if key in r["checkpoints"]]
            b = [r["checkpoints"][key] for r in by[("gmm-prf", p)] if key in r["checkpoints"]]
            if a and b:
                sa, sb = np.mean([c["std"] for c in a]), np.mean([c["std"] for c in b])
                ma, mb = np.mean([c["abs_mean"] for c in a]), np.mean([c["abs_mean"] for c in b])
                ratios.append({"p": p, "checkpoint": key, "std_rks": sa, "std_prf": sb, "absmean_rks": ma,
                               "absmean_prf": mb, "std_prf_over_rks": sb / sa,
                               "absmean_prf_over_rks": mb / ma})
    T, need, cps = {}, {}, {}
    for m in METHODS:
        T[m] = {}
        for p in sz["ps"]:
            rs = by[(m, p)]
            cps[f"{m} p={p}"] = float(np.mean([r["cpu_seconds_per_step"] for r in rs]))
            # T of the cell: the seed mean of each seed's T; censored (None) if a seed never reached 40%
            t = [r["steps_to_40"] for r in rs]
            T[m][str(p)] = None if None in t else float(np.mean(t))
            late = [r for r in rs if r["steps_to_40"] is None]               # full-length curves
            if late:
                steps, acc = _mean_curve(late)
                n = harness.extrapolated_steps(steps, acc, T_CONV)
                need[f"{m} p={p}"] = {"steps": n, "seeds_below": len(late),
                                      "note": harness.budget_note(n, cps[f"{m} p={p}"])}
    lo, hi = str(min(sz["ps"])), str(max(sz["ps"]))

    def slowdown(m):
        a, b = T[m][hi], T[m][lo]
        return None if a is None or b is None else a / b

    cv = {"ratios": [r["std_prf_over_rks"] for r in ratios], "cells": ratios,
          "fraction_std_ratio_above_1": (float(np.mean([r["std_prf_over_rks"] > 1 for r in ratios]))
                                         if ratios else None),
          "fraction_absmean_ratio_above_1": (float(np.mean([r["absmean_prf_over_rks"] > 1 for r in ratios]))
                                             if ratios else None),
          "steps_to_40pct (None = not reached in the budget)": T,
          "slowdown_prf": slowdown("gmm-prf"), "slowdown_rks": slowdown("gmm-rks")}
    return cv, {"below_guard": need, "cpu_seconds_per_step": cps}


def log_steps_to_40(results: list[dict], ps) -> dict:
    """``{(method, "lo" | "hi"): [log T per seed]}`` at the smallest and largest p of `ps` (None for a cell
    with a seed that never reached 40%): what :func:`sparse_rules.sparsity_rung` reads."""
    out = {}
    for m in METHODS:
        for end, p in (("lo", min(ps)), ("hi", max(ps))):
            t = [r["steps_to_40"] for r in results if r["method"] == m and r["p"] == p]
            out[(m, end)] = None if None in t or not t else [float(np.log(x)) for x in t]
    return out


def ladder(results: list[dict], size: str) -> list[dict]:
    """The sparsity claim's budget ladder from `results` (any rungs): for each rung of :data:`LADDER` whose
    runs are complete, its rung (:func:`sparse_rules.sparsity_rung`: effect in units of its SE, the parts
    beside) with the rung's steps and compute against the paper's, and the criterion's own verdict there."""
    sz = SIZES[size]
    want = len(sz["ps"]) * len(METHODS) * sz["seeds"]
    out = []
    for r in LADDER:
        mine = [x for x in at_rung(results, r) if x["weight_decay"] == WEIGHT_DECAY]
        if len(mine) != want:
            continue
        cv, _ = criterion_values(mine, sz)
        out.append({**sparsity_rung(cv["cells"], log_steps_to_40(mine, sz["ps"])), **budget(size, r),
                    "rung": r, "steps": rung_size(size, r)["steps"],
                    "criterion_verdict": decide({"criterion_values": cv})[0],
                    "slowdown_prf": cv["slowdown_prf"], "slowdown_rks": cv["slowdown_rks"],
                    "fraction_std_ratio_above_1": cv["fraction_std_ratio_above_1"]})
    return out


def run(size: str = "small", seed: int = 0, out_dir: Path | None = None, ctx=None) -> dict:
    """Train (or reuse) every rung of the grid of `size`; the record decides on the whole size (rung 1) and
    carries the ladder in ``criterion_values["ladder"]`` (:func:`ladder`)."""
    sz = SIZES[size]
    harness.require_kinds(*METHODS)
    ctx = ctx or Context(seed=seed, size=size)
    out_dir = harness.ensure_dir(out_dir, NAME)
    every = grid(ctx, runs_for(size, seed, rungs=LADDER))
    results = at_rung(every, "1")
    by = {(m, p): [x for x in results if x["method"] == m and x["p"] == p] for m in METHODS for p in sz["ps"]}
    cv, learning = criterion_values(results, sz)
    cv["ladder"] = ladder(every, size)
    T = cv["steps_to_40pct (None = not reached in the budget)"]
    record = {
        "experiment": NAME, "size": size, "seed": seed, **budget(size), "provenance": rows(PROVENANCE),
        "scale": {k: v for k, v in sz.items() if k != "workers"} | {
            "dtype": "float32", "lr_schedule": harness.warmup_cosine(sz["steps"], sz["lr"]),
            "weight_decay": WEIGHT_DECAY, "paper_scale": "200K sequences, L=200, batch 400, AdamW lr 5e-6",
            "ladder": {r: {k: rung_size(size, r)[k] for k in RUNG_SCALED} for r in LADDER}},
        "runs": results, "criterion": CRITERION, "criterion_values": cv,
        "learning": {"guard": f"seed-mean validation accuracy reaches {T_CONV} (chance 1/9)", **learning,
                     "train_cpu_seconds_total": round(sum(r["train_cpu_seconds"] for r in results), 1),
                     "ladder_train_cpu_seconds": {
                         r: round(sum(x["train_cpu_seconds"] for x in at_rung(every, r)), 1)
                         for r in LADDER}},
        "summary": {m: {str(p): {"final_val_acc": float(np.mean([r["final_val_acc"] for r in by[(m, p)]])),
                                 "steps_to_40": T[m][str(p)]} for p in sz["ps"]} for m in METHODS},
    }
    record["figures"] = [str(figure(results, sz, size, out_dir / f"{NAME}.png"))]
    harness.save_json(out_dir / f"{NAME}.json", record)
    return record


def figure(results: list[dict], sz: dict, size: str, path: Path) -> Path:
    """Fig. 6 at this scale: validation (solid) and training (dashed) accuracy vs step per p, both models."""
    fig, axes = harness.new_figure(len(sz["ps"]), width=3.6)
    for ax, p in zip(axes, sz["ps"], strict=True):
        for i, m in enumerate(METHODS):
            for j, r in enumerate(x for x in results if x["method"] == m and x["p"] == p):
                c = r["curve"]
                ax.plot(c["step"], c["val_acc"], color=f"C{i}", marker=".", label=m if j == 0 else None)
                ax.plot(c["step"], c["train_acc"], color=f"C{i}", ls="--", alpha=0.5)
        ax.axhline(T_CONV, color="k", lw=0.6, ls=":")
        ax.set_title(f"p = {p} (L={sz['L']}, size={size})", fontsize=9)
        ax.set_xlabel("step")
        ax.set_ylim(0, 1)
    axes[0].set_ylabel("accuracy (solid: validation, dashed: train)")
    axes[0].legend(fontsize=8)
    return harness.save_figure(fig, path)


def decide(record: dict) -> tuple[str, str]:
    cv = record["criterion_values"]
    n = len(cv["ratios"])
    sp, sr = cv["slowdown_prf"], cv["slowdown_rks"]

    def fmt(v):
        return "censored" if v is None else f"{v:.2f}"

    above = round(cv["fraction_std_ratio_above_1"] * n) if n else 0
    txt = (f"{n} cells reached by both; std PRF/RKS > 1 in {above} of them; "
           f"slowdown T(p=max)/T(p=min): PRF {fmt(sp)}, RKS {fmt(sr)}")
    txt += ladder_text(cv.get("ladder"))
    if n < 4:
        return "not-checkable", ("too few checkpoints reached: " + txt
                                 + harness.guard_note(record))
    if not cv["fraction_std_ratio_above_1"] >= 0.75:
        return "fails", txt
    if sp is None or sr is None:
        return "not-checkable", ("a model did not reach 40% at p=min or p=max within the budget: " + txt
                                 + harness.guard_note(record))
    return ("holds" if sp > sr else "fails"), txt
