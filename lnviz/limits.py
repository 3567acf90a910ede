"""How much one learner may ask of the server: full limits on a laptop, tighter ones in demo mode.

Set the environment variable ``LNVIZ_DEMO=1`` when the app is hosted for a class (a shared link,
Streamlit Community Cloud, a Docker container): uploads, tensors and training runs are then
capped so that many learners at once fit in about a gigabyte of memory.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

__all__ = [
    "BN_VS_LN_MAX_BATCH",
    "CHECK_REFERENCE_LIMIT",
    "DEMO_LIMITS",
    "EXPLORER_BYTES_PER_VALUE",
    "EXPLORER_MAX_D_MODEL",
    "EXPLORER_MAX_LENGTH",
    "EXPLORER_MAX_SEQUENCES",
    "FULL_LIMITS",
    "GEMMA3_MAX_TOKENS",
    "GEOMETRY_MAX_MAGNITUDE",
    "GEOMETRY_MAX_VECTORS",
    "GRADIENTS_MAX_JACOBIAN",
    "IMAGE_MAX_BYTES",
    "IMAGE_MAX_PIXELS",
    "INSPECTOR_BYTES_PER_VALUE",
    "INSPECTOR_MAX_NORM_CHANNELS",
    "LIVE_LIMIT",
    "LIVE_MAX_SIDE",
    "LN_LSTM_MAX_RUNS",
    "LN_LSTM_MAX_SEEDS",
    "LN_LSTM_MAX_STEP_WORK",
    "MAX_DATASET_VALUES",
    "MAX_ELEMENTS",
    "MAX_SHARED_TEXT",
    "MAX_TABLE_FEATURES",
    "MAX_TEXT_CHARS",
    "MAX_TEXT_NESTING",
    "MAX_URL_NUMBER",
    "MAX_URL_VALUE",
    "MINILM_MAX_DRAWN_TOKENS",
    "MODEL_MAX_CHARS",
    "PADDING_MAX_D_MODEL",
    "PADDING_MAX_LENGTH",
    "PADDING_MAX_SEQUENCES",
    "SEQUENCE_MAX_FEATURES",
    "SEQUENCE_MAX_STEPS",
    "SMOLLM2_MAX_TOKENS",
    "START_HERE_MAX_ANSWER_CHARS",
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
#: What one value of a capture or checkpoint costs the server in the Model inspector, which holds
#: the file whole and works on one layer at a time (and in the Explorer, which holds a capture
#: whole but explores one layer's input, under EXPLORER_BYTES_PER_VALUE). Counted: Streamlit's
#: copy of the upload, the bytes the page reads from it, the float32 arrays (4 bytes each), and a
#: fresh copy of the upload Streamlit hands each rerun. Measured with
#: tools/inspector_memory.py on a 512-token SmolLM2 capture (36 M values, 144 MB): the peak rose
#: by 17 bytes per value through upload, three reruns, a layer, "Open in Explorer" and leaving.
INSPECTOR_BYTES_PER_VALUE = 24

#: The Explorer's generated padded batches: at most this many sequences, each padded to at most
#: this length, of at most this many features (typed as numbers; the element cap applies too).
EXPLORER_MAX_SEQUENCES, EXPLORER_MAX_LENGTH, EXPLORER_MAX_D_MODEL = 10_000, 100_000, 100_000
#: The Padding page's generated batch: the page draws every position of every sequence, so at
#: most 16 × 32 = 512 rows of 16 features per panel.
PADDING_MAX_SEQUENCES, PADDING_MAX_LENGTH, PADDING_MAX_D_MODEL = 16, 32, 16



# --- The URL and typed text ------------------------------------------------------------------
#: The longest URL value kept: every value a control writes is a short label or number.
MAX_URL_VALUE = 200
#: Numbers beyond this are refused in the URL: integers up to it convert exactly to floats.
MAX_URL_NUMBER = 2.0**53
#: The most characters a free-text control (typed numbers, sequence lengths) may take in the
#: address, URL-encoded. With every other setting a link stays under 8 KB, far inside what
#: browsers and servers accept (Streamlit's server answers HTTP 400 from about 64 KB on).
MAX_SHARED_TEXT = 4000
#: Typed numbers (:func:`lnviz.data.parser.parse_numbers`): at most this many characters, and
#: brackets nested at most this deep (a batch of sequences of vectors needs 3; 5 leaves room).
MAX_TEXT_CHARS = 2_000_000
MAX_TEXT_NESTING = 5

# --- What the pages draw and check -----------------------------------------------------------
#: The largest tensor (in values) the live panels draw whole and recompute on every input event.
LIVE_LIMIT = 4096
#: ... and at most this many rows and columns of its grid (lnviz.batch.to_grid).
LIVE_MAX_SIDE = 128
#: The most features a per-feature γ/β table offers to edit (wider tensors take one γ and β).
MAX_TABLE_FEATURES = 256
#: Above this many values the Explorer's check skips its float64 reference (it would double the
#: memory).
CHECK_REFERENCE_LIMIT = 4_000_000
#: The geometry page: at most this many vectors (a few dozen points keep the figures readable
#: and small), each typed value at most this large (float16, max 65 504, still holds it).
GEOMETRY_MAX_VECTORS = 24
GEOMETRY_MAX_MAGNITUDE = 1e4
#: The largest batch the BatchNorm vs LayerNorm page builds. Every re-drawn batch of size B is
#: the fixed sample and the first B − 1 of one draw of BN_VS_LN_MAX_BATCH − 1 batch-mates
#: (:func:`lnviz.lessons.bn_vs_ln.batch_mates`): batches are nested, so growing a batch adds
#: mates and keeps the ones it had.
BN_VS_LN_MAX_BATCH = 64
#: The gradients page: the largest Jacobian side (batch × features) drawn as a heatmap.
GRADIENTS_MAX_JACOBIAN = 64
#: The most characters a Start-here answer field takes.
START_HERE_MAX_ANSWER_CHARS = 80
#: The two model pages: the longest text they take, in characters (all-MiniLM-L6-v2 reads at most
#: 512 tokens; SmolLM2's page runs at most SMOLLM2_MAX_TOKENS); and the most tokens the
#: real-transformer page's heatmaps draw (the first ones; everything else uses all).
MODEL_MAX_CHARS = 5000
MINILM_MAX_DRAWN_TOKENS = 64
#: The real LLM page: the most tokens of a prompt it runs. A run keeps every block's attention,
#: 30 × 9 × T² floats (71 MB at 256 tokens, 27 GB at 5,000), and SmolLM2 reads digits one token
#: each, so a character cap alone does not bound it.
SMOLLM2_MAX_TOKENS = 256
#: The Gemma 3 page: the most tokens of a prompt it runs (<bos> included). A run keeps its 109
#: norms' inputs and outputs, 218 × T × 640 floats (143 MB at 256 tokens), and every block's
#: attention, 18 × 4 × T² (19 MB).
GEMMA3_MAX_TOKENS = 256
#: An uploaded picture (lnviz.data.files.load_image): at most this many bytes, and this many
#: pixels, read from its header before it is decoded: 40 M (a 7,700 × 5,200 photo) decodes to
#: 120 MB of RGB, for the moment it takes to crop and resize it to 224 × 224 (the page keeps
#: only that). The demo takes fewer (:attr:`Limits.image_pixels`).
IMAGE_MAX_BYTES = 20 * 2**20
IMAGE_MAX_PIXELS = 40_000_000
#: The most channels one normalization layer of a checkpoint may have: four times the widest
#: published model's (Llama 3.1 405B, 16,384). A file can hold one γ of millions of values
#: (1.5 KB of torch.save, a stored value repeated): it is refused, not tabulated.
INSPECTOR_MAX_NORM_CHANNELS = 65_536

# --- Training --------------------------------------------------------------------------------
#: The most multiply-adds one uninterruptible piece of work may take: a training step of one
#: model, or one slice of an evaluation (about a third of a second on two CPU cores). The largest
#: step the LN-LSTM page offers on MNIST (batch 256, H = 256, 28 × 28) takes 6.5e9. A training
#: is stopped between pieces, so this bounds how long Stop waits.
LN_LSTM_MAX_STEP_WORK = 8_000_000_000
#: The most seeds per model and setting, and the most runs (models × swept values × seeds) one
#: comparison may train: each keeps its weights and Adam's state in memory until it ends.
LN_LSTM_MAX_SEEDS = 5
LN_LSTM_MAX_RUNS = 30
#: The longest sequences (image rows) and the most features per step (columns) an uploaded
#: training set may have. Every training step loops over the rows one by one, and the gate
#: figures keep every row's gates: an upload of 20 000 rows made a single step take minutes.
#: MNIST has 28 × 28.
SEQUENCE_MAX_STEPS = 128
SEQUENCE_MAX_FEATURES = 1024


@dataclass(frozen=True)
class Limits:
    upload_mb: int  # largest uploaded file
    max_elements: int  # largest Explorer tensor before the memory budget (tensor_values)
    max_training_steps: int  # longest training run on the LN-LSTM page
    #: the most multiply-adds of one training run (lnviz.train.training_work): full, the
    #: largest run the page offers on MNIST (about an hour on two cores); demo, about a minute
    max_training_work: float
    tensor_mb: int  # memory one learner's uploaded tensor may take, with all built from it
    #: values in the LN-LSTM page's uploaded data set (all files together): full, MNIST's
    #: 70,000 images of 28 × 28 (55M values, 220 MB as float32); demo, about a seventh of it
    training_values: int
    #: what one session's cached results may hold (lnviz.ui.cache): full, as much as the
    #: Explorer's largest tensor with everything built from it; demo, a tab's share of the
    #: instance with the models loaded (docs/benchmarks.md, memory per session)
    cache_mb: int
    #: heavy jobs (trainings, races, model sweeps) the server runs at once (lnviz.ui.jobs); the
    #: rest wait in line
    heavy_jobs: int
    #: the longest prompt (tokens) the SmolLM2 page's norm sweep runs: 124 runs of the model
    sweep_tokens: int
    #: the largest training race (lnviz.train.race_work, block-steps): full, more than
    #: the largest either page offers (Beyond's, 48,000: about 100 s here, quiet); demo, the
    #: pages' defaults and a little more (12,000: about 25 s here, docs/benchmarks.md §6)
    race_work: int
    #: the Performance page's benchmark: its largest size (rows × features), longest time budget
    #: (s) and whether torch.compile may run. Demo: sizes to 4096 × 1024 (16 MB a tensor; the
    #: scratch code's intermediates take several times that), 30 s, no compiling (its own
    #: hundreds of MB); elsewhere, everything the page offers
    benchmark_values: int
    benchmark_s: int
    benchmark_compile: bool
    #: the most pixels of a picture uploaded to the EfficientNet page: full, IMAGE_MAX_PIXELS;
    #: demo, 12 M (a phone's photo, 36 MB decoded, for a moment)
    image_pixels: int = IMAGE_MAX_PIXELS

    @property
    def tensor_values(self) -> int:
        """The most values one Explorer tensor may hold, uploaded (decompressed, in all its
        arrays) or generated: as many as fit in :attr:`tensor_mb` at
        :data:`EXPLORER_BYTES_PER_VALUE` each."""
        return min(self.max_elements, self.tensor_mb * 2**20 // EXPLORER_BYTES_PER_VALUE)

    @property
    def capture_values(self) -> int:
        """The most values a capture or checkpoint may hold, all its arrays together, in the Model
        inspector (and a capture in the Explorer, whose chosen layer must also fit
        :attr:`tensor_values`): as many as fit in :attr:`tensor_mb` at
        :data:`INSPECTOR_BYTES_PER_VALUE` each."""
        return min(self.max_elements, self.tensor_mb * 2**20 // INSPECTOR_BYTES_PER_VALUE)


FULL_LIMITS = Limits(upload_mb=200, max_elements=MAX_ELEMENTS, max_training_steps=5_000,
                     max_training_work=1e14, tensor_mb=2048, training_values=56_000_000,
                     cache_mb=2048, heavy_jobs=2, sweep_tokens=SMOLLM2_MAX_TOKENS,
                     race_work=50_000, benchmark_values=16384 * 4096, benchmark_s=120,
                     benchmark_compile=True)
DEMO_LIMITS = Limits(upload_mb=20, max_elements=2_000_000, max_training_steps=500,
                     max_training_work=1e12, tensor_mb=64, training_values=8_000_000,
                     cache_mb=96, heavy_jobs=1, sweep_tokens=64, race_work=12_000,
                     benchmark_values=4096 * 1024, benchmark_s=30, benchmark_compile=False,
                     image_pixels=12_000_000)


def current_limits() -> Limits:
    """:data:`DEMO_LIMITS` when ``LNVIZ_DEMO`` is set to 1/true/yes, else :data:`FULL_LIMITS`."""
    demo = os.environ.get("LNVIZ_DEMO", "").strip().lower() in ("1", "true", "yes")
    return DEMO_LIMITS if demo else FULL_LIMITS
