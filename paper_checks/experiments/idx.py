"""NumPy-only edge: read MNIST-format IDX files (Fashion-MNIST, MNIST, KMNIST, ...) and find the real data.

The IDX format (LeCun et al.'s MNIST page): a 4-byte magic number ``0x00 0x00 <type> <ndim>``, then ``ndim``
big-endian uint32 dimensions, then ``prod(dims)`` big-endian values of ``<type>`` (``0x08`` uint8, ``0x09``
int8, ``0x0B`` int16, ``0x0C`` int32, ``0x0D`` float32, ``0x0E`` float64). Files may be gzip-compressed
(detected from the gzip magic bytes, not from the name).

* :func:`read_idx` -- one file -> a NumPy array; every malformed file raises ``ValueError`` naming the file
  and what is wrong (bad magic, unknown type, truncated header or data, trailing bytes, not a regular file,
  a declared size over :data:`MAX_IDX_BYTES`). Untrusted files are bounded before anything is allocated: the
  declared dimensions are multiplied as Python integers (no int64 overflow) and checked against the bound,
  and a gzip stream is decompressed only up to the declared size plus one byte (a small ``.gz`` that would
  inflate to gigabytes is refused after reading what its header declares).
* :func:`load_mnist_format` -- a directory holding ``{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]`` ->
  :class:`ImageData`, with the images ``(N, H, W)`` uint8 and the labels ``(N,)`` in 0..9 checked against
  each other (a labels file passed as images, or counts that differ, is an error).
* :func:`data_dir` -- the directory the experiments read: ``$PAPER_CHECKS_DATA`` (set by ``python -m
  paper_checks --data DIR``) or Debian's ``/usr/share/datasets/fashion-mnist`` (``apt-get install
  dataset-fashion-mnist``).
"""

from __future__ import annotations

import gzip
import os
import stat
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

__all__ = ["IDX_TYPES", "MAX_IDX_BYTES", "DEFAULT_DATA_DIR", "DATA_ENV", "INSTALL_HINT", "ImageData",
           "read_idx", "write_idx", "mnist_files", "load_mnist_format", "data_dir", "find_real_data"]

#: IDX type byte -> NumPy dtype (big-endian on disk).
IDX_TYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"),
             0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}
#: The largest data block :func:`read_idx` accepts (declared dimensions x item size): 1 GiB, twenty times
#: Fashion-MNIST's training images (47 MB).
MAX_IDX_BYTES = 2**30
DEFAULT_DATA_DIR = Path("/usr/share/datasets/fashion-mnist")
DATA_ENV = "PAPER_CHECKS_DATA"
INSTALL_HINT = ("apt-get install dataset-fashion-mnist (Debian; files in /usr/share/datasets/fashion-mnist), "
                "or python -m paper_checks --data DIR with any MNIST-format directory")
_SPLITS = {"train": "train", "test": "t10k"}


class ImageData(NamedTuple):
    """An MNIST-format dataset: ``x_*: (N, H, W)`` uint8, ``y_*: (N,)`` int64 in 0..9, and its source."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    source: str        # the directory read (or a description of a stand-in)


def _read_exactly(f, n: int, path: Path, what: str) -> bytearray:
    """`n` bytes from the open stream `f` into one preallocated buffer (ValueError naming `path` when the
    stream ends first)."""
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = f.readinto(view[got:])
        if not k:
            raise ValueError(f"{path}: truncated IDX {what}: {got} byte(s), expected {n}")
        got += k
    return buf


def read_idx(path, *, max_bytes: int = MAX_IDX_BYTES) -> np.ndarray:
    """The array stored in IDX file `path` (gzip or plain), in native byte order.

    The header is read first; its dimensions are multiplied as Python integers and the data block they
    declare must not exceed `max_bytes` (default :data:`MAX_IDX_BYTES`), so nothing larger is allocated or
    decompressed. The data block is then read into one buffer, and a single further byte tells trailing data
    apart (a gzip stream is never inflated past the declared size plus one byte).

    Raises ``ValueError`` naming the file when it is not a regular file (a FIFO, a device), the magic number
    is wrong, the type byte is unknown, the declared size exceeds `max_bytes`, the header or the data are
    truncated, bytes follow the data or the gzip stream is corrupt; ``FileNotFoundError`` when it does not
    exist."""
    path = Path(path)
    if not stat.S_ISREG(path.stat().st_mode):                  # follows links: /dev/zero, a FIFO are refused
        raise ValueError(f"{path}: not a regular file (a FIFO, device or directory); expected an IDX file")
    try:
        with open(path, "rb") as raw_f:
            gz = raw_f.read(2) == b"\x1f\x8b"                                       # gzip magic
            raw_f.seek(0)
            f = gzip.GzipFile(fileobj=raw_f, mode="rb") if gz else raw_f
            return _read_stream(f, path, max_bytes, None if gz else os.fstat(raw_f.fileno()).st_size)
    except (OSError, EOFError, zlib.error) as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise ValueError(f"{path}: corrupt or truncated gzip stream ({exc})") from None


def _read_stream(f, path: Path, max_bytes: int, file_size: int | None) -> np.ndarray:
    magic = f.read(4)
    if len(magic) < 4:
        raise ValueError(f"{path}: truncated IDX header: {len(magic)} byte(s), expected at least 4")
    if magic[0] != 0 or magic[1] != 0:
        raise ValueError(f"{path}: not an IDX file: magic number starts {magic[:2].hex()}, expected 0000")
    type_byte, ndim = magic[2], magic[3]
    if type_byte not in IDX_TYPES:
        raise ValueError(f"{path}: unknown IDX type byte 0x{type_byte:02x}; expected one of "
                         f"{', '.join(f'0x{t:02x}' for t in IDX_TYPES)}")
    if ndim == 0:
        raise ValueError(f"{path}: IDX header declares 0 dimensions; expected at least 1")
    head = 4 + 4 * ndim
    rest = f.read(4 * ndim)
    if len(rest) < 4 * ndim:
        raise ValueError(f"{path}: truncated IDX header: {4 + len(rest)} bytes, expected {head} for {ndim} "
                         "dimensions")
    dims = tuple(int.from_bytes(rest[4 * i:4 * i + 4], "big") for i in range(ndim))
    dt = IDX_TYPES[type_byte]
    n_bytes = dt.itemsize
    for n in dims:                                      # Python integers: no overflow, however large
        n_bytes *= n
    if n_bytes > max_bytes:
        raise ValueError(f"{path}: the IDX header declares shape {dims} of {dt.name}, {n_bytes} bytes, over "
                         f"the bound of {max_bytes} bytes (MAX_IDX_BYTES); refused before reading the data")
    if file_size is not None and file_size - head != n_bytes:          # a plain file: its size says it all
        got = file_size - head
        if got < n_bytes:
            raise ValueError(f"{path}: truncated IDX data: {got} bytes after the header, expected {n_bytes} "
                             f"for shape {dims} of {dt.name}")
        raise ValueError(f"{path}: {got - n_bytes} unexpected byte(s) after the IDX data of shape {dims}")
    buf = _read_exactly(f, n_bytes, path, f"data (shape {dims} of {dt.name})")
    if f.read(1):                                       # one byte more, never the whole tail
        raise ValueError(f"{path}: unexpected byte(s) after the IDX data of shape {dims}")
    arr = np.frombuffer(buf, dtype=dt).reshape(dims)
    return arr.astype(dt.newbyteorder("="), copy=False)


def write_idx(path, array: np.ndarray, *, compress: bool | None = None) -> Path:
    """Write `array` as an IDX file (gzip when `compress`, default: when the name ends in ``.gz``). For tests
    and for users converting their own data; the dtype must be one of :data:`IDX_TYPES`."""
    path = Path(path)
    a = np.asarray(array)
    codes = {v.newbyteorder("="): k for k, v in IDX_TYPES.items()}
    code = codes.get(a.dtype.newbyteorder("="))
    if code is None:
        raise TypeError(f"array: dtype {a.dtype} has no IDX type; expected one of "
                        f"{sorted(str(v.newbyteorder('=')) for v in IDX_TYPES.values())}")
    if not 1 <= a.ndim <= 255:
        raise ValueError(f"array: expected 1 to 255 dimensions; got {a.ndim}")
    payload = (bytes([0, 0, code, a.ndim]) + np.asarray(a.shape, dtype=">u4").tobytes()
               + a.astype(IDX_TYPES[code]).tobytes())
    if compress if compress is not None else path.suffix == ".gz":
        payload = gzip.compress(payload, mtime=0)
    path.write_bytes(payload)
    return path


def mnist_files(directory) -> dict[str, Path] | None:
    """``{"train-images", "train-labels", "test-images", "test-labels"} -> path`` of an MNIST-format directory
    (``.gz`` or plain), or None when any of the four is missing."""
    d = Path(directory)
    out = {}
    for split, stem in _SPLITS.items():
        for what, kind in (("images", "idx3"), ("labels", "idx1")):
            base = d / f"{stem}-{what}-{kind}-ubyte"
            hit = next((p for p in (base.with_name(base.name + ".gz"), base) if p.is_file()), None)
            if hit is None:
                return None
            out[f"{split}-{what}"] = hit
    return out


def load_mnist_format(directory, *, n_classes: int = 10) -> ImageData:
    """Read an MNIST-format directory: images ``(N, H, W)`` uint8 and labels ``(N,)`` in ``0..n_classes-1``.

    Raises ``FileNotFoundError`` naming the missing files (and how to install Fashion-MNIST) and
    ``ValueError`` when a file has the wrong type or rank (e.g. a labels file where images belong), or image
    and label counts differ, or a label is out of range."""
    d = Path(directory)
    files = mnist_files(d)
    if files is None:
        raise FileNotFoundError(f"{d}: expected MNIST-format files "
                                "{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]; "
                                f"not all four are there ({INSTALL_HINT})")
    arrays = {}
    for split in _SPLITS:
        x, y = read_idx(files[f"{split}-images"]), read_idx(files[f"{split}-labels"])
        if x.dtype != np.uint8 or x.ndim != 3:
            raise ValueError(f"{files[f'{split}-images']}: expected images, a 3-D uint8 array (N, H, W); got "
                             f"{x.ndim}-D {x.dtype} of shape {x.shape}")
        if y.dtype != np.uint8 or y.ndim != 1:
            raise ValueError(f"{files[f'{split}-labels']}: expected labels, a 1-D uint8 array (N,); got "
                             f"{y.ndim}-D {y.dtype} of shape {y.shape}")
        if x.shape[0] != y.shape[0]:
            raise ValueError(f"{d}: {split} split has {x.shape[0]} images but {y.shape[0]} labels")
        if y.size and int(y.max()) >= n_classes:
            raise ValueError(f"{files[f'{split}-labels']}: label {int(y.max())} out of range; expected 0.."
                             f"{n_classes - 1}")
        arrays[split] = (x, y.astype(np.int64))
    if arrays["train"][0].shape[1:] != arrays["test"][0].shape[1:]:
        raise ValueError(f"{d}: train images are {arrays['train'][0].shape[1:]} but test images are "
                         f"{arrays['test'][0].shape[1:]}")
    return ImageData(*arrays["train"], *arrays["test"], source=str(d))


def data_dir() -> Path:
    """``$PAPER_CHECKS_DATA`` when set (``python -m paper_checks --data DIR`` sets it, also for worker
    processes), else :data:`DEFAULT_DATA_DIR`."""
    env = os.environ.get(DATA_ENV)
    return Path(env) if env else DEFAULT_DATA_DIR


def find_real_data() -> Path | None:
    """:func:`data_dir` when it holds the four MNIST-format files, else None (the experiments then fall back
    to a stand-in and say so)."""
    d = data_dir()
    return d if mnist_files(d) is not None else None
