"""The boundary contract of refattn.rpe's public functions: every array argument, parameter fields
and cotangents included, is checked for shape, dtype (real floating; integer positions are indices by nature)
and finiteness, and a bad one raises ValueError/TypeError naming it as the user passed it (``q``,
``spectrum.sigma``, ``proposal.scale``, ``dy``); never another exception, never a silent NaN. Empty sizes give
the documented result (package docstring of refattn.rpe)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from refattn.rpe import (
    GaussianKernel,
    GaussianMixture,
    Proposal,
    S1Params,
    check_proposal,
    flt_attention,
    flt_attention_bwd,
    flt_attention_fwd,
    flt_features,
    flt_features_bwd,
    flt_features_fwd,
    flt_frequencies,
    flt_importance_weights,
    flt_mask_estimate,
    proposal_log_density,
    rpe_mask,
    s1_attention,
    s1_attention_bwd,
    s1_attention_fwd,
    s1_augment,
    s1_positional,
    s1_positional_bwd,
    s1_positional_fwd,
    s1_relative_matrix,
    s1_relative_term,
    s2_attention,
    s2_attention_bwd,
    s2_attention_fwd,
    s2_attention_naive,
    s2_logits,
    spectrum_f,
    spectrum_g,
    spectrum_g_bwd,
    spectrum_g_fwd,
    toeplitz_attention,
    toeplitz_attention_bwd,
    toeplitz_attention_dense,
    toeplitz_attention_fwd,
    toeplitz_matrix,
)

L, d, dv, m, r = 5, 3, 2, 4, 6


def _inputs():
    rng = np.random.default_rng(0)

    def normal(*s):
        return rng.standard_normal(s)

    def lognormal(*s):
        return np.exp(rng.standard_normal(s))

    R, P = normal, lognormal                                                       # noqa: N806

    params = S1Params(np.abs(R(1, 2)) + 0.1, R(1, 2), R(1, 2))
    gm = GaussianMixture(np.abs(R(2)), R(2, 2), np.array([0.5, 0.8]))
    prop = Proposal("gaussian", np.zeros(2), np.asarray(3.0))
    pos1 = np.arange(L) * 1.0
    qkv = dict(q=R(2, L, d), k=R(2, L, d), v=R(2, L, dv))
    feats = dict(phi_q=P(2, L, m), phi_k=P(2, L, m), v=R(2, L, dv), coeffs=P(2 * L - 1))
    flt = dict(pos=R(L, 2), eps=R(r, 2), spectrum=gm, proposal=prop)
    return R, P, params, gm, prop, pos1, qkv, feats, flt


R, P, PARAMS, GM, PROP, POS1, QKV, FEATS, FLT = _inputs()

# name -> (function of keyword arrays, valid keyword arrays, {'arg:axis'} whose size is free (no shape error))
FORWARD = {
    "s1_positional": (s1_positional, dict(positions=POS1, params=PARAMS), {"positions:last"}),
    "s1_augment": (s1_augment, dict(q=QKV["q"], k=QKV["k"], positions=POS1, params=PARAMS), set()),
    "s1_attention": (s1_attention, dict(**QKV, positions=POS1, params=PARAMS), {"v:last"}),
    "s1_relative_term": (s1_relative_term, dict(delta=R(4), params=PARAMS), {"delta:last"}),
    "s1_relative_matrix": (s1_relative_matrix, dict(positions=POS1, params=PARAMS), {"positions:last"}),
    "s2_attention": (lambda **a: s2_attention(**a, k=2), dict(q=QKV["q"], v=QKV["v"], w=R(5, d)), {"v:last"}),
    "s2_attention_favor": (lambda **a: s2_attention(**a, k=2),
                           dict(q=QKV["q"], v=QKV["v"], w=R(5, d), omega=R(m, d)), {"v:last", "omega:lead"}),
    "s2_logits": (lambda **a: s2_logits(**a, k=2), dict(q=QKV["q"], w=R(5, d)), {"q:lead"}),
    "s2_attention_naive": (lambda **a: s2_attention_naive(**a, k=2), dict(q=QKV["q"], v=QKV["v"], w=R(5, d)),
                           {"v:last"}),
    "toeplitz_attention": (toeplitz_attention, FEATS, {"v:last"}),
    "toeplitz_attention_dense": (toeplitz_attention_dense, FEATS, {"v:last"}),
    "toeplitz_matrix": (lambda coeffs: toeplitz_matrix(coeffs, L), dict(coeffs=FEATS["coeffs"]), set()),
    "spectrum_g": (spectrum_g, dict(spectrum=GM, xi=R(4, 2)), {"xi:lead"}),
    "spectrum_f": (spectrum_f, dict(spectrum=GM, delta=R(4, 2)), {"delta:lead"}),
    "rpe_mask": (rpe_mask, dict(pos=R(L, 2), spectrum=GM), {"pos:lead"}),
    "proposal_log_density": (lambda eps: proposal_log_density("gaussian", eps), dict(eps=R(4, 2)),
                             {"eps:last", "eps:lead"}),
    "check_proposal": (check_proposal, dict(spectrum=GM, proposal=PROP), {"proposal.scale:last"}),
    "flt_frequencies": (flt_frequencies, dict(eps=FLT["eps"], proposal=PROP),
                        {"proposal.scale:last", "eps:lead"}),
    "flt_importance_weights": (flt_importance_weights, dict(eps=FLT["eps"], spectrum=GM, proposal=PROP),
                               {"proposal.scale:last", "eps:lead"}),
    "flt_features": (flt_features, FLT, {"proposal.scale:last", "eps:lead", "pos:lead"}),
    "flt_mask_estimate": (flt_mask_estimate, FLT, {"proposal.scale:last", "eps:lead", "pos:lead"}),
    "flt_attention": (flt_attention, dict(**QKV, **FLT, omega=R(m, 2 * r + d)),
                      {"proposal.scale:last", "v:last", "omega:lead"}),
}
INDEX_ARGS = {"positions", "pos"}                                                 # integer positions allowed

BACKWARD = {
    "s1_positional_bwd": (lambda: s1_positional_fwd(POS1, PARAMS), s1_positional_bwd),
    "s1_attention_bwd": (lambda: s1_attention_fwd(**QKV, positions=POS1, params=PARAMS), s1_attention_bwd),
    "s2_attention_bwd": (lambda: s2_attention_fwd(QKV["q"], QKV["v"], R(5, d), k=2), s2_attention_bwd),
    "toeplitz_attention_bwd": (lambda: toeplitz_attention_fwd(**FEATS), toeplitz_attention_bwd),
    "spectrum_g_bwd": (lambda: spectrum_g_fwd(GM, R(4, 2)), spectrum_g_bwd),
    "flt_features_bwd": (lambda: flt_features_fwd(**FLT), flt_features_bwd),
    "flt_attention_bwd": (lambda: flt_attention_fwd(**QKV, **FLT, omega=R(m, 2 * r + d)), flt_attention_bwd),
}


def _leaves(obj, path):
    if isinstance(obj, np.ndarray):
        yield path, obj
    elif isinstance(obj, tuple) and hasattr(obj, "_fields"):
        for f in obj._fields:
            yield from _leaves(getattr(obj, f), path + (f,))


def _replace(obj, path, new):
    if not path:
        return new
    return obj._replace(**{path[0]: _replace(getattr(obj, path[0]), path[1:], new)})


def _mutations(x, index):
    out = {}
    if x.size:
        y = x.astype(float)
        y.flat[0] = np.nan
        out["nan"] = y
        y = x.astype(float)
        y.flat[-1] = np.inf
        out["inf"] = y
    if not index:
        out["int"] = np.ones(x.shape, dtype=np.int64)
    out["bool"] = np.ones(x.shape, dtype=bool)
    out["complex"] = x.astype(np.complex128)
    out["float32"] = x.astype(np.float32)
    out["shape:last"] = np.concatenate([x, x[..., :1]], axis=-1) if x.ndim else np.stack([x, x])
    if x.ndim >= 2:
        out["shape:lead"] = np.concatenate([x, x[..., :1, :]], axis=-2)
    return out


def _cases():
    for fname, (fn, kw, free) in FORWARD.items():
        for top, val in kw.items():
            for path, x in _leaves(val, (top,)):
                name = ".".join(path)
                for mname, y in _mutations(x, top in INDEX_ARGS).items():
                    if mname.startswith("shape") and f"{name}:{mname[6:]}" in free:
                        continue
                    if mname == "float32" and len(kw) == 1:                        # one array: a float32 call
                        continue
                    # a size mismatch may be reported on the other argument of the pair (k's d from q's)
                    names = tuple(kw) if mname.startswith("shape") else (name,)
                    yield pytest.param(fn, kw, top, path, y, names, id=f"{fname}-{name}-{mname}")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.parametrize("fn, kw, top, path, bad, names", list(_cases()))
def test_forward_rejects_bad_arrays_naming_them(fn, kw, top, path, bad, names):
    kw2 = dict(kw)
    kw2[top] = _replace(kw[top], path[1:], bad)
    with pytest.raises((ValueError, TypeError)) as info:
        fn(**kw2)
    msg = str(info.value)
    assert any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", msg) for n in names), (
        f"message does not name {names}: {msg}")


@pytest.mark.parametrize("mutation", ["nan", "inf", "shape:last", "float32", "int"])
@pytest.mark.parametrize("name", list(BACKWARD))
def test_backward_rejects_bad_cotangents_naming_them(name, mutation):
    make, bwd = BACKWARD[name]
    y, cache = make()
    if name == "spectrum_g_bwd":
        dy, label = (_mutations(np.asarray(y[0]), False)[mutation], None), "dg[0]"
    elif isinstance(y, tuple):
        dy = tuple(_mutations(np.asarray(a), False)[mutation] for a in y)
        label = {"s1_positional_bwd": "dQ_p", "flt_features_bwd": "dN[0]"}[name]
    else:
        dy, label = _mutations(np.asarray(y), False)[mutation], "dy"
    with pytest.raises((ValueError, TypeError)) as info:
        bwd(dy, cache)
    assert label in str(info.value), f"message does not name {label!r}: {info.value}"


def test_flt_frequencies_checks_eps_shape_and_scale_sign():
    """Two holes once open: eps of the wrong width, and a negative proposal scale."""
    with pytest.raises(ValueError, match=r"proposal.scale: expected positive values"):
        flt_frequencies(R(3, 2), Proposal("gaussian", np.zeros(2), np.asarray(-1.0)))
    with pytest.raises(ValueError, match=r"proposal.loc: expected shape \(D\) with D = 3"):
        flt_frequencies(R(3, 3), Proposal("gaussian", np.zeros(2), np.asarray(1.0)))
    with pytest.raises(ValueError, match=r"eps: expected shape \(r, D\)"):
        flt_frequencies(R(3), PROP)
    with pytest.raises(ValueError, match=r"eps: the 'uniform' proposal's noise must lie in \[-1, 1\]"):
        flt_frequencies(np.full((2, 2), 1.5), Proposal("uniform", np.zeros(2), np.asarray(1.0)))


# ----------------------------------------------------------------------------------------------------------
# empty sizes: the documented result or a ValueError naming the argument


EMPTY_RESULTS = [
    ("s1_positional L=0", lambda: s1_positional(np.arange(0) * 1.0, PARAMS), [(0, 4), (0, 4)]),
    ("s1_relative_matrix L=0", lambda: s1_relative_matrix(np.arange(0) * 1.0, PARAMS), [(0, 0)]),
    ("s2_attention L=0", lambda: s2_attention(R(2, 0, d), R(2, 0, dv), R(5, d), k=2), [(2, 0, dv)]),
    ("s2_attention d_v=0", lambda: s2_attention(R(2, L, d), R(2, L, 0), R(5, d), k=2), [(2, L, 0)]),
    ("s1_attention d=0",
     lambda: s1_attention(R(2, L, 0), R(2, L, 0), R(2, L, dv), POS1, PARAMS), [(2, L, dv)]),
    ("toeplitz d_v=0",
     lambda: toeplitz_attention(P(2, L, m), P(2, L, m), R(2, L, 0), P(2 * L - 1)), [(2, L, 0)]),
    ("rpe_mask L=0", lambda: rpe_mask(R(0, 2), GM), [(0, 0)]),
    ("flt_features L=0", lambda: flt_features(R(0, 2), R(r, 2), GM, PROP), [(0, 2 * r), (0, 2 * r)]),
    ("flt_frequencies r=0", lambda: flt_frequencies(R(0, 2), PROP), [(0, 2), (0,)]),
    ("spectrum_g r=0", lambda: spectrum_g(GM, R(0, 2))[0], [(0,)]),
    ("spectrum_g D=0",
     lambda: spectrum_g(GaussianKernel(np.asarray(1.0), np.asarray(1.0)), R(3, 0))[0], [(3,)]),
]

EMPTY_ERRORS = [
    ("s1_attention L=0",
     lambda: s1_attention(R(2, 0, d), R(2, 0, d), R(2, 0, dv), np.arange(0) * 1.0, PARAMS),
     r"q: expected shape \(\.\.\., L, d\) with L >= 1"),
    ("s2_attention d=0", lambda: s2_attention(R(2, L, 0), R(2, L, dv), R(5, 0), k=2), r"q: .* d >= 1"),
    ("s2_attention m=0",
     lambda: s2_attention(R(2, L, d), R(2, L, dv), R(5, d), k=2, omega=R(0, d)), r"omega: "),
    ("toeplitz L=0",
     lambda: toeplitz_attention(P(2, 0, m), P(2, 0, m), R(2, 0, dv), P(0)), r"phi_q: .*L >= 1"),
    ("toeplitz m=0",
     lambda: toeplitz_attention(P(2, L, 0), P(2, L, 0), R(2, L, dv), P(2 * L - 1)),
     r"phi_q: .*m >= 1 features"),
    ("toeplitz_dense m=0",
     lambda: toeplitz_attention_dense(P(2, L, 0), P(2, L, 0), R(2, L, dv), P(2 * L - 1)),
     r"phi_q: .*m >= 1 features"),
    ("flt_attention L=0",
     lambda: flt_attention(R(2, 0, d), R(2, 0, d), R(2, 0, dv), R(0, 2), R(r, 2), GM, PROP, R(m, 2 * r + d)),
     r"q: .*L >= 1 and d >= 1"),
    ("flt_attention d=0",
     lambda: flt_attention(R(2, L, 0), R(2, L, 0), R(2, L, dv), R(L, 2), R(r, 2), GM, PROP, R(m, 2 * r)),
     r"q: .*L >= 1 and d >= 1"),
    ("flt_attention m=0",
     lambda: flt_attention(R(2, L, d), R(2, L, d), R(2, L, dv), R(L, 2), R(r, 2), GM, PROP, R(0, 2 * r + d)),
     r"omega: "),
    ("flt_features r=0", lambda: flt_features(R(L, 2), R(0, 2), GM, PROP), r"eps: .*r >= 1"),
]


@pytest.mark.parametrize("call, shapes", [pytest.param(c, s, id=n) for n, c, s in EMPTY_RESULTS])
def test_empty_sizes_give_the_empty_result(call, shapes):
    out = call()
    out = out if isinstance(out, tuple) else (out,)
    assert [tuple(np.asarray(a).shape) for a in out] == shapes
    assert all(np.all(np.isfinite(np.asarray(a))) for a in out)


@pytest.mark.parametrize("call, match", [pytest.param(c, s, id=n) for n, c, s in EMPTY_ERRORS])
def test_empty_sizes_without_a_result_raise_naming_the_argument(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_quadratic_allocations_fail_before_allocating_above_the_bound():
    """The O(L^2) paths ask refattn.limits first: above the bound a MemoryError names the argument, size."""
    from refattn import limits

    with limits.max_bytes(2**20):
        with pytest.raises(MemoryError, match=r"toeplitz_matrix\(coeffs, L=1000\): this request needs"):
            toeplitz_matrix(np.ones(1999), 1000)
        with pytest.raises(MemoryError, match=r"pos \(L = 1000\): the \(L, L\) mask"):
            rpe_mask(np.zeros((1000, 2)), GM)
        with pytest.raises(MemoryError, match=r"phi_q \(L = 600, batch 2\): the dense \(L, L\) path"):
            toeplitz_attention_dense(P(2, 600, 1), P(2, 600, 1), R(2, 600, 1), P(1199))
        assert toeplitz_matrix(np.ones(19), 10).shape == (10, 10)                 # small requests unaffected
