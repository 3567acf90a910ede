"""Reading a GGUF file that a weights-only package ships: whole, or split across packages.

A model's package is found without importing it and its bytes are checked against the sha256
this module's caller pins before any of them is used (:mod:`lnviz.models.packaged`). This module
parses the checked bytes itself (:func:`read`): the metadata as Python values and each tensor as
an array over the bytes, shaped as gguf's own reader shapes it, with gguf's table of quantized
types (tests/test_models_llama.py and tests/test_models_gemma.py compare the two readers field by
field and tensor by tensor; tests/test_gguf_file.py reads files gguf's writer wrote, and damaged
ones). gguf's reader makes a numpy view of every value of the metadata, a tokenizer's 262,144
tokens each one: 3.5 s of Gemma 3's 9-second load here, against 0.2-0.3 s for these loops
(docs/benchmarks.md §7).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from lnviz.models.packaged import ModelFileError, check_sha256, reinstall

__all__ = ["GGUFFile", "GGUFTensor", "field", "read"]

#: A GGUF file starts with these four bytes; this module reads versions 2 and 3.
MAGIC, VERSIONS = b"GGUF", (2, 3)
#: The metadata's scalar types by their code in the file (gguf's GGUFValueType): the struct
#: format of each; 8 is a string, 9 an array.
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
            12: "d"}
_STRING, _ARRAY = 8, 9


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of the file: its name, its ggml type (gguf's ``GGMLQuantizationType``), its
    dimensions as the file lists them (fastest-varying first) and its bytes as an array, no
    copy: a quantized type's as uint8 rows of whole blocks, a plain type's as its values, both
    shaped (…, rows, columns) as gguf's reader shapes ``data``."""

    name: str
    tensor_type: Any
    shape: tuple[int, ...]
    data: np.ndarray


@dataclass(frozen=True)
class GGUFFile:
    """A checked GGUF file: ``fields`` (each metadata key's value: a string, a number, a bool
    or a list of them, in the file's order) and ``tensors`` (:class:`GGUFTensor`, in the file's
    order)."""

    version: int
    fields: dict[str, Any]
    tensors: list[GGUFTensor]


def read(source: Path | Sequence[Path], *, sha256: str, packages: Sequence[str]) -> GGUFFile:
    """The GGUF file ``source``, or the file whose consecutive pieces are ``source``, parsed
    once its bytes matched ``sha256`` (the hash is taken over the very bytes the weights are
    read from, before any of them is parsed). A whole file is memory-mapped; pieces are read, in
    order, into one buffer (nothing is written to disk). ``packages`` ship the file (the first
    pins its hash): the messages say to reinstall them."""
    try:
        import gguf  # noqa: F401  (its table of quantized types, and the weights' dequantizing)
    except ImportError as err:
        raise ModelFileError("reading the model needs the gguf package: pip install gguf") from err
    pieces = [source] if isinstance(source, Path) else list(source)
    again = reinstall(packages)
    missing = [str(p) for p in pieces if not p.is_file()]
    if missing:
        raise ModelFileError(f"the model's file is incomplete ({', '.join(missing)} is missing): "
                             f"{again}")
    if len(pieces) == 1:  # mapped, not read: the weights are copied out of it once
        try:
            given = np.asarray(np.memmap(pieces[0], dtype=np.uint8, mode="r"))
        except (OSError, ValueError) as err:
            raise ModelFileError(f"cannot read the model's file ({err}): {again}") from err
    else:
        sizes = [p.stat().st_size for p in pieces]
        given = np.empty(sum(sizes), dtype=np.uint8)
        start = 0
        for piece, size in zip(pieces, sizes, strict=True):
            with piece.open("rb") as file:
                if file.readinto(memoryview(given)[start:start + size]) != size:
                    raise ModelFileError(f"{piece} changed while it was read: {again}")
            start += size
    # the hash before the parse: a damaged file is refused as such, whatever its header says
    what = pieces[0] if len(pieces) == 1 else f"the file made of {len(pieces)} pieces"
    check_sha256(memoryview(given), sha256, f"{what} is not {packages[0]}'s model file", packages)

    try:
        return _parse(given)
    except (ValueError, KeyError, IndexError, TypeError, struct.error) as err:
        raise ModelFileError(f"cannot read the model's file ({err}): {again}") from err


class _Cursor:
    """Reads the file's little-endian values one after another."""

    def __init__(self, data: np.ndarray) -> None:
        self.buffer, self.at = memoryview(data), 0

    def take(self, fmt: str) -> Any:
        value = struct.unpack_from("<" + fmt, self.buffer, self.at)[0]
        self.at += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.take("Q")
        if self.at + n > len(self.buffer):
            raise ValueError("a string runs past the end of the file")
        text = str(self.buffer[self.at:self.at + n], "utf-8")
        self.at += n
        return text

    def value(self, kind: int) -> Any:
        if kind == _STRING:
            return self.string()
        if kind != _ARRAY:
            return self.take(_SCALARS[kind])
        item, count = self.take("I"), self.take("Q")
        if item == _STRING:
            return [self.string() for _ in range(count)]
        if item == _ARRAY:  # each inner array: its item type, its length, its items
            return [self.value(_ARRAY) for _ in range(count)]
        fmt = _SCALARS[item]
        values = list(struct.unpack_from(f"<{count}{fmt}", self.buffer, self.at))
        self.at += count * struct.calcsize(fmt)
        return values


def _parse(data: np.ndarray) -> GGUFFile:
    """The file ``data`` holds (checked already): its metadata, then its tensors, whose bytes
    start at the next multiple of ``general.alignment`` (32 unless it says) after their list."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType
    from gguf.quants import quant_shape_to_byte_shape

    if bytes(data[:4]) != MAGIC:
        raise ValueError("not a GGUF file")
    cursor = _Cursor(data)
    cursor.at = 4
    version = cursor.take("I")
    if version & 0xFFFF == 0 and version:
        raise ValueError("a big-endian GGUF file, which this reader does not read")
    if version not in VERSIONS:
        raise ValueError(f"GGUF version {version}; this reader reads {VERSIONS}")
    n_tensors, n_fields = cursor.take("Q"), cursor.take("Q")
    fields: dict[str, Any] = {}
    alignment = 32
    for _ in range(n_fields):
        key = cursor.string()
        kind = cursor.take("I")
        if key in fields:
            raise ValueError(f"the key {key} is there twice")
        fields[key] = cursor.value(kind)
        if key == "general.alignment":  # a uint32 and a power of two, as gguf requires
            alignment = fields[key]
            if kind != 4 or alignment & (alignment - 1) or not alignment:
                raise ValueError(f"general.alignment is {alignment!r}, not a power of two "
                                 "stored as a uint32")
    listed, names = [], set()
    for _ in range(n_tensors):
        name = cursor.string()
        if name in names:
            raise ValueError(f"the tensor {name} is there twice")
        names.add(name)
        dims = tuple(cursor.take("Q") for _ in range(cursor.take("I")))
        listed.append((name, dims, GGMLQuantizationType(cursor.take("I")), cursor.take("Q")))
    start = -(-cursor.at // alignment) * alignment
    plain = {GGMLQuantizationType.F16: np.float16, GGMLQuantizationType.F32: np.float32,
             GGMLQuantizationType.F64: np.float64, GGMLQuantizationType.I8: np.int8,
             GGMLQuantizationType.I16: np.int16, GGMLQuantizationType.I32: np.int32,
             GGMLQuantizationType.I64: np.int64}
    tensors = []
    for name, dims, kind, offset in listed:
        shape = tuple(reversed(dims))  # rows before columns
        count = int(np.prod(dims, dtype=np.int64))
        at = start + offset
        if kind in plain:
            dtype = np.dtype(plain[kind])
            size = count * dtype.itemsize
        else:
            block, per_block = GGML_QUANT_SIZES[kind]
            size = count * per_block // block
        if at + size > len(data):
            raise ValueError(f"the tensor {name} runs past the end of the file")
        if kind in plain:
            values = data[at:at + size].view(dtype).reshape(shape)
        else:
            values = data[at:at + size].reshape(quant_shape_to_byte_shape(shape, kind))
        tensors.append(GGUFTensor(name, kind, dims, values))
    return GGUFFile(version, fields, tensors)


def field(reader: GGUFFile, key: str) -> Any:
    """A metadata value: a string, a number, a bool, or a list of them."""
    return reader.fields[key]
