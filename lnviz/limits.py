"""How much one learner may ask of the server: full limits on a laptop, tighter ones in demo mode.

Set the environment variable ``LNVIZ_DEMO=1`` when the app is hosted for a class (a shared link,
Streamlit Community Cloud, a Docker container): uploads, tensors and training runs are then
capped so that many learners at once fit in about a gigabyte of memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "DEMO_LIMITS",
    "EXPLORER_BYTES_PER_VALUE",
    "EXPLORER_MAX_D_MODEL",
    "EXPLORER_MAX_LENGTH",
    "EXPLORER_MAX_SEQUENCES",
    "FULL_LIMITS",
    "MAX_DATASET_VALUES",
    "MAX_ELEMENTS",
    "PADDING_MAX_D_MODEL",
    "PADDING_MAX_LENGTH",
    "PADDING_MAX_SEQUENCES",
    "Limits",
    "current_limits",
]

#: The most values one tensor may hold, generated (:mod:`lnviz.data.generators`) or read from a
#: file (:func:`lnviz.data.files.load_arrays`' default), and the Explorer's cap on a laptop
#: (:data:`FULL_LIMITS`): a float64 copy is 400 MB.
MAX_ELEMENTS = 50_000_000
#: The most values a training dataset read by :mod:`lnviz.data.sequences` may hold, all its files
#: together, when the caller names no smaller cap: all of MNIST (70 000 × 785) with room to spare.
#: The app passes :attr:`Limits.training_values` instead.
MAX_DATASET_VALUES = 64_000_000

#: What one uploaded value costs the server at the Explorer's peak, in bytes. Counted: the
#: float64 array kept for the session and Streamlit's copy of the file (8 + 8); two results kept
#: per session, each with x, x̂ and y (12 in float32; 16 in float64, where x is the upload
#: itself); and while one is computed, torch's reference output, |reference|, their difference,
#: the group ids and the float64 copies of the step-by-step table (about 50). Measured with
#: tools/upload_memory.py (upload, move ε, switch to float64 and to BatchNorm): the peak rose
#: by 134-144 bytes per value for 5 million values and by about 170 for 400,000 (fixed costs
#: weigh more there; the rest is memory the allocator keeps after freeing it).
EXPLORER_BYTES_PER_VALUE = 160

#: The Explorer's generated padded batches: at most this many sequences, each padded to at most
#: this length, of at most this many features (typed as numbers; the element cap applies too).
EXPLORER_MAX_SEQUENCES, EXPLORER_MAX_LENGTH, EXPLORER_MAX_D_MODEL = 10_000, 100_000, 100_000
#: The Padding page's generated batch: the page draws every position of every sequence, so at
#: most 16 × 32 = 512 rows of 16 features per panel.
PADDING_MAX_SEQUENCES, PADDING_MAX_LENGTH, PADDING_MAX_D_MODEL = 16, 32, 16


@dataclass(frozen=True)
class Limits:
    upload_mb: int  # largest uploaded file
    max_elements: int  # largest Explorer tensor before the memory budget (tensor_values)
    max_training_steps: int  # longest training run on the LN-LSTM page
    #: the most multiply-adds of one training run (lnviz.lessons.ln_lstm.training_work): full, the
    #: largest run the page offers on MNIST (about an hour on two cores); demo, about a minute
    max_training_work: float
    tensor_mb: int  # memory one learner's uploaded tensor may take, with all built from it
    #: values in the LN-LSTM page's uploaded data set (all files together): full, MNIST's
    #: 70,000 images of 28 × 28 (55M values, 220 MB as float32); demo, about a seventh of it
    training_values: int

    @property
    def tensor_values(self) -> int:
        """The most values one Explorer tensor may hold, uploaded (decompressed, in all its
        arrays) or generated: as many as fit in :attr:`tensor_mb` at
        :data:`EXPLORER_BYTES_PER_VALUE` each."""
        return min(self.max_elements, self.tensor_mb * 2**20 // EXPLORER_BYTES_PER_VALUE)


FULL_LIMITS = Limits(upload_mb=200, max_elements=MAX_ELEMENTS, max_training_steps=5_000,
                     max_training_work=1e14, tensor_mb=2048, training_values=56_000_000)
DEMO_LIMITS = Limits(upload_mb=20, max_elements=2_000_000, max_training_steps=500,
                     max_training_work=1e12, tensor_mb=64, training_values=8_000_000)


def current_limits() -> Limits:
    """:data:`DEMO_LIMITS` when ``LNVIZ_DEMO`` is set to 1/true/yes, else :data:`FULL_LIMITS`."""
    demo = os.environ.get("LNVIZ_DEMO", "").strip().lower() in ("1", "true", "yes")
    return DEMO_LIMITS if demo else FULL_LIMITS
