"""Horn et al.'s translation-equivariant Performers (ExpectationMax/Translational-Equivariant-Performers,
from a source checkout: the package ``relative_performer``), Strategy 1 and Strategy 2.

Bridged conventions (nothing else):

* **S1** (``constrained_relative_encoding``): the contract's ``q, k`` enter as the content part of
  ``ConstrainedLinear`` (queries) and ``IdentityLinear`` (keys), whose ``content_linear`` is set to the
  identity (weight I, bias 0) so that its output is the given q or k; one head, the contract's ``(B, H)``
  folded into the batch; ``LearnableSinusoidEncoding.inv_freq = freqs`` and positions ``arange(L)`` give
  ``K_p = [sin, cos]`` per lengthscale; ``alpha, beta`` are the layer's parameters; the attention is the
  repository's ``FastAttention(d + 2S, m, causal)`` with ``projection_matrix = omega``.
* **S2** (``clipped_relative_attention.relative_attention(q, rpe, v)``): it takes feature maps, ``q @ rpe^T``
  being the kernel ``k(q_i, w_r)``; the contract's exact softmax kernel is given to it as the exact
  finite-dimensional features ``q_i -> [exp(q_i . w_r / sqrt(d))]_{r = 0..k}`` and ``rpe = I_{k+1}``
  (draws substituted: exact values for its random features), so that the check exercises its index,
  clipping and normalisation logic. Its image is square, ``img_dim = int(sqrt(L))``, with a class token
  last: the contract ``s2-grid-cls`` (5 x 5 grid, k = 3). The contract's learnable tensors (``freqs``,
  ``alpha``, ``beta``) replace the layers' parameters as plain tensors, so that gradients reach them.
"""

from __future__ import annotations

import contextlib
import io
import math

from .base import Finding, Implementation, Row, on_path, source_path

__all__ = ["IMPLEMENTATION", "modules", "s1_attention", "s2_grid_cls"]

SUBDIR = "Translational-Equivariant-Performers"


def modules(sources: str):
    """``(constrained_relative_encoding, clipped_relative_attention, performer_pytorch)`` of the checkout."""
    on_path(source_path(sources, SUBDIR))
    with contextlib.redirect_stdout(io.StringIO()):
        import relative_performer.clipped_relative_attention as cra
        import relative_performer.constrained_relative_encoding as cre
        import relative_performer.performer_pytorch as rpp
    return cre, cra, rpp


def s1_attention(sources: str):
    cre, _, rpp = modules(sources)

    def fn(q, k, v, positions, freqs, alpha, beta, omega, causal):
        import torch
        B, H, L, d = q.shape
        S = freqs.shape[-1]
        enc = cre.LearnableSinusoidEncoding(2 * S)
        del enc.inv_freq                                  # the given tensor, not a new (detached) leaf
        enc.inv_freq = freqs.reshape(S)
        pos = enc(positions.to(q.dtype).reshape(1, L).expand(B * H, L))          # (B H, L, 2S)
        to_q = cre.ConstrainedLinear(d, d, S, 1).to(q.dtype)
        to_k = cre.IdentityLinear(d, d, S, 1).to(q.dtype)
        for lin in (to_q, to_k):
            with torch.no_grad():
                lin.content_linear.weight.copy_(torch.eye(d, dtype=q.dtype))
                lin.content_linear.bias.zero_()
        del to_q.alpha, to_q.beta
        to_q.alpha, to_q.beta = alpha.reshape(S), beta.reshape(S)
        Q = to_q(q.reshape(B * H, L, d), pos)                                      # (B H, 1, L, d + 2S)
        K = to_k(k.reshape(B * H, L, d), pos)
        with contextlib.redirect_stdout(io.StringIO()):
            fa = rpp.FastAttention(d + 2 * S, omega.shape[0], causal=bool(causal))
        fa.projection_matrix = omega
        out = fa(Q, K, v.reshape(B * H, 1, L, v.shape[-1]))
        return out.reshape(B, H, L, v.shape[-1])
    return fn


def s2_grid_cls(sources: str):
    _, cra, _ = modules(sources)

    def fn(q, v, w, k, grid):
        import torch
        H, W = grid
        if H != W or w.shape[0] != k + 1:
            raise ValueError(f"relative_attention takes a square image and k + 1 encodings; got grid {grid}, "
                             f"w {tuple(w.shape)}, k {k}")
        feats = torch.exp(q @ w.T / math.sqrt(q.shape[-1]))                       # (..., L, k + 1)
        rpe = torch.eye(k + 1, dtype=q.dtype)
        lead = q.shape[:-2]
        if len(lead) != 2:
            feats = feats.reshape(-1, 1, *feats.shape[-2:])
            v4 = v.reshape(-1, 1, *v.shape[-2:])
        else:
            v4 = v
        out = cra.relative_attention(feats, rpe, v4)
        return out.reshape(*lead, *out.shape[-2:])
    return fn


_T = "tests/validation/conformance/test_horn.py::"
IMPLEMENTATION = Implementation(
    name="Horn et al. (relative_performer)",
    family="S1 (rotation-constrained sinusoids + FAVOR+), S2 (clipped "
    "relative keys on an image grid)",
    source="https://github.com/ExpectationMax/Translational-Equivariant-Performers", subdir=SUBDIR, dist=None,
    requires=("torch", "einops"),
    rows=(
        Row("S1 RelativePerformer attention", "attention", "s1", "torch", s1_attention,
            note="ConstrainedLinear / IdentityLinear with identity content projections, "
                 "FastAttention(d + 2S, "
                 "m, causal) with projection_matrix = omega"),
        Row("S2 relative_attention", "attention", "s2-grid-cls", "torch", s2_grid_cls, dtype="float32",
            note="relative_attention(exp(q w^T / sqrt d), I, v) on a 5 x 5 grid + class token, float32 (its "
                 "float64 call raises: see dtype)"),
    ),
    findings=(
        Finding("S1 RelativePerformer attention", "values", "FAIL", "defect",
                "the repository's FastAttention (a copy of an early performer-pytorch) adds eps "
                "= 1e-4 to the "
                "features after dividing by a key maximum over the whole tensor, so the S1 "
                "output is about 2% "
                "off FAVOR+ on the same draws",
                _T + "test_s1_eps_and_batch_maximum",
                "in softmax_kernel, take the key maximum per sequence (amax over dims -1, "
                "-2) and default eps "
                "to 0"),
        Finding("S1 RelativePerformer attention", "gradients", "FAIL", "defect",
                "its gradient is the derivative of its own forward (central differences agree): it differs "
                "from refattn's by the forward's eps and batch-wide maximum",
                _T + "test_s1_eps_and_batch_maximum",
                "the same change"),
        Finding("S1 RelativePerformer attention", "batch_independence", "FAIL", "defect",
                "that key maximum (torch.max(data_dash), no dim) runs over the batch: with "
                "the eps, one batch "
                "element's keys change the outputs of the others",
                _T + "test_s1_eps_and_batch_maximum", "the same change"),
        Finding("S1 RelativePerformer attention", "prefix_invariance", "FAIL", "defect",
                "in causal mode the same maximum over all positions lets later keys "
                "change earlier outputs (a "
                "causal leak)", _T + "test_s1_causal_leak",
                "a per-position key maximum over the features (amax(dim=-1)) in causal mode"),
        Finding("S2 relative_attention", "values", "FAIL", "defect",
                "the class token (last) is placed at (y, x) = (img_dim, 0), below the image, as a query: it "
                "attends to the bottom rows at their Manhattan distance, while as a key it is at the clipped "
                "distance from every token; the image tokens' outputs are exact",
                _T + "test_s2_class_token_query_sits_below_the_grid",
                "mark the class token's row of valid as False (valid[-1] = False) so that it has no position "
                "as a query either"),
        Finding("S2 relative_attention", "gradients", "FAIL", "defect",
                "its gradient follows its forward, so the class token's position shows in the gradients too",
                _T + "test_s2_class_token_query_sits_below_the_grid", "the same change"),
        Finding("S2 relative_attention", "dtype", "FAIL", "defect",
                "relative_attention allocates its padded values with torch.zeros in the default dtype, so "
                "float64 inputs raise a dtype error", _T + "test_s2_float64_raises",
                "allocate v_padded with dtype=v.dtype"),
    ),
)
