"""Safe reading and writing of the tensor files a learner uploads or downloads.

`load_arrays` turns a .npy or .npz file (bytes, a path, or an uploaded file object) into float
arrays without ever unpickling anything and without allocating more than its caps allow, so a
hostile or broken upload can only ever produce a `TensorFileError` with a message saying what was
wrong. `to_npy_bytes`, `to_npz_bytes` and `to_csv_text` write results back out for download.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, BinaryIO

import numpy as np
from numpy.lib import format as npy_format

from lnviz.limits import MAX_ELEMENTS

__all__ = [
    "MAX_NPZ_MEMBERS",
    "TensorFileError",
    "TensorTooLargeError",
    "load_arrays",
    "nonfinite_report",
    "to_csv_text",
    "to_npy_bytes",
    "to_npz_bytes",
]

MAX_NPZ_MEMBERS = 64

_NPY_MAGIC = b"\x93NUMPY"
_ZIP_MAGICS = (b"PK\x03\x04", b"PK\x05\x06")
_SAVE_HINT = "save with numpy.save / numpy.savez"
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
_MAX_NDIM = 32
_READ_CHUNK = 1024 * 1024


class TensorFileError(ValueError):
    """A file that cannot be loaded as arrays; the message says what was wrong and what works."""


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
    """Load the arrays of a .npy or .npz file as native, C-contiguous float arrays.

    `source` is the file's bytes, a path, or a binary file object (read from its current
    position, as an uploaded file is). The format is recognised from the content, not the name.
    A .npy gives ``{"array": arr}``; a .npz gives one entry per member, named without ".npy", in
    archive order. Arrays come back as float32, or float64 where the file holds float64 or
    integers of 32 bits or more (which float32 rounds above 2**24) and `keep_float64` is set.
    Nothing is ever unpickled, and files declaring more than `max_elements` values in all are
    refused before any memory is set aside for them; so are files over ``8 * max_elements``
    bytes plus 1 MiB (read no further than that) and archives of more than `MAX_NPZ_MEMBERS`
    members or whose declared sizes exceed that budget (zip bombs).

    Raises TensorFileError for anything that is not a safe, well-formed .npy/.npz file.
    """
    if isinstance(max_elements, bool) or not isinstance(max_elements, int) or max_elements < 0:
        raise ValueError(f"max_elements must be a non-negative int, got {max_elements!r}")
    raw_limit = max_elements * 8 + _RAW_SLACK
    data = _read_source(source, raw_limit)

    if data.startswith(_NPY_MAGIC):
        header = _read_npy_header(data, max_elements, where="")
        return {"array": _build_array(data, header, keep_float64)}
    if data.startswith(_ZIP_MAGICS):
        return _load_npz(data, max_elements, keep_float64)
    if not data:
        raise TensorFileError(f"the file is empty (0 bytes); {_SAVE_HINT}")
    if data[:1] == b"\x80":
        raise TensorFileError(
            "this looks like a Python pickle (from pickle.dump or torch.save), which is never "
            f"loaded because unpickling can run arbitrary code; {_SAVE_HINT}"
        )
    raise TensorFileError(
        f"not a .npy or .npz file (it starts with {bytes(data[:8])!r}); {_SAVE_HINT}"
    )


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
    if len(shape) > _MAX_NDIM:
        raise refuse(f"the array has {len(shape)} dimensions; at most {_MAX_NDIM} are accepted")
    count = math.prod(shape)
    if count > max_elements:
        raise TensorTooLargeError(
            f"{where}the array has shape {shape_text}, i.e. {count} elements, more than the cap "
            f"of {max_elements} elements (max_elements)"
        )
    if max(shape, default=0) > max_elements:
        # Not TensorTooLargeError: with a zero elsewhere in the shape it holds no values at all.
        raise refuse(
            f"the array has shape {shape_text}, with a dimension larger than the cap of "
            f"{max_elements} elements (max_elements)"
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
                f"the .npz directory is larger than {self.cap} bytes; at most "
                f"{MAX_NPZ_MEMBERS} arrays are accepted"
            )
        return chunk


def _load_npz(data: bytes, max_elements: int, keep_float64: bool) -> dict[str, np.ndarray]:
    member_budget = max_elements * 8 + _HEADER_ALLOWANCE
    file = _CentralDirectoryCap(data)
    try:
        archive = zipfile.ZipFile(file)
    except TensorFileError:
        raise
    except Exception as err:
        # zipfile raises BadZipFile, OSError, EOFError, ValueError, NotImplementedError and more
        # on corrupt archives, varying with the Python version.
        raise TensorFileError(
            f"corrupt .npz file ({_short(str(err))}); it may be truncated or damaged; {_SAVE_HINT}"
        ) from err
    file.cap = None
    with archive:
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
                f"(a torch.save file is not an .npz); {_SAVE_HINT}"
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
