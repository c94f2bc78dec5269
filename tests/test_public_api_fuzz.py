"""In-suite fuzz test of refattn's public API.

A table maps every public callable exported by ``refattn``, ``refattn.nn``, ``refattn.rpe``,
``refattn.features``, ``refattn.layers``, ``refattn.attention`` and ``refattn.random`` to a *valid-call
builder*. Stems share a builder: ``f`` and ``f_fwd`` take the same arguments; ``f_bwd`` gets the forward's
cache and a cotangent ``dy`` shaped like the forward's output. For each array argument (parameter fields and
``dy`` included) every invalid class is applied:

    shape (last axis + 1), ndim (one axis dropped), batch (leading axis + 1), dtype (int, complex, bool,
    float16), nan, inf, empty (each axis in turn of size 0: the batch, sequence and feature axes alike),
    huge and non-int (integer size arguments), and the builder's own invalid non-array values
    (``Call.bad``: configurations, seeds, rngs, dtypes, rates)

and the outcome must be a correct result (every array leaf finite; the documented empty result for
``empty``) or a ``ValueError``/``TypeError``/``MemoryError`` whose message names the argument as the user
passed it. Never another exception, never a silent NaN. Hypothesis draws the sizes and values (bounded
examples, derandomized). ``test_table_covers_every_export`` fails when a new export has no entry.
Two documented relaxations: transfers and accessors (``as_xp``, ``tree_to_numpy``, ``spectrum_arrays``) pass
values through unchecked (``Call.accessor``; only a foreign exception fails), and functions that read only
shapes (``generator_param_count``, ``split_heads``) may accept dtype/NaN mutations (``Call.values_unread``).

Every exported callable has a builder (``PENDING``, the names parked without one, must stay empty). The table
(builders, ``PENDING``, ``NON_CALLABLES``) is in ``tests/public_api_table.py``; ``python -m
tests.test_public_api_fuzz`` prints the outcome tally of the README's reliability section.
"""

from __future__ import annotations

import importlib
import inspect

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.public_api_table import BWD_FREE, FWD_BWD, NON_CALLABLES, PENDING, PLAIN, STEMS, Call


MODULES = ["refattn", "refattn.nn", "refattn.rpe", "refattn.features", "refattn.layers", "refattn.attention",
           "refattn.random"]
ALLOWED = (ValueError, TypeError, MemoryError)
CLASSES = ["shape", "ndim", "batch", "int", "complex", "bool", "float16", "nan", "inf", "empty"]
FUZZ = settings(max_examples=2, derandomize=True, deadline=None, database=None,
                suppress_health_check=list(HealthCheck))


def _exports():
    """``{name: object}`` over the modules' ``__all__``, submodules left out (a package lists its own)."""
    names = {}
    for m in MODULES:
        mod = importlib.import_module(m)
        for n in mod.__all__:
            if not inspect.ismodule(getattr(mod, n)):
                names.setdefault(n, getattr(mod, n))
    return names


def mutate(a, cls):
    """The invalid version of array `a` for class `cls` (None when the class does not apply)."""
    if cls == "shape":
        return None if a.ndim == 0 else np.concatenate([a, a[..., :1]], axis=-1)
    if cls == "ndim":  # a 0-d array: wrong for every argument with a named axis
        return None if a.ndim == 0 or a.size == 0 else a.reshape(-1)[0].reshape(())
    if cls == "batch":
        return None if a.ndim < 2 else np.concatenate([a, a[:1]], axis=0)
    if cls == "int":
        return None if np.issubdtype(a.dtype, np.integer) else np.ones(a.shape, np.int64)
    if cls == "complex":
        return a.astype(np.complex128)
    if cls == "bool":
        return a != 0
    if cls == "float16":
        return None if np.issubdtype(a.dtype, np.integer) else a.astype(np.float16)
    if cls in ("nan", "inf"):
        if np.issubdtype(a.dtype, np.integer) or a.size == 0:
            return None
        b = a.copy()
        b.reshape(-1)[0] = np.nan if cls == "nan" else np.inf
        return b
    if cls == "empty":
        return None if a.ndim == 0 else a[:0]
    raise AssertionError(cls)


def variants(a, cls):
    """``[(label, invalid array)]`` for class `cls`: one per axis for ``empty`` (that axis of size 0, every
    other axis kept), else :func:`mutate`'s one (none when the class does not apply)."""
    if cls == "empty":
        return [(f"empty axis {ax}", np.take(a, np.arange(0), axis=ax)) for ax in range(a.ndim)]
    bad = mutate(a, cls)
    return [] if bad is None else [(cls, bad)]


def _leaves(x):
    if isinstance(x, np.ndarray) or np.isscalar(x) and isinstance(x, (float, np.floating)):
        return [np.asarray(x)]
    if isinstance(x, dict):
        return [leaf for v in x.values() for leaf in _leaves(v)]
    if isinstance(x, (tuple, list)):
        return [leaf for v in x for leaf in _leaves(v)]
    return []


def assert_finite_result(fname, out, what):
    for leaf in _leaves(out):
        if np.issubdtype(leaf.dtype, np.floating):
            assert np.all(np.isfinite(leaf)), f"{fname}: {what}: a non-finite result (silent NaN/inf)"


def outcomes(fname, fn, call, path, cls, aliases):
    """``[(label, why)]`` for every variant of class `cls` at `path` (:func:`variants`) whose outcome is not
    allowed (see :func:`outcome`)."""
    if cls == "batch" and path not in call.batch:
        return []
    out = []
    for label, bad in variants(np.asarray(call.get(path)), cls):
        why = outcome(fname, fn, call, path, cls, aliases, bad)
        if why is not None:
            out.append((label, why))
    return out


def outcome(fname, fn, call, path, cls, aliases, bad):
    """Run `fn` on `call` with `path` replaced by `bad` (class `cls`); None if the outcome is allowed, else
    why."""
    args, kw = call.replaced(path, bad)
    try:
        with np.errstate(all="ignore"):
            out = fn(*args.values(), **kw)
    except ALLOWED as exc:
        msg = str(exc)
        names = {path, path.split(".")[0], path.replace(".", "['") + "']", *aliases}
        if any(n in msg for n in names):
            return None
        return f"{type(exc).__name__} not naming {path!r}: {msg[:160]}"
    except Exception as exc:  # noqa: BLE001 -- the point: any other exception is a finding
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    if call.accessor or path in call.accessor_paths:
        return None
    if call.values_unread and cls in ("int", "complex", "bool", "float16", "nan", "inf"):
        return None
    if cls == "nan" and path in call.nan_ok:
        return None
    for leaf in _leaves(out):
        if np.issubdtype(leaf.dtype, np.floating) and not np.all(np.isfinite(leaf)):
            if cls == "inf" and path in call.inf_ok:
                return None
            return "returned a non-finite result (silent NaN/inf)"
    if cls == "empty" and call.empty_ok:
        return None
    if cls in ("shape", "ndim", "batch") and path in call.free:
        return None
    if cls == "shape" and path in call.free_last:
        return None
    if cls == "int" and path in call.int_ok:
        return None
    if cls == "inf" and path in call.inf_ok:
        return None
    return "accepted the invalid input and returned a result"


def bad_values(call):
    """``(path, value, label, names)`` for each invalid non-array value of `call`: oversized (2**40) and
    non-integer (1.5) size arguments, then the builder's own `bad` list (configs, seeds, rngs)."""
    for size in call.sizes:
        yield size, 2**40, f"{size} <- huge", (size,)
        yield size, 1.5, f"{size} <- non-int size", (size,)
    yield from call.bad


def bad_outcome(fn, call, path, bad, names):
    """None when `fn` rejects `bad` at `path` with an allowed exception naming one of `names`, else why."""
    args, kw = call.replaced(path, bad)
    try:
        with np.errstate(all="ignore"):
            fn(*args.values(), **kw)
    except ALLOWED as exc:
        if any(n in str(exc) for n in names):
            return None
        return f"{type(exc).__name__} not naming {names}: {str(exc)[:160]}"
    except Exception as exc:  # noqa: BLE001 -- any other exception is a finding
        return f"{type(exc).__name__}: {str(exc)[:160]}"
    return "accepted"


def _fuzzed_names():
    names = {}
    for stem, b in STEMS.items():
        names[stem] = (stem, b, "f")
        names[stem + "_fwd"] = (stem, b, "fwd")
        names[stem + "_bwd"] = (stem, b, "bwd")
    for stem, b in FWD_BWD.items():
        names[stem + "_fwd"] = (stem, b, "fwd")
        names[stem + "_bwd"] = (stem, b, "bwd")
    for n, b in PLAIN.items():
        names[n] = (n, b, "plain")
    return names


FUZZED = _fuzzed_names()


def test_table_covers_every_export():
    exports = _exports()
    callables = {n for n, o in exports.items() if callable(o) and not inspect.isclass(o)}
    others = {n for n in exports if n not in callables}
    missing = sorted(n for n in callables if n not in FUZZED and n not in PENDING)
    assert not missing, f"public callables with no fuzz builder and no PENDING entry: {missing}"
    stale = sorted(n for n in set(FUZZED) | set(PENDING) if n not in callables)
    assert not stale, f"table entries that are not exported callables: {stale}"
    unlisted = sorted(others - NON_CALLABLES)
    assert not unlisted, f"exported classes/constants/modules not listed in NON_CALLABLES: {unlisted}"


SIZES = st.fixed_dictionaries({"B": st.integers(1, 2), "L": st.integers(1, 4), "d": st.integers(1, 4),
                               "m": st.integers(2, 5), "seed": st.integers(0, 2**16)})


def _dy_like(out, rng, field=None):
    if field is not None:
        out = getattr(out, field)
    elif hasattr(out, "_fields") and "y" in out._fields:
        out = out.y
    if isinstance(out, (np.ndarray, np.generic)):
        out = np.asarray(out)
        return np.asarray(rng.standard_normal(out.shape)).astype(out.dtype)
    if isinstance(out, tuple):
        return tuple(rng.standard_normal(o.shape).astype(o.dtype) if isinstance(o, np.ndarray) else None
                     for o in out)
    raise AssertionError(f"no cotangent for {type(out)}")


def _calls(name, s):
    """(function, Call, aliases) for `name` at sizes `s`."""
    stem, builder, kind = FUZZED[name]
    rng = np.random.default_rng(s["seed"])
    call = builder(rng, s)
    exports = _exports()
    if kind in ("f", "plain"):
        return exports[name], call, ()
    if kind == "fwd":
        return exports[name], call, ()
    with np.errstate(all="ignore"):
        out, cache = exports[stem + "_fwd"](*call.args.values(), **call.kw)
    dy = _dy_like(out, rng, call.dy_field)
    bwd = exports[name]
    dname = list(inspect.signature(bwd).parameters)[0]
    arrays = ["dy"] if isinstance(dy, np.ndarray) else [f"dy.{i}" for i, a in enumerate(dy) if a is not None]
    c = Call({"dy": dy, "cache": cache}, arrays=arrays, empty_ok=name in BWD_FREE, batch=arrays,
             free=arrays if name in BWD_FREE else ())
    return bwd, c, (dname, "dy", "dphi", "dlog_scale", "dk_log_scale", "dout", "domega", "dscale",
                    *call.bwd_names)


@pytest.mark.parametrize("name", sorted(FUZZED))
@FUZZ
@given(s=SIZES)
def test_public_function_contract(name, s):
    fn, call, aliases = _calls(name, s)
    with np.errstate(all="ignore"):
        out = fn(*call.args.values(), **call.kw)
    assert_finite_result(name, out, "valid call")
    failures = []
    for path in call.arrays:
        for cls in CLASSES:
            for label, why in outcomes(name, fn, call, path, cls, aliases):
                failures.append(f"{name}({path} <- {label}): {why}")
    for path, bad, label, names in bad_values(call):
        why = bad_outcome(fn, call, path, bad, names)
        if why is not None:
            failures.append(f"{name}({label}): {why}")
    assert not failures, "\n".join(failures)


#: Zero sizes whose error the function documents (a mean over nothing, a positional table or scale that
#: needs a position): ``{name: (size, ...)}``; every other function returns the empty result at B = 0, L = 0.
DOCUMENTED_EMPTY = {
    "batchnorm": ("L",), "batchnorm_fwd": ("L",),              # training-mode statistics need 2 rows
    "flt_attention": ("L",), "flt_attention_fwd": ("L",),      # L >= 1 (docstring)
    "s1_attention": ("L",), "s1_attention_fwd": ("L",),        # L >= 1 in attention (docstring)
    "mse": ("B", "L"), "mse_fwd": ("B", "L"),                  # the mean over no entries
    "softmax_cross_entropy": ("B", "L"), "softmax_cross_entropy_fwd": ("B", "L"),
    "loss_and_grads": ("B", "L"), "transformer_loss_fwd": ("B", "L"),
    "transformer": ("L",), "transformer_fwd": ("L",),          # L >= 1 (docstring)
    "sinusoid_position_table": ("L",),                         # L is a positive size argument
}


@pytest.mark.parametrize("size", ["B", "L", "d"])
def test_zero_sizes_empty_every_argument_together(size):
    """Each size in turn set to 0 in every argument at once (the builders take the sizes): an empty batch or
    sequence (B, L) gives the empty result or the documented error; d = 0 a result or a ValueError/TypeError
    whose message starts with the argument it names (never ZeroDivisionError or a NumPy-internal message).
    Builders that cannot build a call at that size (a draw that refuses d = 0) are left out."""
    import re

    exports, failures, tried = _exports(), [], 0
    for name, (_, builder, kind) in sorted(FUZZED.items()):
        if kind == "bwd":
            continue
        s = {"B": 2, "L": 3, "d": 3, "m": 4, "seed": 1, size: 0}
        try:
            call = builder(np.random.default_rng(1), s)
        except (ValueError, TypeError):
            continue
        tried += 1
        fn = exports[name]
        names = {*inspect.signature(fn).parameters, *(p.split(".")[0] for p in call.arrays), "L", "d",
                 "logits"}                        # the losses name the logits whose mean over nothing fails
        try:
            with np.errstate(all="ignore"):
                out = fn(*call.args.values(), **call.kw)
        except ALLOWED as exc:
            first = re.match(r"\s*([A-Za-z_]\w*)", str(exc))
            if size in DOCUMENTED_EMPTY.get(name, ()) or size == "d":
                if first is None or first.group(1) not in names:
                    failures.append(f"{name}({size} = 0): an error not naming an argument: {exc}")
            else:
                failures.append(f"{name}({size} = 0): {type(exc).__name__}, not the empty result: {exc}")
        except Exception as exc:  # noqa: BLE001 -- any other exception is a finding
            failures.append(f"{name}({size} = 0): {type(exc).__name__}: {str(exc)[:160]}")
        else:
            for leaf in _leaves(out):
                if np.issubdtype(leaf.dtype, np.floating) and not np.all(np.isfinite(leaf)):
                    failures.append(f"{name}({size} = 0): a non-finite result")
    assert tried > (100 if size != "d" else 30), tried
    assert not failures, "\n".join(failures)


def test_nothing_pending():
    """Every exported callable has a builder: a name parked in ``PENDING`` (with its reason) fails here."""
    assert not PENDING, "exports without a fuzz builder: " + "; ".join(f"{n}: {why}"
                                                                       for n, why in PENDING.items())


def tally(sizes=None):
    """Outcomes of the table at one size: ``{class: [tried, failing]}`` and the failing cases (README table;
    ``python -m tests.test_public_api_fuzz``, with ``PYTHONPATH`` at another checkout to measure that one)."""
    import collections

    sizes = sizes or {"B": 2, "L": 3, "d": 3, "m": 4, "seed": 1}
    counts, fails = collections.defaultdict(lambda: [0, 0]), []
    for name in sorted(FUZZED):
        fn, call, aliases = _calls(name, sizes)
        for path in call.arrays:
            for cls in CLASSES:
                if cls == "batch" and path not in call.batch:
                    continue
                for label, bad in variants(np.asarray(call.get(path)), cls):
                    why = outcome(name, fn, call, path, cls, aliases, bad)
                    counts[cls][0] += 1
                    if why is not None:
                        counts[cls][1] += 1
                        fails.append(f"{name}({path} <- {label}): {why}")
        for path, bad, label, names in bad_values(call):
            cls = label.split(" <- ")[-1] if label.endswith(("<- huge", "<- non-int size")) else "bad value"
            counts[cls][0] += 1
            why = bad_outcome(fn, call, path, bad, names)
            if why is not None:
                counts[cls][1] += 1
                fails.append(f"{name}({label}): {why}")
    return dict(counts), fails


if __name__ == "__main__":
    counts, fails = tally()
    for cls, (tried, failing) in counts.items():
        print(f"{cls:14s} tried {tried:5d}  failing {failing:5d}")
    print(f"all            tried {sum(t for t, _ in counts.values()):5d}  failing {len(fails):5d}"
          f"  ({len({f.split('(')[0] for f in fails})} functions)")
    print("\n".join(fails))
