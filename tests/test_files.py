"""lnviz.data.files: .npy/.npz/.safetensors/torch.save round trips, a corpus of good, odd and
hostile files (pickle payloads that would create a directory if they ran), fuzzing, memory."""

from __future__ import annotations

import codecs
import collections
import csv
import io
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import time
import tracemalloc
import warnings
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from safetensors import numpy as st_numpy
from safetensors import torch as st_torch

from lnviz.data.files import (
    MAX_ARRAYS,
    MAX_NPZ_MEMBERS,
    MAX_PICKLE_BYTES,
    TensorFileError,
    load_arrays,
    nonfinite_report,
    safetensors_metadata,
    to_csv_text,
    to_npy_bytes,
    to_npz_bytes,
)
from lnviz.data.torch_pickle import MAX_PICKLE_OPCODES
from lnviz.limits import MAX_ELEMENTS
from tools.upload_cost import Call

FUZZ = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
# Errors that would mean a hostile file got further than the checks meant to stop it.
FORBIDDEN = (MemoryError, OverflowError, EOFError, pickle.UnpicklingError, zipfile.BadZipFile)


# ---------------------------------------------------------------------------------------------
# Building files
# ---------------------------------------------------------------------------------------------


def npy(array: np.ndarray, **kwargs: Any) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, **kwargs)
    return buffer.getvalue()


def npy_version(array: np.ndarray, version: tuple[int, int]) -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, version=version)
    return buffer.getvalue()


def npz(compressed: bool = False, **arrays: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buffer, **arrays)
    return buffer.getvalue()


def raw_npy(
    header: str | bytes,
    data: bytes = b"",
    version: tuple[int, int] = (1, 0),
    length: int | None = None,
) -> bytes:
    """An .npy file with any header text, including ones numpy would never write."""
    text = header.encode("latin1") if isinstance(header, str) else header
    declared = len(text) if length is None else length
    length_field = struct.pack("<H" if version == (1, 0) else "<I", declared)
    return b"\x93NUMPY" + bytes(version) + length_field + text + data


def header(descr: Any = "<f4", fortran_order: Any = False, shape: Any = (2,)) -> str:
    return repr({"descr": descr, "fortran_order": fortran_order, "shape": shape}) + "\n"


def zip_of(members: dict[str, bytes], compression: int = zipfile.ZIP_STORED) -> bytes:
    """A plain (non-zip64) archive, so that tests can patch its size fields in place."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


# Offsets of fields in the first local header and in the first central directory entry.
LOCAL = {"flags": 6, "method": 8, "file_size": 22}
CENTRAL = {"flags": 8, "method": 10, "file_size": 24}
FIELD_FORMAT = {"flags": "<H", "method": "<H", "file_size": "<I"}


def patch_zip(data: bytes, name: str, value: int) -> bytes:
    """Overwrite one field of the first member in both its local and central headers."""
    patched = bytearray(data)
    end = data.rfind(b"PK\x05\x06")
    central = struct.unpack_from("<I", data, end + 16)[0]
    assert data[:4] == b"PK\x03\x04" and data[central : central + 4] == b"PK\x01\x02"
    struct.pack_into(FIELD_FORMAT[name], patched, LOCAL[name], value)
    struct.pack_into(FIELD_FORMAT[name], patched, central + CENTRAL[name], value)
    return bytes(patched)


class Tripwire:
    """Unpickling this creates a directory: proof that a payload was (or was not) unpickled."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (os.makedirs, (str(self.path),))


def tripwire_path(tmp_path: Path) -> Path:
    return tmp_path / "unpickled"


class UploadedFile(io.BytesIO):
    """Stands in for streamlit's UploadedFile: a BytesIO with a name and a declared type."""

    def __init__(self, data: bytes, name: str) -> None:
        super().__init__(data)
        self.name = name
        self.type = "application/octet-stream"


class CountingReader:
    """A non-seekable stream of zeros that never ends, counting what was read from it."""

    def __init__(self) -> None:
        self.consumed = 0

    def read(self, size: int = -1) -> bytes:
        n = 1 << 16 if size is None or size < 0 else min(size, 1 << 16)
        self.consumed += n
        return b"\0" * n


# ---------------------------------------------------------------------------------------------
# The corpus
# ---------------------------------------------------------------------------------------------


@dataclass
class Case:
    """One file: build(tmp_path) gives the source; it loads to `expected` or is refused."""

    id: str
    build: Callable[[Path], Any]
    expected: dict[str, np.ndarray] | None = None
    match: tuple[str, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    dtype: type = np.float32
    after: Callable[[Path], None] | None = None


A23 = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
RNG = np.random.default_rng(0)
JUNK = RNG.integers(0, 256, 4096, dtype=np.uint8).tobytes()
NONFINITE = np.array([1.0, np.nan, np.inf, -np.inf, np.nan], dtype=np.float32)
F64 = np.array([1 / 3, 1e-300, 1e30, -2.0])
U64 = np.array([0, 2**63, 2**64 - 1], dtype=np.uint64)
FORTRAN = np.asfortranarray(np.arange(12, dtype=">i4").reshape(3, 4))
FORTRAN3 = np.asfortranarray(np.arange(24, dtype=np.float32).reshape(2, 3, 4))


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def object_npy(tmp_path: Path) -> bytes:
    payload = np.array([Tripwire(tripwire_path(tmp_path)), 1], dtype=object)
    return npy(payload, allow_pickle=True)


def raw_pickle(tmp_path: Path) -> bytes:
    return pickle.dumps(Tripwire(tripwire_path(tmp_path)))


def not_unpickled(tmp_path: Path) -> None:
    assert not tripwire_path(tmp_path).exists()


def zip_bomb(tmp_path: Path) -> bytes:
    # 32 MB of zeros deflate to ~32 KB; refused on the declared size, never inflated.
    return zip_of({"zeros.npy": npy(np.zeros(4_000_000))}, zipfile.ZIP_DEFLATED)


def npz_lying_size(tmp_path: Path) -> bytes:
    data = zip_of({"a.npy": npy(np.arange(1000, dtype=np.float32))}, zipfile.ZIP_DEFLATED)
    return patch_zip(data, "file_size", 200)


def npz_flipped(tmp_path: Path) -> bytes:
    data = bytearray(npz(a=np.arange(100, dtype=np.float32)))
    middle = len(data) // 3
    data[middle : middle + 8] = bytes(b ^ 0xFF for b in data[middle : middle + 8])
    return bytes(data)


def npz_huge_directory(tmp_path: Path) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for i in range(20):
            info = zipfile.ZipInfo(f"a{i}.npy")
            info.comment = b"x" * 65_535
            archive.writestr(info, npy(np.zeros(1, dtype=np.float32)))
    return buffer.getvalue()


def npz_duplicate_names(tmp_path: Path) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings(), zipfile.ZipFile(buffer, "w") as archive:
        warnings.simplefilter("ignore")  # zipfile warns about the duplicate, as it should
        archive.writestr("a.npy", npy(A23))
        archive.writestr("a.npy", npy(A23))
    return buffer.getvalue()


def torch_save(tmp_path: Path) -> bytes:
    buffer = io.BytesIO()
    torch.save(torch.arange(4.0), buffer)
    return buffer.getvalue()


def already_read(tmp_path: Path) -> io.BytesIO:
    file = io.BytesIO(npy(A23))
    file.read()
    return file


def text_mode(tmp_path: Path) -> Any:
    path = write(tmp_path, "a.npy", npy(A23))
    return path.open("r", encoding="latin1")


GOOD = [
    Case("npy-float32-2x3", lambda p: npy(A23), {"array": A23}),
    Case("npy-float64-to-float32", lambda p: npy(F64), {"array": F64.astype(np.float32)}),
    Case(
        "npy-float64-kept",
        lambda p: npy(F64),
        {"array": F64},
        kwargs={"keep_float64": True},
        dtype=np.float64,
    ),
    Case(
        "npy-float64-beyond-float32-is-inf",
        lambda p: npy(np.array([1e300, -1e300, 1e-300])),
        {"array": [np.inf, -np.inf, 0.0]},
    ),
    Case(  # float32 would round integers above 2**24: 16777217 became 16777216
        "npy-int32-kept-as-float64",
        lambda p: npy(np.array([-3, 16_777_217], dtype=np.int32)),
        {"array": np.array([-3, 16_777_217], dtype=np.float64)},
        kwargs={"keep_float64": True},
        dtype=np.float64,
    ),
    Case(  # 16 bits fit float32 exactly: no need for twice the memory
        "npy-int16-not-kept-as-float64",
        lambda p: npy(np.array([-3, 7], dtype=np.int16)),
        {"array": np.array([-3, 7], dtype=np.float32)},
        kwargs={"keep_float64": True},
    ),
    Case("npy-int64", lambda p: npy(np.array([-(2**40), 5])), {"array": [-(2.0**40), 5.0]}),
    Case("npy-int8", lambda p: npy(np.array([-128, 127], np.int8)), {"array": [-128.0, 127.0]}),
    Case("npy-uint8", lambda p: npy(np.arange(256, dtype=np.uint8)), {"array": np.arange(256.0)}),
    Case("npy-uint64", lambda p: npy(U64), {"array": U64.astype(np.float32)}),
    Case("npy-bool", lambda p: npy(np.array([True, False, True])), {"array": [1.0, 0.0, 1.0]}),
    Case(
        "npy-bool-nonzero-bytes",
        lambda p: raw_npy(header("|b1", shape=(3,)), b"\x00\x02\xff"),
        {"array": [0.0, 1.0, 1.0]},
    ),
    Case(
        "npy-float16",
        lambda p: npy(np.array([0.5, -2.0, 65504.0], np.float16)),
        {"array": [0.5, -2.0, 65504.0]},
    ),
    Case(
        "npy-big-endian-float64",
        lambda p: npy(F64.astype(">f8")),
        {"array": F64.astype(np.float32)},
    ),
    Case("npy-big-endian-fortran-int32", lambda p: npy(FORTRAN), {"array": FORTRAN}),
    Case("npy-fortran-3d", lambda p: npy(FORTRAN3), {"array": FORTRAN3}),
    Case("npy-version-2.0", lambda p: npy_version(A23, (2, 0)), {"array": A23}),
    Case("npy-version-3.0", lambda p: npy_version(A23, (3, 0)), {"array": A23}),
    Case("npy-0-elements", lambda p: npy(np.zeros(0)), {"array": np.zeros(0)}),
    Case("npy-0-elements-3d", lambda p: npy(np.zeros((3, 0, 2))), {"array": np.zeros((3, 0, 2))}),
    Case("npy-0d-scalar", lambda p: npy(np.float64(2.5)), {"array": np.array(2.5)}),
    Case("npy-nan-inf", lambda p: npy(NONFINITE), {"array": NONFINITE}),
    Case(
        "npz-savez-archive-order",
        lambda p: npz(z=A23, a=np.arange(3), m=np.array(True)),
        {"z": A23, "a": np.arange(3), "m": np.array(1.0)},
    ),
    Case(
        "npz-compressed",
        lambda p: npz(True, x=FORTRAN3, y=np.zeros(0)),
        {"x": FORTRAN3, "y": np.zeros(0)},
    ),
    Case(
        "npz-positional-names",
        lambda p: to_npz_bytes({"arr_0": A23}),
        {"arr_0": A23},
    ),
    Case(
        "npz-float64-kept",
        lambda p: npz(True, x=F64),
        {"x": F64},
        kwargs={"keep_float64": True},
        dtype=np.float64,
    ),
    Case("source-bytesio", lambda p: io.BytesIO(npy(A23)), {"array": A23}),
    Case("source-bytearray", lambda p: bytearray(npy(A23)), {"array": A23}),
    Case("source-memoryview", lambda p: memoryview(npy(A23)), {"array": A23}),
    Case("source-str-path", lambda p: str(write(p, "a.npy", npy(A23))), {"array": A23}),
    Case("source-pathlib", lambda p: write(p, "a.npz", npz(b=A23)), {"b": A23}),
    Case(
        "source-uploaded-file-misnamed",
        lambda p: UploadedFile(npz(b=A23), name="weights.txt"),
        {"b": A23},
    ),
    Case("npy-named-npz-on-disk", lambda p: write(p, "x.npz", npy(A23)), {"array": A23}),
]

HOSTILE = [
    Case("empty-bytes", lambda p: b"", match=("empty",)),
    Case("random-junk", lambda p: JUNK, match=("not a .npy or .npz", "numpy.save")),
    Case("text-file", lambda p: b"1,2,3\n4,5,6\n", match=("not a .npy or .npz",)),
    Case("magic-only", lambda p: b"\x93NUMPY", match=("malformed .npy header",)),
    Case("npy-header-only", lambda p: npy(A23)[:128], match=("truncated", "24 bytes")),
    Case("npy-half-data", lambda p: npy(A23)[:-12], match=("truncated", "holds 12")),
    Case("npy-trailing-junk", lambda p: npy(A23) + b"junk", match=("trailing data", "4 bytes")),
    Case("npy-two-arrays-one-file", lambda p: npy(A23) + npy(A23), match=("trailing data",)),
    Case(
        "npy-shape-10e12",
        lambda p: raw_npy(header(shape=(10**12,))),
        match=("1000000000000", str(MAX_ELEMENTS), "max_elements"),
    ),
    Case(
        "npy-shape-product-overflows-int64",
        lambda p: raw_npy(header(shape=(2**40, 2**40, 2**40))),
        match=(str(2**120), "max_elements"),
    ),
    Case(
        "npy-over-small-cap",
        lambda p: npy(A23),
        match=("6 elements", "cap of 5"),
        kwargs={"max_elements": 5},
    ),
    Case("npy-negative-dim", lambda p: raw_npy(header(shape=(-1, 4))), match=("negative",)),
    Case(
        "npy-zero-size-giant-dim",
        lambda p: raw_npy(header(shape=(0, 10**30))),
        match=("dimensions larger",),
    ),
    Case("npy-too-many-dims", lambda p: raw_npy(header(shape=(1,) * 40)), match=("40 dim",)),
    Case(
        "npy-header-missing-keys",
        lambda p: raw_npy("{'descr': '<f4', 'shape': (2,)}"),
        match=("malformed .npy header",),
    ),
    Case("npy-header-not-dict", lambda p: raw_npy("[1, 2, 3]"), match=("malformed .npy header",)),
    Case(
        "npy-header-syntax-error",
        lambda p: raw_npy("{'descr': '<f4', 'shape': (2,"),
        match=("malformed .npy header",),
    ),
    Case(
        "npy-header-code-injection",
        lambda p: raw_npy(
            "{'descr': __import__('os').system('false'), 'fortran_order': False, 'shape': (2,)}"
        ),
        match=("malformed .npy header",),
    ),
    Case(
        "npy-header-bad-shape-type",
        lambda p: raw_npy(header(shape=(2.5,))),
        match=("malformed .npy header",),
    ),
    Case(
        "npy-header-bad-descr",
        lambda p: raw_npy(header(descr="<q9")),
        match=("malformed .npy header",),
    ),
    Case(
        "npy-header-deep-nesting",
        lambda p: raw_npy("(" * 5000 + ")" * 5000),
        match=("malformed .npy header",),
    ),
    Case(
        "npy-version-9.9",
        lambda p: raw_npy(header(), bytes(8), version=(9, 9)),
        match=("unsupported .npy format version 9.9",),
    ),
    Case(
        "npy-header-length-beyond-file",
        lambda p: raw_npy(header(), length=5000),
        match=("malformed .npy header", "5000"),
    ),
    Case(
        "npy-header-length-huge",
        lambda p: raw_npy(header(), version=(2, 0), length=2**32 - 1),
        match=("malformed .npy header", str(2**32 - 1)),
    ),
    Case(
        "npy-v3-invalid-utf8",
        lambda p: raw_npy(header().encode() + b"\xff\xfe", bytes(8), version=(3, 0)),
        match=("malformed .npy header",),
    ),
    Case(
        "npy-object-pickle-payload",
        object_npy,
        match=("pickle", "object", "accepted: bool, integer and floating-point"),
        after=not_unpickled,
    ),
    Case("raw-pickle-file", raw_pickle, match=("pickle",), after=not_unpickled),
    Case("npy-unicode", lambda p: npy(np.array(["ab", "c"])), match=("<U2", "accepted: bool")),
    Case("npy-bytes", lambda p: npy(np.array([b"ab"])), match=("S2", "accepted: bool")),
    Case(
        "npy-structured",
        lambda p: npy(np.zeros(2, dtype=[("x", "<f4"), ("y", "<i4")])),
        match=("unsupported dtype", "accepted: bool"),
    ),
    Case(
        "npy-subarray-descr",
        lambda p: raw_npy(header(descr=("<f4", (2,)), shape=(1,)), bytes(8)),
        match=("unsupported dtype",),
    ),
    Case(
        "npy-datetime64",
        lambda p: npy(np.array(["2024-01-01"], dtype="datetime64[D]")),
        match=("datetime64", "accepted: bool"),
    ),
    Case(
        "npy-timedelta64",
        lambda p: npy(np.array([1], dtype="timedelta64[s]")),
        match=("timedelta64", "accepted: bool"),
    ),
    Case("npy-complex", lambda p: npy(np.array([1 + 2j])), match=("complex", "accepted: bool")),
    Case("npy-void", lambda p: npy(np.zeros(2, dtype="V8")), match=("unsupported dtype",)),
    Case(
        "npz-zip-bomb",
        zip_bomb,
        match=("declares 32000128 bytes", "cap of 1000000"),
        kwargs={"max_elements": 1_000_000},
    ),
    Case(
        "npz-declared-4gb",
        lambda p: patch_zip(zip_of({"a.npy": npy(A23)}), "file_size", 2**32 - 2),
        match=(f"declares {2**32 - 2} bytes",),
    ),
    Case("npz-lying-small-size", npz_lying_size, match=("corrupt",)),
    Case(
        "npz-non-npy-member",
        lambda p: zip_of({"a.npy": npy(A23), "readme.txt": b"hello"}),
        match=("'readme.txt'", "only .npy members"),
    ),
    Case("npz-no-members", lambda p: zip_of({}), match=("holds no arrays",)),
    Case("npz-flipped-bytes", npz_flipped, match=("corrupt",)),
    Case("npz-truncated", lambda p: npz(a=A23)[:200], match=("corrupt",)),
    Case(
        "npz-too-many-members",
        lambda p: zip_of({f"a{i}.npy": npy(np.zeros(1)) for i in range(MAX_NPZ_MEMBERS + 1)}),
        match=(f"{MAX_NPZ_MEMBERS + 1} members", f"{MAX_NPZ_MEMBERS} accepted"),
    ),
    Case("npz-huge-directory", npz_huge_directory, match=("directory",)),
    Case(
        "npz-nested",
        lambda p: zip_of({"inner.npy": npz(a=A23)}),
        match=("'inner.npy'", "nested"),
    ),
    Case(
        "npz-encrypted-flag",
        lambda p: patch_zip(zip_of({"a.npy": npy(A23)}), "flags", 0x1),
        match=("encrypted",),
    ),
    Case(
        "npz-unknown-compression",
        lambda p: patch_zip(zip_of({"a.npy": npy(A23)}), "method", 99),
        match=("compression",),
    ),
    Case("npz-duplicate-names", npz_duplicate_names, match=("several members named 'a.npy'",)),
    Case(
        "npz-object-member",
        lambda p: npz(w=np.array([Tripwire(tripwire_path(p))], dtype=object)),
        match=("'w.npy'", "pickle"),
        after=not_unpickled,
    ),
    Case(
        "npz-member-truncated-npy",
        lambda p: zip_of({"a.npy": npy(A23)[:-4]}),
        match=("'a.npy'", "truncated"),
    ),
    Case(
        "npz-elements-over-cap-in-all",
        lambda p: npz(a=np.zeros(600), b=np.zeros(600)),
        match=("in all", "1000"),
        kwargs={"max_elements": 1000},
    ),
    Case("path-missing", lambda p: p / "missing.npy", match=("cannot read", "missing.npy")),
    Case("path-directory", lambda p: str(p), match=("cannot read",)),
    Case("file-object-already-read", already_read, match=("empty", "seek(0)")),
    Case("file-object-text-mode", text_mode, match=("binary mode",)),
    Case(
        "raw-bytes-over-cap",
        lambda p: JUNK * 512,
        match=("2097152 bytes", "1048576 bytes accepted"),
        kwargs={"max_elements": 0},
    ),
]


# ---------------------------------------------------------------------------------------------
# .safetensors and torch.save files
# ---------------------------------------------------------------------------------------------


def st_file(tensors: dict[str, Any], metadata: dict[str, str] | None = None) -> bytes:
    """A .safetensors file written by the safetensors library itself."""
    return st_torch.save(tensors, metadata=metadata)


def st_raw(header: Any, data: bytes = b"", length: int | None = None) -> bytes:
    """A .safetensors file with any header, including ones safetensors would never write."""
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    declared = len(text) if length is None else length
    return struct.pack("<Q", declared) + text + data


def st_entry(dtype: str = "F32", shape: Any = (2,), offsets: Any = (0, 8)) -> dict[str, Any]:
    return {"dtype": dtype, "shape": list(shape), "data_offsets": list(offsets)}


def tsave(obj: Any, **kwargs: Any) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # TypedStorage, quantization deprecation notices
        torch.save(obj, buffer, **kwargs)
    return buffer.getvalue()


def rezip(data: bytes, replace: dict[str, bytes] | None = None,
          compression: int = zipfile.ZIP_STORED, extra: dict[str, bytes] | None = None) -> bytes:
    """A torch.save zip rewritten: some entries replaced (by their name after the top folder),
    others added, all with `compression`."""
    replace = replace or {}
    source = zipfile.ZipFile(io.BytesIO(data))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=compression) as archive:
        root = source.namelist()[0].split("/")[0]
        for info in source.infolist():
            inner = info.filename.split("/", 1)[1]
            archive.writestr(info.filename, replace.get(inner, source.read(info)))
        for inner, content in (extra or {}).items():
            archive.writestr(f"{root}/{inner}", content)
    return buffer.getvalue()


class Exec:
    """Unpickling this runs Python source that creates the tripwire directory."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (exec, (f"import os; os.makedirs({str(self.path)!r})",))


def pt_tripwire(tmp_path: Path) -> bytes:
    return tsave({"w": torch.ones(2), "evil": Tripwire(tripwire_path(tmp_path))})


def pt_exec(tmp_path: Path) -> bytes:
    return tsave({"w": torch.ones(2), "evil": Exec(tripwire_path(tmp_path))})


def pt_protocol4(tmp_path: Path) -> bytes:
    """The payload as protocol 4 writes it (STACK_GLOBAL), put in place of torch's data.pkl."""
    payload = pickle.dumps({"w": Tripwire(tripwire_path(tmp_path))}, protocol=4)
    return rezip(tsave({"w": torch.ones(2)}), {"data.pkl": payload})


def pt_legacy(tmp_path: Path) -> bytes:
    return tsave({"evil": Tripwire(tripwire_path(tmp_path))}, _use_new_zipfile_serialization=False)


def pt_torchscript(tmp_path: Path) -> bytes:
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit is deprecated, and says so
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 2)), buffer)
    return buffer.getvalue()


def pt_dict_bomb(tmp_path: Path) -> bytes:
    """A few hundred bytes that unfold to 2**25 paths: each level holds the next one twice."""
    level: Any = 0
    for _ in range(25):
        level = {"a": level, "b": level}
    return tsave({"w": torch.ones(1), "bomb": level})


def pt_bytearray(tmp_path: Path) -> bytes:
    """A few hundred bytes whose loading allocates and zeroes 1 GiB (bytearray is on torch's
    weights-only allow-list)."""
    return tsave({"w": torch.ones(2), "x": Call(bytearray, 2**30)})


def pt_punycode(tmp_path: Path) -> bytes:
    """Text whose punycode encoding (pure Python, quadratic in distinct characters) takes
    minutes: _codecs.encode is on torch's weights-only allow-list."""
    text = "".join(map(chr, range(0x4E00, 0x4E00 + 48_000)))
    return tsave({"w": torch.ones(2), "x": Call(codecs.encode, text, "punycode")})


def pt_stretched_storage(tmp_path: Path) -> bytes:
    """A storage record of 8 bytes whose pickle declares a million values."""
    data = tsave({"w": torch.ones(2)})
    return rezip(data, {"data.pkl": pickle_of(data).replace(b"K\x02t", b"J@B\x0f\x00t", 1)})


def pt_second_pickle(tmp_path: Path) -> bytes:
    """A torch.save zip with a second pickle named ``DATA.PKL`` after the real one: torch's zip
    reader finds entries ignoring case, and took the second, which nothing had checked (it
    calls bytearray(2**30))."""
    evil = pickle.dumps(Call(bytearray, 2**30), protocol=2)
    return rezip(tsave({"w": torch.ones(3)}), extra={"DATA.PKL": evil})


def two_faced_zip(seen_by_zipfile: bytes, seen_by_torch: bytes) -> bytes:
    """One file holding two torch.save archives: Python's zipfile reads the first (the central
    directory just before the end record, its offsets corrected), torch's reader the second (the
    directory at the offset the end record declares)."""
    def entries(data: bytes) -> list[tuple[bytes, bytes]]:
        archive = zipfile.ZipFile(io.BytesIO(data))
        return [(i.filename.encode(), archive.read(i)) for i in archive.infolist()]

    def local(name: bytes, data: bytes) -> bytes:
        return struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0, zlib.crc32(data),
                           len(data), len(data), len(name), 0) + name + data

    def central(name: bytes, data: bytes, at: int) -> bytes:
        return struct.pack("<4s6H3L5H2L", b"PK\x01\x02", 20, 20, 0, 0, 0, 0, zlib.crc32(data),
                           len(data), len(data), len(name), 0, 0, 0, 0, 0, at) + name

    shown, hidden = entries(seen_by_zipfile), entries(seen_by_torch)
    out, at_hidden = b"", []
    for name, data in hidden:
        at_hidden.append(len(out))
        out += local(name, data)
    out += bytes(46 * len(hidden) + sum(len(n) for n, _ in hidden))  # zipfile's offset shift
    at_shown = []
    for name, data in shown:
        at_shown.append(len(out))
        out += local(name, data)
    declared = len(out)
    hidden_dir = b"".join(central(n, d, o) for (n, d), o in zip(hidden, at_hidden, strict=True))
    shown_dir = b"".join(central(n, d, o - len(hidden_dir))
                         for (n, d), o in zip(shown, at_shown, strict=True))
    return (out + hidden_dir + shown_dir
            + struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, len(shown), len(shown),
                          len(shown_dir), declared, 0))


def pt_with_items(items: bytes) -> bytes:
    """A state dict of one tensor whose pickle also sets ``items`` (pickle opcodes: MARK, keys
    and values, SETITEMS) in the top-level dict, before its end."""
    data = tsave({"w": torch.zeros(4)})
    body = pickle_of(data)
    assert body.endswith(b"s.")
    return rezip(data, {"data.pkl": body[:-1] + b"(" + items + b"u."})


def long_int(n: int) -> bytes:
    raw = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def pt_rebuilt(*tensors: tuple[str, str, int, tuple[int, ...], tuple[int, ...], bytes]
               ) -> bytes:
    """A torch.save file of hand-written tensors over one storage ``0`` of four float32
    values: per tensor, its key, storage class, offset, size, stride and the pickle of the
    metadata dict torch.save appends (b"" for none)."""
    def text(value: str) -> bytes:
        raw = value.encode("utf-8", "surrogatepass")
        return b"X" + struct.pack("<I", len(raw)) + raw

    def ints(values: tuple[int, ...]) -> bytes:
        return b"(" + b"".join(long_int(v) for v in values) + b"t"

    body = b"\x80\x02}"
    for key, kind, offset, size, stride, metadata in tensors:
        count = 4 * 4 // {"FloatStorage": 4, "ByteStorage": 1}[kind]
        storage = (b"(" + text("storage") + b"ctorch\n" + kind.encode() + b"\n" + text("0")
                   + text("cpu") + long_int(count) + b"tQ")
        body += (text(key) + b"ctorch._utils\n_rebuild_tensor_v2\n(" + storage
                 + long_int(offset) + ints(size) + ints(stride) + b"\x89"
                 + b"ccollections\nOrderedDict\n)R" + metadata + b"tRs")
    return rezip(tsave({"w": torch.arange(4.0)}), {"data.pkl": body + b"."})


def pickle_of(data: bytes) -> bytes:
    source = zipfile.ZipFile(io.BytesIO(data))
    return source.read(next(n for n in source.namelist() if n.endswith("data.pkl")))


def central_entries(data: bytes) -> dict[str, int]:
    """Where each central directory entry of a zip starts, by name."""
    end = data.rfind(b"PK\x05\x06")
    at = struct.unpack_from("<I", data, end + 16)[0]
    found = {}
    while data[at:at + 4] == b"PK\x01\x02":
        name_len, extra_len, comment_len = struct.unpack_from("<3H", data, at + 28)
        found[data[at + 46:at + 46 + name_len].decode()] = at
        at += 46 + name_len + extra_len + comment_len
    return found


def pt_shared_bytes(tmp_path: Path) -> bytes:
    """Three storages whose directory entries all point at the first one's bytes (its local
    header, CRC and size): 4,000 of them over one 100 KB record declared 400 MB in 929 KB."""
    data = tsave({f"t{i}": torch.arange(4.0) + i for i in range(3)})
    archive = zipfile.ZipFile(io.BytesIO(data))
    first = next(i for i in archive.infolist() if i.filename.endswith("/data/0"))
    patched = bytearray(data)
    for name, at in central_entries(data).items():
        if name.endswith(("/data/1", "/data/2")):
            struct.pack_into("<3L", patched, at + 16, first.CRC, first.compress_size,
                             first.file_size)
            struct.pack_into("<L", patched, at + 42, first.header_offset)
    return bytes(patched)


def pt_nested_long_key(tmp_path: Path) -> bytes:
    """One 1,000-character key (pickled once, then memoized) over 30 levels, above a list of
    one tensor 4,096 times: every tensor's name would be a 30 KB copy (120 MB of names; 39 KB
    of file asked for 3.5 GB with 30,000 characters)."""
    key, value = "A" * 1000, [torch.ones(1)] * 4096
    for _ in range(30):
        value = {key: value}
    return tsave(value)


def pt_cycle(tmp_path: Path) -> bytes:
    loop: dict[str, Any] = {"w": torch.ones(1)}
    loop["self"] = loop
    return tsave(loop)


class Config:
    """A class of the script that saved a checkpoint: loading it would import this module."""

    lr = 0.1


def checkpoint() -> dict[str, Any]:
    """What a training script saves: weights, optimizer state, plain values."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.LayerNorm(2))
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.randn(4, 3)).sum().backward()
    optimizer.step()
    return {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": 3,
            "name": "run-1", "best": None}


CKPT = checkpoint()
BF16 = torch.tensor([1.0, -2.5, 3.140625, 1e-3], dtype=torch.bfloat16)
BIG_U64 = torch.tensor([0, 2**63, 2**64 - 1], dtype=torch.uint64)
ARANGE = torch.arange(20.0).reshape(4, 5)


def expected_checkpoint() -> dict[str, np.ndarray]:
    model = {f"model.{k}": v.numpy() for k, v in CKPT["model"].items()}
    state = {f"optimizer.state.{i}.{k}": v.numpy()
             for i, slot in CKPT["optimizer"]["state"].items() for k, v in slot.items()}
    return model | state


GOOD += [
    Case("safetensors-float32", lambda p: st_file({"x": torch.from_numpy(A23)}), {"x": A23}),
    Case(
        "safetensors-half-precisions-arrive-as-float32",
        lambda p: st_file({"bf16": BF16, "f16": torch.tensor([0.5, 65504.0], dtype=torch.float16),
                           "f8": torch.tensor([0.5, -448.0], dtype=torch.float8_e4m3fn),
                           "f8e5": torch.tensor([0.25, 57344.0], dtype=torch.float8_e5m2)}),
        {"bf16": BF16.float().numpy(), "f16": [0.5, 65504.0], "f8": [0.5, -448.0],
         "f8e5": [0.25, 57344.0]},
    ),
    Case(
        "safetensors-integers-and-bool",
        lambda p: st_file({"i64": torch.tensor([-(2**40), 5]), "u64": BIG_U64,
                           "u8": torch.arange(3, dtype=torch.uint8),
                           "b": torch.tensor([True, False])}),
        # in the order safetensors writes them (by alignment, then name), as the header lists them
        {"u64": BIG_U64.numpy().astype(np.float32), "i64": [-(2.0**40), 5.0],
         "u8": [0.0, 1.0, 2.0], "b": [1.0, 0.0]},
    ),
    Case(
        "safetensors-bool-nonzero-bytes",
        lambda p: st_raw({"b": st_entry("BOOL", (3,), (0, 3))}, b"\x00\x02\xff"),
        {"b": [0.0, 1.0, 1.0]},
    ),
    Case(
        "safetensors-float64-kept",
        lambda p: st_file({"x": torch.from_numpy(F64)}),
        {"x": F64},
        kwargs={"keep_float64": True},
        dtype=np.float64,
    ),
    Case(
        "safetensors-empty-and-scalar",
        lambda p: st_file({"e": torch.zeros(3, 0), "s": torch.tensor(2.5)}),
        {"e": np.zeros((3, 0)), "s": np.array(2.5)},
    ),
    Case(
        "safetensors-from-numpy",
        # C order: safetensors.numpy.save writes a Fortran-ordered array's memory as if it were
        # C-ordered (its own load gets it wrong too), a bug of that library, not of the format
        lambda p: st_numpy.save({"x": np.ascontiguousarray(FORTRAN3), "y": F64}),
        {"y": F64.astype(np.float32), "x": FORTRAN3},
    ),
    Case(
        "safetensors-with-metadata-on-disk-misnamed",
        lambda p: write(p, "weights.pt", st_file({"x": torch.ones(2)}, {"format": "pt"})),
        {"x": [1.0, 1.0]},
    ),
    Case("torch-save-file", torch_save, {"array": np.arange(4.0)}),
    Case(
        "torch-state-dict",
        lambda p: tsave(CKPT["model"]),
        {k: v.numpy() for k, v in CKPT["model"].items()},
    ),
    Case(  # plain values (step, name, None, the optimizer's settings) are left out
        "torch-checkpoint-nested-keys-joined",
        lambda p: tsave(CKPT),
        expected_checkpoint(),
    ),
    Case(
        "torch-list-bf16-and-views",
        lambda p: tsave([BF16, ARANGE.T, ARANGE[1:3, ::2]]),
        {"0": BF16.float().numpy(), "1": ARANGE.T.numpy(), "2": ARANGE[1:3, ::2].numpy()},
    ),
    Case(
        "torch-integers-kept",
        lambda p: tsave({"i": torch.tensor([16_777_217], dtype=torch.int32), "u": BIG_U64}),
        {"i": np.array([16_777_217.0]), "u": BIG_U64.numpy().astype(np.float64)},
        kwargs={"keep_float64": True},
        dtype=np.float64,
    ),
    Case(
        "torch-parameters-on-disk-as-npy",
        lambda p: write(p, "acts.npy", tsave({"p": torch.nn.Parameter(torch.ones(2))})),
        {"p": [1.0, 1.0]},
    ),
]

HOSTILE += [
    # .safetensors
    Case(
        "safetensors-header-claims-2-to-the-40",
        lambda p: st_raw({"x": st_entry()}, bytes(8), length=2**40),
        match=("malformed .safetensors header", str(2**40), "4194304 accepted"),
    ),
    Case(
        "safetensors-header-longer-than-file",
        lambda p: st_raw({"x": st_entry()}, bytes(8), length=5000),
        match=("declares 5000 bytes", "truncated"),
    ),
    Case(
        "safetensors-tensor-claims-2-to-the-40-values",
        lambda p: st_raw({"x": st_entry(shape=(2**40,), offsets=(0, 2**42))}, bytes(8)),
        match=(str(2**40), "max_elements"),
    ),
    Case(
        "safetensors-offsets-past-the-end",
        lambda p: st_raw({"x": st_entry(offsets=(0, 8))}, bytes(4)),
        match=("'x'", "run past the end", "holds 4 bytes"),
    ),
    Case(
        "safetensors-truncated",
        lambda p: st_file({"x": torch.ones(100)})[:-40],
        match=("run past the end", "truncated"),
    ),
    Case(
        "safetensors-offsets-wrong-size",
        lambda p: st_raw({"x": st_entry(shape=(3,), offsets=(0, 8))}, bytes(8)),
        match=("needs 12 bytes", "span 8"),
    ),
    Case(
        "safetensors-unknown-dtype",
        lambda p: st_raw({"x": st_entry("Q7")}, bytes(8)),
        match=("unknown dtype 'Q7'", "BF16"),
    ),
    Case(
        "safetensors-complex",
        lambda p: st_raw({"x": st_entry("C64")}, bytes(8)),
        match=("C64", "complex"),
    ),
    Case(
        "safetensors-overlapping-tensors",
        lambda p: st_raw({"a": st_entry(offsets=(0, 8)), "b": st_entry(offsets=(4, 12))},
                         bytes(12)),
        match=("overlap",),
    ),
    Case(
        "safetensors-bytes-of-no-tensor",
        lambda p: st_raw({"a": st_entry(offsets=(0, 8))}, bytes(16)),
        match=("8 bytes of the data section belong to no tensor",),
    ),
    Case("safetensors-not-json", lambda p: st_raw(b"{not json}"), match=("not valid JSON",)),
    Case(
        "safetensors-deep-json",
        lambda p: st_raw(b"{" + b'"a":' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        match=("malformed .safetensors header",),
    ),
    Case(
        "safetensors-invalid-utf8",
        lambda p: st_raw(b'{"\xff": 1}'),
        match=("not valid JSON",),
    ),
    Case(
        "safetensors-metadata-not-strings",
        lambda p: st_raw({"__metadata__": {"n": 1}, "x": st_entry()}, bytes(8)),
        match=("__metadata__ must map strings to strings",),
    ),
    Case(
        "safetensors-shape-not-integers",
        lambda p: st_raw({"x": st_entry(shape=[2.0])}, bytes(8)),
        match=("not a list of integers",),
    ),
    Case(
        "safetensors-negative-dim",
        lambda p: st_raw({"x": st_entry(shape=[-2])}, bytes(8)),
        match=("negative dimension",),
    ),
    Case(
        "safetensors-no-tensors",
        lambda p: st_file({}, {"only": "metadata"}),
        match=("holds no tensors",),
    ),
    Case(
        "safetensors-too-many-tensors",
        lambda p: st_raw({f"t{i}": st_entry(shape=(0,), offsets=(0, 0))
                          for i in range(MAX_ARRAYS + 1)}),
        match=(f"{MAX_ARRAYS + 1} tensors", f"{MAX_ARRAYS} accepted"),
    ),
    Case(
        "safetensors-over-small-cap",
        lambda p: st_file({"a": torch.ones(4), "b": torch.ones(4)}),
        match=("8 elements", "cap of 5"),
        kwargs={"max_elements": 5},
    ),
    # torch.save files
    Case(
        "torch-pickle-payload-makedirs",
        pt_tripwire,
        match=("os.makedirs", "is not read", "state_dict"),
        after=not_unpickled,
    ),
    Case(
        "torch-pickle-payload-exec",
        pt_exec,
        match=("builtins.exec", "is not read"),
        after=not_unpickled,
    ),
    Case(
        "torch-pickle-payload-protocol-4",
        pt_protocol4,
        match=("not written by torch.save", "os.makedirs", "is not read"),
        after=not_unpickled,
    ),
    Case(
        "torch-legacy-pickle-with-payload",
        pt_legacy,
        match=("bare Python pickle", "_use_new_zipfile_serialization=False", "never loaded"),
        after=not_unpickled,
    ),
    Case(
        "torch-whole-model",
        lambda p: tsave(torch.nn.Linear(2, 2)),
        match=("a whole model", "torch.nn.modules.linear.Linear", "model.state_dict()"),
    ),
    Case(
        "torch-numpy-array-inside",
        lambda p: tsave({"w": torch.ones(1), "n": np.zeros(3)}),
        match=("numpy arrays", "numpy."),
    ),
    Case(
        "torch-class-of-the-script",
        lambda p: tsave({"w": torch.ones(1), "config": Config()}),
        match=("test_files.Config", "is not read"),
    ),
    Case("torch-torchscript", pt_torchscript, match=("TorchScript",)),
    Case(
        "torch-truncated",
        lambda p: tsave({"w": torch.ones(100)})[:-300],
        match=("corrupt torch.save file",),
    ),
    Case(
        "torch-compressed-entries",
        lambda p: rezip(tsave({"w": torch.zeros(10_000)}), compression=zipfile.ZIP_DEFLATED),
        match=("compressed", "never does"),
    ),
    Case(
        "torch-encrypted-flag",
        lambda p: patch_zip(tsave({"w": torch.ones(2)}), "flags", 0x1),
        match=("encrypted",),
    ),
    Case(
        "torch-pickle-too-large",
        lambda p: rezip(tsave({"w": torch.ones(1)}), {"data.pkl": b"\x80\x02" + bytes(2**21)}),
        match=("pickle is 2097154 bytes", f"more than the {MAX_PICKLE_BYTES}"),
    ),
    Case(
        "torch-storages-over-cap",
        lambda p: tsave({"w": torch.ones(1000, dtype=torch.float64)}),
        match=("storages declare 8000 bytes", "cap of 100 elements"),
        kwargs={"max_elements": 100},
    ),
    Case(  # one value on disk, a billion through a stride of 0: refused before anything is built
        "torch-stride-0-view-of-a-billion",
        lambda p: tsave(torch.zeros(1).expand(10**9)),
        match=("1000000000 elements", "max_elements"),
    ),
    Case(
        "torch-unfolding-dict-bomb",
        pt_dict_bomb,
        match=("more than 100000 objects",),
    ),
    Case("torch-cycle", pt_cycle, match=("nests containers more than 32 deep",)),
    Case(  # torch's allow-list admits the call; lnviz reads tensors and plain values alone
        "torch-bytearray-of-a-gibibyte",
        pt_bytearray,
        match=("a bytearray", "builtins.bytearray", "is not read"),
    ),
    Case(
        "torch-punycode-of-48000-characters",
        pt_punycode,
        match=("a bytes value", "_codecs.encode", "is not read"),
    ),
    Case(
        "torch-second-pickle-differing-in-case",
        pt_second_pickle,
        match=("two entries named", "DATA.PKL", "is not read"),
    ),
    Case(
        "torch-entry-torch-save-never-writes",
        lambda p: rezip(tsave({"w": torch.ones(3)}), extra={"extra.py": b"print(1)"}),
        match=("an entry torch.save does not write", "extra.py"),
    ),
    Case(  # hash() of a tuple nested 200,000 deep overflowed the C stack: the process died
        "torch-key-nested-200000-deep",
        lambda p: pt_with_items(b")" + b"\x85" * 200_000 + b"N"),
        match=("a dict key of type tuple", "is not read"),
    ),
    Case(  # whole numbers 2**61 - 1 apart hash alike: 60,000 of them took 29 s to set
        "torch-keys-that-hash-alike",
        lambda p: pt_with_items(b"".join(long_int(i * (2**61 - 1)) + b"N"
                                         for i in range(1, 60_001))),
        match=("a dict key of type int", "below 2**31"),
    ),
    Case(  # {"neg": True}: torch negated the tensor lazily and numpy refused it (a RuntimeError)
        "torch-negative-bit-in-metadata",
        lambda p: pt_rebuilt(("w", "FloatStorage", 0, (4,), (1,), b"}X\x03\x00\x00\x00neg\x88s")),
        match=("rebuilds a tensor from arguments torch.save does not write",),
    ),
    Case(  # torch keeps the storage as first read: "a" came back as bytes, not the checked floats
        "torch-one-storage-read-as-two-dtypes",
        lambda p: pt_rebuilt(("b", "ByteStorage", 0, (4,), (1,), b""),
                             ("a", "FloatStorage", 0, (4,), (1,), b"")),
        match=("reads storage '0' as uint8 and as float32",),
    ),
    Case(  # an empty dim beside dims of 2**62: numpy's "array is too big", no TensorFileError
        "torch-empty-tensor-with-huge-dims",
        lambda p: pt_rebuilt(("w", "FloatStorage", 0, (0, 2**62, 2**62), (1, 1, 1), b"")),
        match=("rebuilds a tensor from arguments torch.save does not write",),
    ),
    Case(
        "torch-storage-larger-than-its-record",
        pt_stretched_storage,
        match=("declared as 1000000 values of float32", "holds 8 bytes", "damaged"),
    ),
    Case(
        "torch-nested-tensor",
        lambda p: tsave({"n": torch.nested.nested_tensor([torch.ones(2), torch.ones(3)])}),
        match=("a nested tensor", "_rebuild_nested_tensor", "unbind"),
    ),
    Case(
        "torch-float4",
        lambda p: tsave({"f": torch.zeros(2, dtype=torch.float4_e2m1fn_x2)}),
        match=("unsupported dtype float4_e2m1fn_x2", "accepted: bool"),
    ),
    Case(
        "torch-quantized",
        lambda p: tsave({"q": torch.quantize_per_tensor(torch.ones(2), 0.1, 0, torch.qint8)}),
        match=("unsupported dtype qint8", "accepted: bool"),
    ),
    Case(
        "torch-sparse",
        lambda p: tsave({"s": torch.eye(3).to_sparse()}),
        match=("sparse", "to_dense"),
    ),
    Case(
        "torch-complex",
        lambda p: tsave({"c": torch.ones(2, dtype=torch.complex64)}),
        match=("complex64", "accepted: bool"),
    ),
    Case(
        "torch-set",
        lambda p: tsave({"w": torch.ones(1), "s": {1, 2}}),
        match=("builtins.set", "is not read"),
    ),
    Case(
        "torch-key-clash",
        lambda p: tsave({"a.b": torch.ones(1), "a": {"b": torch.ones(1)}}),
        match=("'a.b'", "rename"),
    ),
    Case("torch-no-tensors", lambda p: tsave({"step": 3, "name": "x"}), match=("no tensors",)),
    Case(
        "torch-too-many-tensors",
        lambda p: tsave([torch.zeros(0)] * (MAX_ARRAYS + 1)),
        match=(f"more than the {MAX_ARRAYS} tensors",),
    ),
    # A fifth hostile pass. Each rebuild is a tensor of its own, memoized arguments or not
    # (160,000 rebuilds of 800 KB cost seconds before the count after torch.load).
    Case(
        "torch-too-many-rebuilds",
        lambda p: tsave([torch.zeros(0) for _ in range(MAX_ARRAYS + 1)]),
        match=(f"rebuilds more than {MAX_ARRAYS} tensors",),
    ),
    # bzip2 and LZMA members are inflated whole by zipfile, whatever is read (1.6 KB: 4 GB)
    Case(
        "npz-bzip2",
        lambda p: zip_of({"a.npy": npy(A23)}, zipfile.ZIP_BZIP2),
        match=("compression method 12", "numpy.savez never writes"),
    ),
    Case(
        "npz-lzma",
        lambda p: zip_of({"a.npy": npy(A23)}, zipfile.ZIP_LZMA),
        match=("compression method 14",),
    ),
    Case("torch-shared-bytes", pt_shared_bytes, match=("share bytes",)),
    Case("torch-nested-long-key", pt_nested_long_key,
         match=("longer than 1024 characters", "AAAA")),
    Case(
        "torch-long-key",
        lambda p: tsave({"k" * 1024: torch.ones(1)}),
        match=("longer than 1024 characters",),
    ),
    Case(
        "torch-long-entry-name",  # 80 KB of name overflowed the rewritten zip's 2-byte field
        lambda p: rezip(tsave({"w": torch.ones(1)}), extra={"data/" + "a" * 2000: b""}),
        match=("longer than 1024 bytes",),
    ),
    Case(
        "torch-unicode-storage-name",
        lambda p: rezip(tsave({"w": torch.ones(1)}), extra={"data/\u00c7": b""}),
        match=("an entry torch.save does not write",),
    ),
    Case(  # zipfile does not implement these flags: its NotImplementedError escaped
        "torch-patched-data-flag",
        lambda p: patch_zip(tsave({"w": torch.ones(1)}), "flags", 0x20),
        match=("corrupt torch.save file",),
    ),
    Case(
        "torch-lone-surrogate-key",
        lambda p: pt_rebuilt(("w\ud800", "FloatStorage", 0, (4,), (1,), b"")),
        match=("not valid Unicode",),
    ),
    Case(  # numpy's ValueError "array is too big" escaped: 10**24 is zero values here
        "torch-empty-view-of-huge-dims",
        lambda p: tsave({"w": torch.empty(0).as_strided((0,) + (10**6,) * 4, (0,) * 5)}),
        match=("larger than the cap", "beside its empty one"),
    ),
    Case(  # SETITEMS with a key and no value: zip(strict=True)'s ValueError escaped
        "torch-key-without-value",
        lambda p: pt_with_items(b"X\x01\x00\x00\x00x"),
        match=("a key without its value",),
    ),
    Case(  # each BUILD updates the state dict's __dict__: k keys built m times cost k·m
        "torch-state-built-twice",
        lambda p: pt_with_items(b"X\x01\x00\x00\x00o" + b"ccollections\nOrderedDict\n)R"
                                + b"}b" * 2),
        match=("once, its _metadata",),
    ),
    Case(
        "torch-state-beyond-metadata",
        lambda p: pt_with_items(b"X\x01\x00\x00\x00o" + b"ccollections\nOrderedDict\n)R}"
                                + b"X\x01\x00\x00\x00xNsb"),
        match=("once, its _metadata",),
    ),
]


@pytest.mark.parametrize("case", GOOD + HOSTILE, ids=lambda case: case.id)
def test_corpus(case: Case, tmp_path: Path) -> None:
    source = case.build(tmp_path)
    # the work's own time, this thread's CPU: a busy machine stretches the wall clock (the
    # 200,000-deep key took over a second of it at load average 10), not the work
    start = time.thread_time()
    try:
        result = load_arrays(source, **case.kwargs)
    except TensorFileError as err:
        elapsed = time.thread_time() - start
        assert case.expected is None, f"refused a good file: {err}"
        message = str(err)
        for fragment in case.match:
            assert fragment in message, f"{fragment!r} not in {message!r}"
    except FORBIDDEN as err:  # pragma: no cover - reported as a failure with its type
        pytest.fail(f"{type(err).__name__} escaped: {err}")
    else:
        elapsed = time.thread_time() - start
        assert case.expected is not None, f"loaded a file that should be refused: {result}"
        assert list(result) == list(case.expected)
        for name, expected in case.expected.items():
            array = result[name]
            assert array.dtype == case.dtype and array.dtype.isnative
            assert array.flags.c_contiguous and array.flags.writeable
            np.testing.assert_array_equal(array, np.asarray(expected, dtype=case.dtype))
    finally:
        if hasattr(source, "close"):
            source.close()
    # 0.6 s of CPU here when the machine is quiet (the 200,000-deep key; the others under
    # 0.2 s), and 2.3 s once during the whole suite in a fresh virtual environment (its first
    # imports compiled, two workers' browsers drawing beside it): the bound a hostile file must
    # stay under, with that margin and more for a slower CPU
    assert elapsed < 10.0
    if case.after is not None:
        case.after(tmp_path)


def test_corpus_is_large_enough() -> None:
    assert len(GOOD) + len(HOSTILE) >= 30
    assert len({case.id for case in GOOD + HOSTILE}) == len(GOOD) + len(HOSTILE)


def test_tripwire_is_live(tmp_path: Path) -> None:
    """The pickle payloads in the corpus really would act if unpickled: numpy's own trusted load
    of the same bytes creates the directory that load_arrays must never create."""
    np.load(io.BytesIO(object_npy(tmp_path)), allow_pickle=True)
    assert tripwire_path(tmp_path).is_dir()


@pytest.mark.parametrize("build", [pt_tripwire, pt_exec, pt_protocol4, pt_legacy],
                         ids=["makedirs", "exec", "protocol-4", "legacy"])
def test_torch_payloads_are_live(build: Callable[[Path], bytes], tmp_path: Path) -> None:
    """The torch.save payloads of the corpus act when loaded the unsafe way (weights_only=False):
    the directory that load_arrays never creates appears."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.load(io.BytesIO(build(tmp_path)), weights_only=False)
    assert tripwire_path(tmp_path).is_dir()


def test_torch_files_go_through_weights_only_load_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch.load is called with weights_only=True, and the stdlib unpickler is never used."""
    calls = []
    real_load = torch.load

    def spy(*args: Any, **kwargs: Any) -> Any:
        calls.append(kwargs)
        return real_load(*args, **kwargs)

    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("load_arrays must not use the stdlib unpickler")

    monkeypatch.setattr(torch, "load", spy)
    for name in ("load", "loads", "Unpickler"):
        monkeypatch.setattr(pickle, name, forbidden)
    assert list(load_arrays(tsave(CKPT))) == list(expected_checkpoint())
    assert [call["weights_only"] for call in calls] == [True]


def test_payloads_are_refused_before_torch_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The static scan refuses a payload before torch.load (itself refusing) even starts."""
    monkeypatch.setattr(torch, "load", lambda *a, **k: pytest.fail("torch.load was called"))
    for build in (pt_tripwire, pt_exec, pt_protocol4):
        with pytest.raises(TensorFileError, match="is not read"):
            load_arrays(build(tmp_path))
    assert not tripwire_path(tmp_path).exists()


def test_old_torch_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    """torch before 2.6 had known ways around weights_only=True: its users get a refusal."""
    monkeypatch.setattr(torch, "__version__", "2.5.1+cpu")
    with pytest.raises(TensorFileError, match=r"torch 2\.6 or later.*2\.5\.1"):
        load_arrays(tsave({"w": torch.ones(2)}))


@pytest.mark.parametrize("items, match", [
    ((MAX_PICKLE_OPCODES - 3) // 3, "no tensors"),  # just under the cap: torch.load reads it
    ((MAX_PICKLE_BYTES - 16) // 5, "more than 500,000 operations"),  # refused by the scan
], ids=["read", "refused"])
def test_the_slowest_pickle_is_refused_or_read_in_seconds(items: int, match: str) -> None:
    """The time cap: a pickle of the opcodes torch's pure-Python unpickler is slowest on (a dict
    filled item by item), at the most operations accepted or at MAX_PICKLE_BYTES, is refused
    or read in a few seconds."""
    slow = b"\x80\x02}" + b"K\x01K\x02s" * items + b"."
    assert len(slow) <= MAX_PICKLE_BYTES
    data = rezip(tsave({"w": torch.ones(1)}), {"data.pkl": slow})
    start = time.thread_time()  # the work's CPU, not a busy machine's wall clock
    with pytest.raises(TensorFileError, match=match):
        load_arrays(data)
    assert time.thread_time() - start < 10.0


def test_never_goes_through_np_load_or_pickle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("load_arrays must not call np.load or unpickle")

    for module, name in [(np, "load"), (pickle, "load"), (pickle, "loads"), (pickle, "Unpickler")]:
        monkeypatch.setattr(module, name, forbidden)
    assert list(load_arrays(npz(a=A23, b=FORTRAN))) == ["a", "b"]
    with pytest.raises(TensorFileError, match="pickle"):
        load_arrays(object_npy(tmp_path))


def test_zip_bomb_is_not_inflated() -> None:
    bomb = zip_bomb(Path())
    assert len(bomb) < 100_000
    tracemalloc.start()
    try:
        with pytest.raises(TensorFileError, match="declares"):
            load_arrays(bomb, max_elements=1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000


def test_endless_stream_is_cut_off_at_the_cap() -> None:
    stream = CountingReader()
    with pytest.raises(TensorFileError, match="more than the 1048576 bytes accepted"):
        load_arrays(stream, max_elements=0)
    assert stream.consumed <= 1024 * 1024 + 1


def test_large_files_are_refused_without_reading(tmp_path: Path) -> None:
    class Watched(io.BytesIO):
        consumed = 0

        def read(self, size: int | None = -1) -> bytes:
            chunk = super().read(size)
            self.consumed += len(chunk)
            return chunk

    big = Watched(bytes(2 * 1024 * 1024))
    with pytest.raises(TensorFileError, match="holds 2097152 bytes, more than the 1048576"):
        load_arrays(big, max_elements=0)
    assert big.consumed == 0
    path = write(tmp_path, "big.npy", bytes(2 * 1024 * 1024))
    with pytest.raises(TensorFileError, match="holds 2097152 bytes, more than the 1048576"):
        load_arrays(path, max_elements=0)


def test_uploaded_file_is_read_from_its_position() -> None:
    upload = UploadedFile(b"ignored prefix" + npy(A23), name="a.npy")
    upload.seek(len(b"ignored prefix"))
    np.testing.assert_array_equal(load_arrays(upload)["array"], A23)


def test_bad_arguments_are_programming_errors() -> None:
    with pytest.raises(TypeError, match="source must be"):
        load_arrays(12345)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_elements"):
        load_arrays(npy(A23), max_elements=-1)


# ---------------------------------------------------------------------------------------------
# Round trips
# ---------------------------------------------------------------------------------------------

LOADABLE_DTYPES = st.sampled_from(
    ["?", "<i1", "<i2", ">i4", "<i8", "|u1", ">u2", "<u4", "<u8", "<f2", ">f4", "<f4", ">f8"]
)


@FUZZ
@given(
    array=LOADABLE_DTYPES.flatmap(
        lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0))
    ),
    fortran=st.booleans(),
    container=st.sampled_from(["npy", "npz", "npz-compressed"]),
)
def test_saved_arrays_load_back_equal(array: np.ndarray, fortran: bool, container: str) -> None:
    if fortran:
        array = np.asfortranarray(array)
    if container == "npy":
        result = load_arrays(npy(array))
        name = "array"
    else:
        result = load_arrays(npz(container == "npz-compressed", values=array))
        name = "values"
    assert list(result) == [name]
    loaded = result[name]
    assert loaded.dtype == np.float32 and loaded.flags.c_contiguous
    with np.errstate(over="ignore"):
        expected = array.astype(np.float32)
    np.testing.assert_array_equal(loaded, expected)


def test_float64_kept_only_on_request() -> None:
    data = npz(x=F64, y=np.arange(3, dtype=np.int64), z=np.arange(3, dtype=np.uint8))
    kept = load_arrays(data, keep_float64=True)
    # int64 rounds in float32 above 2**24, uint8 never does
    assert (kept["x"].dtype, kept["y"].dtype, kept["z"].dtype) == (np.float64, np.float64,
                                                                   np.float32)
    np.testing.assert_array_equal(kept["x"], F64)
    assert {a.dtype for a in load_arrays(data).values()} == {np.dtype(np.float32)}


def test_nonfinite_report_counts_nan_and_inf() -> None:
    arrays = load_arrays(npz(bad=NONFINITE, good=A23, inf=np.array([[np.inf]])))
    assert nonfinite_report(arrays) == {"bad": (2, 2), "inf": (0, 1)}
    assert nonfinite_report({"ints": np.arange(3), "fine": A23}) == {}


@pytest.mark.parametrize(
    "array",
    [A23, F64, U64, FORTRAN, np.array(True), np.zeros((0, 3)), NONFINITE],
    ids=["float32", "float64", "uint64", "fortran-big-endian", "0d-bool", "empty", "nonfinite"],
)
def test_to_npy_bytes_round_trips(array: np.ndarray) -> None:
    data = to_npy_bytes(array)
    again = np.load(io.BytesIO(data), allow_pickle=False)
    assert again.dtype == array.dtype and again.shape == array.shape
    np.testing.assert_array_equal(again, array)
    np.testing.assert_array_equal(load_arrays(data)["array"], array.astype(np.float32))


def test_to_npy_bytes_refuses_object_arrays() -> None:
    with pytest.raises(ValueError, match="pickle"):
        to_npy_bytes(np.array([None], dtype=object))


def test_torch_tensors_are_written() -> None:
    torch = pytest.importorskip("torch")
    grad = torch.tensor([[1.5, -2.0]], requires_grad=True) * 2
    np.testing.assert_array_equal(load_arrays(to_npy_bytes(grad))["array"], [[3.0, -4.0]])
    bf16 = torch.tensor([1.0, 0.5, -3.0], dtype=torch.bfloat16)
    again = np.load(io.BytesIO(to_npy_bytes(bf16)))
    assert again.dtype == np.float32
    np.testing.assert_array_equal(again, [1.0, 0.5, -3.0])
    assert to_csv_text(bf16) == "1,0.5,-3\n"
    np.testing.assert_array_equal(
        load_arrays(to_npz_bytes({"t": torch.arange(3)}))["t"], [0.0, 1.0, 2.0]
    )


def test_to_npz_bytes_round_trips_names_and_order() -> None:
    arrays = {"zeta": A23, "file": np.arange(3), "allow_pickle": F64, "empty": np.zeros(0)}
    data = to_npz_bytes(arrays)
    with np.load(io.BytesIO(data), allow_pickle=False) as stored:
        assert list(stored.keys()) == list(arrays)
        for name, array in arrays.items():
            assert stored[name].dtype == array.dtype
            np.testing.assert_array_equal(stored[name], array)
    loaded = load_arrays(data, keep_float64=True)
    assert list(loaded) == list(arrays)
    np.testing.assert_array_equal(loaded["allow_pickle"], F64)


def test_to_npz_bytes_refuses_bad_names() -> None:
    with pytest.raises(ValueError, match="names"):
        to_npz_bytes({"": A23})


def parse_csv(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_csv_0d_and_1d_are_one_row() -> None:
    assert to_csv_text(np.float32(2.5)) == "2.5\n"
    assert parse_csv(to_csv_text(np.array([1.0, 1 / 3, -1e-7]))) == [["1", "0.333333", "-1e-07"]]
    assert to_csv_text(np.array([1 / 3]), float_format="%.3f") == "0.333\n"
    assert to_csv_text(np.zeros(0)) == ""


def test_csv_2d_is_rows_by_columns() -> None:
    text = to_csv_text(A23)
    np.testing.assert_array_equal(np.loadtxt(io.StringIO(text), delimiter=","), A23)
    assert len(text.splitlines()) == 2
    values = np.array([[1.0, np.nan], [np.inf, -np.inf]])
    np.testing.assert_array_equal(
        np.loadtxt(io.StringIO(to_csv_text(values)), delimiter=","), values
    )


def test_csv_integers_are_exact() -> None:
    assert to_csv_text(U64) == "0,9223372036854775808,18446744073709551615\n"
    assert to_csv_text(np.array([[True, False]])) == "1,0\n"


def test_csv_nd_is_long_format() -> None:
    array = np.arange(24, dtype=np.float32).reshape(2, 3, 4) / 8
    rows = parse_csv(to_csv_text(array))
    assert rows[0] == ["dim0", "dim1", "dim2", "value"]
    assert len(rows) == 1 + array.size
    rebuilt = np.full(array.shape, np.nan, dtype=np.float32)
    for *index, value in rows[1:]:
        rebuilt[tuple(int(i) for i in index)] = float(value)
    np.testing.assert_array_equal(rebuilt, array)
    assert to_csv_text(np.zeros((2, 0, 2))) == "dim0,dim1,dim2,value\n"
    assert to_csv_text(U64.reshape(1, 1, 3)).splitlines()[-1] == "0,0,2,18446744073709551615"


# ---------------------------------------------------------------------------------------------
# Fuzzing
# ---------------------------------------------------------------------------------------------

NPY_SEEDS = [
    npy(A23),
    npy(FORTRAN),
    npy(np.array([True, False])),
    npy_version(np.arange(5, dtype=np.float16), (3, 0)),
    npy(np.float64(1.5)),
]
SEEDS = [
    *NPY_SEEDS,
    npz(a=A23, b=np.arange(4)),
    npz(True, a=A23, b=FORTRAN3),
    st_file({"a": torch.from_numpy(A23), "b": BF16, "c": torch.arange(3)}, {"k": "v"}),
    tsave({"model": {"w": torch.from_numpy(A23), "b": BF16}, "step": 3}),
]
DESCRS = ["<f4", ">f8", "|b1", "<i8", "|u1", "<f2", "O", "<U3", "|V4", "<c8", "<M8[s]", "", 5]
SHAPES = st.lists(st.integers(-3, 10**13) | st.integers(0, 8), max_size=4).map(tuple)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["flip", "truncate", "insert", "header"]))
        if kind == "flip" and data:
            for _ in range(draw(st.integers(1, 8))):
                position = draw(st.integers(0, len(data) - 1))
                data[position] ^= draw(st.integers(1, 255))
        elif kind == "truncate":
            del data[draw(st.integers(0, len(data))) :]
        elif kind == "insert":
            position = draw(st.integers(0, len(data)))
            data[position:position] = draw(st.binary(min_size=1, max_size=16))
        elif kind == "header" and data.startswith(b"\x93NUMPY") and len(data) >= 10:
            if data[6] == 1:
                body_start = 10 + int.from_bytes(data[8:10], "little")
            else:
                body_start = 12 + int.from_bytes(data[8:12], "little")
            text = draw(
                st.builds(header, st.sampled_from(DESCRS), st.booleans(), SHAPES)
                | st.text(max_size=120)
            )
            version = draw(st.sampled_from([(1, 0), (2, 0), (3, 0)]))
            data = bytearray(raw_npy(text.encode("utf-8"), bytes(data[body_start:]), version))
    return bytes(data)


# Random header text can hold escape sequences or Python 2 syntax that Python's literal parser
# and numpy's header parser warn about; the warnings are theirs and beside the point here.
@pytest.mark.filterwarnings(
    "ignore::DeprecationWarning", "ignore::SyntaxWarning", "ignore::UserWarning"
)
@FUZZ
@given(data=mutated(), max_elements=st.sampled_from([0, 7, 1000, MAX_ELEMENTS]))
def test_mutated_files_load_or_are_refused(data: bytes, max_elements: int) -> None:
    try:
        result = load_arrays(data, max_elements=max_elements)
    except TensorFileError as err:
        assert str(err)
        return
    assert isinstance(result, dict) and result
    assert sum(array.size for array in result.values()) <= max_elements
    for name, array in result.items():
        assert isinstance(name, str)
        assert isinstance(array, np.ndarray) and array.dtype == np.float32
        assert array.flags.c_contiguous and array.flags.writeable


# ---------------------------------------------------------------------------------------------
# Memory
# ---------------------------------------------------------------------------------------------


def test_a_float64_file_kept_as_float64_allocates_under_1_5x_its_size(tmp_path: Path) -> None:
    """The upload's bytes are in memory before the tracing starts: what the loading adds is the
    array (1.00× measured), never a second copy of the file (a needless copy of the bytes made
    it 2.0×)."""
    path = tmp_path / "big64.npy"
    np.save(path, np.linspace(-1.0, 1.0, 4_000_000).reshape(2000, 2000))  # 32 MB of float64
    size = path.stat().st_size
    data = path.read_bytes()  # as an upload arrives: bytes already in memory
    tracemalloc.start()
    try:
        result = load_arrays(data, keep_float64=True)  # what the Explorer asks for
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1.5 * size, peak / size
    assert result["array"].dtype == np.float64 and result["array"][-1, -1] == 1.0


LOADABLE_TORCH = st.sampled_from(
    [torch.bool, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.float16,
     torch.bfloat16, torch.float32, torch.float64]
)


@FUZZ
@given(
    array=LOADABLE_DTYPES.flatmap(
        lambda dtype: hnp.arrays(dtype, hnp.array_shapes(min_dims=0, max_dims=4, min_side=0))
    ),
    container=st.sampled_from(["safetensors-numpy", "safetensors-torch", "torch.save"]),
)
def test_saved_tensors_load_back_equal(array: np.ndarray, container: str) -> None:
    """Arrays saved with safetensors (numpy and torch flavours) and torch.save load back equal."""
    native = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("="))
    if container == "safetensors-numpy":
        data = st_numpy.save({"values": native})
    elif container == "safetensors-torch":
        data = st_file({"values": torch.from_numpy(native)})
    else:
        data = tsave({"values": torch.from_numpy(native)})
    result = load_arrays(data)
    assert list(result) == ["values"]
    loaded = result["values"]
    assert loaded.dtype == np.float32 and loaded.flags.c_contiguous and loaded.flags.writeable
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(loaded, array.astype(np.float32))


@FUZZ
@given(
    dtype=LOADABLE_TORCH,
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=5),
    seed=st.integers(0, 2**16),
    container=st.sampled_from(["safetensors", "torch.save"]),
)
def test_torch_dtypes_load_back_equal(
    dtype: torch.dtype, shape: tuple[int, ...], seed: int, container: str
) -> None:
    """bfloat16 included, which numpy has no dtype for: it arrives as float32, exactly."""
    generator = torch.Generator().manual_seed(seed)
    tensor = (torch.randn(shape, generator=generator) * 100).to(dtype)
    data = st_file({"t": tensor}) if container == "safetensors" else tsave({"t": tensor})
    expected = tensor.to(torch.float64 if dtype == torch.float64 else torch.float32).numpy()
    keep = load_arrays(data, keep_float64=True)["t"]
    np.testing.assert_array_equal(keep, expected)
    np.testing.assert_array_equal(load_arrays(data)["t"], expected.astype(np.float32))


def _tensors_and_scalars() -> st.SearchStrategy[Any]:
    """What a checkpoint holds: tensors (views and Parameters too) of every dtype lnviz reads,
    and the plain values beside them, in dicts, OrderedDicts, lists and tuples."""
    tensors = st.builds(
        lambda dtype, n, view, param: (
            torch.nn.Parameter(torch.arange(float(n)).to(dtype), requires_grad=False)
            if param else (torch.arange(float(n * 2)).to(dtype)[::2] if view
                           else torch.arange(float(n)).to(dtype))),
        st.one_of(LOADABLE_TORCH, st.sampled_from([  # the dtypes torch.save writes another way
            torch.uint16, torch.uint32, torch.uint64, torch.float8_e4m3fn, torch.float8_e5m2])),
        st.integers(0, 6), st.booleans(), st.booleans())
    scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                        st.floats(allow_nan=False), st.text(max_size=5))
    return st.recursive(
        st.one_of(tensors, scalars),
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.lists(inner, max_size=3).map(tuple),
            st.dictionaries(st.text("ab.", min_size=1, max_size=3), inner, max_size=3),
            st.dictionaries(st.text("cd", min_size=1, max_size=2), inner, max_size=3).map(
                collections.OrderedDict)),
        max_leaves=8)


@FUZZ
@given(value=_tensors_and_scalars())
def test_whatever_torch_save_writes_of_tensors_passes_the_scan(value: Any) -> None:
    """The static scan of the pickle accepts every checkpoint-shaped value torch.save writes:
    load_arrays either loads it or refuses it for what its contents are (no tensor, a key clash),
    never for its pickle."""
    try:
        load_arrays(tsave(value))
    except TensorFileError as err:
        assert re.search(r"holds no tensors|get the name|is empty", str(err)), str(err)


def test_tied_weights_load_as_separate_arrays() -> None:
    """Two keys sharing one storage (tied embeddings) give two arrays that share no memory."""
    shared = torch.arange(6.0)
    loaded = load_arrays(tsave({"embed": shared, "head": shared, "part": shared[2:4]}))
    loaded["embed"][0] = 99
    np.testing.assert_array_equal(loaded["head"], np.arange(6.0))
    np.testing.assert_array_equal(loaded["part"], [2.0, 3.0])


def test_safetensors_metadata_is_read_without_tensors(monkeypatch: pytest.MonkeyPatch) -> None:
    import safetensors

    data = st_file({"w": torch.ones(3)}, {"lnviz": "capture", "note": "é"})
    monkeypatch.setattr(safetensors, "deserialize", lambda *a: pytest.fail("tensors built"))
    assert safetensors_metadata(data) == {"lnviz": "capture", "note": "é"}
    assert safetensors_metadata(io.BytesIO(st_file({"w": torch.ones(1)}))) == {}
    with pytest.raises(TensorFileError, match=r"not a \.safetensors file"):
        safetensors_metadata(npy(A23))
    with pytest.raises(TensorFileError, match="run past the end"):
        safetensors_metadata(data[:-4])


MEASURE = """
import re, sys, time
from lnviz.data.files import load_arrays


def peak():  # VmHWM: this process image's peak resident memory, in kB (ru_maxrss would
    # include the memory of the test process it was forked from)
    with open("/proc/self/status") as status:
        return int(re.search(r"VmHWM:\\s+(\\d+) kB", status.read()).group(1)) * 1024


load_arrays(open(sys.argv[2], "rb").read())  # imports and first-use costs, before the baseline
data = open(sys.argv[1], "rb").read()
before = peak()
start = time.perf_counter()
arrays = load_arrays(data)
elapsed = time.perf_counter() - start
print(peak() - before, elapsed)
"""


def peak_rss_of_loading(path: Path, warm_up: Path) -> tuple[int, float]:
    """(bytes by which loading the file raised the process's peak memory, seconds), measured in
    a fresh interpreter that holds the file's bytes first, as the app holds an upload. torch's
    allocations are not seen by tracemalloc, so this reads the peak resident size (Linux)."""
    if not Path("/proc/self/status").exists():
        pytest.skip("peak resident memory is read from /proc/self/status (Linux)")
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(path), str(warm_up)], capture_output=True,
        text=True, check=True, cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
    )
    grown, seconds = done.stdout.split()
    return int(grown), float(seconds)


@pytest.mark.slow  # a fresh process of its own
@pytest.mark.parametrize("container", ["safetensors", "torch.save"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_loading_a_40mb_tensor_file_adds_little_more_than_its_arrays(
    container: str, dtype: torch.dtype, tmp_path: Path
) -> None:
    """Beside the file's bytes, loading holds the library's (or torch's) copy of the values and
    the float32 arrays, each copy released as its array is built: the peak is about the arrays
    alone, the file's size for float32 and twice it for bfloat16 (measured: 1.01x and 2.03x)."""
    values = 10_000_000 if dtype == torch.float32 else 20_000_000  # 40 MB either way
    tensors = {f"layer{i}": torch.ones(values // 4, dtype=dtype) for i in range(4)}
    save = st_file if container == "safetensors" else tsave
    path = write(tmp_path, "big", save(tensors))
    del tensors
    size = path.stat().st_size
    grown, _ = peak_rss_of_loading(path, write(tmp_path, "small", save({"w": torch.ones(2)})))
    arrays = 4 * values
    assert grown < arrays + 0.3 * size, f"{grown / size:.2f} x the file"


def test_loading_40mb_allocates_under_3x_its_size(tmp_path: Path) -> None:
    array = np.arange(10_000_000, dtype=np.float32).reshape(1000, 10_000)
    path = tmp_path / "big.npy"
    np.save(path, array)
    size = path.stat().st_size
    del array
    tracemalloc.start()
    try:
        result = load_arrays(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * size
    loaded = result["array"]
    assert loaded.shape == (1000, 10_000)
    assert loaded[0, 0] == 0 and loaded[999, 9_999] == 9_999_999


def test_a_torch_pickle_with_a_bad_opcode_and_a_bad_crc_is_refused() -> None:
    """Found by test_mutated_files_load_or_are_refused: one changed byte in data.pkl makes
    torch's scanner refuse the pickle, and reading the pickle again to name its imports then
    raised zipfile.BadZipFile (the CRC no longer matches), which is no TensorFileError."""
    buffer = io.BytesIO()
    torch.save({"model": {"w": torch.ones(2, 3)}, "step": 3}, buffer)
    data = bytearray(buffer.getvalue())
    at = data.index(b"\x80\x02") + 2  # the first opcode after the protocol
    data[at] = ord("p") if data[at] != ord("p") else ord("q")
    with pytest.raises(TensorFileError, match=r"corrupt torch\.save file .*Bad CRC-32"):
        load_arrays(bytes(data), max_elements=7)


def test_torch_reads_the_archive_that_was_checked() -> None:
    """A file whose two central directories show zipfile harmless zeros and torch's reader a
    pickle calling bytearray(128 MiB) (or other values) is read as it was checked: torch.load is
    handed the checked entries alone, so it neither allocates nor returns anything else."""
    harmless = tsave({"w": torch.zeros(4)})
    evil = rezip(harmless, {"data.pkl": pickle.dumps(Call(bytearray, 2**27), protocol=2)})
    sevens = tsave({"w": torch.full((4,), 7.0)})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert isinstance(torch.load(io.BytesIO(two_faced_zip(harmless, evil)),
                                     weights_only=True), bytearray)  # the trick is live
    for hidden in (evil, sevens):
        tracemalloc.start()
        try:
            loaded = load_arrays(two_faced_zip(harmless, hidden))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        np.testing.assert_array_equal(loaded["w"], np.zeros(4, np.float32))
        assert peak < 50 * 2**20


# --- Pictures (load_image) -----------------------------------------------------------------------


def _picture_bytes(mode: str, size: tuple[int, int], fmt: str = "PNG", **save: Any) -> bytes:
    from PIL import Image

    generator = np.random.default_rng(0)
    image = Image.new(mode, size)
    if mode in ("RGB", "RGBA", "L"):
        bands = len(mode)
        array = generator.integers(0, 256, (size[1], size[0], bands), dtype=np.uint8)
        image = Image.fromarray(array[..., 0] if bands == 1 else array, mode)
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save)
    return buffer.getvalue()


def test_load_image_reads_png_and_jpeg_as_rgb_uint8():
    from PIL import Image

    from lnviz.data.files import load_image

    png = _picture_bytes("RGB", (30, 20))
    picture = load_image(png)
    assert picture.shape == (20, 30, 3) and picture.dtype == np.uint8
    assert np.array_equal(picture, np.asarray(Image.open(io.BytesIO(png))))
    # grey, transparent and palette pictures become three equal or converted channels
    grey = load_image(_picture_bytes("L", (8, 6)))
    assert grey.shape == (6, 8, 3) and np.array_equal(grey[..., 0], grey[..., 2])
    assert load_image(_picture_bytes("RGBA", (8, 6))).shape == (6, 8, 3)
    assert load_image(_picture_bytes("P", (8, 6))).shape == (6, 8, 3)
    jpeg = load_image(_picture_bytes("RGB", (40, 24), "JPEG", quality=95))
    assert jpeg.shape == (24, 40, 3)


def test_load_image_turns_a_picture_upright_by_its_exif_orientation():
    from PIL import Image

    from lnviz.data.files import load_image

    array = np.zeros((20, 40, 3), dtype=np.uint8)
    array[:, :20] = 255  # left half white, stored 40 wide and 20 high
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to view"
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG", quality=95, exif=exif.tobytes())
    upright = load_image(buffer.getvalue())
    assert upright.shape == (40, 20, 3)
    # turned clockwise, the white left half is now the top half
    assert upright[:18].mean() > 230 and upright[22:].mean() < 25


def _png_declaring(width: int, height: int) -> bytes:
    """A PNG whose header declares width × height pixels and holds none (a few dozen bytes)."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IEND", b"")


def _png_chunks(width: int, height: int, *chunks: tuple[bytes, bytes],
                bad_crc: bool = False) -> bytes:
    """A PNG of ``width`` × ``height`` grey pixels (all 0) with ``chunks`` before its data."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", crc ^ (1 if bad_crc and kind != b"IHDR" else 0)))

    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    rows = zlib.compress(b"".join(b"\x00" + bytes(width) for _ in range(height)))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
            + b"".join(chunk(kind, body) for kind, body in chunks)
            + chunk(b"IDAT", rows) + chunk(b"IEND", b""))


@pytest.mark.parametrize("data, message", [
    (_png_declaring(100_000, 100_000), "more pixels than the 40,000,000 accepted; scale"),
    (_png_declaring(8_000, 6_000), "8000 × 6000 pixels, more than the 40,000,000"),
    (b"", "empty"),
    (b"GIF89a" + b"\x00" * 50, "not a PNG or JPEG"),
    (b"%PDF-1.4 hello", "not a PNG or JPEG"),
    (_png_declaring(64, 64), "cannot be decoded"),
])
def test_load_image_refuses_bombs_and_broken_files_with_a_reason(data, message):
    from lnviz.data.files import ImageFileError, load_image

    with pytest.raises(ImageFileError, match=message):
        load_image(data)


def test_load_image_refuses_a_cut_jpeg_and_a_file_over_its_byte_cap():
    from lnviz.data.files import ImageFileError, load_image

    jpeg = _picture_bytes("RGB", (64, 64), "JPEG")
    with pytest.raises(ImageFileError, match="damaged or cut short"):
        load_image(jpeg[: len(jpeg) // 2])
    with pytest.raises(ImageFileError, match="larger than"):
        load_image(io.BytesIO(jpeg), max_bytes=100)
    with pytest.raises(ImageFileError, match="more than the 100 accepted"):
        load_image(jpeg, max_pixels=100)


def test_load_image_takes_panoramas_and_slivers_within_the_pixel_cap():
    """The 36th review: a picture longer than 8,192 pixels on one side crashed the page."""
    from lnviz.data.files import load_image

    assert load_image(_picture_bytes("RGB", (9000, 2))).shape == (2, 9000, 3)
    assert load_image(_picture_bytes("L", (1, 20000))).shape == (20000, 1, 3)


def test_load_image_refuses_a_jpeg_of_many_scans_before_decoding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The 36th review: a progressive JPEG's last scan repeated 20,000 times (1.3 MB) took
    minutes of CPU; the scans are counted first. Counted first, not merely refused: Pillow's
    decoding is made to fail the test (a 64 × 64 picture whose last scan is repeated 101 times,
    110 scans, decodes in 2 ms, far under any bound on time)."""
    from PIL import ImageFile

    from lnviz.data.files import MAX_JPEG_SCANS, ImageFileError, load_image

    jpeg = _picture_bytes("RGB", (64, 64), "JPEG", progressive=True)
    assert 2 <= jpeg.count(b"\xff\xda") <= 20  # a real progressive JPEG's scans
    load_image(jpeg)
    last = jpeg.rindex(b"\xff\xda")
    repeated = jpeg[:last] + jpeg[last:-2] * (MAX_JPEG_SCANS + 1) + jpeg[-2:]

    def decoded(*args, **kwargs):
        pytest.fail("the JPEG was decoded before its scans were counted")

    monkeypatch.setattr(ImageFile.ImageFile, "load", decoded)
    with pytest.raises(ImageFileError, match=f"more than the {MAX_JPEG_SCANS} a picture needs"):
        load_image(repeated)


def test_load_image_decodes_a_large_picture_at_a_reduced_scale():
    """With max_side, a JPEG is decoded at a scale of libjpeg's (1/2, 1/4, 1/8) and a PNG
    reduced by a whole factor, the shorter side kept at least max_side: little more than the
    decoded file is held (the 36th review measured 600 MB held for a 36 M-pixel picture)."""
    from lnviz.data.files import load_image

    jpeg = _picture_bytes("RGB", (2400, 1600), "JPEG")
    small = load_image(jpeg, max_side=300)
    assert small.shape == (400, 600, 3)  # 1/4: the largest scale that keeps 1600 / k ≥ 300
    full = load_image(jpeg)
    assert full.shape == (1600, 2400, 3)
    # the same picture, a quarter of the size: close to the full decode averaged 4 × 4
    pooled = full.reshape(400, 4, 600, 4, 3).mean(axis=(1, 3))
    assert np.abs(pooled - small).mean() < 8
    png = _picture_bytes("RGB", (1300, 900))
    assert load_image(png, max_side=300).shape == (300, 434, 3)  # reduced by 3 (ceil)
    assert load_image(png, max_side=1000).shape == (900, 1300, 3)  # already small enough


def test_load_image_keeps_good_pixels_under_a_broken_exif_and_names_damage():
    """The 36th review: a PNG whose eXIf chunk is garbage was refused though its pixels were
    good; a damaged PNG or JPEG was called "not a PNG or JPEG"."""
    from lnviz.data.files import ImageFileError, load_image

    picture = load_image(_png_chunks(6, 4, (b"eXIf", b"garbage, not a TIFF header")))
    assert picture.shape == (4, 6, 3) and not picture.any()
    with pytest.raises(ImageFileError, match="the file starts as a PNG but is damaged"):
        load_image(_png_chunks(6, 4, (b"tEXt", b"key\x00value"), bad_crc=True))
    with pytest.raises(ImageFileError, match="the file starts as a PNG but is damaged"):
        load_image(_png_declaring(0, 10))
