"""lnviz: see what Layer Normalization does, and why BatchNorm breaks where LayerNorm doesn't.

The library behind the app: the five normalizations with every intermediate (:mod:`lnviz.norms`),
data sources (:mod:`lnviz.data`), safe tensor files (:mod:`lnviz.data.files`: .npy, .npz,
.safetensors, torch.save), a model's normalization layers captured in one forward
(:mod:`lnviz.capture`), real pretrained models in plain torch (:mod:`lnviz.models`) and devices
(:mod:`lnviz.devices`). It never imports Streamlit outside :mod:`lnviz.ui`.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lnviz.capture import NormRecord, capture, patch
    from lnviz.data.files import TensorFileError, load_arrays
    from lnviz.devices import DTYPES, available_devices, supported_dtypes, to_tensor
    from lnviz.norms import (
        NormResult,
        batch_norm,
        group_norm,
        instance_norm,
        layer_norm,
        rms_norm,
    )

#: Where each public name lives. They load on first use, so that ``import lnviz.ui.pages`` (the
#: app's navigation) does not wait seconds for torch: a cold server shows its frame at once.
_PUBLIC = {
    "DTYPES": "devices", "available_devices": "devices", "supported_dtypes": "devices",
    "to_tensor": "devices", "TensorFileError": "data.files", "load_arrays": "data.files",
    "NormResult": "norms", "batch_norm": "norms", "group_norm": "norms",
    "instance_norm": "norms", "layer_norm": "norms", "rms_norm": "norms",
    # lnviz.capture is the function, also once the module of that name is imported (_Package)
    "capture": "capture", "NormRecord": "capture", "patch": "capture",
}

#: Public functions that share their name with the module they live in.
_SHADOWED = {"capture"}


class _Package(types.ModuleType):
    """The ``lnviz`` package. Importing a submodule sets it as an attribute of its package, so
    ``import lnviz.capture`` (or ``from lnviz.capture import NormRecord``) would make
    ``lnviz.capture`` the module: for the names in :data:`_SHADOWED` the function is kept."""

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _SHADOWED and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package


def __getattr__(name: str) -> Any:
    if name == "models":  # a subpackage, loaded on first use like the names above
        return importlib.import_module("lnviz.models")
    if name not in _PUBLIC:
        raise AttributeError(f"module 'lnviz' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"lnviz.{_PUBLIC[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names too, before their first use: a notebook's tab completion lists them."""
    return sorted(set(globals()) | set(__all__) | {"models"})


__all__ = [
    "DTYPES",
    "NormRecord",
    "NormResult",
    "TensorFileError",
    "available_devices",
    "batch_norm",
    "capture",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "load_arrays",
    "patch",
    "rms_norm",
    "supported_dtypes",
    "to_tensor",
]
