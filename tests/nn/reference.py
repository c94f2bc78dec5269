"""Independent dense references of the transformer (tests only): a direct NumPy forward and a torch-autograd
model.

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


def _tr(x, lib):
    return np.swapaxes(x, -1, -2) if lib is np else x.transpose(-1, -2)


def _t(a, lib, like=None):
    return a if lib is np else lib.as_tensor(a)


def _normalised(a, v, causal, lib):
    L = a.shape[-1]
    if causal:
        a = a * _t(np.tril(np.ones((L, L))), lib)
    z = a.sum(-1, keepdims=True) if lib is np else a.sum(-1, keepdim=True)
    return (a @ v) / z


def _softmax_rows(s, causal, lib):
    L = s.shape[-1]
    if causal:
        s = lib.where(_t(np.triu(np.ones((L, L), dtype=bool), 1), lib), -math.inf, s)
    s = s - (s.max(-1, keepdims=True) if lib is np else s.max(-1, keepdim=True).values)
    return lib.exp(s)


def _rpe_attention(q, k, v, att, attn_params, feats, causal, lib, ct=False):
    """S1 / S2 / Toeplitz written from their definitions (Horn et al. Sec. 2.3; Luo et al. 2021); `ct`:
    token 0 is a class token (S1: zero positional parts; S2: Horn et al.'s code's placement,
    :func:`_s2_classes`)."""
    L, d = q.shape[-2], q.shape[-1]
    stack = np.stack if lib is np else lib.stack
    cat = np.concatenate if lib is np else lib.cat
    if att["kind"] == "s1":
        p = attn_params["s1"]
        n = L - 1 if ct else L                                                         # positioned tokens
        z = _t(np.arange(n, dtype=float), lib)[:, None]                                # (n, 1)
        th = z * p.freqs[0]                                                            # (n, S)
        sn, cs = lib.sin(th), lib.cos(th)
        Qp = stack([p.alpha[0] * sn - p.beta[0] * cs, p.beta[0] * sn + p.alpha[0] * cs], -1).reshape(n, -1)
        Kp = stack([sn, cs], -1).reshape(n, -1)                                      # (n, P) [sin, cos] per s
        if ct:                                                                       # no positional part
            Qp, Kp = (cat([a[:1] * 0.0, a], 0) for a in (Qp, Kp))                    # (L, P)
        B, H = q.shape[0], q.shape[1]
        qa = cat([q, (Qp * 1.0).expand(B, H, L, Qp.shape[-1]) if lib is not np
                  else np.broadcast_to(Qp, (B, H, L, Qp.shape[-1]))], -1)
        ka = cat([k, (Kp * 1.0).expand(B, H, L, Kp.shape[-1]) if lib is not np
                  else np.broadcast_to(Kp, (B, H, L, Kp.shape[-1]))], -1)
        if att["features"] is None:
            a = _softmax_rows(qa @ _tr(ka, lib) / math.sqrt(qa.shape[-1]), causal, lib)
        else:
            fa = dict(att, kind="favor")
            a = _features(qa, fa, feats["omega"], lib) @ _tr(_features(ka, fa, feats["omega"], lib), lib)
        return _normalised(a, v, causal, lib)
    if att["kind"] == "s2":
        # Horn Eq. (4) split over heads: the first C heads use term (a) (ordinary content attention on q, k),
        # the other H - C use term (b) (keys replaced by w[clip(dist(i, j))]); C = content_heads,
        # default H // 2
        H = q.shape[1]
        C = H // 2 if att.get("content_heads") is None else att["content_heads"]
        cls = _s2_classes(L, att["clip"], att.get("grid"), ct)                         # (L, L)
        w = attn_params["w"]                                                           # (H - C, R, d)
        qp, vp = q[:, C:], v[:, C:]
        if att["features"] is None:
            s = (qp @ _tr(w, lib)) / math.sqrt(d)                                       # (B, H - C, L, R)
            logits = s[..., np.arange(L)[:, None], cls] if lib is np else s[..., lib.arange(L)[:, None],
                                                                               lib.as_tensor(cls)]
            a = _softmax_rows(logits, False, lib)
        else:
            fa = dict(att, kind="favor")
            sc = _features(qp, fa, feats["omega"], lib) @ _tr(_features(w, fa, feats["omega"], lib), lib)
            a = sc[..., np.arange(L)[:, None], cls] if lib is np else sc[..., lib.arange(L)[:, None],
                                                                          lib.as_tensor(cls)]
        out_pos = _normalised(a, vp, False, lib)                                        # (B, H - C, L, d)
        if C == 0:
            return out_pos
        qc, kk, vc = q[:, :C], k[:, :C], v[:, :C]
        if att["features"] is None:
            a = _softmax_rows(qc @ _tr(kk, lib) / math.sqrt(d), False, lib)
        else:
            fa = dict(att, kind="favor")
            a = _features(qc, fa, feats["omega"], lib) @ _tr(_features(kk, fa, feats["omega"], lib), lib)
        return cat([_normalised(a, vc, False, lib), out_pos], 1)                        # (B, H, L, d)
    # toeplitz: A_ij = exp(b(i - j)) (phi(q_i) . phi(k_j))
    b = attn_params["log_coeffs"]                                                      # (H, 2 L_max - 1)
    L_max = (b.shape[-1] + 1) // 2
    off = np.arange(L)[:, None] - np.arange(L)[None, :] + L_max - 1                    # (L, L)
    C = lib.exp(b[:, off] if lib is np else b[:, lib.as_tensor(off)])                  # (H, L, L)
    fa = {"kind": "elu"} if att["feature_map"] == "elu" else dict(att, kind="favor", features="positive")
    omega = None if feats is None else feats.get("omega")
    a = C * (_features(q, fa, omega, lib) @ _tr(_features(k, fa, omega, lib), lib))
    return _normalised(a, v, causal, lib)


def _s2_classes(L, kc, grid, ct):
    """S2's (L, L) class index: signed ``clip(j - i)`` + k, or the clipped Manhattan distance on `grid`. With
    a class token (`ct`, token 0) as Horn et al.'s code places it (last there): its query at the raster
    position after the last token, its key in the far class R - 1 for every query."""
    n = L - 1 if ct else L
    r = np.arange(n + 1)                                                               # + the next position
    row, col = (r // grid[1], r % grid[1]) if grid is not None else (r, None)
    order = np.r_[n, 0:n] if ct else np.arange(n)                                      # sequence -> raster
    i, j = order[:, None], order[None, :]
    if grid is None:
        cls = np.clip(j - i, -kc, kc) + kc                                             # (L, L) signed class
    else:
        cls = np.minimum(np.abs(row[i] - row[j]) + np.abs(col[i] - col[j]), kc)        # (L, L) Manhattan
    if ct:
        cls[:, 0] = 2 * kc if grid is None else kc                                     # the class key: far
    return cls


def _spectral_omega(att, attn_params, feats, lib):
    """Frequencies (M, d) and per-frequency scales (M,) of the learnable spectra (Chowdhury et al. Eqs. 5,
    7)."""
    if att["kind"] == "gmm":
        g, n = attn_params["gmm"], feats["noise"]                                       # n: (C, Mc, d)
        C, Mc, d = n.shape
        if g.S.ndim == 2:                                                              # diagonal: Sigma = S^2
            omega = g.mu[:, None, :] + n * g.S[:, None, :]
        else:                                                                            # omega = mu + S n
            omega = g.mu[:, None, :] + n @ (np.swapaxes(g.S, -1, -2) if lib is np else g.S.transpose(-1, -2))
        e = lib.exp(g.logits - g.logits.max())
        pi = e / e.sum()
        scale = (lib.sqrt(C * pi)[:, None] * _t(np.ones((1, Mc)), lib)).reshape(C * Mc)
        return omega.reshape(C * Mc, d), scale
    if att["kind"] == "fastfood":
        # V_b = (1 / sqrt(D)) diag(S_b) H diag(G_b) Pi_b H diag(B_b) (Eq. 6, sigma = 1), H the unnormalised
        # Hadamard matrix, (Pi x)_i = x[perm_i]; d padded with zeros to D: omega_b = V_b[:, :d]
        from scipy.linalg import hadamard

        ff = attn_params["fastfood"]
        nb, D = ff.S.shape
        Hm = _t(hadamard(D).astype(float), lib)
        rows = []
        for b in range(nb):
            perm = np.asarray(ff.perm[b]) if lib is np else ff.perm[b].numpy()
            P = np.zeros((D, D))
            P[np.arange(D), perm] = 1.0
            inner = ff.G[b][:, None] * (_t(P, lib) @ (Hm * ff.B[b][None, :]))
            V = (ff.S[b][:, None] * Hm) @ inner / math.sqrt(D)
            rows.append(V)
        cat = np.concatenate if lib is np else lib.cat
        return cat(rows, 0), None                                                        # (M, D)
    # generative: 4 x (dense, batch norm with the batch statistics of the M rows, LeakyReLU 0.01), dense, tanh
    gp, h = attn_params["generator"], feats["noise"]
    for dp, bp in zip(gp.hidden, gp.norms, strict=True):
        z = h @ dp.W + dp.b
        mean = z.mean(0)
        var = ((z - mean) ** 2).mean(0)
        z = (z - mean) / lib.sqrt(var + 1e-5) * bp.gamma + bp.beta
        h = lib.where(z > 0, z, 0.01 * z)
    omega = lib.tanh(h @ gp.out.W + gp.out.b)
    return omega, None


def _spectral_features(x, att, omega, scale, lib):
    """PRF (Eq. 9: offset |x|^2) or RKS ([cos, sin]) features of d^{-1/4} x with per-frequency scales."""
    M = omega.shape[0]
    xs = x * x.shape[-1] ** -0.25
    u = xs @ omega[:, :x.shape[-1]].T                                  # FastFood: columns past d meet padding
    if att["features"] == "prf":
        phi = lib.exp(u - (xs ** 2).sum(-1)[..., None]) / math.sqrt(M)
        return phi if scale is None else phi * scale
    cat = np.concatenate if lib is np else lib.cat
    phi = cat([lib.cos(u), lib.sin(u)], -1) / math.sqrt(M)
    return phi if scale is None else phi * cat([scale, scale], 0)


def _flt_attention(q, k, v, att, attn_params, feats, causal, lib, ct=False):
    """FLT Algorithm 1 (real form): Q_hat = [N1, d^{-1/4} q], K_hat = [N2, d^{-1/4} k], positive features;
    `ct`: token 0 is a class token, with zero rows of N1 and N2."""
    L, d = q.shape[-2], q.shape[-1]
    L = L - 1 if ct else L                                                             # positioned tokens
    if att["grid"] is None:
        pos = np.arange(L, dtype=float)[:, None]                                       # (L, 1)
    else:
        H, W = att["grid"]
        pos = np.stack([np.arange(L) // W, np.arange(L) % W], -1).astype(float)         # (L, 2) row-major
    sp, pr, eps = attn_params["spectrum"], attn_params["proposal"], feats["eps"]       # eps: (r, D)
    r, D = eps.shape
    # stored raw (refattn.nn.kinds.domains): width = exp(log); scale = floor + exp(log_excess), the floor
    # tau / sqrt(2) of the Gaussian proposal (tau = max sigma, or 1 / (2 pi l))
    if hasattr(sp, "mu"):                                                              # Gaussian mixture
        sigma = lib.exp(sp.sigma.log)
        floor = sigma.max() / math.sqrt(2)
    else:                                                                              # Gaussian kernel
        length = lib.exp(sp.length.log)
        floor = 1 / (2 * math.pi * length * math.sqrt(2))
    scale = floor + lib.exp(pr.scale.log_excess)
    xi = pr.loc + scale * eps                                                          # (r, D)
    if hasattr(sp, "mu"):
        g = (sp.w * lib.exp(-((xi[:, None, :] - sp.mu[None]) ** 2).sum(-1) / (2 * sigma ** 2))).sum(-1)
    else:
        g = sp.C * (2 * math.pi * length ** 2) ** (D / 2) * lib.exp(
            -2 * math.pi ** 2 * length ** 2 * (xi ** 2).sum(-1))
    z = (xi - pr.loc) / scale
    p = lib.exp(-(z ** 2).sum(-1) / 2) / ((2 * math.pi) ** (D / 2) * lib.prod(scale * _t(np.ones(D), lib)))
    w = g / p                                                                        # (r,) importance weights
    a = 2 * math.pi * (_t(pos, lib) @ xi.T)                                            # (L, r)
    cat = np.concatenate if lib is np else lib.cat
    amp = lib.sqrt(lib.abs(w) / r)
    N1 = cat([lib.cos(a) * amp, lib.sin(a) * amp], -1)                                 # (L, 2r)
    sgn = lib.sign(w)
    N2 = cat([lib.cos(a) * amp * sgn, lib.sin(a) * amp * sgn], -1)
    if ct:                                                                             # no RPE features
        N1, N2 = (cat([t[:1] * 0.0, t], 0) for t in (N1, N2))                          # (L + 1, 2r)
    B, Hh = q.shape[0], q.shape[1]
    if lib is np:
        def ex(t):
            return np.broadcast_to(t, (B, Hh) + t.shape)
    else:
        def ex(t):
            return t.expand(B, Hh, *t.shape)
    qh = cat([ex(N1), q * d ** -0.25], -1)
    kh = cat([ex(N2), k * d ** -0.25], -1)
    fa = {"kind": "favor", "features": "positive"}
    omega = feats["omega"]
    scale = qh.shape[-1] ** 0.25      # _features scales by width^{-1/4}; FLT's inputs are already scaled
    A = _features(qh * scale, fa, omega, lib) @ _tr(_features(kh * scale, fa, omega, lib), lib)
    return _normalised(A, v, causal, lib)


def _attention(q, k, v, att, feats, causal, lib, attn_params=None, ct=False):
    L = q.shape[-2]
    if att["kind"] == "flt":
        return _flt_attention(q, k, v, att, attn_params, feats, causal, lib, ct)
    if att["kind"] in ("s1", "s2", "toeplitz"):
        return _rpe_attention(q, k, v, att, attn_params, feats, causal, lib, ct)
    if att["kind"] in ("gmm", "generative", "fastfood"):
        omega, scale = _spectral_omega(att, attn_params, feats, lib)
        phi_k = _spectral_features(k, att, omega, scale, lib)
        a = _spectral_features(q, att, omega, scale, lib) @ _tr(phi_k, lib)
        return _normalised(a, v, causal, lib)
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
    ct = cfg["task"] == "classify" and cfg["readout"] == "class-token"
    if ct:                                                   # prepended after the positions: it has none
        cls = params["cls"][None, None, :]
        x = (np.concatenate([np.broadcast_to(cls, (x.shape[0], 1, D)), x], 1) if lib is np
             else lib.cat([cls.expand(x.shape[0], 1, D), x], 1))
    for i, blk in enumerate(params["blocks"]):
        a = _ln(x, blk["ln1"], lib)
        ap = blk["attn"]
        q, k, v = (_split(a @ ap[n].W + ap[n].b, H, lib) for n in "qkv")
        o = _attention(q, k, v, att, None if features is None else features[i], cfg["causal"], lib,
                       attn_params=ap.get("attn"), ct=ct)
        x = x + _merge(o, lib) @ ap["o"].W + ap["o"].b
        f = _ln(x, blk["ln2"], lib)
        f = _gelu(f @ blk["ff1"].W + blk["ff1"].b, lib) @ blk["ff2"].W + blk["ff2"].b
        x = x + f
    x = _ln(x, params["ln_f"], lib)
    if cfg["task"] == "classify":
        x = x.mean(-2) if cfg["readout"] == "mean" else x[..., 0, :]
    return x @ params["head"].W + params["head"].b
