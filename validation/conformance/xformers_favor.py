"""xFormers' FAVOR (``xformers.components.attention.favor``, facebookresearch/xformers, from a source
checkout; the module was removed from xFormers' main branch after release 0.0.29: the checkout is the commit
before).

Bridged conventions (nothing else):

* **layout**: xFormers attends over ``(batch, L, d)`` with the heads folded into the batch; the adapter
  reshapes the contract's ``(B, H, L, d)`` to ``(B H, L, d)`` and back.
* **draws substituted**: the feature maps project with ``x @ features``, ``features: (d, m)``; the adapter
  sets ``feature_map.features = omega.T`` (a set ``features`` is never redrawn: ``iter_before_redraw`` is
  None). ``draw`` rows call the map's own ``_get_feature_map(d, m)`` after ``torch.manual_seed(seed)`` and
  return its transpose.
* **scalings**: the maps apply ``d^{-1/4}`` inside (``softmax_temp = -1``): families ``positive-scaled``
  (``SMOrf``), ``hyperbolic-scaled`` (``SMHyperbolic``, ``SMReg``: ``dim_features`` counts both halves, so
  ``m`` projections are ``dim_features = 2 m``); the attention's default map is ``SMReg``.
* **the documented flag**: ``epsilon`` (default 1e-6, added to the exponent's offset) is also run at 0.

The sources directory holds the checkout as ``xformers/`` (importable without its compiled extensions).
"""

from __future__ import annotations

import contextlib
import io
import warnings

from .base import Finding, Implementation, Row, on_path, source_path

__all__ = ["IMPLEMENTATION", "modules", "draw", "feature_map", "favor_attention"]

SUBDIR = "xformers"


def modules(sources: str):
    """``(feature_maps.softmax, favor)`` from the checkout under `sources`."""
    on_path(source_path(sources, SUBDIR))
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        import xformers.components.attention.favor as favor
        import xformers.components.attention.feature_maps.softmax as softmax
    return softmax, favor


def draw(sources: str, kind: str):
    """``fn(seed, m, d) -> omega (m, d)``: map `kind`'s own draw (``SMOrf`` or ``SMReg``)."""
    softmax, _ = modules(sources)

    def fn(seed, m, d):
        import torch
        cls = getattr(softmax, kind)
        fm = cls(dim_features=m if kind == "SMOrf" else 2 * m, iter_before_redraw=None)
        with torch.random.fork_rng():
            torch.manual_seed(int(seed))
            return fm._get_feature_map(d, fm.dim_feature_map, torch.device("cpu")).T.contiguous()
    return fn


def feature_map(sources: str, kind: str, epsilon: float = 1e-6):
    """``fn(x, omega) -> phi``: the map `kind` with ``features = omega.T``."""
    softmax, _ = modules(sources)

    def fn(x, omega):
        m = omega.shape[0]
        cls = getattr(softmax, kind)
        fm = cls(dim_features=m if kind == "SMOrf" else 2 * m, iter_before_redraw=None, epsilon=epsilon)
        fm.features = omega.T
        return fm(x)
    return fn


def favor_attention(sources: str, kind: str = "SMReg"):
    """``fn(q, k, v, omega, causal) -> out``: ``FavorAttention(causal, dim_features, feature_map_type)``
    with its feature map's ``features = omega.T``, on ``(B H, L, d)``."""
    softmax, favor = modules(sources)
    from xformers.components.attention.feature_maps import FeatureMapType

    def fn(q, k, v, omega, causal):
        m = omega.shape[0]
        att = favor.FavorAttention(causal=bool(causal), dim_features=m if kind == "SMOrf" else 2 * m,
                                   feature_map_type=getattr(FeatureMapType, kind))
        att.feature_map.features = omega.T
        B, H, L, d = q.shape
        out = att(*(t.reshape(B * H, L, t.shape[-1]) for t in (q, k, v)))
        return out.reshape(B, H, L, v.shape[-1])
    return fn


_T = "tests/validation/conformance/test_xformers_favor.py::"
IMPLEMENTATION = Implementation(
    name="xFormers favor",
    family="FAVOR+ (positive, hyperbolic and regularised softmax features)",
    source="https://github.com/facebookresearch/xformers (the commit before the removal of "
           "xformers/components)",
    subdir=SUBDIR, dist=None, requires=("torch",),
    rows=(
        Row("SMOrf draw", "draw", None, "torch", lambda s: draw(s, "SMOrf"),
            note="SMOrf._get_feature_map(d, m).T after torch.manual_seed(seed)"),
        Row("SMReg draw", "draw", None, "torch", lambda s: draw(s, "SMReg"),
            note="SMReg._get_feature_map(d, m).T after torch.manual_seed(seed) (dim_features = 2m)"),
        Row("SMOrf features", "features", "positive-scaled", "torch", lambda s: feature_map(s, "SMOrf"),
            note="SMOrf(dim_features=m) with features = omega.T"),
        Row("SMOrf features, epsilon 0", "features", "positive-scaled", "torch",
            lambda s: feature_map(s, "SMOrf", 0.0), note="the same with epsilon=0"),
        Row("SMHyperbolic features", "features", "hyperbolic-scaled", "torch",
            lambda s: feature_map(s, "SMHyperbolic", 0.0),
            note="SMHyperbolic(dim_features=2m, epsilon=0) with features = omega.T"),
        Row("FavorAttention", "attention", "hyperbolic", "torch", lambda s: favor_attention(s, "SMReg"),
            note="FavorAttention(causal, dim_features=2m) (default map SMReg) with features = omega.T, "
                 "heads folded into the batch"),
    ),
    findings=(
        Finding("SMOrf draw", "unbiased", "pass", "defect",
                "SMOrf's projections are columns of row-scaled Haar blocks: each coordinate is exactly "
                "N(0, 1) but the rows are not (norms not chi(d), rows not orthogonal, both reported by "
                "haar), and the positive estimate of exp(|x|^2) along all-ones is 2.2 % low, which 20000 "
                "draws show (z = -10.2) and this check's 2000 draws do not (its power; row_norms fails the "
                "draw)",
                _T + "test_smorf_draw_is_biased_along_all_ones",
                "draw ceil(m / d) blocks of d x d Haar matrices (_get_random_ortho_matrix(ceil(m / d), d)), "
                "keep m rows, scale each row by an independent chi(d) norm and transpose, instead of taking "
                "the first d rows of m x m blocks"),
        Finding("SMOrf draw", "row_norms", "FAIL", "defect",
                "the norm of an SMOrf projection has chi^2(d)'s mean d but a variance near 6 instead of 2d = "
                "32: its rows are not N(0, I_d), a necessary condition of an unbiased positive estimate",
                _T + "test_smorf_row_norms_are_not_chi",
                "draw ceil(m / d) blocks of d x d Haar matrices (_get_random_ortho_matrix(ceil(m / d), d)), "
                "keep m rows, scale each row by an independent chi(d) norm and transpose, instead of taking "
                "the first d rows of m x m blocks"),
        Finding("SMReg draw", "row_norms", "FAIL", "convention",
                "SMReg's projections all have norm sqrt(d), SMREG+'s documented regularisation (no chi(d) "
                "law)", _T + "test_smreg_draw_has_norm_sqrt_d"),
        Finding("SMReg draw", "unbiased", "FAIL", "convention",
                "SMReg draws orthogonal projections of fixed norm sqrt(d), the paper's regularised estimator "
                "SMREG+ (documented as such), which is not an unbiased estimate of exp(x.y) through positive "
                "features", _T + "test_smreg_draw_has_norm_sqrt_d"),
        Finding("FavorAttention", "gradients", "FAIL", "defect",
                "its causal gradient is that of the running mean of v (central differences of its own "
                "forward agree): the forward's defect",
                _T + "test_causal_output_is_running_mean_of_own_values",
                "the same change"),
        Finding("FavorAttention", "stability", "FAIL", "defect",
                "the feature maps subtract no maximum from the exponent (normalize_inputs, off by default, "
                "subtracts the largest |x|^2 only), so on large-norm keys the causal output is 0/0",
                _T + "test_favor_attention_underflows_to_nan",
                "subtract the per-position maximum of x.w over the features from the exponent (and the "
                "query's own maximum), as FAVOR+ implementations do"),
        Finding("SMOrf features", "values", "FAIL", "convention",
                "the documented epsilon (1e-6) is added inside the exponent, multiplying every feature by "
                "exp(1e-6): a constant factor that cancels in attention",
                _T + "test_epsilon_is_a_constant_factor"),
        Finding("SMOrf features", "gradients", "FAIL", "convention",
                "the same constant factor exp(1e-6) in the gradient (central differences of its own forward "
                "agree)", _T + "test_epsilon_is_a_constant_factor"),
        Finding("SMOrf features, epsilon 0", "values", "pass", "pass",
                "with epsilon = 0, SMOrf is refattn's positive map of d^{-1/4} x on the same projections",
                _T + "test_epsilon_is_a_constant_factor"),
        Finding("SMHyperbolic features", "values", "pass", "pass",
                "SMHyperbolic is refattn's hyperbolic map of d^{-1/4} x (1/sqrt(2m) [exp(u), exp(-u)] "
                "exp(-|x|^2/2))",
                _T + "test_hyperbolic_closed_form"),
        Finding("FavorAttention", "values", "FAIL", "defect",
                "causal FavorAttention sums over the value dimension instead of the sequence (cumsum(2) of a "
                "(batch, L, d_v) tensor): each causal output row is the running mean of its own value "
                "vector, independent of q and k",
                _T + "test_causal_output_is_running_mean_of_own_values",
                "in _causal_attention, take the prefix sums over the sequence of the outer products "
                "k'_j v_j^T (and of k'_j) before contracting with q'_i (Algorithm 1), instead of contracting "
                "first and summing over dim 2"),
    ),
)
