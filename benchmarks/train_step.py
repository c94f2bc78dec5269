"""Benchmark: one training step of a transformer, refattn vs torch eager on the same model, in one process.

    python benchmarks/train_step.py [--model image|text] [--threads N] [--repeat R] [--profile] [--quick]

``--model image`` (default): the image experiments' ``full`` model (:data:`IMAGE_CONFIG`, the configuration
``paper_checks.experiments.images.model_config("no-pos", SIZES["full"])`` builds: 17 token ids, L = 196,
width 64, 4 heads, 2 pre-LN layers, FFN width 128, FAVOR+ with m = 64 orthogonal projections redrawn every
1000 steps, no positions, mean readout, 10 classes, float32), batch 32. One step is what the experiments'
training loop does: draw the step's projections (from the step's seed: the same draw within a redraw period),
forward, backward, AdamW update (weight decay 0). refattn's step is
``features_for_step`` + ``loss_and_grads`` + ``adamw_update``; torch's is the same network written below from
refattn's equations (:func:`torch_loss`, not calling refattn) with ``loss.backward()`` and
``torch.optim.AdamW``, its projections drawn by torch with the same law (:func:`torch_draw_omega`). Both
get the same number of threads (threadpoolctl for NumPy's BLAS, ``torch.set_num_threads``), printed. The two
steps are timed interleaved (refattn, torch, refattn, ...) so that a change in the machine's load hits both,
by process CPU time (``--clock cpu``, the default: on a shared machine, time the process spends preempted is
not counted; with one thread it is the work done) or wall time (``--clock wall``); the script prints each
side's median and minimum and the ratio refattn / torch of the medians (target <= 0.7) and of the minima.
``--profile`` adds where each step spends its time: refattn by cProfile (layers, attention, optimiser,
checks), torch by timing its phases and by ``torch.profiler``; and the fixed per-step cost of each (the same
step at batch 1, L = 4: Python and dispatch overhead).

``--model text``: a 2-layer text classifier (width 256, 8 heads, FFN 1024, batch 1, vocabulary 256,
sinusoid positions) with softmax, FAVOR+ (m = 256) and GMM-PRF attention at L = 1024 and 4096, forward +
backward only (``--L``, ``--dtype``; ``--quick``: L = 256, width 64).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import time

import numpy as np
from _timing import timeit

import refattn.nn.init as nninit
from refattn.nn.optim import adam_init, adamw_update
from refattn.nn.transformer import loss_and_grads
from refattn.tree import tree_leaves, tree_map

#: The image experiments' ``full`` model (``paper_checks.experiments.images``, method ``no-pos``; a test pins
#: the two equal).
IMAGE_CONFIG = {"task": "classify", "input": "tokens", "vocab_size": 17, "d_model": 64, "n_heads": 4,
                "n_layers": 2, "d_ff": 128, "max_len": 196, "position": "none", "readout": "mean",
                "n_classes": 10, "qk_init": "torch",
                "attention": {"kind": "favor", "features": "positive", "draw": "orthogonal", "m": 64,
                              "redraw_every": 1000}, "dtype": "float32"}
IMAGE_BATCH = 32
IMAGE_LR = 1e-3

TEXT_KINDS = {
    "softmax": {"kind": "softmax"},
    "favor+": {"kind": "favor", "features": "positive", "draw": "orthogonal", "m": 256},
    "gmm-prf": {"kind": "gmm", "features": "prf", "components": 2, "covariance": "diagonal", "m": 256},
}


# ---- the image model in torch (eager), from refattn's equations -------------------------------------------
def torch_params(torch, params):
    """refattn's parameter tree as torch leaf tensors (float leaves require a gradient), same structure."""
    return tree_map(lambda a: torch.tensor(np.asarray(a), requires_grad=np.asarray(a).dtype.kind == "f"),
                    params)


def torch_leaves(tree):
    """The tensors of a parameter tree that require a gradient, in :func:`refattn.tree.tree_leaves` order."""
    return [t for t in tree_leaves(tree) if getattr(t, "requires_grad", False)]


def torch_favor(torch, q, k, v, omega):
    r"""FAVOR+ (positive features), bidirectional: ``q, k, v: (B, H, L, d)``, ``omega: (m, d)``.

    ``q' = d^{-1/4} q``, ``k' = d^{-1/4} k``; ``phi(x) = exp(x omega^T - |x|^2/2) / sqrt(m)``;
    ``y_i = phi(q'_i) sum_j phi(k'_j)^T v_j / phi(q'_i) sum_j phi(k'_j)^T``. Stabilised as the Performer's
    reference code does: each query row shifted by its own maximum (a per-query factor: cancels in the ratio),
    the keys by one maximum per (batch, head) (a per-head factor: cancels too); both shifts are constants of
    the backward (``detach``), so autograd does not differentiate through them.
    """
    d, m = q.shape[-1], omega.shape[0]
    s = d ** -0.25
    qs, ks = q * s, k * s
    uq = qs @ omega.T - 0.5 * (qs * qs).sum(-1, keepdim=True)                          # (B, H, L, m)
    uk = ks @ omega.T - 0.5 * (ks * ks).sum(-1, keepdim=True)                          # (B, H, L, m)
    pq = torch.exp(uq - uq.amax(-1, keepdim=True).detach()) / math.sqrt(m)             # per-row shift
    pk = torch.exp(uk - uk.amax(dim=(-2, -1), keepdim=True).detach()) / math.sqrt(m)   # per-head shift
    kv = pk.transpose(-1, -2) @ v                                                       # (B, H, m, d_v)
    z = pq @ pk.sum(-2).unsqueeze(-1)                                                   # (B, H, L, 1)
    return (pq @ kv) / z


def torch_loss(torch, tp, feats, ids, labels, cfg):
    """Mean softmax cross-entropy of the image model (:data:`IMAGE_CONFIG`'s architecture) in torch.

    Token embedding (no positions), ``n_layers`` pre-LN blocks ``h = x + MHA(LN1(x))``,
    ``y = h + W2 gelu_tanh(W1 LN2(h) + b1) + b2``, final layer norm, mean over positions, dense head; layer
    norm eps 1e-5, dense ``x W + b`` with ``W: (d_in, d_out)``, heads split as
    ``(B, L, H, d) -> (B, H, L, d)``.
    """
    F = torch.nn.functional
    D, H = cfg["d_model"], cfg["n_heads"]
    B, L = ids.shape

    def ln(x, p):
        return F.layer_norm(x, (D,), p.gamma, p.beta, eps=1e-5)

    def dense(x, p):
        return x @ p.W + p.b

    x = tp["embed"][ids]                                                                # (B, L, D)
    for blk, f in zip(tp["blocks"], feats, strict=True):
        a = ln(x, blk["ln1"])
        ap = blk["attn"]
        q, k, v = (dense(a, ap[n]).reshape(B, L, H, D // H).transpose(1, 2) for n in "qkv")
        o = torch_favor(torch, q, k, v, f["omega"]).transpose(1, 2).reshape(B, L, D)
        x = x + dense(o, ap["o"])
        x = x + dense(F.gelu(dense(ln(x, blk["ln2"]), blk["ff1"]), approximate="tanh"), blk["ff2"])
    logits = dense(ln(x, tp["ln_f"]).mean(-2), tp["head"])                             # (B, n_classes)
    return F.cross_entropy(logits, labels)


def torch_draw_omega(torch, gen, m, d):
    """``(m, d)`` Performer orthogonal projections drawn by torch with refattn's law (``draw_orthogonal``):
    Haar d x d blocks (QR with the sign correction), rows rescaled by independent chi(d) norms."""
    nb = -(-m // d)
    Q, R = torch.linalg.qr(torch.randn(nb, d, d, generator=gen))
    Q = Q * torch.sign(torch.diagonal(R, dim1=-2, dim2=-1)).unsqueeze(-2)              # Haar on O(d)
    rows = Q.transpose(-1, -2).reshape(nb * d, d)[:m]                                   # (m, d) unit rows
    return rows * torch.linalg.vector_norm(torch.randn(m, d, generator=gen), dim=-1, keepdim=True)


class TorchImageStep:
    """torch's training step of the image model: draw the step's projections, forward, backward, AdamW."""

    def __init__(self, torch, params, cfg, *, lr=IMAGE_LR, seed=0):
        self.torch, self.cfg = torch, cfg
        self.tp = torch_params(torch, params)
        self.opt = torch.optim.AdamW(torch_leaves(self.tp), lr=lr, weight_decay=0.0)
        self.gen = torch.Generator().manual_seed(seed)
        att = cfg["attention"]
        self.m, self.d = att["m"], cfg["d_model"] // cfg["n_heads"]

    def draw(self):
        dtype = getattr(self.torch, self.cfg["dtype"])
        return [{"omega": torch_draw_omega(self.torch, self.gen, self.m, self.d).to(dtype)}
                for _ in range(self.cfg["n_layers"])]

    def __call__(self, ids, labels):
        self.opt.zero_grad(set_to_none=True)
        loss = torch_loss(self.torch, self.tp, self.draw(), ids, labels, self.cfg)
        loss.backward()
        self.opt.step()
        return float(loss.detach())


class RefattnImageStep:
    """refattn's training step of the image model, as the experiments' training loop runs it."""

    def __init__(self, params, cfg, *, lr=IMAGE_LR, seed=0):
        self.params, self.cfg, self.lr, self.seed = params, cfg, lr, seed
        self.state = adam_init(params)
        self.step = 0

    def __call__(self, ids, labels):
        feats = nninit.features_for_step(self.seed, self.step, self.cfg)
        loss, grads = loss_and_grads(self.params, ids, labels, feats, config=self.cfg)
        self.params, self.state = adamw_update(self.params, grads, self.state, lr=self.lr, weight_decay=0.0)
        self.step += 1
        return float(loss)


def image_inputs(rng, batch, L):
    """Token ids ``(batch, L)`` in 0..16 (zero, the background id, with probability 1/2) and labels."""
    ids = rng.integers(1, 17, size=(batch, L)) * (rng.random((batch, L)) < 0.5)
    return ids, rng.integers(0, 10, size=batch)


def interleaved(fns, repeat, clock=time.process_time):
    """Per function, its times by `clock` over `repeat` rounds, the functions called in turn within each round
    (the order alternating between rounds), after one warm-up call each."""
    for fn in fns:
        fn()
    times = [[] for _ in fns]
    for r in range(repeat):
        order = range(len(fns)) if r % 2 == 0 else reversed(range(len(fns)))
        for i in order:
            t0 = clock()
            fns[i]()
            times[i].append(clock() - t0)
    return times


def _load():
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def run_image(torch, args):
    cfg = IMAGE_CONFIG
    L = cfg["max_len"]
    params = nninit.init_transformer(np.random.default_rng([0, 0]), cfg)
    ids, labels = image_inputs(np.random.default_rng(1), IMAGE_BATCH, L)
    ours = RefattnImageStep(params, cfg)
    print(f"train_step --model image: L = {L}, width {cfg['d_model']}, {cfg['n_heads']} heads, "
          f"{cfg['n_layers']} layers, FAVOR+ m = {cfg['attention']['m']}, batch {IMAGE_BATCH}, float32; "
          f"threads {args.threads} (numpy BLAS), {torch.get_num_threads()} (torch {torch.__version__}); "
          f"load before: {_load()}")
    theirs = TorchImageStep(torch, params, cfg)
    tid, tlab = torch.as_tensor(ids), torch.as_tensor(labels)
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    t_ours, t_theirs = interleaved([lambda: ours(ids, labels), lambda: theirs(tid, tlab)], args.repeat, clock)
    mo, mt = float(np.median(t_ours)), float(np.median(t_theirs))
    kind = "process CPU" if args.clock == "cpu" else "wall"
    print(f"{'':>8} {'median ms':>10} {'min ms':>8}   ({kind} time)")
    print(f"{'refattn':>8} {1e3 * mo:>10.1f} {1e3 * min(t_ours):>8.1f}")
    print(f"{'torch':>8} {1e3 * mt:>10.1f} {1e3 * min(t_theirs):>8.1f}")
    pair = np.median(np.asarray(t_ours) / np.asarray(t_theirs))
    print(f"ratio refattn / torch: {mo / mt:.2f} (medians), {min(t_ours) / min(t_theirs):.2f} (minima), "
          f"{pair:.2f} (median of the {args.repeat} paired rounds); target <= 0.7; load after: {_load()}")
    if args.profile:
        profile_image(torch, params, cfg, ids, labels, args)


# ---- profiles ----------------------------------------------------------------------------------------------
#: refattn's step by function groups: (label, [(module path ending, function name)]), each group's time the
#: sum of its members' cumulative times (no member calls another, and the groups do not nest).
REFATTN_GROUPS = [
    ("feature draw (NumPy edge)", [("nn/init.py", "features_for_step")]),
    ("dense layers fwd", [("layers/dense.py", "dense_fwd_core")]),
    ("dense layers bwd", [("layers/dense.py", "dense_bwd_core")]),
    ("FAVOR+ attention fwd", [("attention/favor.py", "favor_attention_fwd_core")]),
    ("FAVOR+ attention bwd", [("attention/favor.py", "favor_attention_bwd_core")]),
    ("layer norms fwd+bwd", [("layers/layernorm.py", "layernorm_fwd_core"),
                             ("layers/layernorm.py", "layernorm_bwd_core")]),
    ("GELU fwd+bwd", [("layers/activations.py", "gelu_fwd_core"),
                      ("layers/activations.py", "gelu_bwd_core")]),
    ("heads split/merge", [("nn/mha.py", "split_heads"), ("nn/mha.py", "merge_heads")]),
    ("embedding, readout, loss", [("layers/embeddings.py", "token_embedding_fwd_core"),
                                  ("layers/embeddings.py", "token_embedding_bwd_core"),
                                  ("nn/transformer.py", "_readout_fwd"),
                                  ("nn/transformer.py", "_readout_bwd"),
                                  ("layers/losses.py", "softmax_cross_entropy_fwd"),
                                  ("layers/losses.py", "softmax_cross_entropy_bwd_core")]),
    ("tree/config checks", [("nn/_boundary.py", "check_trees"), ("nn/config.py", "check_config"),
                            ("nn/mha.py", "check_mha")]),
    ("AdamW update", [("nn/optim.py", "adamw_update")]),
]


def _group_times(stats, n):
    """ms per step of each group of :data:`REFATTN_GROUPS` from a ``pstats.Stats`` over `n` steps."""
    out = {}
    for label, members in REFATTN_GROUPS:
        total = sum(ct for (path, _, name), (_, _, _, ct, _) in stats.stats.items()
                    if any(path.replace(os.sep, "/").endswith(f) and name == nm for f, nm in members))
        out[label] = 1e3 * total / n
    return out


def profile_image(torch, params, cfg, ids, labels, args, n=10):
    print(f"\nprofile ({n} steps each; load {_load()})")
    ours = RefattnImageStep(params, cfg)
    for _ in range(2):
        ours(ids, labels)
    t0 = time.perf_counter()
    for _ in range(n):
        ours(ids, labels)
    plain = 1e3 * (time.perf_counter() - t0) / n
    prof = cProfile.Profile()
    prof.enable()
    t0 = time.perf_counter()
    for _ in range(n):
        ours(ids, labels)
    profiled = 1e3 * (time.perf_counter() - t0) / n
    prof.disable()
    stats = pstats.Stats(prof, stream=io.StringIO())
    groups = _group_times(stats, n)
    print(f"refattn: {plain:.1f} ms/step unprofiled, {profiled:.1f} ms/step under cProfile; by group "
          f"(cProfile ms/step, share):")
    for label, ms in groups.items():
        print(f"  {label:<28} {ms:>7.1f}  {ms / profiled:>5.1%}")
    rest = profiled - sum(groups.values())
    print(f"  {'other (glue, residuals)':<28} {rest:>7.1f}  {rest / profiled:>5.1%}")
    print(f"  {'refattn functions called':<28} {stats.total_calls / n:>7.0f} per step")

    theirs = TorchImageStep(torch, params, cfg)
    tid, tlab = torch.as_tensor(ids), torch.as_tensor(labels)
    phases = {"feature draw": [], "forward": [], "backward": [], "AdamW step": []}
    for i in range(n + 2):
        t = [time.perf_counter()]
        theirs.opt.zero_grad(set_to_none=True)
        feats = theirs.draw()
        t.append(time.perf_counter())
        loss = torch_loss(torch, theirs.tp, feats, tid, tlab, cfg)
        t.append(time.perf_counter())
        loss.backward()
        t.append(time.perf_counter())
        theirs.opt.step()
        t.append(time.perf_counter())
        if i >= 2:
            for (_, v), a, b in zip(phases.items(), t, t[1:], strict=False):
                v.append(1e3 * (b - a))
    tot = sum(float(np.median(v)) for v in phases.values())
    print(f"torch: phases (median ms/step, share of their sum {tot:.1f} ms):")
    for label, v in phases.items():
        print(f"  {label:<28} {np.median(v):>7.1f}  {np.median(v) / tot:>5.1%}")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as tprof:
        for _ in range(n):
            theirs(tid, tlab)
    print("torch.profiler, top operators by self CPU time (all steps):")
    print(tprof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12, max_name_column_width=34))

    small_ids, small_lab = image_inputs(np.random.default_rng(2), 1, 4)
    small_ours = RefattnImageStep(params, cfg)
    small_theirs = TorchImageStep(torch, params, cfg)
    sid, slab = torch.as_tensor(small_ids), torch.as_tensor(small_lab)
    so, st = interleaved([lambda: small_ours(small_ids, small_lab), lambda: small_theirs(sid, slab)], 20)
    print(f"fixed per-step cost (same model, batch 1, L = 4: Python and dispatch), median ms: refattn "
          f"{1e3 * np.median(so):.2f}, torch {1e3 * np.median(st):.2f}")


# ---- the text classifier (--model text) --------------------------------------------------------------------
def torch_text_step(torch, params, feats, ids, labels, cfg):
    """Forward + backward of the torch text model with the same parameters; returns the loss (float)."""
    F = torch.nn.functional
    D, H = cfg["d_model"], cfg["n_heads"]
    att = cfg["attention"]
    L = ids.shape[-1]

    def ln(x, p):
        return F.layer_norm(x, (D,), p.gamma, p.beta, eps=1e-5)

    def attn(q, k, v, f, ap):
        d = q.shape[-1]
        if att["kind"] == "softmax":
            return F.scaled_dot_product_attention(q, k, v)
        s = d ** -0.25
        if att["kind"] == "favor":
            omega, off, scale_c = f["omega"], 0.5, None
        else:                                                 # GMM-PRF: omega = mu_c + S_c n, Eq. 9 offset
            g = ap["gmm"]
            omega = (g.mu[:, None, :] + g.S[:, None, :] * f["noise"]).reshape(-1, d)
            pi = torch.softmax(g.logits, 0)
            C, Mc = f["noise"].shape[0], f["noise"].shape[1]
            scale_c = torch.sqrt(C * pi).repeat_interleave(Mc)
            off = 1.0
        m = omega.shape[0]
        uq, uk = (q * s) @ omega.T, (k * s) @ omega.T               # (B, H, L, m)
        sq = off * ((q * s) ** 2).sum(-1, keepdim=True)
        sk = off * ((k * s) ** 2).sum(-1, keepdim=True)
        eq = uq - sq
        ek = uk - sk
        pq = torch.exp(eq - eq.amax(-1, keepdim=True).detach()) / math.sqrt(m)       # per-row (cancels)
        pk = torch.exp(ek - ek.amax(dim=(-1, -2), keepdim=True).detach()) / math.sqrt(m)   # per-head max
        if scale_c is not None:
            pq, pk = pq * scale_c, pk * scale_c
        kv = pk.transpose(-1, -2) @ v                               # (B, H, m, d)
        z = pq @ pk.sum(-2, keepdim=True).transpose(-1, -2)         # (B, H, L, 1)
        return (pq @ kv) / z

    x = params["embed"][ids]
    pos = torch.arange(L, dtype=x.dtype)[:, None]
    j = torch.arange(D)[None, :]
    ang = pos / 10000 ** ((2 * (j // 2)).to(x.dtype) / D)
    x = x + torch.where(j % 2 == 0, torch.sin(ang), torch.cos(ang))
    for i, blk in enumerate(params["blocks"]):
        a = ln(x, blk["ln1"])
        ap = blk["attn"]
        q, k, v = ((a @ ap[n].W + ap[n].b).reshape(1, L, H, D // H).transpose(1, 2) for n in "qkv")
        o = attn(q, k, v, feats[i], ap.get("attn", {})).transpose(1, 2).reshape(1, L, D)
        x = x + o @ ap["o"].W + ap["o"].b
        f = F.gelu(ln(x, blk["ln2"]) @ blk["ff1"].W + blk["ff1"].b, approximate="tanh")
        x = x + f @ blk["ff2"].W + blk["ff2"].b
    x = ln(x, params["ln_f"]).mean(-2)
    logits = x @ params["head"].W + params["head"].b
    loss = F.cross_entropy(logits, labels)
    loss.backward()
    return float(loss.detach())


def run_text(torch, args):
    Ls = [int(s) for s in args.L.split(",")] if args.L else ([256] if args.quick else [1024, 4096])
    D, H, m = (64, 4, 32) if args.quick else (256, 8, 256)
    repeat = args.repeat or (2 if args.quick else 3)
    torch_threads = torch.get_num_threads() if torch else "-"
    torch_version = torch.__version__ if torch else "absent"
    print(f"train_step: 2 layers, width {D}, {H} heads, batch 1, dtype {args.dtype}, "
          f"BLAS threads {args.threads} (numpy), {torch_threads} (torch {torch_version})")
    print(f"{'kind':>9} {'L':>6} {'refattn s':>10} {'torch s':>9} {'ratio':>7}  loss(refattn, torch)")
    for L in Ls:
        for name, att in TEXT_KINDS.items():
            att = dict(att, **({"m": m} if "m" in att else {}))
            cfg = dict(task="classify", vocab_size=256, n_classes=2, d_model=D, n_heads=H, n_layers=2,
                       max_len=L, attention=att, position="sinusoid", dtype=args.dtype)
            rng = np.random.default_rng(0)
            params = nninit.init_transformer(rng, cfg)
            feats = nninit.draw_attention_features(rng, cfg)
            ids = rng.integers(0, 256, size=(1, L))
            labels = np.array([1])
            out = {}

            # Loop variables bound as defaults: each closure is timed in its own iteration (B023).
            def ours(out=out, params=params, ids=ids, labels=labels, feats=feats, cfg=cfg):
                out["loss"] = float(loss_and_grads(params, ids, labels, feats, config=cfg)[0])

            t_ours = timeit(ours, repeat)
            t_torch, tl = float("nan"), float("nan")
            if torch is not None:
                tp = torch_params(torch, params)
                tf = [None if f is None else tree_map(lambda a: torch.tensor(a), f) for f in feats]
                tid, tlab = torch.as_tensor(ids), torch.as_tensor(labels)
                res = {}

                def theirs(res=res, tp=tp, tf=tf, tid=tid, tlab=tlab, cfg=cfg):
                    for t in torch_leaves(tp):
                        t.grad = None
                    res["loss"] = torch_text_step(torch, tp, tf, tid, tlab, cfg)

                t_torch = timeit(theirs, repeat)
                tl = res["loss"]
            print(f"{name:>9} {L:>6} {t_ours:>10.4f} {t_torch:>9.4f} {t_ours / t_torch:>7.2f}  "
                  f"({out['loss']:.5f}, {tl:.5f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="image", choices=("image", "text"))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeat", type=int, default=None, help="timed rounds (default: image 30, text 3)")
    ap.add_argument("--profile", action="store_true", help="image: where each step spends its time")
    ap.add_argument("--clock", default="cpu", choices=("cpu", "wall"),
                    help="image: time the interleaved steps by process CPU time (default) or wall time")
    ap.add_argument("--quick", action="store_true", help="text: small sizes (L = 256, width 64, 4 heads)")
    ap.add_argument("--L", default=None, help="text: comma-separated sequence lengths (default 1024,4096)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"), help="text only")
    args = ap.parse_args()

    from threadpoolctl import threadpool_limits
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(args.threads)
    with threadpool_limits(limits=args.threads):
        if args.model == "text":
            run_text(torch, args)
        elif torch is None:
            raise SystemExit("train_step --model image: torch is not installed "
                             "(pip install -e '.[crosscheck]')")
        else:
            args.repeat = args.repeat or 30
            run_image(torch, args)


if __name__ == "__main__":
    main()
