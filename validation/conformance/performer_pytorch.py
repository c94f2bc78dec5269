"""performer-pytorch (lucidrains, PyPI ``performer-pytorch``): the validator's built-in target
(:mod:`validation.crosscheck.performer_pytorch`, which states its bridges: ``projection_matrix = omega``,
the key map's stabilising ``exp(-M)`` multiplied back, ``torch.manual_seed(seed)`` before its draw), and the
documented flag ``eps`` run at 0 as a second attention row.
"""

from __future__ import annotations

import contextlib
import io

from ..crosscheck import performer_pytorch as pp
from .base import Finding, Implementation, Row

__all__ = ["IMPLEMENTATION", "attention_eps0"]


def attention_eps0(q, k, v, omega, causal):
    """``FastAttention``'s computation with its documented ``eps`` arguments at 0: ``softmax_kernel(...,
    eps=0)`` for queries and keys, then its ``linear_attention`` or ``causal_linear_attention_noncuda(...,
    eps=0)`` (what ``FastAttention.forward`` calls, with the same projection)."""
    with contextlib.redirect_stdout(io.StringIO()):
        import performer_pytorch.performer_pytorch as m
    fq = m.softmax_kernel(q, projection_matrix=omega, is_query=True, eps=0.0)
    fk = m.softmax_kernel(k, projection_matrix=omega, is_query=False, eps=0.0)
    return m.causal_linear_attention_noncuda(fq, fk, v, eps=0.0) if causal else m.linear_attention(fq, fk, v)


_T = "tests/validation/conformance/test_performer_pytorch.py::"
IMPLEMENTATION = Implementation(
    name="performer-pytorch", family="FAVOR+ (positive features)", source="PyPI performer-pytorch",
    subdir=None, dist="performer-pytorch", requires=("torch", "performer_pytorch"),
    rows=(
        Row("draw", "draw", None, "torch", lambda s: pp.draw,
            note="gaussian_orthogonal_random_matrix(m, d) after torch.manual_seed(seed)"),
        Row("features", "features", "positive-scaled", "torch", lambda s: pp.features,
            note="softmax_kernel(x, projection_matrix=omega, is_query=False) times exp(its key maximum)"),
        Row("FastAttention", "attention", "positive", "torch", lambda s: pp.attention,
            note="FastAttention(d, m, causal) with projection_matrix = omega"),
        Row("FastAttention, eps 0", "attention", "positive", "torch", lambda s: attention_eps0,
            note="its softmax_kernel and linear attention with eps = 0"),
    ),
    findings=(
        Finding("draw", "haar", "FAIL", "defect",
                "the orthogonal blocks come from torch QR without the sign(diag R) correction, so row "
                "directions are not Haar (the mean of u_00 is about -0.2, not 0)",
                _T + "test_draw_first_coordinate_is_not_sign_symmetric",
                "multiply Q's columns by sign(diag(R)) after torch.linalg.qr in orthogonal_matrix_chunk"),
        Finding("draw", "unbiased", "FAIL", "defect",
                "through those non-Haar draws the positive-feature estimate of exp(|x|^2) is biased, by an "
                "amount that depends on the direction of x",
                _T + "test_draw_first_coordinate_is_not_sign_symmetric",
                "the same sign correction"),
        Finding("features", "values", "FAIL", "defect",
                "softmax_kernel adds eps = 1e-4 to every feature after dividing by the "
                "global key maximum: an "
                "offset relative to the largest feature that biases the kernel estimate (the eps keyword "
                "has no documented meaning beyond stability)",
                _T + "test_features_offset_is_eps_times_max",
                "default eps to 0 in softmax_kernel (the stabiliser alone prevents overflow), or add the eps "
                "to the attention normaliser instead of to each feature"),
        Finding("FastAttention", "values", "FAIL", "defect",
                "the same eps changes FastAttention's output at the percent level against FAVOR+ on the same "
                "omega", _T + "test_eps0_attention_equals_favor", "the same change (eps = 0)"),
        Finding("FastAttention", "prefix_invariance", "FAIL", "defect",
                "in causal mode the key stabiliser is the maximum over all positions, so with the additive "
                "eps the outputs of a prefix depend on later keys (a causal leak)",
                _T + "test_causal_prefix_depends_on_later_keys",
                "take the key maximum per position over the features only (amax(dim=-1)), or over the "
                "prefix, in softmax_kernel when the attention is causal"),
        Finding("FastAttention", "gradients", "FAIL", "defect",
                "softmax_kernel detaches its key maximum, which with the eps does not cancel, so "
                "FastAttention's autograd gradient is not the derivative of its own forward",
                _T + "test_gradient_is_not_the_derivative_of_its_forward",
                "do not detach the maximum in softmax_kernel (or default eps to 0, with which it cancels)"),
        Finding("FastAttention, eps 0", "stability", "FAIL", "convention",
                "with the documented eps at 0, the global key maximum cannot keep keys far below it from "
                "underflowing: causal rows whose keys all underflow are 0/0 (the default eps keeps them "
                "finite)",
                _T + "test_eps0_underflows_to_nan"),
        Finding("FastAttention, eps 0", "prefix_invariance", "pass", "pass",
                "with eps = 0 the global key maximum cancels and the prefix outputs do not depend on later "
                "keys", _T + "test_causal_prefix_depends_on_later_keys"),
        Finding("FastAttention, eps 0", "values", "pass", "pass",
                "with eps = 0 FastAttention's computation is refattn's FAVOR+ on the same omega",
                _T + "test_eps0_attention_equals_favor"),
    ),
)
