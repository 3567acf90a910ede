"""lnviz.data.files: .npy/.npz round trips, a corpus of good, odd and hostile files, fuzzing,
memory."""

from __future__ import annotations

import csv
import io
import os
import pickle
import struct
import time
import tracemalloc
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lnviz.data.files import (
    MAX_NPZ_MEMBERS,
    TensorFileError,
    load_arrays,
    nonfinite_report,
    to_csv_text,
    to_npy_bytes,
    to_npz_bytes,
)
from lnviz.limits import MAX_ELEMENTS

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
    torch = pytest.importorskip("torch")
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
    Case(  # float32 would round integers above 2**24: 16777217 became 16777216 (issue 11)
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
        match=("dimension larger",),
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
    Case("torch-save-file", torch_save, match=("data.pkl", "not .npy")),
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


@pytest.mark.parametrize("case", GOOD + HOSTILE, ids=lambda case: case.id)
def test_corpus(case: Case, tmp_path: Path) -> None:
    source = case.build(tmp_path)
    start = time.perf_counter()
    try:
        result = load_arrays(source, **case.kwargs)
    except TensorFileError as err:
        elapsed = time.perf_counter() - start
        assert case.expected is None, f"refused a good file: {err}"
        message = str(err)
        for fragment in case.match:
            assert fragment in message, f"{fragment!r} not in {message!r}"
    except FORBIDDEN as err:  # pragma: no cover - reported as a failure with its type
        pytest.fail(f"{type(err).__name__} escaped: {err}")
    else:
        elapsed = time.perf_counter() - start
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
    assert elapsed < 1.0
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
SEEDS = [*NPY_SEEDS, npz(a=A23, b=np.arange(4)), npz(True, a=A23, b=FORTRAN3)]
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


def test_a_float64_file_kept_as_float64_allocates_under_3x_its_size(tmp_path: Path) -> None:
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
    assert peak < 3 * size
    assert result["array"].dtype == np.float64 and result["array"][-1, -1] == 1.0


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
