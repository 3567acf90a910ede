"""lnviz: see what Layer Normalization does, and why BatchNorm breaks where LayerNorm doesn't.

The library behind the app: the five normalizations with every intermediate (:mod:`lnviz.norms`),
data sources (:mod:`lnviz.data`), safe tensor files (:mod:`lnviz.io`) and devices
(:mod:`lnviz.devices`). It never imports Streamlit outside :mod:`lnviz.ui`.
"""

from lnviz.devices import DTYPES, available_devices, supported_dtypes, to_tensor
from lnviz.io import TensorFileError, load_arrays
from lnviz.norms import (
    NormResult,
    batch_norm,
    group_norm,
    instance_norm,
    layer_norm,
    rms_norm,
)

__all__ = [
    "DTYPES",
    "NormResult",
    "TensorFileError",
    "available_devices",
    "batch_norm",
    "group_norm",
    "instance_norm",
    "layer_norm",
    "load_arrays",
    "rms_norm",
    "supported_dtypes",
    "to_tensor",
]
