"""Train LSTM, LN-LSTM and BN-LSTM side by side on sequential digits, in steps or from the CLI.

Images are read as sequences, one row per time step: scikit-learn's bundled 8×8 digits (8 steps of
8 features, no download) by default, or sequential MNIST (28 steps of 28) from a ``mnist.npz`` or
the four IDX files a learner supplies. Every model of a comparison starts from the same seed and
sees the same mini-batches, so their curves differ only by the normalization.

:class:`Training` advances all models a piece at a time (one training step, or a slice of an
evaluation) for a given number of seconds, which lets the app draw the curves while they grow and
stop within a fraction of a second; :func:`check_work` refuses, before it starts, a training that
would ask the server for too much; :func:`summarize` turns a finished (or stopped) training into
plain numbers for the figures. From a shell::

    python -m lnviz.train --models lstm ln-lstm --steps 300 --json runs.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from lnviz.devices import available_devices
from lnviz.io import load_arrays
from lnviz.limits import DEMO_LIMITS, Limits
from lnviz.rnn import (
    MODEL_LABELS,
    MODELS,
    SequenceClassifier,
    batch_dependence,
    gate_quantiles,
    make_model,
)

__all__ = [
    "MAX_ELEMENTS",
    "MAX_FEATURES",
    "MAX_SEQUENCE_STEPS",
    "MAX_STEP_WORK",
    "BatchDependence",
    "ModelRun",
    "SequenceData",
    "TrainConfig",
    "Training",
    "TrainingResult",
    "check_work",
    "load_data",
    "load_digits_data",
    "load_files",
    "load_mnist_idx",
    "load_mnist_npz",
    "main",
    "read_idx",
    "step_work",
    "summarize",
    "to_json",
    "train",
    "training_work",
]

#: The most values a dataset file may hold: all of MNIST (70 000 × 785) with room to spare.
MAX_ELEMENTS = 64_000_000
#: Held-out samples used for the accuracy curves (a fixed random subset of larger test sets).
EVAL_SAMPLES = 2000
#: Held-out samples whose gate pre-activations are summarized.
GATE_SAMPLES = 256
#: The longest sequences (image rows) and the most features per step (columns) accepted. Every
#: training step loops over the rows one by one, and the gate figures keep every row's gates: an
#: upload of 20 000 rows made a single step take minutes. MNIST has 28 × 28.
MAX_SEQUENCE_STEPS = 128
MAX_FEATURES = 1024
#: What one time step of one forward pass costs beyond its matrix products (the Python loop over
#: the steps, the norms' small ops), as the number of multiply-adds that take as long: measured
#: at about 0.15 ms on a CPU core. It dominates for small models and long sequences.
TIME_STEP_OVERHEAD = 3_000_000
#: The most multiply-adds one uninterruptible piece of work may take: a training step of one
#: model, or one slice of an evaluation (about a third of a second on two CPU cores). The largest
#: step the page offers on MNIST (batch 256, H = 256, 28 × 28) takes 6.5e9. A training is
#: stopped between pieces, so this bounds how long Stop waits.
MAX_STEP_WORK = 8_000_000_000
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_IDX_NAMES = ("train-images", "train-labels", "t10k-images", "t10k-labels")
_GZIP_MAGIC = b"\x1f\x8b"


# --- Data -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SequenceData:
    """Images as sequences: ``x`` of shape (N, T, F) in [0, 1], one image row per step.

    The held-out part (``x_test``, ``y_test``) is fixed by the dataset, never by the seed.
    """

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def steps(self) -> int:
        """T, the sequence length (image rows)."""
        return int(self.x_train.shape[1])

    @property
    def features(self) -> int:
        """F, the features per step (image columns)."""
        return int(self.x_train.shape[2])

    @property
    def num_classes(self) -> int:
        """The number of classes: one more than the largest label."""
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def _as_sequences(images: np.ndarray, what: str) -> np.ndarray:
    """(N, T, F) float32 images; (N, D) with D a square is read as square images."""
    if images.ndim == 2 and math.isqrt(images.shape[1]) ** 2 == images.shape[1]:
        side = math.isqrt(images.shape[1])
        images = images.reshape(len(images), side, side)
    if images.ndim != 3 or min(images.shape) == 0:
        raise ValueError(f"{what} must be images of shape (N, rows, columns), got shape "
                         f"{list(images.shape)}")
    if not np.isfinite(images).all():
        raise ValueError(f"{what} hold NaN or infinite values, or values beyond float32's "
                         "±3.4e38 (the precision the training uses)")
    return images.astype(np.float32, copy=False)


def _as_labels(labels: np.ndarray, count: int, what: str) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim == 2 and labels.shape[1] == 1:
        labels = labels[:, 0]
    if labels.ndim != 1 or len(labels) != count:
        raise ValueError(f"{what} must hold one label per image ({count}), got shape "
                         f"{list(labels.shape)}")
    whole = np.isfinite(labels).all() and (labels == np.round(labels)).all()
    if not whole or labels.min() < 0 or labels.max() > 999:
        raise ValueError(f"{what} must be whole numbers from 0 to 999 (class indices)")
    return labels.astype(np.int64)


def _sequence_data(name: str, x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray,
                   y_test: np.ndarray) -> SequenceData:
    """Check shapes and labels, and scale the pixel values into [0, 1] with the training range."""
    x_train = _as_sequences(x_train, "the training images")
    x_test = _as_sequences(x_test, "the test images")
    if x_train.shape[1:] != x_test.shape[1:]:
        raise ValueError(f"training images {list(x_train.shape[1:])} and test images "
                         f"{list(x_test.shape[1:])} must have the same size")
    rows, columns = x_train.shape[1:]
    if rows > MAX_SEQUENCE_STEPS:
        raise ValueError(f"the images have {rows} rows, read as {rows} time steps; at most "
                         f"{MAX_SEQUENCE_STEPS} are accepted (MNIST has 28), since every "
                         "training step goes through the rows one by one")
    if columns > MAX_FEATURES:
        raise ValueError(f"the images have {columns} columns, read as {columns} features per "
                         f"time step; at most {MAX_FEATURES} are accepted (MNIST has 28)")
    y_train = _as_labels(y_train, len(x_train), "the training labels")
    y_test = _as_labels(y_test, len(x_test), "the test labels")
    classes = np.unique(y_train)
    if len(classes) < 2:
        raise ValueError(f"the training labels hold a single class ({int(classes[0])}); there "
                         "is nothing to classify")
    # Pixels usually come as 0…255 (or 0…16 for the 8×8 digits); dividing by the range keeps
    # every input step on the same [0, 1] scale whatever the source.
    low, high = min(0.0, float(x_train.min())), max(1.0, float(x_train.max()))
    scale = np.float32(high - low)
    return SequenceData(name, (x_train - low) / scale, y_train,
                        np.clip((x_test - low) / scale, 0, 1), y_test)


def load_digits_data(test_fraction: float = 0.25) -> SequenceData:
    """scikit-learn's bundled 8×8 digits (1797 images, 10 classes) as 8 steps of 8 features.

    The held-out set is a fixed quarter of the images (the same for every seed).
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    order = np.random.RandomState(0).permutation(len(digits.target))
    held_out = math.ceil(len(order) * test_fraction)
    test, train = order[:held_out], order[held_out:]
    images = digits.images.astype(np.float32)
    return _sequence_data("digits 8×8 (scikit-learn)", images[train], digits.target[train],
                          images[test], digits.target[test])


def load_mnist_npz(source: bytes | str | os.PathLike[str], *,
                   max_elements: int = MAX_ELEMENTS) -> SequenceData:
    """Sequential MNIST from the standard ``mnist.npz`` (x_train, y_train, x_test, y_test).

    Read with :func:`lnviz.load_arrays`, which never unpickles and refuses more than
    ``max_elements`` values in all from the sizes the file declares, before decompressing.
    Raises ValueError (a :class:`lnviz.TensorFileError` for a damaged file) saying what is
    missing or wrong.
    """
    arrays = load_arrays(source, max_elements=max_elements)
    missing = [k for k in ("x_train", "y_train", "x_test", "y_test") if k not in arrays]
    if missing:
        raise ValueError(f"the .npz file lacks {', '.join(missing)}; expected the arrays "
                         f"x_train, y_train, x_test, y_test (found {', '.join(arrays)})")
    return _sequence_data("sequential MNIST (mnist.npz)", arrays["x_train"], arrays["y_train"],
                          arrays["x_test"], arrays["y_test"])


def _read_bytes(source: bytes | str | os.PathLike[str], limit: int) -> bytes:
    if isinstance(source, bytes | bytearray | memoryview):
        data = bytes(source)
    else:
        try:
            with open(source, "rb") as file:
                data = file.read(limit + 1)
        except OSError as err:
            raise ValueError(f"cannot read {os.fspath(source)!r}: {err.strerror}") from err
    if len(data) > limit:
        raise ValueError(f"the file is larger than the {limit} bytes accepted")
    return data


def _gunzip(data: bytes, limit: int) -> bytes:
    """Decompress a .gz file, refusing it as soon as it would grow past ``limit`` bytes."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as err:
        raise ValueError(f"corrupt .gz file ({err})") from err
    if len(out) > limit:
        raise ValueError(f"the .gz file expands to more than the {limit:,} bytes it declares")
    if not inflater.eof:
        raise ValueError("truncated .gz file: the compressed stream ends early")
    return out


def _gunzip_head(data: bytes, size: int) -> bytes:
    """The first ``size`` bytes of a .gz file's content (fewer if it is shorter)."""
    try:
        return zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data, size)
    except zlib.error as err:
        raise ValueError(f"corrupt .gz file ({err})") from err


def _idx_header(data: bytes, max_elements: int) -> tuple[np.dtype, tuple[int, ...], int]:
    """An IDX header's dtype, shape and data offset, refusing more than ``max_elements``
    values. ``data`` needs only to reach the end of the header."""
    if len(data) < 4:
        raise ValueError(f"not an IDX file: {len(data)} bytes, shorter than the 4-byte magic")
    if data[:2] != b"\0\0":
        raise ValueError(f"not an IDX file: it starts with {data[:4]!r}, but an IDX magic "
                         "number starts with two zero bytes")
    code, ndim = data[2], data[3]
    if code not in _IDX_DTYPES:
        raise ValueError(f"not an IDX file: unknown type code 0x{code:02X} (known: "
                         f"{', '.join(f'0x{c:02X}' for c in _IDX_DTYPES)})")
    if not 1 <= ndim <= 8:
        raise ValueError(f"IDX file declares {ndim} dimensions; 1 to 8 are accepted")
    offset = 4 + 4 * ndim
    if len(data) < offset:
        raise ValueError("truncated IDX file: it ends inside the list of dimension sizes")
    shape = struct.unpack(f">{ndim}I", data[4:offset])
    count = math.prod(shape)
    if count > max_elements:
        raise ValueError(f"IDX file declares shape {list(shape)}, {count:,} values, more than "
                         f"the {max_elements:,} accepted")
    return np.dtype(_IDX_DTYPES[code]), shape, offset


def read_idx(source: bytes | str | os.PathLike[str], *, max_elements: int = MAX_ELEMENTS
             ) -> np.ndarray:
    """Parse an IDX file (the format of the original MNIST files), optionally gzipped.

    The format: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dims d, then d big-endian uint32 sizes, then the
    values, big-endian, in C order. The declared size must match the file exactly.

    Raises ValueError saying what is wrong with a file that is not a well-formed IDX file.
    """
    limit = max_elements * 8 + 1024
    data = _read_bytes(source, limit)
    if data[:2] == _GZIP_MAGIC:
        # Judge the declared shape before inflating anything: a small .gz can expand to GBs.
        dtype, shape, offset = _idx_header(_gunzip_head(data, 4 + 4 * 8), max_elements)
        data = _gunzip(data, offset + math.prod(shape) * dtype.itemsize)
    dtype, shape, offset = _idx_header(data, max_elements)
    count = math.prod(shape)
    expected = offset + count * dtype.itemsize
    if len(data) != expected:
        problem = "truncated" if len(data) < expected else "trailing bytes after the data"
        raise ValueError(f"{problem}: an IDX file of shape {list(shape)} holds {expected} bytes, "
                         f"this one {len(data)}")
    values = np.frombuffer(data, dtype, count, offset).reshape(shape)
    return values.astype(dtype.newbyteorder("="))


def _idx_role(name: str) -> str | None:
    """Which of the four MNIST files a name is (train/t10k × images/labels), if any."""
    base = Path(name).name.lower().replace(".", "-").replace("_", "-")
    split = "train" if base.startswith("train") else "t10k" if base.startswith(
        ("t10k", "test")) else None
    kind = "images" if ("images" in base or "idx3" in base) else "labels" if (
        "labels" in base or "idx1" in base) else None
    return f"{split}-{kind}" if split and kind else None


def load_mnist_idx(files: Mapping[str, bytes | str | os.PathLike[str]], *,
                   max_elements: int = MAX_ELEMENTS) -> SequenceData:
    """Sequential MNIST from its four IDX files, given as {file name: bytes or path}.

    The names tell the files apart as MNIST names them: ``train-images-idx3-ubyte``,
    ``train-labels-idx1-ubyte``, ``t10k-images-idx3-ubyte``, ``t10k-labels-idx1-ubyte``
    (``.gz`` or ``train-images.idx3-ubyte`` spellings too). At most ``max_elements`` values in
    the four files together.
    """
    found: dict[str, bytes | str | os.PathLike[str]] = {}
    for name, source in files.items():
        role = _idx_role(name)
        if role is not None:
            found[role] = source
    missing = [role for role in _IDX_NAMES if role not in found]
    if missing:
        raise ValueError(f"need the four MNIST IDX files; missing {', '.join(missing)} (got "
                         f"{', '.join(Path(n).name for n in files) or 'none'})")
    parts = {}
    left = max_elements
    for role in _IDX_NAMES:
        try:
            parts[role] = read_idx(found[role], max_elements=left)
        except ValueError as err:
            raise ValueError(f"{role}: {err}" + (" (the four files share this limit)"
                                                 if left < max_elements else "")) from err
        left -= parts[role].size
    return _sequence_data("sequential MNIST (IDX files)", parts["train-images"],
                          parts["train-labels"], parts["t10k-images"], parts["t10k-labels"])


def load_files(files: Mapping[str, bytes], max_elements: int = MAX_ELEMENTS) -> SequenceData:
    """What the app's uploader received: one ``.npz`` file, or the four IDX files, with at most
    ``max_elements`` values in all (the server's :attr:`lnviz.limits.Limits.training_values`)."""
    if len(files) == 1:
        ((name, data),) = files.items()
        if data[:2] == b"PK" or name.lower().endswith(".npz"):
            return load_mnist_npz(data, max_elements=max_elements)
    return load_mnist_idx(files, max_elements=max_elements)


def load_data(path: str | os.PathLike[str] | None = None) -> SequenceData:
    """The CLI's data: the bundled digits (``None``), an ``mnist.npz`` file, or a folder with the
    four IDX files."""
    if path is None:
        return load_digits_data()
    path = Path(path)
    if path.is_dir():
        return load_mnist_idx({p.name: p for p in sorted(path.iterdir()) if p.is_file()})
    return load_mnist_npz(path)


# --- Training ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrainConfig:
    """Everything that decides a comparison's numbers (with the data): same config, same curves.

    Every model in ``models`` starts from ``seed`` and sees the same sequence of mini-batches.
    ``gamma_init``/``beta_init``/``single_bias`` configure the norms of the LN- and BN-LSTM.
    The held-out set is evaluated every ``eval_every`` steps.
    """

    models: tuple[str, ...] = ("lstm", "ln-lstm")
    hidden_size: int = 64
    lr: float = 1e-2
    batch_size: int = 64
    steps: int = 300
    eval_every: int = 10
    gamma_init: float = 1.0
    beta_init: float = 0.0
    single_bias: bool = False
    seed: int = 0
    device: str = "cpu"

    def __post_init__(self) -> None:
        unknown = [m for m in self.models if m not in MODELS]
        if not self.models or unknown or len(set(self.models)) != len(self.models):
            raise ValueError(f"models must be distinct names from {', '.join(MODELS)}; got "
                             f"{list(self.models)}")
        if self.batch_size < 2:
            raise ValueError("batch_size must be at least 2 (BatchNorm needs two samples)")
        if min(self.hidden_size, self.steps, self.eval_every) < 1 or not self.lr > 0:
            raise ValueError("hidden_size, steps and eval_every must be positive, lr above 0")
        if self.device not in available_devices():
            raise ValueError(f"device {self.device!r} is not available here; choose one of "
                             f"{available_devices()}")


@dataclass
class _Tensors:
    """The dataset on the training device, with the held-out subset used for the curves."""

    x_train: torch.Tensor
    y_train: torch.Tensor
    x_eval: torch.Tensor
    y_eval: torch.Tensor

    @classmethod
    def build(cls, data: SequenceData, device: str) -> _Tensors:
        held_out = np.arange(len(data.y_test))
        if len(held_out) > EVAL_SAMPLES:
            held_out = np.sort(np.random.RandomState(0).choice(held_out, EVAL_SAMPLES, False))

        def put(a: np.ndarray) -> torch.Tensor:
            return torch.from_numpy(np.ascontiguousarray(a)).to(device)

        return cls(put(data.x_train), put(data.y_train), put(data.x_test[held_out]),
                   put(data.y_test[held_out]))


# --- How much a training asks for -------------------------------------------------------------


def _forward_work(samples: int, hidden: int, steps: int, features: int) -> int:
    """Multiply-adds of one forward pass of ``samples`` sequences of ``steps`` × ``features``:
    at every time step each sample's W x and U h (4H × (F + H)), plus the fixed cost of a time
    step."""
    return steps * (samples * 4 * hidden * (features + hidden) + TIME_STEP_OVERHEAD)


def step_work(config: TrainConfig, data: SequenceData) -> int:
    """Multiply-adds of one training step of one model: the batch's forward pass, and the
    backward pass at about twice its cost."""
    return 3 * _forward_work(config.batch_size, config.hidden_size, data.steps, data.features)


def _eval_slice(hidden: int, steps: int, features: int) -> int:
    """Held-out samples evaluated in one piece: as many as fit in :data:`MAX_STEP_WORK`
    (at least one, at most 1000, which keeps the activations small)."""
    per_sample = steps * 4 * hidden * (features + hidden)
    room = MAX_STEP_WORK - steps * TIME_STEP_OVERHEAD
    return max(1, min(1000, room // per_sample))


def training_work(config: TrainConfig, data: SequenceData) -> int:
    """Multiply-adds of a whole training, roughly: every step of every model, and every
    evaluation of the held-out set (one every ``eval_every`` steps and one at the end)."""
    held_out = min(len(data.y_test), EVAL_SAMPLES)
    size = (config.hidden_size, data.steps, data.features)
    slices = math.ceil(held_out / _eval_slice(*size))
    evaluation = _forward_work(held_out, *size) + (slices - 1) * data.steps * TIME_STEP_OVERHEAD
    evaluations = math.ceil(config.steps / config.eval_every)
    per_model = config.steps * step_work(config, data) + evaluations * evaluation
    return len(config.models) * per_model


def check_work(config: TrainConfig, data: SequenceData, limits: Limits) -> None:
    """Refuse, before it starts, a training that would ask too much of the server.

    One training step must fit in :data:`MAX_STEP_WORK` (Stop is checked between steps), and the
    whole training in ``limits.max_training_work``. Raises ValueError saying what to lower.
    """
    shape = (f"a batch of {config.batch_size} sequences of {data.steps} steps × "
             f"{data.features} features with H = {config.hidden_size}")
    one_step = step_work(config, data)
    if one_step > MAX_STEP_WORK:
        raise ValueError(f"One training step would be too big to stop promptly: {shape} is "
                         f"{_times(one_step / MAX_STEP_WORK)} the most one step may take. "
                         "Lower the batch size or the hidden size H.")
    work = training_work(config, data)
    if work > limits.max_training_work:
        where = "this server in demo mode" if limits == DEMO_LIMITS else "this server"
        models = len(config.models)
        raise ValueError(f"This training asks for too much work: {models} model"
                         f"{'s' * (models > 1)} × {config.steps} steps of {shape} is "
                         f"{_times(work / limits.max_training_work)} the most {where} allows "
                         "for one run. Lower the training steps, the batch size, the hidden "
                         "size H or the number of models.")


def _times(ratio: float) -> str:
    """A ratio above 1 as "1.3 times", rounded up so that it never reads as 1."""
    return f"{math.ceil(ratio * 10) / 10:g} times"


class ModelRun:
    """One model of a comparison: its parameters, Adam state, batch sampler and curves so far.

    Attributes:
        kind: the model's name (see :data:`lnviz.rnn.MODELS`).
        step: optimizer steps taken.
        curve: at each evaluation, ``step``, ``loss`` (mean training loss since the previous
            evaluation), ``accuracy`` (on the held-out set) and ``grad_norm`` (mean ‖∇θ‖₂).
        step_loss, step_grad_norm: the training loss and the gradient norm of every step.
        seconds: time spent training and evaluating this model.
        gates_at_init: gate pre-activation quantiles before training (see
            :func:`lnviz.rnn.gate_quantiles`).
    """

    def __init__(self, kind: str, tensors: _Tensors, num_classes: int, config: TrainConfig
                 ) -> None:
        self.kind, self.config, self.tensors = kind, config, tensors
        torch.manual_seed(config.seed)  # the same initial weights on every run of this seed
        self.model: SequenceClassifier = make_model(
            kind, tensors.x_train.shape[2], config.hidden_size, num_classes,
            gamma_init=config.gamma_init, beta_init=config.beta_init,
            single_bias=config.single_bias, max_steps=tensors.x_train.shape[1],
        ).to(config.device)
        self.optimizer = torch.optim.Adam(self.model.parameters(), lr=config.lr)
        # The same generator seed for every model, so all of them see the same mini-batches.
        self.generator = torch.Generator().manual_seed(config.seed)
        self.step = 0
        self.curve: dict[str, list[float]] = {"step": [], "loss": [], "accuracy": [],
                                              "grad_norm": []}
        self.step_loss: list[float] = []
        self.step_grad_norm: list[float] = []
        self.seconds = 0.0
        self.gates_at_init = gate_quantiles(self.model, tensors.x_eval[:GATE_SAMPLES])
        # An evaluation goes through the held-out set in slices, one per piece of work, so that
        # a long one can be stopped too: the next sample and the hits so far, None between them.
        self.eval_slice = _eval_slice(config.hidden_size, *tensors.x_train.shape[1:])
        self._evaluation: tuple[int, int] | None = None

    @property
    def evaluating(self) -> bool:
        """Whether an evaluation of the held-out set is under way (the weights wait for it)."""
        return self._evaluation is not None

    @property
    def finished(self) -> bool:
        """Whether every step is taken and the last evaluation recorded."""
        return self.step >= self.config.steps and not self.evaluating

    def evaluate_to_date(self) -> None:
        """Finish the evaluation under way, or evaluate now if steps were taken since the last
        one, so that a stopped training's curves end where its weights are (a Stop before the
        first scheduled evaluation left them empty)."""
        evaluated = self.curve["step"][-1] if self.curve["step"] else 0
        if not self.evaluating and self.step > evaluated:
            self._evaluation = (0, 0)
        while self.evaluating:
            self._evaluate_slice()

    def work(self) -> None:
        """One piece of work, at most :data:`MAX_STEP_WORK` (as :func:`check_work` checks): the
        next slice of the evaluation under way, else one optimizer step (which starts an
        evaluation every ``eval_every`` steps and after the last)."""
        start = time.perf_counter()
        if self.evaluating:
            self._evaluate_slice()
        else:
            self._train_step()
        self.seconds += time.perf_counter() - start

    def advance(self, n: int) -> None:
        """Take ``n`` optimizer steps on random mini-batches, with their evaluations."""
        target = self.step + n
        while self.step < target or self.evaluating:
            self.work()

    def _train_step(self) -> None:
        config, tensors = self.config, self.tensors
        self.model.train()
        index = torch.randint(len(tensors.y_train), (config.batch_size,),
                              generator=self.generator).to(tensors.y_train.device)
        loss = F.cross_entropy(self.model(tensors.x_train[index]), tensors.y_train[index])
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = torch.nn.utils.get_total_norm(  # ‖∇θ‖₂ over all parameters
            [p.grad for p in self.model.parameters() if p.grad is not None])
        self.optimizer.step()
        self.step += 1
        self.step_loss.append(float(loss.detach()))
        self.step_grad_norm.append(float(grad_norm))
        if self.step % config.eval_every == 0 or self.step == config.steps:
            self._evaluation = (0, 0)

    @torch.no_grad()
    def _evaluate_slice(self) -> None:
        start, hits = self._evaluation
        x = self.tensors.x_eval[start:start + self.eval_slice]
        y = self.tensors.y_eval[start:start + self.eval_slice]
        self.model.eval()
        try:
            hits += int((self.model(x).argmax(1) == y).sum())
        finally:
            self.model.train()
        start += len(y)
        if start < len(self.tensors.y_eval):
            self._evaluation = (start, hits)
            return
        self._evaluation = None
        since = self.step - (self.curve["step"][-1] if self.curve["step"] else 0)
        self.curve["step"].append(self.step)
        self.curve["loss"].append(float(np.mean(self.step_loss[-since:])))
        self.curve["accuracy"].append(hits / start)
        self.curve["grad_norm"].append(float(np.mean(self.step_grad_norm[-since:])))


class Training:
    """A comparison in progress: every model of ``config`` on ``data``, advanced in chunks.

    ``advance_for(seconds)`` works on the models piece by piece (a training step, or a slice of
    an evaluation) for about that long, always on the model furthest behind, so that their
    curves grow together; ``advance(n)`` moves each model n steps further; ``stop()`` ends it
    early, at the end of the piece under way; ``done`` says whether it has ended.

    Creating one is instant: the models are built on first use. The app keeps a training between
    reruns, and Streamlit starts a rerun (a click on Stop) while the previous run is still inside
    ``advance_for``, so the advances and :func:`summarize` take a lock: one waits for the other's
    chunk to end instead of both changing the same weights at once.
    """

    def __init__(self, data: SequenceData, config: TrainConfig) -> None:
        self.data, self.config = data, config
        self.stopped = False
        self._lock = threading.RLock()
        self._tensors: _Tensors | None = None
        self._runs: list[ModelRun] = []

    def _build(self) -> None:
        with self._lock:
            if self._tensors is None:
                tensors = _Tensors.build(self.data, self.config.device)
                self._runs = [ModelRun(kind, tensors, self.data.num_classes, self.config)
                              for kind in self.config.models]
                self._tensors = tensors

    @property
    def tensors(self) -> _Tensors:
        """The dataset on the training device, with the held-out subset used for the curves."""
        self._build()
        return self._tensors

    @property
    def runs(self) -> list[ModelRun]:
        """One :class:`ModelRun` per model, in the order of ``config.models``."""
        self._build()
        return self._runs

    @property
    def step(self) -> int:
        """Steps every model has taken."""
        return min(run.step for run in self.runs)

    @property
    def done(self) -> bool:
        """Whether all steps are taken and evaluated, or the training was stopped."""
        return self.stopped or all(run.finished for run in self.runs)

    def advance(self, n: int) -> None:
        """Up to ``n`` more steps for every model, with their evaluations (fewer at the end, and
        none once stopped)."""
        with self._lock:
            for run in self.runs:
                target = min(run.step + n, self.config.steps)
                while not self.stopped and (run.step < target or run.evaluating):
                    run.work()

    def advance_for(self, seconds: float, *, clock: Callable[[], float] = time.perf_counter
                    ) -> int:
        """Work for about ``seconds``: piece after piece (see :meth:`ModelRun.work`) of the model
        furthest behind, until the time is up (after at least one piece), the training is done
        or it is stopped. Returns the number of pieces done.

        Time rather than a number of steps sizes the chunk, so that the app hands control back
        to Streamlit (which stops an abandoned run, or starts the one a click asked for, only
        there) every ``seconds`` plus at most one piece, however large the settings.
        """
        with self._lock:
            start, pieces = clock(), 0
            while not self.done:
                behind = min((run for run in self.runs if not run.finished),
                             key=lambda run: run.step)
                behind.work()
                pieces += 1
                if clock() - start >= seconds:
                    break
            return pieces

    def stop(self) -> None:
        """End the training where it is; what was learned so far is kept."""
        self.stopped = True

    def curves(self) -> dict[str, dict[str, list[float]]]:
        """Each model's evaluation curve, keyed by its label (e.g. "LN-LSTM")."""
        return {MODEL_LABELS[run.kind]: run.curve for run in self.runs}


@dataclass(frozen=True)
class BatchDependence:
    """How much one model's outputs change when the same samples are batched differently."""

    model: str
    statistics: str
    batch_sizes: tuple[int, int]
    max_difference: float


@dataclass(frozen=True)
class TrainingResult:
    """A finished (or stopped) comparison as plain numbers, ready for figures and JSON.

    ``gates`` and ``gates_at_init`` map a model label to the (5, T, 5) quantiles of
    :func:`lnviz.rnn.gate_quantiles` after and before training.
    """

    dataset: str
    num_classes: int
    config: TrainConfig
    steps_done: int
    stopped: bool
    curves: dict[str, dict[str, list[float]]]
    step_loss: dict[str, list[float]]
    step_grad_norm: dict[str, list[float]]
    seconds: dict[str, float]
    parameters: dict[str, int]
    gates: dict[str, np.ndarray]
    gates_at_init: dict[str, np.ndarray]
    batch_dependence: list[BatchDependence] = field(default_factory=list)

    def final_accuracy(self) -> dict[str, float]:
        """Held-out accuracy at the last evaluation, per model label."""
        return {label: c["accuracy"][-1] for label, c in self.curves.items() if c["accuracy"]}

    def steps_to_accuracy(self, threshold: float) -> dict[str, int | None]:
        """The first evaluated step at which each model's held-out accuracy reached
        ``threshold`` (None if it never did): a measure of how fast it converged."""
        return {label: next((s for s, a in zip(c["step"], c["accuracy"], strict=True)
                             if a >= threshold), None) for label, c in self.curves.items()}

    def diverged(self) -> list[str]:
        """The models whose training loss became NaN or infinite."""
        return [label for label, losses in self.step_loss.items()
                if not np.isfinite(losses).all()]


def _batch_dependence(run: ModelRun, x: torch.Tensor) -> list[BatchDependence]:
    """LayerNorm and the plain LSTM: one sample alone vs in a batch of len(x). BatchNorm: its
    batch statistics (pairs, the smallest batch it can normalize, vs len(x)) and its running
    averages (alone vs batched)."""
    label, n = MODEL_LABELS[run.kind], len(x)
    if run.kind != "bn-lstm":
        stats = "per sample (LayerNorm)" if run.kind == "ln-lstm" else "none"
        return [BatchDependence(label, stats, (1, n), batch_dependence(run.model, x, 1))]
    return [
        BatchDependence(label, "batch statistics (training mode)", (2, n),
                        batch_dependence(run.model, x, 2, training=True)),
        BatchDependence(label, "running averages (evaluation mode)", (1, n),
                        batch_dependence(run.model, x, 1)),
    ]


def summarize(training: Training) -> TrainingResult:
    """The numbers a page or a JSON file needs from a training, finished or stopped: curves,
    times, gate pre-activation quantiles and the batch-dependence check on 64 held-out
    samples."""
    with training._lock:  # not while another thread is inside advance()
        return _summarize(training)


def _summarize(training: Training) -> TrainingResult:
    for run in training.runs:
        run.evaluate_to_date()
    x_gates = training.tensors.x_eval[:GATE_SAMPLES]
    x_batch = training.tensors.x_eval[:64]
    runs = training.runs
    return TrainingResult(
        dataset=training.data.name,
        num_classes=training.data.num_classes,
        config=training.config,
        steps_done=training.step,
        stopped=training.stopped and training.step < training.config.steps,
        curves={MODEL_LABELS[r.kind]: {k: list(v) for k, v in r.curve.items()} for r in runs},
        step_loss={MODEL_LABELS[r.kind]: list(r.step_loss) for r in runs},
        step_grad_norm={MODEL_LABELS[r.kind]: list(r.step_grad_norm) for r in runs},
        seconds={MODEL_LABELS[r.kind]: r.seconds for r in runs},
        parameters={MODEL_LABELS[r.kind]: sum(p.numel() for p in r.model.parameters())
                    for r in runs},
        gates={MODEL_LABELS[r.kind]: gate_quantiles(r.model, x_gates) for r in runs},
        gates_at_init={MODEL_LABELS[r.kind]: r.gates_at_init for r in runs},
        batch_dependence=[row for r in runs for row in _batch_dependence(r, x_batch)],
    )


def train(data: SequenceData, config: TrainConfig,
          on_eval: Callable[[ModelRun], None] | None = None) -> Training:
    """Train each model of ``config`` to the end, one after the other (so that each one's
    ``seconds`` is its own), calling ``on_eval(run)`` after every evaluation."""
    training = Training(data, config)
    for run in training.runs:
        while run.step < config.steps:
            run.advance(min(config.eval_every, config.steps - run.step))
            if on_eval is not None:
                on_eval(run)
    return training


def to_json(result: TrainingResult) -> dict:
    """The JSON the CLI writes: the dataset, the config and one record per model."""
    label_to_kind = {label: kind for kind, label in MODEL_LABELS.items()}
    return {
        "dataset": result.dataset,
        "config": {k: list(v) if isinstance(v, tuple) else v
                   for k, v in asdict(result.config).items()},
        "runs": [{"model": label_to_kind[label], **curve, "seconds": result.seconds[label]}
                 for label, curve in result.curves.items()],
        "batch_dependence": [asdict(row) for row in result.batch_dependence],
    }


# --- Command line -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    defaults = TrainConfig()
    parser = argparse.ArgumentParser(
        prog="python -m lnviz.train",
        description="Train an LSTM with and without LayerNorm (and with BatchNorm) on sequential "
                    "digits, and report loss and held-out accuracy.")
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(defaults.models),
                        help="the models to compare (default: %(default)s)")
    parser.add_argument("--steps", type=int, default=defaults.steps,
                        help="optimizer steps per model (default: %(default)s)")
    parser.add_argument("--hidden-size", type=int, default=defaults.hidden_size,
                        help="H, units of the LSTM state (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=defaults.lr,
                        help="Adam's learning rate (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size,
                        help="samples per mini-batch, at least 2 (default: %(default)s)")
    parser.add_argument("--eval-every", type=int, default=defaults.eval_every,
                        help="steps between held-out evaluations (default: %(default)s)")
    parser.add_argument("--gamma-init", type=float, default=defaults.gamma_init,
                        help="initial γ of the norms (default: %(default)s)")
    parser.add_argument("--beta-init", type=float, default=defaults.beta_init,
                        help="initial β of the norms (default: %(default)s)")
    parser.add_argument("--single-bias", action="store_true",
                        help="normalize W x and U h without β and add one shared bias instead")
    parser.add_argument("--seed", type=int, default=defaults.seed,
                        help="seeds the initial weights and the mini-batches (default: "
                             "%(default)s)")
    parser.add_argument("--device", choices=available_devices(), default=defaults.device,
                        help="where to train (default: %(default)s)")
    parser.add_argument("--data", metavar="PATH",
                        help="mnist.npz, or a folder with the four MNIST IDX files; default: "
                             "scikit-learn's bundled 8×8 digits")
    parser.add_argument("--json", metavar="PATH", help="write the curves to this JSON file")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``python -m lnviz.train``; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    try:
        config = TrainConfig(
            models=tuple(args.models), hidden_size=args.hidden_size, lr=args.lr,
            batch_size=args.batch_size, steps=args.steps, eval_every=args.eval_every,
            gamma_init=args.gamma_init, beta_init=args.beta_init, single_bias=args.single_bias,
            seed=args.seed, device=args.device)
        data = load_data(args.data)
    except ValueError as err:
        parser.error(str(err))
    print(f"{data.name}: {len(data.y_train)} training and {len(data.y_test)} held-out "
          f"sequences of {data.steps} steps × {data.features} features")

    def report(run: ModelRun) -> None:
        c = run.curve
        print(f"{MODEL_LABELS[run.kind]:>8} step {c['step'][-1]:>5}  loss {c['loss'][-1]:.4f}  "
              f"held-out accuracy {c['accuracy'][-1]:.3f}", flush=True)

    result = summarize(train(data, config, on_eval=report))
    for label, accuracy in result.final_accuracy().items():
        print(f"{label}: held-out accuracy {accuracy:.3f} after {result.seconds[label]:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(to_json(result), indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
