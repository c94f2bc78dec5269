"""Data for the papers' experiments, generated here (no download): shifted digits, the sparse sum
task, ListOps.

* :func:`digits_on_canvas`, :func:`shift_horizontal`, :func:`shiftable` -- Horn et al. Sec. 3 / Figure 1 at
  laptop scale: scikit-learn's bundled 8x8 digits placed in the centre of a larger canvas; a horizontal shift
  is applied only to images that keep every non-zero pixel (the paper evaluates "the subset of images ...
  which can be shifted for 8 pixels in both directions without removing non-zero pixels").
* :func:`sparse_sum_task` -- Chowdhury et al. Appendix E.1: pairs ``(v_i, a_i)``, label ``sum_i v_i a_i`` in
  ``-4..4`` (9 classes), ``v`` flips biased so that no prefix sum leaves ``[-4, 4]``, classes balanced by
  over-generation and sampling.
* :func:`listops_dataset` with :func:`listops_generate` / :func:`listops_evaluate` -- LRA's ListOps (Tay et
  al. 2021; Nangia & Bowman 2018): prefix expressions over ``MAX MIN MED SM`` of digits. The generator
  evaluates the tree it builds; :func:`listops_evaluate` is an independent evaluator (an explicit-stack
  shift-reduce pass over the token string) used by the tests to check every label.

Everything takes a ``numpy.random.Generator`` (NumPy-only edge: this is data generation, not the
array-API core).
"""

from __future__ import annotations

import statistics
from typing import NamedTuple

import numpy as np

__all__ = [
    "digits_on_canvas", "shift_horizontal", "shiftable", "column_extent",
    "SparseTask", "sparse_sum_task", "sparse_features", "SPARSE_MAX_ABS", "SPARSE_CLASSES",
    "LISTOPS_OPS", "LISTOPS_VOCAB", "listops_generate", "listops_tokens", "listops_evaluate",
    "listops_dataset", "ListOpsData",
]


# ---- shifted digits (Horn et al. Sec. 3, Figure 1) ---------------------------------------------------------
def digits_on_canvas(canvas: tuple[int, int] = (16, 16)) -> tuple[np.ndarray, np.ndarray]:
    """scikit-learn's bundled 8x8 digits (1797 images, intensities 0..16) centred on a ``canvas`` of zeros.

    Returns ``images: (N, H, W)`` float64 in ``[0, 1]`` and ``labels: (N,)`` int64 (0..9). The 8x8 image
    occupies rows ``(H-8)//2 ..`` and columns ``(W-8)//2 ..``; everything else is background (exact zeros).
    """
    from sklearn.datasets import load_digits  # bundled with scikit-learn: no download

    H, W = canvas
    if H < 8 or W < 8:
        raise ValueError(f"canvas: expected at least (8, 8) to hold an 8x8 digit; got {canvas}")
    d = load_digits()
    small = d.images / 16.0                                                         # (N, 8, 8)
    out = np.zeros((small.shape[0], H, W))                                          # (N, H, W)
    r0, c0 = (H - 8) // 2, (W - 8) // 2
    out[:, r0:r0 + 8, c0:c0 + 8] = small
    return out, d.target.astype(np.int64)


def column_extent(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """First and last column holding a non-zero pixel, per image: ``images (N, H, W)`` -> two ``(N,)``
    int arrays.

    An all-zero image gets ``first = W``, ``last = -1`` (it can be shifted anywhere)."""
    nz_cols = np.any(images != 0, axis=1)                                           # (N, W)
    W = images.shape[-1]
    any_nz = nz_cols.any(axis=1)
    first = np.where(any_nz, np.argmax(nz_cols, axis=1), W)
    last = np.where(any_nz, W - 1 - np.argmax(nz_cols[:, ::-1], axis=1), -1)
    return first, last


def shiftable(images: np.ndarray, max_shift: int) -> np.ndarray:
    """Boolean ``(N,)``: True where the image can be shifted by every ``dx`` in ``[-max_shift, max_shift]``
    horizontally without a non-zero pixel leaving the canvas."""
    first, last = column_extent(images)
    W = images.shape[-1]
    return (first - max_shift >= 0) & (last + max_shift <= W - 1)


def shift_horizontal(images: np.ndarray, dx: int) -> np.ndarray:
    """Shift every image ``dx`` columns to the right (``dx < 0``: left), filling with zeros.

    Raises ``ValueError`` if any image would lose a non-zero pixel: select the images with :func:`shiftable`
    first (the paper's protocol). ``images: (N, H, W)`` -> ``(N, H, W)``.
    """
    dx = int(dx)
    first, last = column_extent(images)
    W = images.shape[-1]
    bad = (first + dx < 0) | (last + dx > W - 1)
    if np.any(bad):
        raise ValueError(f"dx: shifting by {dx} would drop non-zero pixels of {int(bad.sum())} image(s) "
                         f"(first index {int(np.argmax(bad))}); "
                         f"select images with shiftable(images, {abs(dx)})")
    out = np.zeros_like(images)
    if dx >= 0:
        out[..., dx:] = images[..., :W - dx]
    else:
        out[..., :W + dx] = images[..., -dx:]
    return out


# ---- sparse sum task (Chowdhury et al. Appendix E.1) -------------------------------------------------------
SPARSE_MAX_ABS = 4
SPARSE_CLASSES = 2 * SPARSE_MAX_ABS + 1  # labels -4..4, stored as class index label + 4


class SparseTask(NamedTuple):
    """``v: (N, L)`` in {-1, +1} (int8), ``a: (N, L)`` in {0, 1} (int8), ``y: (N,)`` class index in 0..8
    (= ``sum_i v_i a_i + 4``)."""

    v: np.ndarray
    a: np.ndarray
    y: np.ndarray


def _sparse_draw(rng: np.random.Generator, n: int, L: int, p: float) -> tuple[np.ndarray, np.ndarray]:
    """Draw ``n`` raw sequences (before class balancing), vectorised over sequences, sequential
    over positions.

    Appendix E.1: ``a_i ~ Bernoulli(p)`` independently; ``v_i`` is a fair coin except that it is biased to 1
    (forced) towards zero when the running sum ``S = sum_{j<i} v_j a_j`` sits at ``+-4`` and the position is
    relevant, so no prefix sum ever has ``|S| > 4`` (the minimal bias that guarantees the constraint).
    """
    a = (rng.random((n, L)) < p).astype(np.int8)                                   # (n, L)
    u = rng.random((n, L))                                                          # (n, L) coin flips
    v = np.empty((n, L), dtype=np.int8)
    s = np.zeros(n, dtype=np.int64)                                                 # running sum S, (n,)
    for i in range(L):
        p_plus = np.where(s >= SPARSE_MAX_ABS, 0.0, np.where(s <= -SPARSE_MAX_ABS, 1.0, 0.5))   # (n,)
        vi = np.where(u[:, i] < p_plus, 1, -1).astype(np.int8)
        # irrelevant positions are not constrained: their coin stays fair
        vi = np.where(a[:, i] == 1, vi, np.where(u[:, i] < 0.5, 1, -1)).astype(np.int8)
        v[:, i] = vi
        s += vi.astype(np.int64) * a[:, i]
    return v, a


def sparse_sum_task(rng: np.random.Generator, n: int, L: int, p: float, *,
                    max_rounds: int = 200) -> SparseTask:
    """``n`` sequences of the sparse sum task (Appendix E.1), classes balanced by over-generation
    and sampling.

    Parameters
    ----------
    n : int        number of sequences; must be a multiple of 9 (equal count per class).
    L : int        sequence length (paper: 200).
    p : float      probability that a position is relevant, ``a_i ~ Bernoulli(p)``. The paper labels its
                   datasets 0.1, 0.5 and 0.9 and calls the number "sparsity", while its Figure 6 caption
                   says the number "is inversely proportional to sparsity": we read it as this Bernoulli
                   parameter ``p``.
    """
    if n % SPARSE_CLASSES:
        raise ValueError(f"n: expected a multiple of {SPARSE_CLASSES} (balanced classes); got {n}")
    if not 0.0 < p <= 1.0:
        raise ValueError(f"p: expected a probability in (0, 1]; got {p}")
    if L < SPARSE_MAX_ABS:
        raise ValueError(f"L: expected at least {SPARSE_MAX_ABS} so every class -4..4 is reachable; got {L}")
    per = n // SPARSE_CLASSES
    pools: list[list[tuple[np.ndarray, np.ndarray]]] = [[] for _ in range(SPARSE_CLASSES)]
    have = np.zeros(SPARSE_CLASSES, dtype=np.int64)
    for _ in range(max_rounds):
        if np.all(have >= per):
            break
        v, a = _sparse_draw(rng, max(4 * n, 64), L, p)                             # over-generate
        cls = (v.astype(np.int64) * a).sum(axis=1) + SPARSE_MAX_ABS                # (batch,)
        for c in range(SPARSE_CLASSES):
            need = per - have[c]
            if need > 0:
                idx = np.flatnonzero(cls == c)[:need]
                pools[c].append((v[idx], a[idx]))
                have[c] += idx.size
    else:
        if not np.all(have >= per):
            raise RuntimeError(f"sparse_sum_task: classes still short after {max_rounds} rounds: "
                               f"{have.tolist()} of {per} (L={L}, p={p} make the extreme classes too rare)")
    vs = np.concatenate([np.concatenate([b[0] for b in pools[c]]) for c in range(SPARSE_CLASSES)])
    as_ = np.concatenate([np.concatenate([b[1] for b in pools[c]]) for c in range(SPARSE_CLASSES)])
    y = np.repeat(np.arange(SPARSE_CLASSES), per)
    perm = rng.permutation(n)                                                       # sample order: shuffled
    return SparseTask(vs[perm], as_[perm], y[perm])


def sparse_features(task: SparseTask, dtype=np.float64) -> np.ndarray:
    """Appendix E.2's 3-d many-hot input ``(v_i = 1, v_i = -1, a_i)``: ``(N, L)`` pairs -> ``(N, L, 3)``."""
    return np.stack([task.v == 1, task.v == -1, task.a == 1], axis=-1).astype(dtype)


# ---- ListOps (LRA) -----------------------------------------------------------------------------------------
LISTOPS_OPS = ("MAX", "MIN", "MED", "SM")
# token ids: 0 pad, 1..10 digits 0..9, 11..14 "[MAX" "[MIN" "[MED" "[SM", 15 "]"
LISTOPS_VOCAB = ("<pad>",) + tuple(str(i) for i in range(10)) + tuple("[" + o for o in LISTOPS_OPS) + ("]",)
_TOK = {t: i for i, t in enumerate(LISTOPS_VOCAB)}


def _apply(op: str, args: list[int]) -> int:
    """The generator's own semantics (LRA: MAX, MIN, MED = int(median), SM = sum mod 10)."""
    if op == "MAX":
        return max(args)
    if op == "MIN":
        return min(args)
    if op == "MED":
        return int(statistics.median(args))
    return sum(args) % 10


def listops_generate(rng: np.random.Generator, *, max_depth: int, max_args: int, p_leaf: float = 0.25):
    """One random ListOps tree, returned as ``(tree, value)``; ``tree`` is an int (a digit)
    or ``(op, [children])``.

    At depth ``< max_depth`` a node is a digit with probability ``p_leaf`` (always at ``max_depth``), else an
    operator with ``2..max_args`` arguments; the value is computed while the tree is built (bottom-up)."""
    def node(depth: int):
        if depth >= max_depth or rng.random() < p_leaf:
            d = int(rng.integers(10))
            return d, d
        op = LISTOPS_OPS[int(rng.integers(len(LISTOPS_OPS)))]
        kids = [node(depth + 1) for _ in range(int(rng.integers(2, max_args + 1)))]
        return (op, [k[0] for k in kids]), _apply(op, [k[1] for k in kids])

    if max_depth < 1 or max_args < 2:
        raise ValueError(f"max_depth >= 1 and max_args >= 2 expected; got {max_depth}, {max_args}")
    tree, value = node(0)
    if isinstance(tree, int):  # the root is always an operator
        op = LISTOPS_OPS[int(rng.integers(len(LISTOPS_OPS)))]
        kids = [int(rng.integers(10)) for _ in range(int(rng.integers(2, max_args + 1)))]
        tree, value = (op, kids), _apply(op, kids)
    return tree, value


def listops_tokens(tree) -> list[str]:
    """Prefix token string of a tree: ``[MAX 2 [MIN 4 7 ] 0 ]`` ->
    ``['[MAX', '2', '[MIN', '4', '7', ']', '0', ']']``."""
    if isinstance(tree, int):
        return [str(tree)]
    op, kids = tree
    out = ["[" + op]
    for k in kids:
        out += listops_tokens(k)
    return out + ["]"]


def listops_evaluate(tokens: list[str]) -> int:
    """Evaluate a ListOps token string independently of the generator: an explicit-stack shift-reduce pass.

    Each ``[OP`` pushes a frame; digits append to the top frame; ``]`` pops the frame, reduces it with the
    operator (median: mean of the two middle values of the sorted list, floored) and appends the result to the
    frame below. Raises ``ValueError`` on a malformed string."""
    stack: list[tuple[str, list[int]]] = [("<root>", [])]
    for t in tokens:
        if t.startswith("["):
            if t[1:] not in LISTOPS_OPS:
                raise ValueError(f"tokens: unknown operator {t!r}")
            stack.append((t[1:], []))
        elif t == "]":
            if len(stack) < 2:
                raise ValueError("tokens: ']' without an open operator")
            op, xs = stack.pop()
            if not xs:
                raise ValueError(f"tokens: operator {op} with no arguments")
            s = sorted(xs)
            n = len(s)
            val = {"MAX": s[-1], "MIN": s[0], "SM": sum(s) % 10,
                   "MED": s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) // 2}[op]
            stack[-1][1].append(val)
        elif t.isdigit() and len(t) == 1:
            stack[-1][1].append(int(t))
        else:
            raise ValueError(f"tokens: unexpected token {t!r}")
    if len(stack) != 1 or len(stack[0][1]) != 1:
        raise ValueError("tokens: expected exactly one complete expression")
    return stack[0][1][0]


class ListOpsData(NamedTuple):
    """``ids: (N, L)`` int64 token ids padded with 0 on the right, ``lengths: (N,)``, ``y: (N,)`` values 0..9,
    ``tokens``: the token strings (for the independent evaluator)."""

    ids: np.ndarray
    lengths: np.ndarray
    y: np.ndarray
    tokens: list


def listops_dataset(rng: np.random.Generator, n: int, *, max_len: int, min_len: int = 1, max_depth: int = 4,
                    max_args: int = 5, max_tries: int = 10_000_000) -> ListOpsData:
    """``n`` ListOps expressions whose token length lies in ``[min_len, max_len]`` (rejection sampling, as LRA
    filters its lengths), padded to ``max_len``."""
    if not 1 <= min_len <= max_len:
        raise ValueError(f"min_len, max_len: expected 1 <= min_len <= max_len; got {min_len}, {max_len}")
    ids = np.zeros((n, max_len), dtype=np.int64)
    lengths = np.zeros(n, dtype=np.int64)
    y = np.zeros(n, dtype=np.int64)
    toks: list = []
    tries = 0
    while len(toks) < n:
        tries += 1
        if tries > max_tries:
            raise RuntimeError(f"listops_dataset: could not draw {n} expressions of length "
                               f"{min_len}..{max_len} with max_depth={max_depth}, max_args={max_args}")
        tree, value = listops_generate(rng, max_depth=max_depth, max_args=max_args)
        t = listops_tokens(tree)
        if not min_len <= len(t) <= max_len:
            continue
        i = len(toks)
        ids[i, :len(t)] = [_TOK[s] for s in t]
        lengths[i], y[i] = len(t), value
        toks.append(t)
    return ListOpsData(ids, lengths, y, toks)
