"""Benchmark: forward + backward time of one training step of a 2-layer transformer, refattn vs torch CPU.

    python benchmarks/train_step.py [--quick] [--threads N] [--L 1024,4096] [--dtype float32|float64]

Model: 2 pre-LN blocks, width 256, 8 heads, FFN width 1024, batch 1, token input (vocabulary 256),
mean-pool classifier (2 classes), bidirectional; attention kinds softmax (exact), FAVOR+ (positive features,
m = 256 orthogonal projections) and GMM-PRF (2 components, diagonal covariance, M = 256). refattn's step is
``loss_and_grads`` (the manual backward); torch's is the same network written with torch ops (eager),
``loss.backward()``. Both use the same number of BLAS threads (threadpoolctl for NumPy,
``torch.set_num_threads``), printed.

Prints the median time per step for each (kind, L) and the ratio refattn / torch (target <= 1.5 for FAVOR+ at
L = 4096: GEMM-bound; L = 1024 has no target: elementwise-bound). ``--quick`` runs L = 256, width 64, 4 heads.
"""

from __future__ import annotations

import argparse
import math

import numpy as np
from _timing import timeit

import refattn.nn.init as nninit
from refattn.nn.transformer import loss_and_grads
from refattn.tree import tree_map

KINDS = {
    "softmax": {"kind": "softmax"},
    "favor+": {"kind": "favor", "features": "positive", "draw": "orthogonal", "m": 256},
    "gmm-prf": {"kind": "gmm", "features": "prf", "components": 2, "covariance": "diagonal", "m": 256},
}




# ---- the same network in torch (eager) ---------------------------------------------------------------------
def torch_step(torch, params, feats, ids, labels, cfg):
    """Forward + backward of the torch model with the same parameters; returns the loss (float)."""
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes (L = 256, width 64, 4 heads)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--L", default=None, help="comma-separated sequence lengths (default 1024,4096)")
    ap.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args()
    Ls = [int(s) for s in args.L.split(",")] if args.L else ([256] if args.quick else [1024, 4096])
    D, H, m = (64, 4, 32) if args.quick else (256, 8, 256)
    repeat = args.repeat or (2 if args.quick else 3)

    from threadpoolctl import threadpool_limits
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        torch.set_num_threads(args.threads)
    torch_threads = torch.get_num_threads() if torch else "-"
    torch_version = torch.__version__ if torch else "absent"
    print(f"train_step: 2 layers, width {D}, {H} heads, batch 1, dtype {args.dtype}, "
          f"BLAS threads {args.threads} (numpy), {torch_threads} (torch {torch_version})")
    print(f"{'kind':>9} {'L':>6} {'refattn s':>10} {'torch s':>9} {'ratio':>7}  loss(refattn, torch)")
    with threadpool_limits(limits=args.threads):
        for L in Ls:
            for name, att in KINDS.items():
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
                    tp = tree_map(lambda a: torch.tensor(a, requires_grad=a.dtype.kind == "f"), params)
                    tf = [None if f is None else tree_map(lambda a: torch.tensor(a), f) for f in feats]
                    tid, tlab = torch.as_tensor(ids), torch.as_tensor(labels)
                    res = {}

                    def theirs(res=res, tp=tp, tf=tf, tid=tid, tlab=tlab, cfg=cfg):
                        for t in (x for x in _leaves(tp) if x.requires_grad):
                            t.grad = None
                        res["loss"] = torch_step(torch, tp, tf, tid, tlab, cfg)

                    t_torch = timeit(theirs, repeat)
                    tl = res["loss"]
                print(f"{name:>9} {L:>6} {t_ours:>10.4f} {t_torch:>9.4f} {t_ours / t_torch:>7.2f}  "
                      f"({out['loss']:.5f}, {tl:.5f})")


def _leaves(tree):
    """Torch tensors of a parameter tree (dict / NamedTuple / list)."""
    if isinstance(tree, dict):
        return [x for v in tree.values() for x in _leaves(v)]
    if isinstance(tree, (tuple, list)):
        return [x for v in tree for x in _leaves(v)]
    return [tree] if hasattr(tree, "requires_grad") else []


if __name__ == "__main__":
    main()
