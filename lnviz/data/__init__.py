"""Where a batch comes from: the course notes' presets, seeded generators, numbers typed by hand,
and tensor files read safely.

- :mod:`~lnviz.data.presets`: the worked examples of the source material, by name.
- :mod:`~lnviz.data.generators`: random batches, padded token sequences and images.
- :mod:`~lnviz.data.parser`: numbers typed as rows or as nested brackets.
- :mod:`~lnviz.data.files`: readers of .npy, .npz, .safetensors and torch.save files that never
  run code from them, writers for downloads, and a PNG/JPEG reader.
"""

from lnviz.data.files import (
    ImageFileError,
    TensorFileError,
    TensorTooLargeError,
    load_arrays,
    load_image,
    nonfinite_report,
    safetensors_metadata,
    to_csv_text,
    to_npy_bytes,
    to_npz_bytes,
)
from lnviz.data.generators import (
    DISTRIBUTIONS,
    MAX_ELEMENTS,
    describe_shape,
    image_batch,
    padded_batch,
    random_batch,
)
from lnviz.data.parser import parse_lengths, parse_numbers, parse_table
from lnviz.data.presets import PRESETS, Preset, get_preset
from lnviz.limits import MAX_TEXT_CHARS

__all__ = [
    "DISTRIBUTIONS",
    "MAX_ELEMENTS",
    "MAX_TEXT_CHARS",
    "PRESETS",
    "ImageFileError",
    "Preset",
    "TensorFileError",
    "TensorTooLargeError",
    "describe_shape",
    "get_preset",
    "image_batch",
    "load_arrays",
    "load_image",
    "nonfinite_report",
    "padded_batch",
    "parse_lengths",
    "parse_numbers",
    "parse_table",
    "random_batch",
    "safetensors_metadata",
    "to_csv_text",
    "to_npy_bytes",
    "to_npz_bytes",
]
