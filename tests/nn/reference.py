"""Independent dense references of the transformer (tests only): a direct NumPy forward and a torch-autograd model.

Written from the formulas (not from refattn's code): quadratic attention matrices, unstabilised feature maps,
explicit masks. Used by ``test_transformer.py`` (direct forward) and the torch cross-check.
"""

from __future__ import annotations

import math

import numpy as np


def _ln(x, p, lib):
    mean = x.mean(-1, keepdims=True) if lib is np else x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True) if lib is np else ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / lib.sqrt(var + 1e-5) * p.gamma + p.beta


def _gelu(x, lib):
    return 0.5 * x * (1 + lib.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def _features(x, att, omega, lib):
    """Unstabilised feature map of the per-head x: (B, H, L, d)."""
    if att["kind"] == "elu":
        return lib.where(x > 0, x + 1, lib.exp(lib.minimum(x, x * 0)))
    if att["kind"] == "relu":
        return lib.maximum(x, x * 0) + 1e-3
    d = x.shape[-1]
    xs = x * d ** -0.25
    u = xs @ omega.T                                                  # (B, H, L, m)
    m = omega.shape[0]
    sq = (xs ** 2).sum(-1)[..., None] / 2
    if att["features"] == "positive":
        return lib.exp(u - sq) / math.sqrt(m)
    if att["features"] == "hyperbolic":
        cat = np.concatenate if lib is np else lib.cat
        return cat([lib.exp(u - sq), lib.exp(-u - sq)], -1) / math.sqrt(2 * m)
    cat = np.concatenate if lib is np else lib.cat
    return cat([lib.cos(u), lib.sin(u)], -1) * lib.exp(sq) / math.sqrt(m)   # trig, softmax kernel


def _attention(q, k, v, att, feats, causal, lib):
    L = q.shape[-2]
    if att["kind"] == "softmax":
        s = q @ k.transpose(-1, -2) if lib is not np else q @ np.swapaxes(k, -1, -2)
        s = s / math.sqrt(q.shape[-1])
        if causal:
            mask = np.triu(np.ones((L, L), dtype=bool), 1)
            s = lib.where(lib.as_tensor(mask) if lib is not np else mask, -math.inf, s)
        s = s - (s.max(-1, keepdims=True) if lib is np else s.max(-1, keepdim=True).values)
        a = lib.exp(s)
    else:
        omega = None if feats is None else feats.get("omega")
        pq, pk = _features(q, att, omega, lib), _features(k, att, omega, lib)
        a = pq @ (np.swapaxes(pk, -1, -2) if lib is np else pk.transpose(-1, -2))   # (B, H, L, L)
        if causal:
            tril = np.tril(np.ones((L, L)))
            a = a * (tril if lib is np else lib.as_tensor(tril))
    z = a.sum(-1, keepdims=True) if lib is np else a.sum(-1, keepdim=True)
    return (a @ v) / z


def _split(x, H, lib):
    B, L, D = x.shape
    t = x.reshape(B, L, H, D // H)
    return np.transpose(t, (0, 2, 1, 3)) if lib is np else t.permute(0, 2, 1, 3)


def _merge(x, lib):
    B, H, L, d = x.shape
    t = np.transpose(x, (0, 2, 1, 3)) if lib is np else x.permute(0, 2, 1, 3)
    return t.reshape(B, L, H * d)


def forward(params, ids, features, cfg, lib=np):
    """Logits of the model for token input, written directly (NumPy or torch tensors in `params`)."""
    D, H = cfg["d_model"], cfg["n_heads"]
    att = cfg["attention"]
    L = ids.shape[-1]
    x = params["embed"][ids]                                           # (B, L, D)
    if cfg["position"] == "learned":
        x = x + params["pos"][:L]
    elif cfg["position"] == "sinusoid":
        pos = np.arange(L)[:, None]
        j = np.arange(D)[None, :]
        ang = pos / 10000 ** ((2 * (j // 2)) / D)
        P = np.where(j % 2 == 0, np.sin(ang), np.cos(ang))
        x = x + (P if lib is np else lib.as_tensor(P))
    for i, blk in enumerate(params["blocks"]):
        a = _ln(x, blk["ln1"], lib)
        ap = blk["attn"]
        q, k, v = (_split(a @ ap[n].W + ap[n].b, H, lib) for n in "qkv")
        o = _attention(q, k, v, att, None if features is None else features[i], cfg["causal"], lib)
        x = x + _merge(o, lib) @ ap["o"].W + ap["o"].b
        f = _ln(x, blk["ln2"], lib)
        f = _gelu(f @ blk["ff1"].W + blk["ff1"].b, lib) @ blk["ff2"].W + blk["ff2"].b
        x = x + f
    x = _ln(x, params["ln_f"], lib)
    if cfg["task"] == "classify":
        x = x.mean(-2) if cfg["readout"] == "mean" else x[..., 0, :]
    return x @ params["head"].W + params["head"].b
