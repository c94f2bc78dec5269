"""NumPy-free namespace lookup and argument validation: the one place where shape and dtype errors are made.

Every public function of the core starts with ``xp = namespace(*arrays)`` and validates its arguments with
:func:`check_shape` (named axes), :func:`check_finite` and the integer/choice family
(:func:`check_positive_int`, :func:`check_nonneg_int`, :func:`check_choice`, value first, name second). The
messages name the argument, what was received and what was expected, e.g.::

    ValueError: omega: expected shape (m, d) with d = 16 (from x); got (64, 15)

Policy (the conventions of the guide's foundation page, ``docs/guide/foundation.md``):

* only real floating arrays carry values; integers are accepted only where an index is meant (positions,
  token ids) and those call sites say so with ``allow_int=True``;
* float32 and float64 are never mixed (the standard would promote silently): ``TypeError``;
* complex arrays are rejected everywhere in the core (FLT's complex features have a real form,
  :mod:`refattn.rpe.flt`);
* non-finite values are rejected at the public boundary.

This module does not import NumPy; it only uses ``array_api_compat``.
"""

from __future__ import annotations

import functools

from typing import Any

import array_api_compat
import array_api_compat.numpy  # noqa: F401 -- loaded with refattn, not by the first call (~50 ms)
from array_api_compat import array_namespace

from . import _dispatch

__all__ = [
    "namespace",
    "known_namespace",
    "dtype_kind",
    "check_shape",
    "check_finite",
    "check_choice",
    "check_positive_int",
    "check_nonneg_int",
    "device_of",
    "sum_to_shape",
    "cumulative_max",
    "quiet_nonfinite",
]


def _type_name(x: Any) -> str:
    t = type(x)
    return f"{t.__module__.split('.')[0]}.{t.__name__}"


def namespace(*arrays: Any, names: tuple[str, ...] | None = None, allow_int: tuple[str, ...] = ()) -> Any:
    """Return the array namespace shared by `arrays`, after the dtype policy checks.

    Parameters
    ----------
    *arrays
        Arrays (``None`` entries are skipped). All must come from one library.
    names
        Argument names for the messages, one per entry of `arrays`.
    allow_int
        Names of arguments that are indices by nature and may be integer arrays.

    Raises
    ------
    TypeError
        If the arrays come from several libraries, if a value-carrying array is not real floating, or if
        float dtypes are mixed.
    """
    if names is None:
        names = tuple(f"argument {i}" for i in range(len(arrays)))
    if len(names) != len(arrays):
        raise ValueError("namespace: names must have one entry per array")
    present = [(n, a) for n, a in zip(names, arrays, strict=True) if a is not None]
    xp = _library_of([a for _, a in present], names=[n for n, _ in present])
    float_dtype = None
    float_name = None
    for n, a in present:
        kind = dtype_kind(xp, a.dtype)
        if kind == "integral" and n in allow_int:
            continue
        if kind != "float":
            expected = "a real floating dtype (float32 or float64)"
            if n in allow_int:
                expected = "an integer or real floating dtype (float32 or float64)"
            half = " (float16 is not supported: no accuracy is stated for it; convert to float32)" \
                if kind == "other floating" else ""
            raise TypeError(f"{n}: expected {expected}; got dtype {a.dtype}{half}")
        if float_dtype is None:
            float_dtype, float_name = a.dtype, n
        elif a.dtype != float_dtype:
            raise TypeError(
                f"{n}: dtype {a.dtype} differs from {float_name}'s dtype {float_dtype}; "
                "refattn never casts silently: convert one of them explicitly"
            )
    return xp


#: array type -> its namespace, as array_api_compat answered for arrays of that type alone; and
#: (namespace, dtype) -> the dtype's class under the policy above. Both are pure functions of their keys and
#: are called for every argument of every public call: array_api_compat's lookup and ``isdtype`` cost tens of
#: microseconds each, which at small sizes (gradient checks, tiny models) is most of a checked call.
_LIBRARY_OF_TYPE: dict[type, Any] = {}
_DTYPE_KIND: dict[tuple[int, Any], str] = {}


def _library_of(arrays: list, *, names: list) -> Any:
    """The one namespace of `arrays` (``TypeError`` naming the arguments if they are not arrays of one
    library)."""
    kinds = {type(a) for a in arrays}
    if len(kinds) == 1 and (kind := next(iter(kinds))) in _LIBRARY_OF_TYPE:
        return _LIBRARY_OF_TYPE[kind]
    for n, a in zip(names, arrays, strict=True):
        if not array_api_compat.is_array_api_obj(a):
            raise TypeError(f"{n}: expected an array (NumPy, CuPy, array_api_strict, ...); "
                            f"got {_type_name(a)}")
    try:
        xp = array_namespace(*arrays)
    except TypeError as exc:
        kinds_text = ", ".join(f"{n}: {_type_name(a)}" for n, a in zip(names, arrays, strict=True))
        raise TypeError(f"arrays from several libraries cannot be mixed ({kinds_text})") from exc
    if len(kinds) == 1:
        _LIBRARY_OF_TYPE[next(iter(kinds))] = xp
    return xp


def known_namespace(x: Any) -> Any:
    """The namespace of `x` if arrays of its type have been met before (by :func:`namespace`), else ``None``:
    a lookup for walks over many leaves, which fall back to :func:`namespace` for its errors."""
    return _LIBRARY_OF_TYPE.get(type(x))


def dtype_kind(xp: Any, dtype: Any) -> str:
    """``"float"`` (float32 or float64), ``"other floating"`` (float16, bfloat16), ``"integral"`` or
    ``"other"`` (bool, complex, ...)."""
    key = (id(xp), dtype)
    try:
        return _DTYPE_KIND[key]
    except KeyError:
        pass
    except TypeError:                                  # an unhashable dtype object: classify without caching
        key = None
    if xp.isdtype(dtype, "integral"):
        kind = "integral"
    elif xp.isdtype(dtype, "real floating"):
        kind = "float" if dtype in (xp.float32, xp.float64) else "other floating"
    else:
        kind = "other"
    if key is not None:
        _DTYPE_KIND[key] = kind
    return kind


def _fmt_shape(shape: tuple) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ("," if len(shape) == 1 else "") + ")"


@functools.lru_cache(maxsize=1024)
def _parse_spec(spec: str) -> tuple[bool, tuple[str, ...], tuple[int | None, ...]]:
    """``(leading ..., axis names, each name's fixed size or None)`` of a :func:`check_shape` spec (the specs
    are string literals of the source: parsed once each)."""
    axes = [a.strip() for a in spec.split(",") if a.strip()]
    leading = bool(axes) and axes[0] == "..."
    named = tuple(axes[1:] if leading else axes)
    return leading, named, tuple(int(a) if a.lstrip("-").isdigit() else None for a in named)


def check_shape(name: str, x: Any, spec: str, sizes: dict | None = None, *,
                source: str | None = None) -> dict:
    """Check that ``x.shape`` matches `spec` and bind the named axes in `sizes`.

    Parameters
    ----------
    name
        Argument name used in messages.
    x
        The array.
    spec
        Comma-separated axis names, optionally starting with ``...`` (any number of leading batch axes, which
        must equal the ``...`` already bound, if any). Integer literals fix a size: ``"..., L, 1"``.
    sizes
        Mapping ``axis name -> (size, where it was bound)`` shared between the arguments of one call; updated
        in place and returned (a new dict when ``None``).
    source
        How to name this argument in the "from ..." part of later messages (default: `name`).

    Raises
    ------
    ValueError
        Naming the expected shape with the sizes already bound, and the shape received.
    """
    if sizes is None:
        sizes = {}
    source = source or name
    leading, named, fixed = _parse_spec(spec)
    shape = tuple(x.shape)

    def fail(reason: str = "") -> None:
        bound = [f"{a} = {sizes[a][0]} (from {sizes[a][1]})" for a in named if a in sizes and not a.isdigit()]
        if leading and "..." in sizes:
            bound.insert(0, f"... = {_fmt_shape(sizes['...'][0])} (from {sizes['...'][1]})")
        with_part = f" with {', '.join(bound)}" if bound else ""
        extra = f" ({reason})" if reason else ""
        raise ValueError(f"{name}: expected shape ({spec}){with_part}; got {_fmt_shape(shape)}{extra}")

    if (leading and len(shape) < len(named)) or (not leading and len(shape) != len(named)):
        need = f"at least {len(named)}" if leading else f"{len(named)}"
        fail(f"expected {need} dimensions, got {len(shape)}")
    tail = shape[len(shape) - len(named):]
    for axis, want, size in zip(named, fixed, tail, strict=True):
        if size is None:
            continue
        if want is not None:
            if size != want:
                fail()
        elif axis in sizes:
            if sizes[axis][0] != size:
                fail()
        else:
            sizes[axis] = (size, source)
    if leading:
        batch = shape[: len(shape) - len(named)]
        if "..." in sizes:
            if sizes["..."][0] != batch:
                fail("leading batch axes must be equal; refattn does not broadcast them")
        else:
            sizes["..."] = (batch, source)
    return sizes


def check_finite(name: str, x: Any, *, xp: Any) -> None:
    """Raise ``ValueError`` naming `name` when `x` holds a NaN or an infinity."""
    if not bool(xp.all(xp.isfinite(x))):
        bad = int(xp.sum(xp.astype(~xp.isfinite(x), xp.int64)))
        entries = "entry" if bad == 1 else "entries"
        raise ValueError(f"{name}: expected finite values; got {bad} non-finite {entries}")


def _as_int(value: Any, name: str, expected: str) -> int:
    """``operator.index(value)``, or the family's ``TypeError`` (bool is not an integer here)."""
    import operator

    if isinstance(value, bool):
        raise TypeError(f"{name}: expected {expected}; got the bool {value!r}")
    try:
        return int(operator.index(value))
    except TypeError:
        raise TypeError(f"{name}: expected {expected}; got {value!r} of type {_type_name(value)}") from None


def check_positive_int(value: Any, name: str) -> int:
    """Return `value` as an ``int`` if it is an integer >= 1.

    The integer/choice family (:func:`check_positive_int`, :func:`check_nonneg_int`, :func:`check_choice`)
    takes the value first and the argument name second, and raises with one message style:
    ``"<name>: expected <what>; got <value>"`` (``TypeError`` for a non-integer, bool included;
    ``ValueError`` for an integer out of range). NumPy integers are accepted (``operator.index``).
    """
    v = _as_int(value, name, "a positive integer")
    if v <= 0:
        raise ValueError(f"{name}: expected a positive integer; got {v}")
    return v


def check_nonneg_int(value: Any, name: str) -> int:
    """Return `value` as an ``int`` if it is an integer >= 0 (style: :func:`check_positive_int`)."""
    v = _as_int(value, name, "a non-negative integer")
    if v < 0:
        raise ValueError(f"{name}: expected a non-negative integer; got {v}")
    return v


def check_choice(value: Any, name: str, choices: tuple) -> Any:
    """Return `value` if it is one of `choices`, else raise ``ValueError`` listing them (family style)."""
    try:
        ok = value in choices
    except TypeError:  # an unhashable value tested against a set/dict
        ok = False
    if not ok:
        raise ValueError(f"{name}: expected one of {', '.join(repr(c) for c in choices)}; got {value!r}")
    return value


def device_of(x: Any) -> Any:
    """The device of `x` (``array_api_compat.device``)."""
    return array_api_compat.device(x)


def sum_to_shape(x: Any, shape: tuple, *, xp: Any) -> Any:
    """Sum `x` over the axes along which an array of `shape` was broadcast to ``x.shape`` (a gradient's
    reduction for a broadcast input)."""
    shape = tuple(shape)
    extra = x.ndim - len(shape)
    if extra < 0:
        raise ValueError(f"sum_to_shape: cannot reduce shape {_fmt_shape(tuple(x.shape))} "
                         f"to {_fmt_shape(shape)}")
    if extra:
        x = xp.sum(x, axis=tuple(range(extra)))
    axes = tuple(i for i, s in enumerate(shape) if s == 1 and x.shape[i] != 1)
    if axes:
        x = xp.sum(x, axis=axes, keepdims=True)
    return x


def quiet_nonfinite(*arrays: Any):
    """A context in which NumPy does not warn about inf/NaN arithmetic (``numpy.errstate``; a no-op for other
    namespaces): for computations that validate their *result* once instead of every input first, where a
    non-finite input is reported by that check with the argument's name, not by a RuntimeWarning on the
    way."""
    import contextlib

    numpy_arrays = [a for a in arrays if array_api_compat.is_numpy_array(a)]
    if numpy_arrays:                                                              # numpy.errstate, via compat
        return array_api_compat.array_namespace(numpy_arrays[0]).errstate(
            invalid="ignore", over="ignore", divide="ignore", under="ignore")
    return contextlib.nullcontext()


def cumulative_max(x: Any, *, axis: int = -2, xp: Any) -> Any:
    """Running maximum of `x` along `axis` (``out[i] = max_{j <= i} x[j]``); same shape and dtype.

    The standard has ``cumulative_sum`` but no running maximum. NumPy arrays use one in-place ``maximum`` per
    row; other namespaces a blocked scan with ``xp.maximum``: blocks of ``B = ceil(sqrt(n))`` rows, a
    running maximum inside each block (B slice updates), then the blocks' carries (another B), so about two
    passes over the data and 2 sqrt(n) small operations.
    """
    if array_api_compat.is_numpy_array(x):
        # NumPy (through compat): one in-place ufunc call per row, contiguous; maximum.accumulate along a
        # non-last axis walks the array with a large stride and is much slower (BENCHMARKS.md).
        out = x.copy()
        rows = array_api_compat.array_namespace(x).moveaxis(out, axis, 0)          # a view of out
        for i in range(1, rows.shape[0]):
            array_api_compat.array_namespace(x).maximum(rows[i - 1], rows[i], out=rows[i])
        return out
    axis = axis % x.ndim
    n = x.shape[axis]
    if n <= 1:
        return x
    x = xp.moveaxis(x, axis, 0) if axis != 0 else x
    B = max(1, int(n ** 0.5 + 0.999))
    nb = -(-n // B)
    pad = nb * B - n
    if pad:
        fill = xp.full((pad,) + tuple(x.shape[1:]), -float("inf"), dtype=x.dtype, device=device_of(x))
        x = xp.concat([x, fill], axis=0)
    blocks = xp.reshape(x, (nb, B) + tuple(x.shape[1:]))                            # (nb, B, ...)
    rows = [blocks[:, 0, ...]]
    for t in range(1, B):  # running max in each block
        rows.append(xp.maximum(rows[-1], blocks[:, t, ...]))
    inner = xp.stack(rows, axis=1)                                                  # (nb, B, ...)
    carry = [rows[-1][0, ...]]
    for b in range(1, nb):  # block-end maxima, carried
        carry.append(xp.maximum(carry[-1], rows[-1][b, ...]))
    prev = xp.stack([xp.full_like(carry[0], -float("inf"))] + carry[:-1], axis=0)   # (nb, ...) before block b
    out = xp.maximum(inner, xp.expand_dims(prev, axis=1))                           # (nb, B, ...)
    out = xp.reshape(out, (nb * B,) + tuple(out.shape[2:]))[:n, ...]
    return xp.moveaxis(out, 0, axis) if axis != 0 else out


#: Rows per block of the reference's float32 contraction: OpenBLAS's sgemm over a long inner axis with a small
#: output runs at about half the speed of the same GEMM in 256-row blocks summed (BENCHMARKS.md, attention).
CONTRACT_BLOCK_ROWS = 256


@_dispatch.define("contract_rows")
def _contract_rows_reference(a: Any, b: Any) -> Any:
    """``a^T b`` over the row axis: ``a: (..., N, p)``, ``b: (..., N, r)`` -> ``(..., p, r)`` (float32 in
    blocks of :data:`CONTRACT_BLOCK_ROWS` rows, summed in order)."""
    xp = namespace(a, b)
    n, B = a.shape[-2], CONTRACT_BLOCK_ROWS
    if a.dtype != xp.float32 or n <= 2 * B:
        return xp.matrix_transpose(a) @ b
    out = None
    for r0 in range(0, n, B):
        part = xp.matrix_transpose(a[..., r0:r0 + B, :]) @ b[..., r0:r0 + B, :]   # (..., p, r)
        out = part if out is None else out + part
    return out


def contract_rows(a: Any, b: Any) -> Any:
    r"""``a^T b`` summed over the long row axis: ``a: (..., N, p)``, ``b: (..., N, r)`` -> ``(..., p, r)``.

    The GEMM with a long inner axis and a small output (``phi_k^T [v, 1]`` and ``phi_q^T g`` in linear
    attention, ``du^T x`` for a projection's weight gradient). It is the hot primitive ``"contract_rows"`` of
    :mod:`refattn._dispatch`: a batched GEMM with a long inner axis and a small output per head leaves most of
    a GPU idle, so ``accel.use("cupy")`` swaps in one 2-D GEMM per batch entry (:mod:`accel.cupy.contract`);
    the reference is one matmul.
    """
    return _dispatch.implementation("contract_rows")(a, b)
