"""Reading a GGUF file that a weights-only package ships: whole, or split across packages.

A model's package is found without importing it and its bytes are checked against the sha256
this module's caller pins before any of them is used (:mod:`lnviz.models.packaged`). gguf's own
reader does the parsing, over a plain ndarray rather than its ``numpy.memmap`` (see
:func:`read`), and :func:`field` turns a metadata entry into Python values.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lnviz.models.packaged import ModelFileError, check_sha256, reinstall

__all__ = ["field", "read"]


def read(source: Path | Sequence[Path], *, sha256: str,
         packages: Sequence[str]):  # -> gguf.GGUFReader
    """The GGUF file ``source``, or the file whose consecutive pieces are ``source``, read by
    gguf's reader once its bytes matched ``sha256`` (the hash is taken over the very bytes the
    weights are read from, before any of them is parsed). A whole file is memory-mapped; pieces
    are read, in order, into one buffer (nothing is written to disk). ``packages`` ship the file
    (the first pins its hash): the messages say to reinstall them.

    gguf's reader slices its ``numpy.memmap`` once per value of the metadata (a tokenizer's
    tens of thousands of tokens and merges), and each slice of a memmap goes through Python-level
    subclass hooks: seconds of CPU. The same bytes seen as a plain ndarray read the same fields
    and tensors 3–4 times faster (tests/test_models_llama.py compares the two readers)."""
    try:
        from gguf import GGUFReader
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

    class PlainReader(GGUFReader):
        """gguf's reader over the checked bytes as a plain ndarray (the file's mapping seen
        without its memmap class, no copy: the array's base keeps the mapping open; or the
        pieces' buffer): gguf maps the first piece on its way in, and that mapping is dropped
        unread."""

        @property
        def data(self) -> np.ndarray:
            return self._plain

        @data.setter
        def data(self, mapping: np.ndarray) -> None:
            self._plain = given

    try:
        reader = PlainReader(pieces[0])
    except (OSError, ValueError) as err:
        raise ModelFileError(f"cannot read the model's file ({err}): {again}") from err
    return reader


def field(reader, key: str):  # -> str | float | int | bool | list
    """A metadata value: a string, a number, or a list of either."""
    from gguf import GGUFValueType

    entry = reader.fields[key]
    kind = entry.types[0]

    def one(part: np.ndarray, of: GGUFValueType):  # -> str | float | int
        return bytes(part).decode("utf-8") if of == GGUFValueType.STRING else part.tolist()[0]

    if kind == GGUFValueType.ARRAY:
        return [one(entry.parts[i], entry.types[-1]) for i in entry.data]
    return one(entry.parts[entry.data[0]], kind)
