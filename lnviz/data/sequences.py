"""Images read as sequences for the training lesson.

scikit-learn's bundled 8×8 digits (no download), read row by row (8 steps of 8 features, the
default), upsampled to 28×28 and read row by row (28 steps of 28, sequential MNIST's shape), or
read a few pixels at a time (16 steps of 4, 32 steps of 2): see :data:`DIGIT_READINGS`. Or
sequential MNIST (28 steps of 28) from a ``mnist.npz`` or the four IDX files a learner supplies
(plain or gzipped; the IDX header is checked before anything is inflated).
"""

from __future__ import annotations

import math
import os
import struct
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lnviz.data.files import load_arrays
from lnviz.limits import MAX_DATASET_VALUES, SEQUENCE_MAX_FEATURES, SEQUENCE_MAX_STEPS

__all__ = [
    "DIGIT_READINGS",
    "SequenceData",
    "load_data",
    "load_digits_data",
    "load_files",
    "load_mnist_idx",
    "load_mnist_npz",
    "read_idx",
    "upsample",
]

#: How the 8×8 digits can be read as sequences: (time steps, features per step) and how the page
#: names it. Longer sequences make the same digits a harder memory task: the label depends on
#: steps further back.
DIGIT_READINGS = {
    "rows": ((8, 8), "row by row: 8 steps of 8 pixels"),
    "rows28": ((28, 28), "upsampled to 28×28, row by row: 28 steps of 28 (sequential MNIST's "
                         "shape)"),
    "pixels4": ((16, 4), "4 pixels at a time: 16 steps of 4"),
    "pixels2": ((32, 2), "2 pixels at a time: 32 steps of 2"),
}
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_IDX_NAMES = ("train-images", "train-labels", "t10k-images", "t10k-labels")
_GZIP_MAGIC = b"\x1f\x8b"
#: Names of files that lnviz.load_arrays reads (the uploaders' types).
_ARRAY_SUFFIXES = (".npy", ".npz", ".safetensors", ".pt", ".pth")


@dataclass(frozen=True)
class SequenceData:
    """Images as sequences: ``x`` of shape (N, T, F) in [0, 1], one image row per step.

    The held-out part (``x_test``, ``y_test``) is fixed by the dataset, never by the seed.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def steps(self) -> int:
        """T, the sequence length (image rows)."""
        return int(self.x_train.shape[1])

    @property
    def features(self) -> int:
        """F, the features per step (image columns)."""
        return int(self.x_train.shape[2])

    @property
    def num_classes(self) -> int:
        """The number of classes: one more than the largest label."""
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def _as_sequences(images: np.ndarray, what: str) -> np.ndarray:
    """(N, T, F) float32 images; (N, D) with D a square is read as square images."""
    if images.ndim == 2 and math.isqrt(images.shape[1]) ** 2 == images.shape[1]:
        side = math.isqrt(images.shape[1])
        images = images.reshape(len(images), side, side)
    if images.ndim != 3 or min(images.shape) == 0:
        raise ValueError(f"{what} must be images of shape (N, rows, columns), got shape "
                         f"{list(images.shape)}")
    if not np.isfinite(images).all():
        raise ValueError(f"{what} hold NaN or infinite values, or values beyond float32's "
                         "±3.4e38 (the precision the training uses)")
    return images.astype(np.float32, copy=False)


def _as_labels(labels: np.ndarray, count: int, what: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or len(labels) != count:
        raise ValueError(f"{what} must hold one label per image ({count}), got shape "
                         f"{list(labels.shape)}")
    whole = np.isfinite(labels).all() and (labels == np.round(labels)).all()
    if not whole or labels.min() < 0 or labels.max() > 999:
        raise ValueError(f"{what} must be whole numbers from 0 to 999 (class indices)")
    return labels.astype(np.int64)


def _sequence_data(name: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                   y_test: np.ndarray) -> SequenceData:
    """Check shapes and labels, and scale the pixel values into [0, 1] with the training range."""
    x_train = _as_sequences(x_train, "the training images")
    x_test = _as_sequences(x_test, "the test images")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise ValueError(f"training images {list(x_train.shape[1:])} and test images "
                         f"{list(x_test.shape[1:])} must have the same size")
    rows, columns = x_train.shape[1:]
    if rows > SEQUENCE_MAX_STEPS:
        raise ValueError(f"the images have {rows} rows, read as {rows} time steps; at most "
                         f"{SEQUENCE_MAX_STEPS} are accepted (MNIST has 28), since every "
                         "training step goes through the rows one by one")
    if columns > SEQUENCE_MAX_FEATURES:
        raise ValueError(f"the images have {columns} columns, read as {columns} features per "
                         f"time step; at most {SEQUENCE_MAX_FEATURES} are accepted (MNIST has 28)")
    y_train = _as_labels(y_train, len(x_train), "the training labels")
    y_test = _as_labels(y_test, len(x_test), "the test labels")
    classes = np.unique(y_train)
    if len(classes) < 2:
        raise ValueError(f"the training labels hold a single class ({int(classes[0])}); there "
                         "is nothing to classify")
    # Pixels usually come as 0…255 (or 0…16 for the 8×8 digits); dividing by the range keeps
    # every input step on the same [0, 1] scale whatever the source.
    low, high = min(0.0, float(x_train.min())), max(1.0, float(x_train.max()))
    scale = high - low
    # A range wider than float32 holds (±3e38) overflowed to inf and made every pixel NaN,
    # which the page then blamed on the learning rate: such a file is scaled in float64.
    wide = scale > np.finfo(np.float32).max

    def unit(x: np.ndarray) -> np.ndarray:
        if wide:
            return ((x.astype(np.float64) - low) / scale).astype(np.float32)
        return (x - np.float32(low)) / np.float32(scale)

    return SequenceData(name, unit(x_train), y_train, np.clip(unit(x_test), 0, 1), y_test)


def _resize_matrix(size: int, new_size: int) -> np.ndarray:
    """(new_size, size): linear interpolation from ``size`` samples to ``new_size``, with the
    pixel centres aligned as ``torch.nn.functional.interpolate(..., align_corners=False)`` does."""
    position = np.clip((np.arange(new_size) + 0.5) * size / new_size - 0.5, 0, size - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, size - 1)
    weight = position - low
    matrix = np.zeros((new_size, size))
    np.add.at(matrix, (np.arange(new_size), low), 1 - weight)
    np.add.at(matrix, (np.arange(new_size), high), weight)
    return matrix


def upsample(images: np.ndarray, side: int) -> np.ndarray:
    """Square images (N, s, s) resized to (N, side, side) by bilinear interpolation (what
    ``F.interpolate(x, size=(side, side), mode="bilinear")`` computes), in float32."""
    rows = _resize_matrix(images.shape[1], side)
    columns = _resize_matrix(images.shape[2], side)
    return np.einsum("ij,njk,lk->nil", rows, images, columns).astype(np.float32)


def _read_digits(images: np.ndarray, reading: str) -> np.ndarray:
    """(N, 8, 8) digits as (N, steps, features) for one of :data:`DIGIT_READINGS`."""
    (steps, features), _ = DIGIT_READINGS[reading]
    if reading.startswith("rows") and steps != images.shape[1]:
        images = upsample(images, steps)
    return images.reshape(len(images), steps, features)


def load_digits_data(test_fraction: float = 0.25, reading: str = "rows") -> SequenceData:
    """scikit-learn's bundled 8×8 digits (1797 images, 10 classes) as sequences, read as
    ``reading`` says (a key of :data:`DIGIT_READINGS`; "rows": 8 steps of 8 features).

    The held-out set is a fixed quarter of the images (the same for every seed and reading).
    """
    from sklearn.datasets import load_digits

    if reading not in DIGIT_READINGS:
        raise ValueError(f"unknown reading {reading!r}; choose one of "
                         f"{', '.join(DIGIT_READINGS)}")
    digits = load_digits()
    order = np.random.RandomState(0).permutation(len(digits.target))
    held_out = math.ceil(len(order) * test_fraction)
    test, train = order[:held_out], order[held_out:]
    images = _read_digits(digits.images.astype(np.float32), reading)
    name = "digits 8×8 (scikit-learn)" + ("" if reading == "rows" else
                                          f", {DIGIT_READINGS[reading][1].split(':')[0]}")
    return _sequence_data(name, images[train], digits.target[train], images[test],
                          digits.target[test])


def load_mnist_npz(source: bytes | str | os.PathLike[str], *,
                   max_elements: int = MAX_DATASET_VALUES) -> SequenceData:
    """Sequential MNIST from the standard ``mnist.npz`` (x_train, y_train, x_test, y_test), or
    any file of those four arrays that :func:`lnviz.load_arrays` reads (.safetensors, .pt).

    Read with :func:`lnviz.load_arrays`, which never unpickles and refuses more than
    ``max_elements`` values in all from the sizes the file declares, before decompressing.
    Raises ValueError (a :class:`lnviz.TensorFileError` for a damaged file) saying what is
    missing or wrong.
    """
    arrays = load_arrays(source, max_elements=max_elements)
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in arrays]
    if missing:
        raise ValueError(f"the file lacks {', '.join(missing)}; expected the arrays "
                         f"x_train, y_train, x_test, y_test (found {', '.join(arrays)})")
    return _sequence_data("sequential MNIST (mnist.npz)", arrays["x_train"], arrays["y_train"],
                          arrays["x_test"], arrays["y_test"])


def _read_bytes(source: bytes | str | os.PathLike[str], limit: int) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        try:
            with open(source, "rb") as file:
                data = file.read(limit + 1)
        except OSError as err:
            raise ValueError(f"cannot read {os.fspath(source)!r}: {err.strerror}") from err
    if len(data) > limit:
        raise ValueError(f"the file is larger than the {limit} bytes accepted")
    return data


def _gunzip(data: bytes, limit: int) -> bytes:
    """Decompress a .gz file, refusing it as soon as it would grow past ``limit`` bytes. A file
    of several gzip members (``cat a.gz b.gz``, bgzip) is read whole, as gzip reads it; bytes
    after the last member other than zero padding are refused."""
    parts: list[bytes] = []
    size, rest = 0, data
    while True:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = inflater.decompress(rest, limit + 1 - size)
        except zlib.error as err:
            raise ValueError(f"corrupt .gz file ({err})") from err
        size += len(part)
        parts.append(part)
        if size > limit:
            raise ValueError(f"the .gz file expands to more than the {limit:,} bytes it declares")
        if not inflater.eof:
            raise ValueError("truncated .gz file: the compressed stream ends early")
        rest = inflater.unused_data
        if not rest.strip(b"\0"):
            return b"".join(parts)
        if not rest.startswith(b"\x1f\x8b"):
            raise ValueError("the .gz file holds other data after its compressed stream")


def _gunzip_head(data: bytes, size: int) -> bytes:
    """The first ``size`` bytes of a .gz file's content (fewer if it is shorter)."""
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, size)
    except zlib.error as err:
        raise ValueError(f"corrupt .gz file ({err})") from err


def _idx_header(data: bytes, max_elements: int) -> tuple[np.dtype, tuple[int, ...], int]:
    """An IDX header's dtype, shape and data offset, refusing more than ``max_elements``
    values. ``data`` needs only to reach the end of the header."""
    if len(data) < 4:
        raise ValueError(f"not an IDX file: {len(data)} bytes, shorter than the 4-byte magic")
    if data[:2] != b"\0\0":
        raise ValueError(f"not an IDX file: it starts with {data[:4]!r}, but an IDX magic "
                         "number starts with two zero bytes")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"not an IDX file: unknown type code 0x{code:02X} (known: "
                         f"{', '.join(f'0x{c:02X}' for c in _IDX_DTYPES)})")
    if not 1 <= ndim <= 8:
        raise ValueError(f"IDX file declares {ndim} dimensions; 1 to 8 are accepted")
    offset = 4 + 4 * ndim
    if len(data) < offset:
        raise ValueError("truncated IDX file: it ends inside the list of dimension sizes")
    shape = struct.unpack(f">{ndim}I", data[4:offset])
    count = math.prod(shape)
    if count > max_elements:
        raise ValueError(f"IDX file declares shape {list(shape)}, {count:,} values, more than "
                         f"the {max_elements:,} accepted")
    return np.dtype(_IDX_DTYPES[code]), shape, offset


def read_idx(source: bytes | str | os.PathLike[str], *, max_elements: int = MAX_DATASET_VALUES
             ) -> np.ndarray:
    """Parse an IDX file (the format of the original MNIST files), optionally gzipped.

    The format: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dims d, then d big-endian uint32 sizes, then the
    values, big-endian, in C order. The declared size must match the file exactly.

    Raises ValueError saying what is wrong with a file that is not a well-formed IDX file.
    """
    limit = max_elements * 8 + 1024
    data = _read_bytes(source, limit)
    if data[:2] == _GZIP_MAGIC:
        # Judge the declared shape before inflating anything: a small .gz can expand to GBs.
        dtype, shape, offset = _idx_header(_gunzip_head(data, 4 + 4 * 8), max_elements)
        data = _gunzip(data, offset + math.prod(shape) * dtype.itemsize)
    dtype, shape, offset = _idx_header(data, max_elements)
    count = math.prod(shape)
    expected = offset + count * dtype.itemsize
    if len(data) != expected:
        problem = "truncated" if len(data) < expected else "trailing bytes after the data"
        raise ValueError(f"{problem}: an IDX file of shape {list(shape)} holds {expected} bytes, "
                         f"this one {len(data)}")
    values = np.frombuffer(data, dtype, count, offset).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def _idx_role(name: str) -> str | None:
    """Which of the four MNIST files a name is (train/t10k × images/labels), if any."""
    base = Path(name).name.lower().replace(".", "-").replace("_", "-")
    split = "train" if base.startswith("train") else "t10k" if base.startswith(
        ("t10k", "test")) else None
    kind = "images" if ("images" in base or "idx3" in base) else "labels" if (
        "labels" in base or "idx1" in base) else None
    return f"{split}-{kind}" if split and kind else None


def load_mnist_idx(files: Mapping[str, bytes | str | os.PathLike[str]], *,
                   max_elements: int = MAX_DATASET_VALUES) -> SequenceData:
    """Sequential MNIST from its four IDX files, given as {file name: bytes or path}.

    The names tell the files apart as MNIST names them: ``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``
    (``.gz`` or ``train-images.idx3-ubyte`` spellings too). At most ``max_elements`` values in
    the four files together.
    """
    found: dict[str, bytes | str | os.PathLike[str]] = {}
    for name, source in files.items():
        role = _idx_role(name)
        if role is not None:
            found[role] = source
    missing = [role for role in _IDX_NAMES if role not in found]
    if missing:
        raise ValueError(f"need the four MNIST IDX files; missing {', '.join(missing)} (got "
                         f"{', '.join(Path(n).name for n in files) or 'none'})")
    parts = {}
    left = max_elements
    for role in _IDX_NAMES:
        try:
            parts[role] = read_idx(found[role], max_elements=left)
        except ValueError as err:
            raise ValueError(f"{role}: {err}" + (" (the four files share this limit)"
                                                 if left < max_elements else "")) from err
        left -= parts[role].size
    return _sequence_data("sequential MNIST (IDX files)", parts["train-images"],
                          parts["train-labels"], parts["t10k-images"], parts["t10k-labels"])


def load_files(files: Mapping[str, bytes], max_elements: int = MAX_DATASET_VALUES) -> SequenceData:
    """What the app's uploader received: one file of arrays (``mnist.npz``, or the same arrays
    in .safetensors or a torch.save file), or the four IDX files, with at most ``max_elements``
    values in all (the server's :attr:`lnviz.limits.Limits.training_values`)."""
    if len(files) == 1:
        ((name, data),) = files.items()
        # zip (.npz, torch.save), .npy, or .safetensors (a JSON header after its length)
        looks_like_arrays = data[:2] == b"PK" or data[:6] == b"\x93NUMPY" or data[8:9] == b"{"
        if looks_like_arrays or name.lower().endswith(_ARRAY_SUFFIXES):
            return load_mnist_npz(data, max_elements=max_elements)
    return load_mnist_idx(files, max_elements=max_elements)


def load_data(path: str | os.PathLike[str] | None = None, reading: str = "rows"
              ) -> SequenceData:
    """The CLI's data: the bundled digits (``None``, read as ``reading`` says), an
    ``mnist.npz`` file, or a folder with the four IDX files."""
    if path is None:
        return load_digits_data(reading=reading)
    path = Path(path)
    if path.is_dir():
        return load_mnist_idx({p.name: p for p in sorted(path.iterdir()) if p.is_file()})
    return load_mnist_npz(path)
