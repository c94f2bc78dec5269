"""What is measured on a trained random-feature model: output variance and GMM covariance spectrum.

Chowdhury et al.'s Sec. 4.1 (variance metrics) and Table 4 (covariance eigenvalues). The sparse-task and
ListOps experiments measure every model they train with these; :mod:`.variance_metrics` and
:mod:`.eigenvalues` read the measurements from those runs.

**Variance metrics** (Sec. 4.1). Each trained model is run ``passes`` times on validation examples with fresh
random features. The paper's tasks are binary (LRA Text, Retrieval) and its metrics are written for a signed
output; for ``K`` classes we use, per example, the modal class ``c*`` of the passes and the margin
``z_c* - max_{j != c*} z_j`` of each pass (for ``K = 2`` this is ``+-(z_1 - z_0)``, and every metric below is
exactly the paper's):

* RSD (per example): ``std / |mean|`` of the margin over the passes (averaged over examples; the median too);
* PI (per example): ``passes - #passes predicting c*`` (binary: ``min(x, passes - x)`` with ``x`` the number
  of positive outputs; averaged over examples);
* VA: accuracy of the majority vote ``c*``; accuracy = mean over passes of the single-pass accuracy;
* AGV = VA / accuracy.

**Covariance spectrum** (Table 4). For every layer and component the eigenvalues of ``Sigma_c = S_c S_c^T``
(refattn's convention, ``refattn/features/gmm.py``; a diagonal factor gives ``S_c^2``), and the MSE they
imply: ``refattn.features.gmm.gmm_rks_mse`` / ``gmm_prf_mse`` (Theorem 3, re-derived) evaluated with the
learnt spectrum and with the same spectrum at its initial ``S = s_init I``, on query/key pairs
``q, k ~ N(0, I/d)``; reported as the median ratio learnt / initial. The initial eigenvalue
(:func:`initial_eigenvalue`) is ``s_init^2`` for the scaled-identity start; for the KL authors' random start
(the gmm kind's ``init="authors"``) it is the mean eigenvalue that start has in expectation, and the MSE
ratio's initial spectrum is the isotropic one of that eigenvalue.
"""

from __future__ import annotations

import numpy as np

from . import harness

__all__ = ["variance_metrics", "variance_metrics_multiclass", "passes_metrics", "gmm_leaves",
           "covariance_eigenvalues", "implied_mse_ratio", "initial_eigenvalue", "spectrum"]


def variance_metrics(outputs: np.ndarray, labels: np.ndarray) -> dict:
    """Sec. 4.1's metrics from ``outputs (passes, N)`` (pre-sigmoid, positive = class 1) and ``labels (N,)``
    in {0, 1}: per-example ``rsd (N,)``, ``pi (N,)``; scalars ``accuracy``, ``voting_accuracy``, ``agv``."""
    R = outputs.shape[0]
    mean = outputs.mean(axis=0)
    std = outputs.std(axis=0, ddof=1)
    with np.errstate(divide="ignore"):
        rsd = std / np.abs(mean)                                                    # (N,)
    pos = (outputs > 0).sum(axis=0)                                                 # (N,)
    pi = np.minimum(pos, R - pos)                                                   # (N,)
    acc = float(np.mean((outputs > 0) == (labels[None, :] == 1)))
    vote = pos * 2 > R                                                              # ties count as class 0
    va = float(np.mean(vote == (labels == 1)))
    return {"rsd": rsd, "pi": pi, "accuracy": acc, "voting_accuracy": va,
            "agv": va / acc if acc > 0 else float("nan")}


def variance_metrics_multiclass(logits: np.ndarray, labels: np.ndarray) -> dict:
    """Sec. 4.1's metrics for ``K`` classes (module docstring) from ``logits (passes, N, K)`` and
    ``labels (N,)``: per-example ``rsd (N,)``, ``pi (N,)``; scalars ``accuracy``, ``voting_accuracy``,
    ``agv``. For ``K = 2`` these are :func:`variance_metrics` of ``z_1 - z_0``."""
    z = np.asarray(logits, dtype=np.float64)
    R, N, K = z.shape
    pred = harness.predictions(z)                                                   # (R, N); -1: failed pass
    counts = np.stack([(pred == c).sum(axis=0) for c in range(K)], axis=-1)         # (N, K)
    mode = np.argmax(counts, axis=-1)                                               # (N,) ties: lowest class
    idx = np.arange(N)
    zc = z[:, idx, mode]                                                            # (R, N)
    other = z.copy()
    other[:, idx, mode] = -np.inf
    margin = zc - other.max(axis=-1)                                                # (R, N); NaN: failed pass
    with np.errstate(divide="ignore", invalid="ignore"):
        ok = np.isfinite(margin)
        n_ok = ok.sum(axis=0)
        m0 = np.where(ok, margin, 0.0)
        mean = m0.sum(axis=0) / n_ok
        var = np.where(ok, (margin - mean) ** 2, 0.0).sum(axis=0) / (n_ok - 1)
        rsd = np.sqrt(var) / np.abs(mean)                                           # over the finite passes
    pi = R - counts[idx, mode]
    acc = float(np.mean(pred == labels[None, :]))
    va = float(np.mean(mode == labels))
    return {"rsd": rsd, "pi": pi, "accuracy": acc, "voting_accuracy": va,
            "agv": va / acc if acc > 0 else float("nan")}


def passes_metrics(params, cfg: dict, x: np.ndarray, y: np.ndarray, *, seed: int, passes: int) -> dict:
    """The metrics of a trained model over `passes` fresh feature draws on ``(x, y)``, summarised: mean and
    median RSD (finite values), mean PI, accuracy, voting accuracy, AGV."""
    outs = np.stack([harness.predict_logits(params, x, cfg, harness.draw_features(seed, 3 * 10**6 + r, cfg))
                     for r in range(passes)])                                       # (passes, N, K)
    vm = variance_metrics_multiclass(outs, y)
    finite = np.isfinite(vm["rsd"])
    failed = int(np.sum(~np.all(np.isfinite(outs), axis=-1)))
    return {"rsd_mean": float(np.mean(vm["rsd"][finite])) if finite.any() else float("nan"),
            "rsd_median": float(np.median(vm["rsd"][finite])) if finite.any() else float("nan"),
            "pi_mean": float(np.mean(vm["pi"])), "accuracy": vm["accuracy"],
            "voting_accuracy": vm["voting_accuracy"], "agv": vm["agv"], "passes": int(passes),
            "n_examples": int(y.shape[0]), "failed_predictions": failed}

def gmm_leaves(params) -> list[tuple[int, object]]:
    """``(layer, GMMParams-like)`` for every object with ``S``, ``mu`` and ``logits`` fields in the blocks."""
    out = []

    def walk(t, layer):
        if all(hasattr(t, f) for f in ("S", "mu", "logits")):
            out.append((layer, t))
        elif isinstance(t, dict):
            for v in t.values():
                walk(v, layer)
        elif isinstance(t, (list, tuple)):
            for v in t:
                walk(v, layer)

    for i, blk in enumerate(params["blocks"]):
        walk(blk, i)
    return out


def covariance_eigenvalues(S: np.ndarray, d: int) -> np.ndarray:
    """Eigenvalues of ``S S^T`` over the last two axes (full factor ``(..., d, d)``) or ``S^2`` (diagonal
    ``(..., d)``), flattened per leading index: returns ``(n_matrices, d)``."""
    S = np.asarray(S, dtype=np.float64)
    if S.shape[-2:] == (d, d):
        Sig = S @ np.swapaxes(S, -1, -2)
        return np.linalg.eigvalsh(Sig.reshape(-1, d, d))
    return (S ** 2).reshape(-1, d)


def implied_mse_ratio(gp, method: str, M: int, d: int, rng: np.random.Generator, n: int = 64,
                      s_init: float = 1.0) -> float:
    """Median over ``n`` pairs ``q, k ~ N(0, I/d)`` of MSE(learnt spectrum) / MSE(same spectrum
    with its initial factor ``S = s_init I``)."""
    from refattn.features import gmm

    mse = gmm.gmm_rks_mse if method == "gmm-rks" else gmm.gmm_prf_mse
    S = np.asarray(gp.S, dtype=np.float64)
    lead = S.shape[:-2] if S.shape[-2:] == (d, d) else S.shape[:-1]
    C = np.asarray(gp.logits).shape[-1]
    q = rng.standard_normal((n, 1, d)) / np.sqrt(d)
    k = rng.standard_normal((n, 1, d)) / np.sqrt(d)
    ratios = []
    # heads (if any) lead the component axis: iterate over the leading index of S beyond the component axis
    S2 = S.reshape((-1,) + S.shape[len(lead) - 1:]) if len(lead) > 1 else S[None]
    mu = np.asarray(gp.mu, dtype=np.float64).reshape(S2.shape[0], C, d)
    lg = np.asarray(gp.logits, dtype=np.float64).reshape(S2.shape[0], C)
    for h in range(S2.shape[0]):
        learnt = type(gp)(logits=lg[h], mu=mu[h], S=S2[h]) if hasattr(type(gp), "_fields") else None
        eye = s_init * (np.broadcast_to(np.eye(d), (C, d, d)).copy() if S2[h].shape[-2:] == (d, d)
                        else np.ones((C, d)))
        init = type(gp)(logits=lg[h], mu=mu[h], S=eye)
        a, b = np.asarray(mse(q, k, learnt, M))[:, 0, 0], np.asarray(mse(q, k, init, M))[:, 0, 0]
        ratios.append(np.median(a / b))
    return float(np.median(ratios))


def initial_eigenvalue(att: dict, d: int, n_heads: int) -> float:
    """The eigenvalue a GMM covariance starts from, on average over the start's draw: ``s_init^2`` for
    ``init="scaled-identity"`` (every eigenvalue); for ``init="authors"``
    (:func:`refattn.random.init_gmm_authors`), RKS: entries ``U(+-b)``, ``b^2 = 6 / (d^2 + H d)``, so
    ``E[S S^T] = d b^2 / 3 I = 2 / (d + H) I``; PRF: ``Sigma = diag(exp(s))``, ``s ~ U(+-b)``, ``b = sqrt(6 /
    (d + H))``, so ``E[exp(s)] = sinh(b) / b``. A random start's eigenvalues spread about this mean (RKS: a
    product of square iid matrices, Marchenko-Pastur at ratio 1, from 0 to about 4 times the mean)."""
    if att.get("init", "scaled-identity") != "authors":
        return float(att.get("s_init", 1.0)) ** 2
    if att["features"] == "rks":
        return 2.0 / (d + n_heads)
    b = float(np.sqrt(6.0 / (d + n_heads)))
    return float(np.sinh(b) / b)


def spectrum(params, cfg: dict, rng: np.random.Generator, initial_params=None) -> dict | None:
    """Eigenvalues of every GMM covariance in `params`: per layer min/mean/max and the Theorem 3 MSE ratio
    learnt / initial (:func:`implied_mse_ratio`), and over all layers min/mean/max and a histogram-ready
    sorted sample (at most 512 values), with ``initial``, the eigenvalue every covariance started from
    (:func:`initial_eigenvalue`: ``s_init^2``, or the mean of the authors' random start); with
    `initial_params` (the run's own start) also ``initial_mean`` and ``initial_max``, the mean and largest
    eigenvalue of that start over all layers (a random start's spread about ``initial``); None when the model
    has no GMM parameters."""
    leaves = gmm_leaves(params)
    if not leaves:
        return None
    d = cfg["d_model"] // cfg["n_heads"]
    initial = initial_eigenvalue(cfg["attention"], d, cfg["n_heads"])
    s_init = (float(np.sqrt(initial)) if cfg["attention"].get("init") == "authors"      # the isotropic
              else float(cfg["attention"].get("s_init", 1.0)))                          # start of it
    per_layer, allv = [], []
    for layer, gp in leaves:
        ev = covariance_eigenvalues(gp.S, d)
        allv.append(ev.ravel())
        per_layer.append({"layer": layer + 1, "min": float(ev.min()), "max": float(ev.max()),
                          "mean": float(ev.mean()),
                          "mse_ratio_learnt_over_init": implied_mse_ratio(gp, cfg["attention"]["kind"] + "-"
                                                                          + cfg["attention"]["features"],
                                                                          cfg["attention"]["m"], d, rng,
                                                                          s_init=s_init)})
    v = np.sort(np.concatenate(allv))
    sample = v[np.linspace(0, v.size - 1, min(v.size, 512)).astype(int)]
    out = {"per_layer": per_layer, "min": float(v.min()), "mean": float(v.mean()), "max": float(v.max()),
           "n": int(v.size), "sorted_sample": sample.tolist(), "initial": initial}
    if initial_params is not None:
        v0 = np.sort(np.concatenate([covariance_eigenvalues(gp.S, d).ravel()                  # sorted as v:
                                     for _, gp in gmm_leaves(initial_params)]))               # one sum order
        out.update(initial_mean=float(v0.mean()), initial_max=float(v0.max()))
    return out
