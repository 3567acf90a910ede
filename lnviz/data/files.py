"""Safe reading and writing of the tensor files a learner uploads or downloads.

`load_arrays` turns a .npy, .npz, .safetensors or torch.save file (bytes, a path, or an uploaded
file object) into float arrays without ever running code from the file and without allocating
more than its caps allow, so a hostile or broken upload can only ever produce a `TensorFileError`
with a message saying what was wrong. `load_image` decodes a PNG or JPEG into an (H, W, 3) uint8
picture, its size checked from the header before a pixel is decoded. `safetensors_metadata`
reads a .safetensors file's metadata (a capture's description of its layers) without loading its
tensors. `to_npy_bytes`, `to_npz_bytes` and `to_csv_text` write results back out for download.
`installed_folder` finds the folder of an installed package whose files lnviz reads (model
weights, sample photos) without importing it.

Caps, checked on what the file declares before memory is set aside for it:

========================  =====================================================================
what                      cap
========================  =====================================================================
bytes read                ``8 * max_elements`` plus 1 MiB, for every format
values, all arrays        ``max_elements`` (declared shapes, before anything is built)
arrays in one file        `MAX_NPZ_MEMBERS` for .npz, `MAX_ARRAYS` for .safetensors and torch
.safetensors header       `MAX_SAFETENSORS_HEADER_BYTES`, and within the file
torch.save pickle         `MAX_PICKLE_BYTES` and `MAX_PICKLE_OPCODES`, and nothing but tensors
                          (`lnviz.data.torch_pickle`, checked before torch.load starts)
torch.save storages       their declared sizes in the zip directory, in all, as bytes read
========================  =====================================================================
"""

from __future__ import annotations

import bisect
import functools
import importlib.util
import io
import itertools
import json
import math
import os
import re
import struct
import warnings
import zipfile
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from pickle import UnpicklingError  # the class torch's weights-only unpickler raises
from typing import Any, BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from lnviz.data.torch_pickle import (
    DTYPE_BYTES,
    MAX_NDIM,
    PickleForeign,
    PickleRefused,
    check_tensor_pickle,
    pickle_globals,
)
from lnviz.limits import IMAGE_MAX_BYTES, IMAGE_MAX_PIXELS, MAX_ELEMENTS

__all__ = [
    "MAX_ARRAYS",
    "MAX_NPZ_MEMBERS",
    "MAX_PICKLE_BYTES",
    "MAX_SAFETENSORS_HEADER_BYTES",
    "ImageFileError",
    "TensorFileError",
    "TensorTooLargeError",
    "installed_folder",
    "load_arrays",
    "nonfinite_report",
    "safetensors_metadata",
    "to_csv_text",
    "to_npy_bytes",
    "to_npz_bytes",
]

MAX_NPZ_MEMBERS = 64
#: The most tensors one .safetensors or torch.save file may hold: a checkpoint's state dict has a
#: few hundred (BERT-base 199, Llama-2-7B 291, ResNet-50 320); a capture has up to six per layer.
MAX_ARRAYS = 4096
#: The longest .safetensors header (the JSON table of tensors and the metadata) accepted: about
#: 150 bytes per tensor, so a full `MAX_ARRAYS` file's header is under 1 MiB.
MAX_SAFETENSORS_HEADER_BYTES = 4 * 1024 * 1024
#: The largest pickle (``data.pkl``) a torch.save file may hold. torch's weights-only unpickler is
#: written in Python, so this also caps the time: a pickle this size of its slowest opcodes (a
#: dict filled item by item) takes about a second (tests/test_files.py); a state dict of
#: `MAX_ARRAYS` tensors with long names pickles to under 1 MiB.
MAX_PICKLE_BYTES = 2 * 1024 * 1024

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_SAVE_HINT = "save with numpy.save / numpy.savez"
_TORCH_HINT = (
    "save only tensors, e.g. torch.save(model.state_dict(), path), or save a .safetensors file "
    "with safetensors.torch.save_file"
)
# torch 2.6 fixed the known ways around torch.load(weights_only=True) (CVE-2025-32434).
_TORCH_SAFE_VERSION = (2, 6)
# Containers in a torch.save file nested deeper than this are refused (a state dict is 1-3 deep).
_MAX_NESTING = 32
# Objects visited while flattening a torch.save file's containers: a pickle can share one dict
# under two keys at every level, a few bytes that would unfold to 2**depth entries. An Adam
# checkpoint of a 300-tensor model visits about 2,000.
_MAX_OBJECTS = 100_000
# The longest name an array may get (a torch.save file's keys joined by "."): a state dict's
# longest are under 100 characters. A pickle can repeat one long key under many tensors, each of
# which would get a copy (39 KB asked for 3.5 GB of names).
_MAX_NAME_CHARS = 1024
# The longest entry name of a torch.save zip, in bytes (torch.save writes "<folder>/data/<n>").
_MAX_ENTRY_NAME_BYTES = 1024
# The dtypes of .safetensors: bytes per value; the last group is known but refused.
_SAFETENSORS_DTYPES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
    "I16": 2, "U16": 2, "F16": 2, "BF16": 2,
    "I32": 4, "U32": 4, "F32": 4,
    "I64": 8, "U64": 8, "F64": 8,
}
_SAFETENSORS_NUMPY = {
    "BOOL": "|u1", "U8": "|u1", "I8": "|i1", "I16": "<i2", "U16": "<u2", "F16": "<f2",
    "I32": "<i4", "U32": "<u4", "F32": "<f4", "I64": "<i8", "U64": "<u8", "F64": "<f8",
}
_SAFETENSORS_REFUSED = {
    "C64": "complex numbers", "F4": "4-bit floats", "F6_E2M3": "6-bit floats",
    "F6_E3M2": "6-bit floats", "F8_E8M0": "8-bit scale factors (F8_E8M0)",
}
_ACCEPTED = "accepted: bool, integer and floating-point arrays"
_SUPPORTED_VERSIONS = ((1, 0), (2, 0), (3, 0))
# numpy's own default limit on the header text; real headers of accepted dtypes are ~100 bytes.
_MAX_HEADER_BYTES = 10_000
# Largest possible magic + version + length prefix + header of an .npy member, rounded up.
_HEADER_ALLOWANCE = 16 * 1024
# The raw file may be this much larger than max_elements float64 values (headers, zip metadata).
_RAW_SLACK = 1024 * 1024
# np.savez writes ~100 bytes of central directory per member; far more means a hostile archive
# whose millions of entries would cost far more memory as ZipInfo objects than as bytes.
_MAX_CENTRAL_DIRECTORY_BYTES = 1024 * 1024
_READ_CHUNK = 1024 * 1024


class TensorFileError(ValueError):
    """A file that cannot be loaded as arrays; the message says what was wrong and what works."""


def installed_folder(module: str) -> Path | None:
    """The folder of the installed package whose import name is ``module``, found without
    importing it (nothing of the package runs); None where it is not installed. Callers say
    which package to install."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


class ImageFileError(ValueError):
    """A file that cannot be decoded as a picture; the message says what was wrong."""


#: The most scans a JPEG may hold. A progressive JPEG has about ten, and each is decoded over
#: the whole picture, so one of thousands of scans (a small file) takes minutes of CPU.
MAX_JPEG_SCANS = 100
_PNG_MAGIC, _JPEG_MAGIC = b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff"
#: EXIF orientation → the turn that makes the picture upright (as ImageOps.exif_transpose).
_UPRIGHT = {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE",
            6: "ROTATE_270", 7: "TRANSVERSE", 8: "ROTATE_90"}


def load_image(
    source: bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO,
    *,
    max_bytes: int = IMAGE_MAX_BYTES,
    max_pixels: int = IMAGE_MAX_PIXELS,
    max_side: int | None = None,
) -> np.ndarray:
    """Decode a PNG or JPEG file into an (H, W, 3) uint8 RGB array.

    The file is read no further than ``max_bytes``; its width × height, read from the header,
    must be at most ``max_pixels`` before anything is decoded (a small file can declare a huge
    picture: Pillow's decompression-bomb guard is kept too, as an error), and a JPEG may hold
    at most :data:`MAX_JPEG_SCANS` scans. The picture is turned upright as its EXIF
    orientation says (phone photos are often stored sideways; an unreadable EXIF block is
    ignored), and grey, palette, 16-bit and transparent pictures become plain RGB
    (transparency dropped). Only the first frame of an animated PNG is read.

    With ``max_side``, a picture whose shorter side is longer is scaled down on the way in, by
    a whole factor that keeps that side at least ``max_side``: a JPEG is decoded at that scale
    directly (libjpeg's DCT scaling), a PNG reduced right after decoding, so that little more
    than the decoded file is ever held. Anything else is an :class:`ImageFileError`.
    """
    from PIL import Image, UnidentifiedImageError

    try:
        data = _read_source(source, max_bytes)
    except TensorTooLargeError as err:
        raise ImageFileError(f"the picture's file is larger than {max_bytes / 2**20:.0f} MB; "
                             "save it smaller (a JPEG of a few MB is plenty)") from err
    except TensorFileError as err:
        raise ImageFileError(str(err)) from err
    if not data:
        raise ImageFileError("the file is empty (0 bytes)")
    kind = ("PNG" if data.startswith(_PNG_MAGIC) else
            "JPEG" if data.startswith(_JPEG_MAGIC) else None)
    if kind is None:
        raise ImageFileError("the file is not a PNG or JPEG picture")
    scans = data.count(b"\xff\xda") if kind == "JPEG" else 0  # start-of-scan markers
    if scans > MAX_JPEG_SCANS:
        raise ImageFileError(f"the JPEG holds {scans:,} scans, more than the "
                             f"{MAX_JPEG_SCANS} a picture needs; save it again as a plain JPEG")
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            with Image.open(io.BytesIO(data), formats=(kind,)) as image:
                width, height = image.size
                if width * height > max_pixels:
                    raise ImageFileError(
                        f"the picture is {width} × {height} pixels, more than the "
                        f"{max_pixels:,} accepted; scale it down first")
                if width < 1 or height < 1:
                    raise ImageFileError("the picture has no pixels")
                turn = _UPRIGHT.get(_orientation(image))
                if max_side and kind == "JPEG" and min(width, height) > max_side:
                    scale = max_side / min(width, height)  # the decoder keeps at least this
                    image.draft("RGB", (math.ceil(width * scale), math.ceil(height * scale)))
                image.load()
                picture = image if image.mode in _REDUCIBLE else image.convert("RGB")
                factor = min(picture.size) // max_side if max_side else 1
                if factor >= 2:
                    picture = picture.reduce(factor)
                if turn is not None:
                    picture = picture.transpose(getattr(Image.Transpose, turn))
                if picture.mode != "RGB":
                    picture = picture.convert("RGB")
                array = np.asarray(picture)
                return array if array.flags.writeable else array.copy()
        except ImageFileError:
            raise
        except UnidentifiedImageError as err:
            raise ImageFileError(f"the file starts as a {kind} but is damaged: Pillow cannot "
                                 "read its header") from err
        except (Image.DecompressionBombError, Image.DecompressionBombWarning) as err:
            raise ImageFileError(f"the picture declares more pixels than the {max_pixels:,} "
                                 "accepted; scale it down first") from err
        except MemoryError:
            raise
        except Exception as err:  # Pillow's decoders raise many kinds on a damaged file
            raise ImageFileError(f"the picture cannot be decoded, the file is damaged or "
                                 f"cut short ({type(err).__name__}: {_short(str(err))})") from err


#: Modes Image.reduce works in; others become RGB first.
_REDUCIBLE = ("RGB", "RGBA", "L", "LA", "I", "F")


def _orientation(image: Any) -> int:
    """The picture's EXIF orientation (1: as stored), 1 where the EXIF block is unreadable."""
    try:
        return int(image.getexif().get(0x0112, 1))
    except Exception:  # a damaged EXIF block: the pixels are still good
        return 1


class TensorTooLargeError(TensorFileError):
    """A file refused for its size (bytes, values or decompressed bytes) alone: it may be well
    formed, but it is more than `max_elements` allows."""


@dataclass(frozen=True)
class _NpyHeader:
    shape: tuple[int, ...]
    fortran_order: bool
    dtype: np.dtype
    data_offset: int
    count: int


def load_arrays(
    source: bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO,
    *,
    max_elements: int = MAX_ELEMENTS,
    keep_float64: bool = False,
) -> dict[str, np.ndarray]:
    """Load the arrays of a .npy, .npz, .safetensors or torch.save file as native, C-contiguous
    float arrays.

    `source` is the file's bytes, a path, or a binary file object (read from its current
    position, as an uploaded file is). The format is recognised from the content, not the name:

    - .npy gives ``{"array": arr}``; .npz one entry per member, named without ".npy", in archive
      order. Never unpickled: object arrays are refused.
    - .safetensors gives one entry per tensor, in the header's order; parsed with the
      ``safetensors`` library after the header's size, dtypes, shapes and offsets have been
      checked against the file and the caps.
    - torch.save files (the zip format that torch.save writes by default, .pt/.pth) are read with
      ``torch.load(weights_only=True)`` only, after the pickle has been scanned for anything but
      tensors (refused, naming what it holds: a whole model, numpy arrays, a class of the
      script). A tensor gives ``{"array": arr}``; dicts, lists and tuples of tensors, nested,
      give one entry per tensor with the keys (list positions) joined by "."
      (``{"model": {"fc.weight": w}}`` → ``"model.fc.weight"``). Other plain values beside the
      tensors (numbers, strings, None: ``{"model": state_dict, "step": 3}``) are metadata and are
      left out; a file with no tensor at all is refused. Legacy torch.save files (written with
      ``_use_new_zipfile_serialization=False``) and other bare pickles are refused, since they
      could only be read by running the pickle.

    Arrays come back as float32, or float64 where the file holds float64 or integers of 32 bits
    or more (which float32 rounds above 2**24) and `keep_float64` is set; float16, bfloat16 and
    float8 arrive as float32. Files declaring more than `max_elements` values in all are refused
    before any memory is set aside for them; so are files over ``8 * max_elements`` bytes plus
    1 MiB (read no further than that), .npz archives of more than `MAX_NPZ_MEMBERS` members or
    whose declared sizes exceed that budget (zip bombs), .safetensors and torch files of more
    than `MAX_ARRAYS` tensors, headers over `MAX_SAFETENSORS_HEADER_BYTES` and pickles over
    `MAX_PICKLE_BYTES`.

    Raises TensorFileError for anything that is not a safe, well-formed file of these formats.
    """
    if isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 0:
        raise ValueError(f"max_elements must be a non-negative int, got {max_elements!r}")
    raw_limit = max_elements * 8 + _RAW_SLACK
    data = _read_source(source, raw_limit)
    return _plain_names(_load(data, max_elements, keep_float64))


def _load(data: bytes, max_elements: int, keep_float64: bool) -> dict[str, np.ndarray]:
    if data.startswith(_NPY_MAGIC):
        header = _read_npy_header(data, max_elements, where="")
        return {"array": _build_array(data, header, keep_float64)}
    if data.startswith(_ZIP_MAGICS):
        archive = _open_zip(data)
        with archive:
            if _is_torch_zip(archive):
                return _load_torch(data, archive, max_elements, keep_float64)
            return _load_npz(archive, max_elements, keep_float64)
    if _looks_like_safetensors(data):
        return _load_safetensors(data, max_elements, keep_float64)
    if not data:
        raise TensorFileError(f"the file is empty (0 bytes); {_SAVE_HINT}")
    if data[:1] == b"\x80":
        raise TensorFileError(
            "this is a bare Python pickle (pickle.dump, or torch.save with "
            "_use_new_zipfile_serialization=False, the format of torch before 1.6), which is "
            "never loaded because reading it means running it; re-save it with torch.save's "
            f"default format or as .safetensors, or {_SAVE_HINT}"
        )
    raise TensorFileError(
        "not a .npy or .npz file, nor a .safetensors or torch.save (.pt/.pth) one (it starts "
        f"with {bytes(data[:8])!r}); {_SAVE_HINT}, safetensors.torch.save_file or torch.save"
    )


def _plain_names(arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Names a page can show and a file can be saved under: text that is valid Unicode (a
    pickle's or a JSON header's lone surrogate, "\\ud800", cannot be written as UTF-8)."""
    for name in arrays:
        try:
            name.encode("utf-8")
        except UnicodeEncodeError as err:
            raise TensorFileError(f"the file names an array {_short(name, 60)!a}, which is "
                                  "not valid Unicode text; rename it") from err
    return arrays


def safetensors_metadata(
    source: bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO,
    *,
    max_elements: int = MAX_ELEMENTS,
) -> dict[str, str]:
    """The ``__metadata__`` of a .safetensors file (string keys and values; empty if it has
    none), read from the header alone: no tensor is built.

    The file passes the same checks as in :func:`load_arrays` (size, header, dtypes, shapes and
    offsets against `max_elements`); anything else raises TensorFileError.
    """
    if isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 0:
        raise ValueError(f"max_elements must be a non-negative int, got {max_elements!r}")
    data = _read_source(source, max_elements * 8 + _RAW_SLACK)
    if not _looks_like_safetensors(data):
        raise TensorFileError(
            f"not a .safetensors file (it starts with {bytes(data[:8])!r}); save one with "
            "safetensors.torch.save_file or lnviz.capture(...).save(path)"
        )
    return _read_safetensors_header(data, max_elements).metadata


def nonfinite_report(arrays: Mapping[str, np.ndarray]) -> dict[str, tuple[int, int]]:
    """Count NaN and infinite values per array: name -> (nan_count, inf_count), nonzero only."""
    report: dict[str, tuple[int, int]] = {}
    for name, array in arrays.items():
        values = np.asarray(array)
        if not np.issubdtype(values.dtype, np.inexact):
            continue
        nans = int(np.count_nonzero(np.isnan(values)))
        infs = int(np.count_nonzero(np.isinf(values)))
        if nans or infs:
            report[name] = (nans, infs)
    return report


def to_npy_bytes(array: Any) -> bytes:
    """The .npy file of a numpy array or torch tensor (never pickled)."""
    buffer = io.BytesIO()
    np.save(buffer, _as_numpy(array), allow_pickle=False)
    return buffer.getvalue()


def to_npz_bytes(arrays: Mapping[str, Any]) -> bytes:
    """A compressed .npz file holding each array (numpy or torch) under its name."""
    buffer = io.BytesIO()
    # Written member by member rather than through np.savez_compressed(**arrays), so that names
    # such as "file" or "allow_pickle" cannot collide with that function's own parameters.
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, array in arrays.items():
            if not isinstance(name, str) or not name:
                raise ValueError(f"array names must be non-empty strings, got {name!r}")
            with archive.open(name + ".npy", "w", force_zip64=True) as member:
                npy_format.write_array(member, _as_numpy(array), allow_pickle=False)
    return buffer.getvalue()


def to_csv_text(array: Any, *, float_format: str = "%.6g") -> str:
    """The values of a numpy array or torch tensor as comma-separated text.

    A 0-D or 1-D array is one row and a 2-D array is rows x columns. Higher dimensions use the
    long format: a ``dim0,dim1,...,value`` header line, then one line per element. Floating-point
    values use `float_format`; integer and bool values are written as exact integers.
    """
    values = _as_numpy(array)
    value_format = float_format if np.issubdtype(values.dtype, np.inexact) else "%d"
    if values.ndim <= 2:
        table = values.reshape(1, -1) if values.ndim < 2 else values
        header = ""
        formats = [value_format] * table.shape[1]
    else:
        # A structured table keeps each column in its own dtype, so indices and integer values
        # stay exact instead of being promoted to a shared float column.
        columns = [(f"dim{i}", np.int64) for i in range(values.ndim)]
        table = np.empty(values.size, dtype=[*columns, ("value", values.dtype)])
        for (column, _), index in zip(columns, np.indices(values.shape), strict=True):
            table[column] = index.reshape(-1)
        table["value"] = values.reshape(-1)
        header = ",".join(name for name, _ in columns) + ",value\n"
        formats = ["%d"] * values.ndim + [value_format]
    buffer = io.StringIO()
    buffer.write(header)
    if table.size:
        np.savetxt(buffer, table, fmt=formats, delimiter=",")
    return buffer.getvalue()


def _as_numpy(array: Any) -> np.ndarray:
    if hasattr(array, "detach") and hasattr(array, "cpu"):
        tensor = array.detach().cpu()
        try:
            return tensor.numpy()
        except TypeError:
            # bfloat16 and a few other torch dtypes have no numpy counterpart.
            return tensor.float().numpy()
    return np.asarray(array)


def _read_source(source: Any, limit: int) -> bytes:
    if isinstance(source, bytes):
        data = source
    elif isinstance(source, bytearray | memoryview):
        data = bytes(source)
    elif isinstance(source, str | os.PathLike):
        try:
            with open(source, "rb") as file:
                return _read_capped(file, limit)
        except OSError as err:
            raise TensorFileError(f"cannot read {os.fspath(source)!r}: {err.strerror}") from err
    elif hasattr(source, "read"):
        return _read_capped(source, limit)
    else:
        raise TypeError(
            f"source must be bytes, a path or a binary file object, got {type(source).__name__}"
        )
    if len(data) > limit:
        raise _too_large(len(data), limit)
    return data


def _read_capped(file: Any, limit: int) -> bytes:
    """Read a file object to its end, refusing it as soon as it holds more than `limit` bytes."""
    remaining = _remaining_size(file)
    if remaining is not None and remaining > limit:
        raise _too_large(remaining, limit)
    chunks: list[bytes] = []
    total = 0
    # One read of the known size keeps a single copy of the data; without a size, read in chunks.
    want = remaining + 1 if remaining is not None else _READ_CHUNK
    while total <= limit:
        try:
            chunk = file.read(min(want, limit + 1 - total))
        except OSError as err:
            raise TensorFileError(f"cannot read the file: {err}") from err
        if not chunk:
            break
        if not isinstance(chunk, bytes | bytearray):
            raise TensorFileError("the file was opened in text mode; open it in binary mode 'rb'")
        chunks.append(bytes(chunk))
        total += len(chunk)
        want = _READ_CHUNK
    if total > limit:
        raise _too_large(None, limit)
    if total == 0:
        raise TensorFileError(
            "the file is empty (0 bytes); if it is a file object that was already read, "
            f"rewind it with .seek(0) first; {_SAVE_HINT}"
        )
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _remaining_size(file: Any) -> int | None:
    try:
        if not file.seekable():
            return None
        position = file.tell()
        end = file.seek(0, io.SEEK_END)
        file.seek(position)
    except (AttributeError, OSError, ValueError):
        return None
    return max(end - position, 0)


def _too_large(size: int | None, limit: int) -> TensorTooLargeError:
    held = f"{size} bytes, more than" if size is not None else "more than"
    return TensorTooLargeError(
        f"the file holds {held} the {limit} bytes accepted for the element cap "
        "(max_elements); load a smaller array or raise max_elements"
    )


def _malformed(reason: str) -> str:
    return f"malformed .npy header ({reason}); the file is damaged or was not written by numpy.save"


def _short(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def _count_within_cap(shape: list[int], total: int, max_elements: int, where: str) -> int:
    """``total`` plus the values of one more array of ``shape``, refused when the array has too
    many dimensions or brings the file over ``max_elements``: checked from the declared shape,
    before anything is allocated."""
    if len(shape) > MAX_NDIM:
        raise TensorFileError(
            f"{where}it has {len(shape)} dimensions; at most {MAX_NDIM} are accepted"
        )
    count = math.prod(shape)
    total += count
    if count > max_elements or total > max_elements:
        raise TensorTooLargeError(
            f"{where}shape {_short(repr(shape))} brings the file to {total} elements, more than "
            f"the cap of {max_elements} (max_elements)"
        )
    if math.prod(d for d in shape if d) > max_elements:
        # Not TensorTooLargeError: with a zero elsewhere in the shape it holds no values at all
        # (numpy refuses to build one whose other dims multiply past 2**63)
        raise TensorFileError(
            f"{where}shape {_short(repr(shape))} has dimensions larger than the cap of "
            f"{max_elements} elements (max_elements) beside its empty one"
        )
    return total


def _read_npy_header(data: bytes, max_elements: int, where: str) -> _NpyHeader:
    """Parse and check an .npy header, refusing it before any array memory is allocated."""

    def refuse(message: str) -> TensorFileError:
        return TensorFileError(where + message)

    # The prefix is parsed here as well, so that a lying header length gets a clear message and
    # numpy's parser only ever sees a header that is fully present and of bounded size.
    head = io.BytesIO(data[: len(_NPY_MAGIC) + 2])
    try:
        version = npy_format.read_magic(head)
    except ValueError as err:
        raise refuse(_malformed(_short(str(err)))) from err
    if version not in _SUPPORTED_VERSIONS:
        raise refuse(
            f"unsupported .npy format version {version[0]}.{version[1]}; "
            "versions 1.0, 2.0 and 3.0 are accepted"
        )
    length_size = 2 if version == (1, 0) else 4
    prefix = len(_NPY_MAGIC) + 2 + length_size
    if len(data) < prefix:
        raise refuse(_malformed("the file ends inside the header length"))
    header_length = int.from_bytes(data[prefix - length_size : prefix], "little")
    if header_length > _MAX_HEADER_BYTES:
        raise refuse(
            _malformed(
                f"it is {header_length} bytes long, more than the {_MAX_HEADER_BYTES} accepted"
            )
        )
    data_offset = prefix + header_length
    if data_offset > len(data):
        raise refuse(
            _malformed(
                f"it declares {header_length} bytes but the file holds only "
                f"{len(data) - prefix} after the header length"
            )
        )
    try:
        if version == (3, 0):
            # 3.0 differs from 2.0 only in allowing utf8 (for non-ASCII field names, which are
            # refused below anyway), so once it is valid utf8 the 2.0 parser reads it correctly.
            data[prefix:data_offset].decode("utf-8")
        header_file = io.BytesIO(data[:data_offset])
        npy_format.read_magic(header_file)
        read_header = (
            npy_format.read_array_header_1_0
            if version == (1, 0)
            else npy_format.read_array_header_2_0
        )
        shape, fortran_order, dtype = read_header(header_file, max_header_size=_MAX_HEADER_BYTES)
    except Exception as err:
        # numpy's safe literal parser raises ValueError, SyntaxError, TypeError, RecursionError
        # or MemoryError on hostile headers; all of them mean the same thing to the learner.
        raise refuse(_malformed(_short(str(err)))) from err

    _check_dtype(dtype, refuse)
    shape = tuple(int(dim) for dim in shape)
    shape_text = _short(repr(shape))
    if any(dim < 0 for dim in shape):
        raise refuse(_malformed(f"negative dimension in shape {shape_text}"))
    if len(shape) > MAX_NDIM:
        raise refuse(f"the array has {len(shape)} dimensions; at most {MAX_NDIM} are accepted")
    count = math.prod(shape)
    if count > max_elements:
        raise TensorTooLargeError(
            f"{where}the array has shape {shape_text}, i.e. {count} elements, more than the cap "
            f"of {max_elements} elements (max_elements)"
        )
    if math.prod(d for d in shape if d) > max_elements:
        # Not TensorTooLargeError: with a zero elsewhere in the shape it holds no values at all
        # (numpy refuses to build one whose other dims multiply past 2**63).
        raise refuse(
            f"the array has shape {shape_text}, with dimensions larger than the cap of "
            f"{max_elements} elements (max_elements) beside its empty one"
        )
    expected = count * dtype.itemsize
    held = len(data) - data_offset
    if held < expected:
        raise refuse(
            f"truncated: header declares {expected} bytes of data but the file holds {held}"
        )
    if held > expected:
        raise refuse(
            f"trailing data: {held - expected} bytes follow the {expected} bytes of array data "
            "(several arrays saved into one file? use numpy.savez)"
        )
    return _NpyHeader(shape, fortran_order, dtype, data_offset, count)


def _check_dtype(dtype: np.dtype, refuse: Callable[[str], TensorFileError]) -> None:
    # Structured and subarray dtypes have kind "V", so this admits plain numbers only.
    if dtype.kind in "biu" or (dtype.kind == "f" and dtype.itemsize in (2, 4, 8)):
        return
    if dtype.hasobject:
        raise refuse(
            f"the array has dtype {dtype}: it holds pickled Python objects, which are never "
            f"loaded because unpickling can run arbitrary code; {_ACCEPTED}"
        )
    raise refuse(f"unsupported dtype {_short(str(dtype))}; {_ACCEPTED}")


def _build_array(data: bytes, header: _NpyHeader, keep_float64: bool) -> np.ndarray:
    # float64, and integers that float32 cannot hold exactly (above 2**24: int32, int64, ...)
    kind, size = header.dtype.kind, header.dtype.itemsize
    keep = keep_float64 and ((kind == "f" and size == 8) or (kind in "iu" and size >= 4))
    target = np.float64 if keep else np.float32
    if header.count == 0:
        return np.zeros(header.shape, dtype=target)
    if header.dtype.kind == "b":
        # Bytes other than 0 and 1 would make invalid numpy bools; read them as "nonzero".
        raw = np.frombuffer(data, np.uint8, header.count, header.data_offset)
        flat = raw != 0
    else:
        flat = np.frombuffer(data, header.dtype, header.count, header.data_offset)
    shaped = flat.reshape(header.shape, order="F" if header.fortran_order else "C")
    # Values beyond float32's range become +-inf, which nonfinite_report then counts.
    with np.errstate(over="ignore"):
        # Always a copy: the result must be writable and must not keep the file's bytes alive.
        return np.array(shaped, dtype=target, order="C")


class _CentralDirectoryCap(io.BytesIO):
    """In-memory zip whose reads are capped while zipfile parses the central directory."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.cap: int | None = _MAX_CENTRAL_DIRECTORY_BYTES

    def read(self, size: int | None = -1) -> bytes:
        chunk = super().read(size)
        if self.cap is not None and len(chunk) > self.cap:
            raise TensorFileError(
                f"the zip directory is larger than {self.cap} bytes; at most "
                f"{MAX_NPZ_MEMBERS} arrays (.npz) or {MAX_ARRAYS} tensors (torch.save) are "
                "accepted"
            )
        return chunk


def _open_zip(data: bytes) -> zipfile.ZipFile:
    file = _CentralDirectoryCap(data)
    try:
        archive = zipfile.ZipFile(file)
    except TensorFileError:
        raise
    except Exception as err:
        # zipfile raises BadZipFile, OSError, EOFError, ValueError, NotImplementedError and more
        # on corrupt archives, varying with the Python version.
        kind = "torch.save" if b"data.pkl" in data else ".npz"
        raise TensorFileError(
            f"corrupt {kind} file ({_short(str(err))}); it may be truncated or damaged; "
            f"{_SAVE_HINT}"
        ) from err
    file.cap = None
    return archive


def _is_torch_zip(archive: zipfile.ZipFile) -> bool:
    """torch.save's zip format: one top folder holding the pickle ``data.pkl``."""
    return any(_is_pickle_entry(name) for name in archive.namelist())


def _is_pickle_entry(name: str) -> bool:
    return name == "data.pkl" or (name.endswith("/data.pkl") and name.count("/") == 1)


def _load_npz(
    archive: zipfile.ZipFile, max_elements: int, keep_float64: bool
) -> dict[str, np.ndarray]:
    member_budget = max_elements * 8 + _HEADER_ALLOWANCE
    infos = archive.infolist()
    if len(infos) > MAX_NPZ_MEMBERS:
        raise TensorFileError(
            f"the .npz file holds {len(infos)} members, more than the {MAX_NPZ_MEMBERS} "
            "accepted"
        )
    others = [info.filename for info in infos if not info.filename.endswith(".npy")]
    if others:
        raise TensorFileError(
            f"the .npz file holds members that are not .npy arrays: "
            f"{_short(', '.join(map(repr, others)))}; only .npy members are accepted "
            f"(nor is it a torch.save file, which holds a data.pkl); {_SAVE_HINT}"
        )
    if not infos:
        raise TensorFileError(f"the .npz file holds no arrays; {_SAVE_HINT}")
    names = [info.filename[: -len(".npy")] for info in infos]
    repeated = sorted({name + ".npy" for name in names if names.count(name) > 1})
    if repeated:
        listed = _short(", ".join(map(repr, repeated)))
        raise TensorFileError(
            f"the .npz file holds several members named {listed}; each array needs its own "
            f"name; {_SAVE_HINT}"
        )
    # Checked on the declared sizes before anything is decompressed, so a zip bomb is refused
    # without inflating it.
    for info in infos:
        if info.flag_bits & 0x1:
            raise TensorFileError(
                f"member {info.filename!r} of the .npz file is encrypted; {_SAVE_HINT}"
            )
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            # zipfile inflates bzip2 and LZMA whole, whatever is read: 1.6 KB of bzip2 asked
            # for 4 GB before its size could be compared with the directory's
            raise TensorFileError(
                f"member {info.filename!r} of the .npz file uses compression method "
                f"{info.compress_type}, which numpy.savez never writes (savez stores, "
                f"savez_compressed deflates); {_SAVE_HINT}"
            )
        if info.file_size > member_budget:
            raise TensorTooLargeError(
                f"member {info.filename!r} of the .npz file declares {info.file_size} bytes "
                f"uncompressed, more than the {member_budget} bytes accepted for the cap of "
                f"{max_elements} elements (max_elements)"
            )
    total_size = sum(info.file_size for info in infos)
    total_budget = max_elements * 8 + len(infos) * _HEADER_ALLOWANCE
    if total_size > total_budget:
        raise TensorTooLargeError(
            f"the .npz members declare {total_size} bytes uncompressed in all, more than the "
            f"{total_budget} bytes accepted for the cap of {max_elements} elements "
            "(max_elements)"
        )

    arrays: dict[str, np.ndarray] = {}
    total_count = 0
    for name, info in zip(names, infos, strict=True):
        where = f"member {info.filename!r} of the .npz file: "
        raw = _read_member(archive, info, where)
        header = _read_npy_header(raw, max_elements, where)
        total_count += header.count
        if total_count > max_elements:
            raise TensorTooLargeError(
                f"the .npz arrays hold more than the cap of {max_elements} elements in all "
                "(max_elements)"
            )
        arrays[name] = _build_array(raw, header, keep_float64)
    return arrays


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, where: str) -> bytes:
    try:
        with archive.open(info) as member:
            # Bounded even if the declared size lies: one byte more than declared is refused.
            raw = member.read(info.file_size + 1)
    except Exception as err:
        # Bad CRCs, truncated or corrupt compressed streams and unsupported compression methods
        # surface as BadZipFile, EOFError, zlib.error, NotImplementedError and others.
        raise TensorFileError(
            f"{where}corrupt .npz member ({_short(str(err))}); it may be damaged, or compressed "
            f"in a way numpy.savez does not write; {_SAVE_HINT}"
        ) from err
    if len(raw) > info.file_size:
        raise TensorFileError(f"{where}it holds more data than the .npz directory declares")
    if not raw.startswith(_NPY_MAGIC):
        raise TensorFileError(f"{where}not a .npy array (nested archives are not accepted)")
    return raw


# ---------------------------------------------------------------------------------------------
# torch.save files
# ---------------------------------------------------------------------------------------------


def _load_torch(
    data: bytes, archive: zipfile.ZipFile, max_elements: int, keep_float64: bool
) -> dict[str, np.ndarray]:
    """A torch.save zip: its directory checked against the caps, its pickle scanned for
    anything but tensors, then ``torch.load(weights_only=True)``; nothing else reads it."""
    infos = archive.infolist()
    # data.pkl, version, byteorder, .format_version, .storage_alignment, .data/... and storages
    if len(infos) > MAX_ARRAYS + 16:
        raise TensorFileError(
            f"the torch.save file holds {len(infos)} entries, more than the {MAX_ARRAYS} tensors "
            "accepted"
        )
    pickles = [info for info in infos if _is_pickle_entry(info.filename)]
    root = pickles[0].filename[: -len("data.pkl")]
    names = {info.filename for info in infos}
    if root + "constants.pkl" in names or any(n.startswith(root + "code/") for n in names):
        raise TensorFileError(
            "this is a TorchScript archive (torch.jit.save), which holds code as well as "
            f"tensors and is not read; {_TORCH_HINT}"
        )
    _check_torch_entries(infos, root)
    for info in infos:
        if info.flag_bits & 0x1:
            raise TensorFileError(f"entry {info.filename!r} of the torch.save file is encrypted")
        if info.compress_type != zipfile.ZIP_STORED:
            # torch.save never compresses; its reader would inflate whatever size is declared.
            raise TensorFileError(
                f"entry {info.filename!r} of the torch.save file is compressed, which torch.save "
                "never does; save the file again with torch.save"
            )
    if len(pickles) != 1:
        raise TensorFileError("the torch.save file holds several data.pkl; it is damaged")
    if pickles[0].file_size > MAX_PICKLE_BYTES:
        raise TensorFileError(
            f"the torch.save file's pickle is {pickles[0].file_size} bytes, more than the "
            f"{MAX_PICKLE_BYTES} accepted (a state dict of {MAX_ARRAYS} tensors needs less than "
            "half of it)"
        )
    storage_bytes = sum(
        info.file_size for info in infos if info.filename.startswith(root + "data/")
    )
    if storage_bytes > max_elements * 8:
        raise TensorTooLargeError(
            f"the torch.save file's storages declare {storage_bytes} bytes, more than the "
            f"{max_elements * 8} bytes accepted for the cap of {max_elements} elements "
            "(max_elements)"
        )

    torch = _safe_torch()
    # Read as an unpickler would, building nothing (torch_pickle's docstring): anything but
    # tensors, their storages and plain containers and scalars is refused before torch.load,
    # whose own allow-list admits calls that cost what the file asks (bytearray(N), punycode).
    try:
        pickle_bytes = archive.read(pickles[0])
    # a bad CRC, a short file, a local header whose name does not decode, flags zipfile does not
    # implement, offsets beyond what it can seek to
    except Exception as err:
        raise TensorFileError(
            f"corrupt torch.save file ({_short(str(err))}); it may be truncated or damaged"
        ) from err
    records = {info.filename[len(root + "data/"):]: info.file_size for info in infos
               if info.filename.startswith(root + "data/")}
    try:
        check_tensor_pickle(pickle_bytes, records, max_tensors=MAX_ARRAYS)
    except PickleForeign as err:
        raise TensorFileError(_unsafe_message(err.names)) from err
    except PickleRefused as err:
        named = pickle_globals(pickle_bytes)
        raise TensorFileError(
            f"this torch.save file's pickle was not written by torch.save for tensors: {err}"
            + (f"; it needs {_short(', '.join(named), 200)}" if named else "")
            + f"; it is not read; {_TORCH_HINT}"
        ) from err
    checked = _rewritten_torch_zip(data, infos, root, pickle_bytes)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loaded = torch.load(checked, map_location="cpu", weights_only=True)
    except Exception as err:
        if isinstance(err, UnpicklingError):
            raise TensorFileError(
                "this torch.save file needs more than tensors to load, and is not read: "
                f"{_weights_only_reason(str(err))}; {_TORCH_HINT}"
            ) from err
        raise TensorFileError(
            f"corrupt torch.save file ({_short(str(err))}); it may be truncated or damaged"
        ) from err
    tensors = _flatten_torch(loaded, torch)
    del loaded
    return _torch_arrays(tensors, torch, max_elements, keep_float64)


#: The entries of a torch.save zip besides its storages (``data/<key>``), under its top folder.
_TORCH_ENTRIES = frozenset({"data.pkl", "version", "byteorder", ".format_version",
                            ".storage_alignment", ".data/version", ".data/serialization_id"})


def _check_torch_entries(infos: list[zipfile.ZipInfo], root: str) -> None:
    """The entries torch.load will read are the ones checked here, and nothing else is there:
    torch's zip reader takes its top folder from the first entry and finds an entry by name
    ignoring case, so a second ``DATA.PKL`` after the real one would be the pickle it runs."""
    names = [info.filename for info in infos]
    first = names[0].split("/", 1)[0] + "/"
    if root != first or not root.strip("/"):
        raise TensorFileError("the torch.save file's pickle is not in its top folder; it is "
                              "damaged or was not written by torch.save")
    seen: dict[str, str] = {}
    for name in names:
        if len(name.encode("utf-8", "surrogateescape")) > _MAX_ENTRY_NAME_BYTES:
            raise TensorFileError(
                f"the torch.save file holds an entry whose name is longer than "
                f"{_MAX_ENTRY_NAME_BYTES} bytes ({_short(name, 60)!r}); it is not read")
        folded = name.lower()
        if folded in seen:
            raise TensorFileError(
                f"the torch.save file holds two entries named {_short(seen[folded], 60)!r} and "
                f"{_short(name, 60)!r}, which torch's reader cannot tell apart; it is not read")
        seen[folded] = name
        inner = name[len(root):] if name.startswith(root) else None
        if inner is None or not (inner in _TORCH_ENTRIES
                                 or re.fullmatch(r"data/\w+", inner, re.ASCII)):
            raise TensorFileError(
                f"the torch.save file holds an entry torch.save does not write "
                f"({_short(name, 80)!r}); it is not read")


def _rewritten_torch_zip(data: bytes, infos: list[zipfile.ZipInfo], root: str,
                         pickle_bytes: bytes) -> io.RawIOBase:
    """The checked entries as a zip of their own, which is what torch.load reads.

    Two zip readers can see two archives in one file: Python's zipfile finds the central
    directory before the end record and corrects the offsets it declares, torch's reader
    trusts them. A file holding two directories showed zipfile a harmless pickle and torch
    another one (bytearray(3 GiB)). Written anew, the archive torch reads holds exactly the
    bytes checked here: the scanned pickle, and each other entry's bytes where zipfile found
    them (their CRC checked), shared with ``data`` rather than copied. No two entries may share
    bytes: 4,000 entries over one 100 KB record declared 400 MB that a 929 KB file held."""
    pieces: list[bytes | memoryview] = []
    directory = []
    offset = 0
    view = memoryview(data)
    spans = []
    for info in infos:
        begin, stored = _stored_content(view, info)
        spans.append((info.header_offset, begin + len(stored)))
        content = pickle_bytes if info.filename == root + "data.pkl" else stored
        name = info.filename.encode("utf-8")
        crc = zlib.crc32(content)
        pieces += [struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0x800, 0, 0, 0, crc,
                               len(content), len(content), len(name), 0), name, content]
        directory.append(struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0x800, 0, 0, 0,
                                     crc, len(content), len(content), len(name), 0, 0, 0, 0,
                                     0, offset) + name)
        offset += 30 + len(name) + len(content)
    size = sum(len(entry) for entry in directory)
    spans.sort()
    if any(start < end for (_, end), (start, _) in itertools.pairwise(spans)):
        raise TensorFileError("the torch.save file's entries share bytes, which torch.save never "
                              "writes; it is not read")
    pieces += directory
    pieces.append(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(directory),
                              len(directory), size, offset, 0))
    return _Pieces(pieces)


def _stored_content(view: memoryview, info: zipfile.ZipInfo) -> tuple[int, memoryview]:
    """Where an uncompressed entry's bytes start where zipfile reads them, and those bytes,
    checked against its CRC."""
    start = info.header_offset
    header = bytes(view[start:start + 30])
    if len(header) < 30 or header[:4] != b"PK\x03\x04":
        raise TensorFileError(f"corrupt torch.save file (entry {_short(info.filename, 60)!r} "
                              "has no local header where the directory says)")
    # the local header's own name and extra field come before the content
    name_len, extra_len = struct.unpack("<2H", header[26:30])
    begin = start + 30 + name_len + extra_len
    content = view[begin:begin + info.compress_size]
    if len(content) != info.compress_size or zlib.crc32(content) != info.CRC:
        raise TensorFileError(f"corrupt torch.save file (entry {_short(info.filename, 60)!r} "
                              "does not match its CRC); it may be truncated or damaged")
    return begin, content


class _Pieces(io.RawIOBase):
    """One readable, seekable file made of byte strings laid end to end, none copied."""

    def __init__(self, pieces: list[bytes | memoryview]) -> None:
        self._pieces = [memoryview(piece).cast("B") for piece in pieces]
        self._starts = list(itertools.accumulate((len(p) for p in self._pieces), initial=0))
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._starts[-1]}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        out = memoryview(buffer).cast("B")
        done = 0
        while done < len(out) and self._pos < self._starts[-1]:
            k = bisect.bisect_right(self._starts, self._pos) - 1
            at = self._pos - self._starts[k]
            chunk = self._pieces[k][at:at + len(out) - done]
            out[done:done + len(chunk)] = chunk
            done += len(chunk)
            self._pos += len(chunk)
        return done


def _safe_torch() -> Any:
    import torch

    version = tuple(int(part) for part in re.findall(r"\d+", torch.__version__)[:2])
    if version < _TORCH_SAFE_VERSION:
        raise TensorFileError(
            f"torch.save files are read only with torch 2.6 or later, which fixed the known ways "
            f"around weights_only=True; this is torch {torch.__version__}: upgrade torch, or "
            "save the tensors as .safetensors"
        )
    return torch


#: What a refused global says the file holds, by the start of its name; first match wins.
_FOREIGN_HINTS = (
    ("torch.nn.modules.", "a whole model (torch.save(model)); save model.state_dict() instead"),
    ("numpy.", "numpy arrays; convert them with torch.from_numpy before torch.save"),
    ("__main__.", "objects of classes defined in a script"),
    ("torch._utils._rebuild_sparse", "a sparse tensor; only dense tensors are accepted (call "
     ".to_dense() before saving)"),
    ("torch._utils._rebuild_nested", "a nested tensor; save its tensors one by one "
     "(nested.unbind())"),
    ("_codecs.encode", "a bytes value (pickle writes one as a call of _codecs.encode)"),
    ("builtins.bytearray", "a bytearray"),
)


def _unsafe_message(names: list[str]) -> str:
    dtypes = _foreign_dtypes(names)
    if dtypes:
        return (f"this torch.save file holds tensors of unsupported dtype {', '.join(dtypes)}; "
                f"{_ACCEPTED}")
    hint = next((hint for prefix, hint in _FOREIGN_HINTS
                 if any(name.startswith(prefix) for name in names)),
                "Python objects other than tensors")
    return (
        f"this torch.save file holds {hint}: it needs {_short(', '.join(names), 300)} to load, "
        "and is not read (lnviz reads tensors, and dicts, lists and tuples of them beside the "
        f"numbers and strings of a checkpoint, nothing else); {_TORCH_HINT}"
    )


def _foreign_dtypes(names: list[str]) -> list[str]:
    """The dtypes named by refused storage classes (torch.ComplexFloatStorage) and dtypes."""
    known = _torch_dtype_names()
    return sorted({known[name] for name in names if name in known})


@functools.cache
def _torch_dtype_names() -> dict[str, str]:
    import torch

    named: dict[str, str] = {}
    with warnings.catch_warnings():  # the typed storage classes are deprecated, and say so
        warnings.simplefilter("ignore")
        for attr in dir(torch):
            value = getattr(torch, attr, None)
            if isinstance(value, torch.dtype):
                named[f"torch.{attr}"] = str(value).removeprefix("torch.")
            elif attr.endswith("Storage") and isinstance(getattr(value, "dtype", None),
                                                         torch.dtype):
                named[f"torch.{attr}"] = str(value.dtype).removeprefix("torch.")
    return named


def _weights_only_reason(message: str) -> str:
    lines = [
        line.strip()
        for line in message.splitlines()
        if line.strip()
        and not line.startswith(("Weights only load failed", "Check the documentation"))
    ]
    reason = " ".join(lines).removeprefix("WeightsUnpickler error: ")
    return _short(reason or message, 200)


def _flatten_torch(loaded: Any, torch: Any) -> dict[str, Any]:
    """The tensors of a loaded torch.save object, keys joined by "."; plain values skipped."""
    tensors: dict[str, Any] = {}
    visited = 0
    skipped = (bool, int, float, complex, str, bytes, bytearray, type(None), torch.dtype,
               torch.device, torch.layout, torch.memory_format)

    def walk(value: Any, key: str, depth: int) -> None:
        nonlocal visited
        visited += 1
        if visited > _MAX_OBJECTS:
            raise TensorFileError(
                f"the torch.save file unfolds to more than {_MAX_OBJECTS} objects (containers "
                "shared many times over); it is not read"
            )
        if isinstance(value, torch.Tensor):
            name = key or "array"
            if name in tensors:
                raise TensorFileError(
                    f"two tensors of the torch.save file get the name {name!r} once their keys "
                    "are joined with '.'; rename one"
                )
            if len(tensors) >= MAX_ARRAYS:
                raise TensorFileError(
                    f"the torch.save file holds more than the {MAX_ARRAYS} tensors accepted"
                )
            tensors[name] = value
            return
        if isinstance(value, skipped):
            return  # metadata beside the tensors: a step count, a name, a flag
        if isinstance(value, dict | list | tuple):
            if depth >= _MAX_NESTING:
                raise TensorFileError(
                    f"the torch.save file nests containers more than {_MAX_NESTING} deep"
                )
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for part, item in items:
                if isinstance(part, bool) or not isinstance(part, str | int):
                    raise TensorFileError(
                        f"the torch.save file has a dict key of type {type(part).__name__} "
                        f"under {key or 'the top level'!r}; only str and int keys are accepted"
                    )
                part = str(part)
                if len(key) + len(part) >= _MAX_NAME_CHARS:
                    raise TensorFileError(
                        f"the torch.save file's keys, joined with '.', make a name longer than "
                        f"{_MAX_NAME_CHARS} characters (under {_short(key or part, 60)!r}); "
                        "it is not read")
                walk(item, f"{key}.{part}" if key else part, depth + 1)
            return
        kind = type(value)
        raise TensorFileError(
            f"the torch.save file holds a {kind.__module__}.{kind.__qualname__} "
            f"under {key or 'the top level'!r}, which is not a tensor; {_TORCH_HINT}"
        )

    walk(loaded, "", 0)
    if not tensors:
        raise TensorFileError(f"the torch.save file holds no tensors; {_TORCH_HINT}")
    return tensors


def _torch_arrays(
    tensors: dict[str, Any], torch: Any, max_elements: int, keep_float64: bool
) -> dict[str, np.ndarray]:
    total = 0
    for name, tensor in tensors.items():
        where = f"tensor {name!r} of the torch.save file: "
        if tensor.layout != torch.strided:
            raise TensorFileError(
                f"{where}a {tensor.layout} tensor; only dense tensors are accepted "
                "(call .to_dense() before saving)"
            )
        if tensor.is_quantized or str(tensor.dtype).removeprefix("torch.") not in DTYPE_BYTES:
            raise TensorFileError(
                f"{where}unsupported dtype {tensor.dtype}; {_ACCEPTED}"
            )
        if tensor.device.type != "cpu":
            raise TensorFileError(f"{where}a tensor on the {tensor.device.type} device")
        # A view can declare any shape over a small storage (a stride of 0), so the shapes
        # are checked here, before any array is built.
        total = _count_within_cap(list(tensor.shape), total, max_elements, where)
    arrays = {}
    for name in list(tensors):
        arrays[name] = _tensor_to_array(tensors.pop(name), torch, keep_float64)
    return arrays


def _tensor_to_array(tensor: Any, torch: Any, keep_float64: bool) -> np.ndarray:
    values = tensor.detach()
    dtype = values.dtype
    keep = keep_float64 and (
        dtype == torch.float64
        or (not dtype.is_floating_point and dtype != torch.bool and dtype.itemsize >= 4)
    )
    target = np.float64 if keep else np.float32
    if values.numel() == 0:
        return np.zeros(tuple(values.shape), dtype=target)
    if dtype == torch.bool:
        # Bytes other than 0 and 1 would make invalid bools; read them as "nonzero".
        values = values.view(torch.uint8) != 0
    elif dtype.is_floating_point and dtype not in (torch.float16, torch.float32, torch.float64):
        # bfloat16, float8: exact in float32, unknown to numpy. The new tensor is this array's
        # own memory, so it is handed over as it is rather than copied once more.
        return values.to(torch.float32, memory_format=torch.contiguous_format).numpy()
    with np.errstate(over="ignore"):
        # Always a copy: tensors sharing a storage (tied weights) must not share an array.
        return np.array(values.numpy(), dtype=target, order="C")


# ---------------------------------------------------------------------------------------------
# .safetensors files
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _SafetensorsEntry:
    name: str
    dtype: str
    shape: tuple[int, ...]
    begin: int
    end: int


@dataclass(frozen=True)
class _SafetensorsHeader:
    metadata: dict[str, str]
    entries: list[_SafetensorsEntry]


def _looks_like_safetensors(data: bytes) -> bool:
    # 8 bytes of header length, then the JSON header, which the format says starts with "{".
    return len(data) > 8 and data[8:9] == b"{"


def _read_safetensors_header(data: bytes, max_elements: int) -> _SafetensorsHeader:
    """Parse and check a .safetensors header against the file and the caps, building nothing."""

    def malformed(reason: str) -> TensorFileError:
        return TensorFileError(
            f"malformed .safetensors header ({reason}); the file is damaged or was not written "
            "by safetensors"
        )

    length = int.from_bytes(data[:8], "little")
    if length > MAX_SAFETENSORS_HEADER_BYTES:
        raise malformed(
            f"it declares {length} bytes, more than the {MAX_SAFETENSORS_HEADER_BYTES} accepted"
        )
    if 8 + length > len(data):
        raise malformed(
            f"it declares {length} bytes but the file holds only {len(data) - 8} after the "
            "header length: truncated?"
        )
    try:
        header = json.loads(data[8 : 8 + length].decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        raise malformed(f"not valid JSON: {_short(str(err))}") from err
    if not isinstance(header, dict):
        raise malformed(f"a JSON {type(header).__name__}, not an object")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise malformed("__metadata__ must map strings to strings")
    if len(header) > MAX_ARRAYS:
        raise TensorFileError(
            f"the .safetensors file holds {len(header)} tensors, more than the {MAX_ARRAYS} "
            "accepted"
        )
    body = len(data) - 8 - length
    entries = []
    total = 0
    for name, spec in header.items():
        where = f"tensor {_short(repr(name), 80)}: "
        if not isinstance(spec, dict) or not {"dtype", "shape", "data_offsets"} <= spec.keys():
            raise malformed(f"{where}needs dtype, shape and data_offsets")
        dtype, shape, offsets = spec["dtype"], spec["shape"], spec["data_offsets"]
        if dtype in _SAFETENSORS_REFUSED:
            raise TensorFileError(
                f"{where}dtype {dtype} ({_SAFETENSORS_REFUSED[dtype]}) is not accepted; "
                f"{_ACCEPTED}"
            )
        if dtype not in _SAFETENSORS_DTYPES:
            raise TensorFileError(
                f"{where}unknown dtype {_short(repr(dtype), 40)}; {_ACCEPTED} "
                f"({', '.join(_SAFETENSORS_DTYPES)})"
            )
        if not _is_int_list(shape):
            raise malformed(f"{where}shape {_short(repr(shape))} is not a list of integers")
        if any(dim < 0 for dim in shape):
            raise malformed(f"{where}negative dimension in shape {_short(repr(shape))}")
        total = _count_within_cap(shape, total, max_elements, where)
        count = math.prod(shape)
        if not _is_int_list(offsets) or len(offsets) != 2 or not 0 <= offsets[0] <= offsets[1]:
            raise malformed(f"{where}data_offsets {_short(repr(offsets))} are not [begin, end]")
        begin, end = offsets
        if end > body:
            raise TensorFileError(
                f"{where}its data_offsets [{begin}, {end}] run past the end of the file, whose "
                f"data section holds {body} bytes: the file is truncated or damaged"
            )
        needed = count * _SAFETENSORS_DTYPES[dtype]
        if end - begin != needed:
            raise malformed(
                f"{where}shape {shape} of {dtype} needs {needed} bytes but its data_offsets "
                f"span {end - begin}"
            )
        entries.append(_SafetensorsEntry(name, dtype, tuple(shape), begin, end))
    position = 0
    for entry in sorted(entries, key=lambda e: (e.begin, e.end)):
        if entry.begin != position and entry.end > entry.begin:
            raise malformed(
                f"tensor {_short(repr(entry.name), 80)} starts at byte {entry.begin} of the data "
                f"section where {position} was expected (a gap or an overlap)"
            )
        position = max(position, entry.end)
    if position != body:
        raise malformed(f"{body - position} bytes of the data section belong to no tensor")
    return _SafetensorsHeader(metadata, entries)


def _is_int_list(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(item, int) and not isinstance(item, bool) for item in value
    )


def _load_safetensors(data: bytes, max_elements: int, keep_float64: bool) -> dict[str, np.ndarray]:
    header = _read_safetensors_header(data, max_elements)
    if not header.entries:
        raise TensorFileError(
            "the .safetensors file holds no tensors; save some with safetensors.torch.save_file"
        )
    try:
        from safetensors import SafetensorError, deserialize
    except ImportError as err:  # pragma: no cover - a dependency of lnviz (pyproject.toml)
        raise TensorFileError(
            "reading .safetensors files needs the safetensors package: pip install safetensors"
        ) from err
    try:
        parsed = dict(deserialize(data))
    except SafetensorError as err:
        raise TensorFileError(
            f"corrupt .safetensors file ({_short(str(err))}); it may be truncated or damaged"
        ) from err
    arrays = {}
    for entry in header.entries:
        raw = parsed.pop(entry.name)["data"]  # released as soon as its array is built
        arrays[entry.name] = _safetensors_array(raw, entry, keep_float64)
    return arrays


def _safetensors_array(raw: Any, entry: _SafetensorsEntry, keep_float64: bool) -> np.ndarray:
    keep = keep_float64 and entry.dtype in ("F64", "I32", "U32", "I64", "U64")
    target = np.float64 if keep else np.float32
    count = math.prod(entry.shape)
    if count == 0:
        return np.zeros(entry.shape, dtype=target)
    if entry.dtype == "BF16":
        # bfloat16 is the upper half of a float32: shifting its bits up gives the value exactly.
        bits = np.frombuffer(raw, "<u2", count).astype(np.uint32)
        bits <<= 16  # in place: no second array of the same size
        return bits.view(np.float32).reshape(entry.shape)
    if entry.dtype.startswith("F8_"):
        import torch

        kind = torch.float8_e4m3fn if entry.dtype == "F8_E4M3" else torch.float8_e5m2
        values = torch.frombuffer(raw, dtype=kind).to(torch.float32).numpy()
        return values.reshape(entry.shape)
    flat = np.frombuffer(raw, _SAFETENSORS_NUMPY[entry.dtype], count)
    if entry.dtype == "BOOL":
        flat = flat != 0  # bytes other than 0 and 1 read as "nonzero"
    with np.errstate(over="ignore"):
        return np.array(flat.reshape(entry.shape), dtype=target, order="C")
