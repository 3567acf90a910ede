"""The Model inspector: what a model's normalization layers hold and what they do.

Two kinds of file:

- a **checkpoint** (a state dict in .safetensors or torch.save form): every normalization
  layer's γ and β, recognised from the names and shapes of its tensors
  (:func:`find_norm_layers`), their distribution, the channels where they are extreme or where
  γ ≈ 0, and BatchNorm's running statistics;
- a **capture** (``lnviz.capture(model, inputs).save(path)``): per layer, the statistics of the
  input over the values that share one μ and σ in that layer (a token's features for LayerNorm,
  a channel's values across the batch for BatchNorm), the channels that carry outliers and what
  the layer does to them (:func:`layer_view`), and the Explorer's settings for the layer's input
  (:func:`explorer_setup`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

import numpy as np
import pandas as pd

from lnviz.capture import CAPTURE_FORMAT, CapturedLayer, read_capture
from lnviz.data.files import TensorFileError, load_arrays, safetensors_metadata
from lnviz.lessons.common import EPSILONS
from lnviz.limits import INSPECTOR_MAX_NORM_CHANNELS, MAX_ELEMENTS
from lnviz.terms import Layout, NormKind

__all__ = [
    "DEFAULT_SIGMAS",
    "SNIPPET",
    "ExplorerSetup",
    "GroupLabels",
    "LayerView",
    "ModelFile",
    "NormLayer",
    "capture_layers",
    "capture_overview",
    "explorer_batch",
    "explorer_setup",
    "extreme_channels",
    "find_norm_layers",
    "layer_key",
    "layer_view",
    "max_sigmas",
    "near_zero_gamma",
    "no_norm_message",
    "open_model_file",
    "parameter_table",
    "running_stats",
]

#: How to capture one's own model: run in the inspector's tests.
SNIPPET = """import lnviz

cap = lnviz.capture(model, inputs)     # one forward pass; every norm layer recorded
cap.save("norms.safetensors")          # open this file here, in the Model inspector"""
#: The default outlier threshold, in standard deviations of the value's own group.
DEFAULT_SIGMAS = 6.0
#: The most points the input-vs-output figure draws besides the outliers.
SCATTER_POINTS = 4000
#: The most outlier points drawn, and the most channels listed, per layer.
MAX_OUTLIER_POINTS, MAX_OUTLIER_ROWS = 2000, 100


# --- Opening a file ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelFile:
    """A file the inspector opened: a ``"capture"`` (with its layers, in call order) or a
    ``"checkpoint"`` (any other file of arrays), and its arrays by name."""

    kind: str
    arrays: dict[str, np.ndarray]
    layers: tuple[CapturedLayer, ...] = ()
    norm_layers: tuple[NormLayer, ...] = ()


def open_model_file(data: bytes, *, max_elements: int = MAX_ELEMENTS) -> ModelFile:
    """Open a capture (a .safetensors file written by ``Capture.save``, its layers checked
    against its tensors) or a checkpoint (any file :func:`lnviz.load_arrays` reads, its norm
    layers found by :func:`find_norm_layers`): the whole reading of a file, so that one refusal
    covers it. Raises ValueError (TensorFileError for the file itself) for anything else."""
    layers = capture_layers(data, max_elements)
    if layers == ():  # a model that called no norm layer: a capture with no tensors
        return ModelFile("capture", {})
    arrays = load_arrays(data, max_elements=max_elements, keep_float64=True)
    if layers is not None:
        return ModelFile("capture", arrays, layers)
    return ModelFile("checkpoint", arrays, norm_layers=tuple(find_norm_layers(arrays)))


def layer_key(layer: CapturedLayer) -> str:
    """How a capture file names a layer's call: ``"encoder.layers.0.norm1[0]"``."""
    return f"{layer.name or '<model>'}[{layer.call}]"


# --- Checkpoints ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NormLayer:
    """A normalization layer found in a state dict: its module path, what it probably is,
    how it was recognised, and its tensors (None where the checkpoint has none)."""

    name: str
    kind: str
    how: str
    weight: np.ndarray | None = None
    bias: np.ndarray | None = None
    running_mean: np.ndarray | None = None
    running_var: np.ndarray | None = None
    num_batches_tracked: int | None = None

    @property
    def channels(self) -> int:
        present = [a for a in (self.weight, self.bias, self.running_mean) if a is not None]
        return int(present[0].size) if present else 0


_GAMMA = ("weight", "gamma", "scale")
_BETA = ("bias", "beta")
_RUNNING = ("running_mean", "running_var", "num_batches_tracked")
#: (pattern on the module's own name, kind, how it was recognised), first match wins.
_NAME_RULES = (
    (re.compile(r"layer_?norm|^ln(_\w+|\d+)?$", re.IGNORECASE), NormKind.LAYER,
     "named like a LayerNorm ({name!r})"),
    (re.compile(r"rms_?norm", re.IGNORECASE), NormKind.RMS, "named like an RMSNorm ({name!r})"),
    (re.compile(r"group_?norm|^gn\d*$", re.IGNORECASE), NormKind.GROUP,
     "named like a GroupNorm ({name!r})"),
    (re.compile(r"batch_?norm|^bn\d*$", re.IGNORECASE), NormKind.BATCH,
     "named like a BatchNorm ({name!r})"),
    (re.compile(r"norm", re.IGNORECASE), "a norm", "its name contains 'norm' ({name!r})"),
)


def find_norm_layers(arrays: dict[str, np.ndarray]) -> list[NormLayer]:
    """Every normalization layer of a state dict, in the order of its keys.

    A module (the key without its last part) is recognised as one:

    - when it holds ``running_mean`` and ``running_var``: BatchNorm's running statistics
      (InstanceNorm with ``track_running_stats`` holds them too);
    - when its own name says so and its γ (``weight``, ``gamma`` or ``scale``) is 1-D:
      ``…LayerNorm``, ``layer_norm``, ``ln_1``/``ln_f``, ``…RMSNorm``, ``bn1``, ``gn``, or any
      name containing "norm" (``norm1``, ``final_norm``);
    - when it has a 1-D ``weight`` and a ``bias`` of the same length, whatever its name (the
      layers of an ``nn.Sequential`` are named by number): the shape of a norm's γ and β, since
      the weight of a Linear or a convolution has two dims or more (PReLU's 1-D weight has no
      bias).
    """
    modules: dict[str, dict[str, np.ndarray]] = {}
    for key, value in arrays.items():
        module, _, leaf = key.rpartition(".")
        modules.setdefault(module, {})[leaf] = value
    found = []
    for module, tensors in modules.items():
        gamma_key = next((k for k in _GAMMA if k in tensors), None)
        beta_key = next((k for k in _BETA if k in tensors), None)
        gamma = tensors.get(gamma_key) if gamma_key else None
        beta = tensors.get(beta_key) if beta_key else None
        own_name = module.rpartition(".")[2]
        if "running_mean" in tensors and "running_var" in tensors:
            kind, how = NormKind.BATCH, "holds running_mean and running_var"
        elif gamma is None or gamma.ndim != 1 or (beta is not None and beta.shape != gamma.shape):
            continue
        else:
            rule = next((r for r in _NAME_RULES if r[0].search(own_name)), None)
            if rule is not None:
                kind, how = rule[1], rule[2].format(name=own_name)
            elif gamma_key == "weight" and beta is not None:
                kind, how = "a norm", "a 1-D weight and a bias of the same length"
            else:
                continue
        per_channel = {role: _flat(tensors.get(key)) for role, key in (
            ("weight", gamma_key), ("bias", beta_key), ("running_mean", "running_mean"),
            ("running_var", "running_var")) if key in tensors}
        sizes = {role: values.size for role, values in per_channel.items()}
        if max(sizes.values(), default=0) > INSPECTOR_MAX_NORM_CHANNELS:
            raise ValueError(f"{module}: {max(sizes.values()):,} channels, more than the "
                             f"{INSPECTOR_MAX_NORM_CHANNELS:,} a normalization layer may have here "
                             "(the widest published model has 16,384), so this checkpoint is not "
                             "read")
        if len(set(sizes.values())) > 1:
            first, *others = sizes
            odd = next(role for role in others if sizes[role] != sizes[first])
            raise ValueError(f"{module}: its {first} has {sizes[first]} channels, its {odd} "
                             f"{sizes[odd]}; a norm layer has one of each per channel, so this "
                             "checkpoint is not read")
        found.append(NormLayer(name=module, kind=kind, how=how, **per_channel,
                               num_batches_tracked=_tracked(module, tensors)))
    return found


def _tracked(module: str, tensors: dict[str, np.ndarray]) -> int | None:
    """A BatchNorm's num_batches_tracked: a count, or a ValueError that says what it is."""
    tracked = tensors.get("num_batches_tracked")
    if tracked is None:
        return None
    if tracked.size != 1:
        raise ValueError(f"{module}: num_batches_tracked holds {tracked.size} values, not one "
                         "count, so this checkpoint is not read")
    value = float(tracked.ravel()[0])
    if not (math.isfinite(value) and value >= 0 and value == int(value)):
        raise ValueError(f"{module}: num_batches_tracked = {value:g}, not a count of batches, so "
                         "this checkpoint is not read")
    return int(value)


def _flat(values: np.ndarray | None) -> np.ndarray | None:
    return None if values is None else np.asarray(values, np.float64).ravel()


def no_norm_message(model_file: ModelFile) -> str:
    """Why a file shows nothing in the inspector: what it holds instead."""
    arrays = model_file.arrays
    if list(arrays) == ["array"]:
        shape = tuple(arrays["array"].shape)
        return (f"this file holds one unnamed array of shape {shape} (a .npy file, or a torch.save "
                "of one tensor), not a state dict: nothing in it names a normalization layer. "
                "Open it in the Explorer to normalize it, or save a model's state_dict() or a "
                "capture (the snippet above).")
    names = ", ".join(list(arrays)[:5]) + (", …" if len(arrays) > 5 else "")
    return (f"no normalization layer found among the {len(arrays)} arrays of this file ({names}): "
            "none holds running_mean and running_var, and none has a 1-D weight named like a "
            "norm or beside a bias of its length. A state dict saved with "
            "torch.save(model.state_dict(), path) or safetensors.torch.save_file names them.")


def _scaled(statistic: Callable[[np.ndarray], Any], values: np.ndarray) -> float:
    """``statistic`` (a mean, a median) of ``values`` taken on them divided by their largest
    finite magnitude, then scaled back: γ near ±1e308 made the sums overflow ("mean inf" for a
    true 5e307)."""
    finite = np.abs(values[np.isfinite(values)])
    scale = float(finite.max()) if finite.size and finite.max() > 0 else 1.0
    return float(statistic(np.asarray(values, np.float64) / scale)) * scale


def parameter_table(layers: list[NormLayer], zero_tol: float) -> pd.DataFrame:
    """One row per layer: its kind and how it was recognised, channels, and the mean, min and
    max of γ and of β, and how many channels have |γ| ≤ ``zero_tol``."""
    rows = []
    for layer in layers:
        row: dict[str, Any] = {"layer": layer.name, "kind": layer.kind,
                               "recognised as": layer.how, "channels": layer.channels}
        for symbol, values in (("γ", layer.weight), ("β", layer.bias)):
            present = values is not None and values.size > 0
            row[f"{symbol} mean"] = _scaled(np.mean, values) if present else None
            row[f"{symbol} min"] = float(values.min()) if present else None
            row[f"{symbol} max"] = float(values.max()) if present else None
        row["γ ≈ 0"] = (int(np.count_nonzero(np.abs(layer.weight) <= zero_tol))
                        if layer.weight is not None else None)
        rows.append(row)
    return pd.DataFrame(rows)


def extreme_channels(layers: list[NormLayer], top: int) -> pd.DataFrame:
    """For every layer, the ``top`` channels whose γ lies farthest from the layer's median γ,
    and the same for β: layer, parameter, channel, value, the layer's median, distance."""
    rows = []
    for layer in layers:
        for symbol, values in (("γ", layer.weight), ("β", layer.bias)):
            if values is None or values.size == 0:
                continue
            median = _scaled(np.median, values)
            distance = np.abs(np.asarray(values, np.float64) - median)
            # farthest first; ties in channel order (a stable sort on the negated distance)
            for channel in np.argsort(-distance, kind="stable")[:top]:
                rows.append({"layer": layer.name, "parameter": symbol, "channel": int(channel),
                             "value": float(values[channel]), "layer median": median,
                             "distance": float(distance[channel])})
    return pd.DataFrame(rows, columns=["layer", "parameter", "channel", "value", "layer median",
                                       "distance"])


def near_zero_gamma(layers: list[NormLayer], tol: float) -> pd.DataFrame:
    """The channels with |γ| ≤ ``tol``, whose output is about β whatever the input: per layer
    the first `MAX_OUTLIER_ROWS` in channel order (`parameter_table` counts them all)."""
    names, channels, gammas, betas = [], [], [], []
    for layer in layers:
        if layer.weight is None:
            continue
        found = np.flatnonzero(np.abs(layer.weight) <= tol)[:MAX_OUTLIER_ROWS]
        names.append(np.full(found.size, layer.name, dtype=object))
        channels.append(found)
        gammas.append(layer.weight[found].astype(np.float64))
        betas.append(np.full(found.size, None, dtype=object) if layer.bias is None
                     else layer.bias[found].astype(np.float64).astype(object))
    if not names:
        return pd.DataFrame(columns=["layer", "channel", "γ", "β"])
    return pd.DataFrame({"layer": np.concatenate(names), "channel": np.concatenate(channels),
                         "γ": np.concatenate(gammas), "β": np.concatenate(betas)})


def running_stats(layer: NormLayer) -> tuple[np.ndarray, np.ndarray]:
    """A BatchNorm's running mean and running variance per channel."""
    if layer.running_mean is None or layer.running_var is None:
        raise ValueError(f"{layer.name} holds no running statistics")
    return layer.running_mean, layer.running_var


# --- Captures ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LayerView:
    """One captured layer's input as the layer sees it: the values that share one μ and σ in
    this layer form a group (a token's features for LayerNorm and RMSNorm, a channel's values
    over the batch and positions for BatchNorm, a sample's group or channel for GroupNorm and
    InstanceNorm).

    Attributes:
        group_word: what one group is ("token", "channel", "channel group", ...), for labels.
        mean, std: μ and σ (biased, as the norms use) of the input, per group.
        group_labels: a label per group ("(0, 3)" for sample 0, token 3).
        members: values per group; no value can lie farther than √(members − 1) σ from its
            group's mean.
        max_abs_in, max_abs_out: the largest |x| and |y|.
        outliers: one row per channel that holds a value more than ``sigmas`` σ from its
            group's mean (see :func:`layer_view`).
        outlier_values: how many values are beyond ``sigmas`` σ.
        scatter_x, scatter_y, scatter_outlier: inputs and outputs drawn in the figure (all
            values, or an evenly spaced sample plus every outlier) and which are outliers.
        notes: sentences the page shows about this layer.
    """

    key: str
    kind: str
    module: str
    shape: tuple[int, ...]
    group_word: str
    over: str
    sigmas: float
    mean: np.ndarray
    std: np.ndarray
    group_labels: GroupLabels
    members: int
    max_abs_in: float
    max_abs_out: float
    outliers: pd.DataFrame
    outlier_values: int
    scatter_x: np.ndarray
    scatter_y: np.ndarray
    scatter_outlier: np.ndarray
    notes: list[str] = field(default_factory=list)
    outlier_note: str = ""


def max_sigmas(members: int) -> float:
    """The farthest any value can lie from the mean of ``members`` values, in their (biased)
    standard deviations: √(members − 1) (Samuelson's inequality), reached when all but one
    value are equal."""
    return math.sqrt(max(members - 1, 0))


class GroupLabels(Sequence[str]):
    """A label per group, made when read: "(0, 3)" for the group at index (0, 3) of the leading
    dims, "3" with one leading dim, "all" with none. A layer of millions of one-value groups
    made as many strings on every view (6.5 s and 650 MB kept per learner); the page reads the
    few it draws."""

    def __init__(self, lead: tuple[int, ...]) -> None:
        self.lead = tuple(int(n) for n in lead)

    def __len__(self) -> int:
        return math.prod(self.lead)

    @overload
    def __getitem__(self, index: int) -> str: ...

    @overload
    def __getitem__(self, index: slice) -> list[str]: ...

    def __getitem__(self, index: int | slice) -> str | list[str]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        if not self.lead:
            return "all"
        at = tuple(int(i) for i in np.unravel_index(index % len(self), self.lead))
        return str(at[0]) if len(at) == 1 else str(at)


def _grouped(x: np.ndarray, kind: str, settings: dict[str, Any]
             ) -> tuple[np.ndarray, np.ndarray, GroupLabels, str, str]:
    """``x`` as (groups, members), the channel of every element (same shape), a label per
    group, what one group is, and what its values are taken over."""
    shape = x.shape
    if kind in (NormKind.LAYER, NormKind.RMS):
        k = len(settings["normalized_shape"])
        lead, channels = shape[:len(shape) - k], shape[-1]
        grouped = x.reshape(int(np.prod(lead, dtype=np.int64)), -1)
        channel = np.broadcast_to(np.arange(grouped.shape[1]) % channels, grouped.shape)
        labels = GroupLabels(lead)
        over = (f"its {channels} features" if k == 1
                else f"its last {k} dims {tuple(shape[-k:])}")
        return grouped, channel, labels, "token" if k == 1 and len(lead) >= 1 else "position", \
            over
    if kind == NormKind.BATCH:
        moved = np.moveaxis(x, 1, 0)
        grouped = moved.reshape(shape[1], -1)
        channel = np.broadcast_to(np.arange(shape[1])[:, None], grouped.shape)
        over = "the batch" + (f" and its {int(np.prod(shape[2:]))} positions"
                              if len(shape) > 2 else "")
        return grouped, channel, GroupLabels((shape[1],)), "channel", over
    if kind == NormKind.GROUP:
        n, c = shape[0], shape[1]
        groups = settings["num_groups"]
        per = c // groups
        grouped = x.reshape(n * groups, -1)
        spatial = grouped.shape[1] // per
        channel = (np.arange(n * groups)[:, None] % groups) * per \
            + np.arange(grouped.shape[1])[None, :] // spatial
        labels = GroupLabels((n, groups))
        return grouped, channel, labels, "channel group", f"{per} channels and their positions"
    # instance_norm: one group per (sample, channel), or per channel without a batch dim
    batched = settings.get("batched", True)
    lead = shape[:2] if batched else shape[:1]
    grouped = x.reshape(int(np.prod(lead)), -1)
    c = shape[1] if batched else shape[0]
    channel = np.broadcast_to((np.arange(grouped.shape[0]) % c)[:, None], grouped.shape)
    return grouped, channel, GroupLabels(lead), "channel of a sample", "its positions"


def _z(grouped: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """μ, σ (biased) per group and every value's distance from its group's μ in σ (0 in a group
    with σ = 0, which has no outlier)."""
    # each group divided by its largest finite magnitude first: squaring 1e160 overflowed,
    # σ came out inf and every z 0 (a real outlier at 9.95 σ was reported as none)
    finite = np.where(np.isfinite(grouped), np.abs(grouped), 0.0)
    scale = finite.max(axis=1, initial=0.0)
    scale = np.where(scale > 0, scale, 1.0)
    scaled = grouped / scale[:, None]
    mean_s = scaled.mean(axis=1)
    std_s = np.sqrt(np.mean((scaled - mean_s[:, None]) ** 2, axis=1))  # two-pass
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(std_s[:, None] > 0, (scaled - mean_s[:, None]) / std_s[:, None], 0.0)
    return mean_s * scale, std_s * scale, z


def layer_view(layer: CapturedLayer, arrays: dict[str, np.ndarray],
               sigmas: float = DEFAULT_SIGMAS) -> LayerView:
    """What a captured layer's input looks like to the layer, and what the layer does to its
    outliers.

    A value is an outlier when it lies more than ``sigmas`` standard deviations from the mean
    of its group (the values that share one μ and σ in this layer; σ biased, as the norms use).
    The outlier table has one row per channel holding any: how many of its values are
    outliers, the largest |z| among them and where, the input x and the output y there, and
    y's own distance from its group's output mean (in the output's σ); γ and β of the channel
    where the layer has them. Rows: largest |z| first, at most :data:`MAX_OUTLIER_ROWS`.
    """
    if not sigmas > 0:
        raise ValueError(f"the outlier threshold must be above 0 σ, got {sigmas}")
    x = np.asarray(arrays[layer.arrays["input"]], np.float64)
    y = np.asarray(arrays[layer.arrays["output"]], np.float64)
    if x.size == 0:
        raise ValueError(f"{layer_key(layer)}: the input is empty, shape {list(x.shape)}")
    grouped, channel, labels, word, over = _grouped(x, layer.kind, layer.settings)
    grouped_y, *_ = _grouped(y, layer.kind, layer.settings)
    mean, std, z = _z(grouped)
    _, _, z_out = _z(grouped_y)
    flags = np.abs(z) > sigmas
    weight = arrays.get(layer.arrays.get("weight", ""))
    bias = arrays.get(layer.arrays.get("bias", ""))
    gamma = None if weight is None else np.asarray(weight, np.float64).reshape(-1)
    beta = None if bias is None else np.asarray(bias, np.float64).reshape(-1)
    # per element: γ and β have the normalized dims' shape for LayerNorm and RMSNorm (indexed
    # by the element's place in its group), one value per channel otherwise
    by_member = layer.kind in (NormKind.LAYER, NormKind.RMS)
    # flat copies made once: a BatchNorm's groups are a strided view of its input, whose ravel()
    # copies the whole tensor, and once per outlier channel that cost minutes
    flat_x, flat_y, flat_zs, flat_z_out = (a.ravel() for a in (grouped, grouped_y, z, z_out))
    at = np.flatnonzero(flags.ravel())
    flat_z, flat_channel = np.abs(flat_zs[at]), channel.ravel()[at]
    order = np.lexsort((-flat_z, flat_channel))  # by channel, largest |z| first within one
    channels, first, counts = np.unique(flat_channel[order], return_index=True,
                                        return_counts=True)
    totals = np.bincount(channel.ravel(), minlength=int(channels.max(initial=-1)) + 1)
    rows = []
    for c, best, count in zip(channels.tolist(), at[order][first].tolist(), counts.tolist(),
                              strict=True):
        member = best % grouped.shape[1]
        rows.append({
            "channel": c, "outlier values": count, "of": int(totals[c]),
            "largest |z| (σ)": float(abs(flat_zs[best])),
            f"at {word}": labels[best // grouped.shape[1]],
            "input x": float(flat_x[best]), "output y": float(flat_y[best]),
            "y's |z| after (σ)": float(abs(flat_z_out[best])),
            "γ": None if gamma is None else float(gamma[member if by_member else c]),
            "β": None if beta is None else float(beta[member if by_member else c])})
    # largest |z| first, ties in channel order (a stable sort); built once, as shown (a capture
    # of 2,048 tiny layers spent half its time sorting and dropping columns of empty tables)
    rows.sort(key=lambda row: -row["largest |z| (σ)"])
    columns = ["channel", "outlier values", "of", "largest |z| (σ)", f"at {word}", "input x",
               "output y", "y's |z| after (σ)"] + ["γ"] * (gamma is not None) \
        + ["β"] * (beta is not None)
    outliers = pd.DataFrame(rows[:MAX_OUTLIER_ROWS], columns=columns)
    sx, sy, so = _scatter(flat_x, flat_y, flags.ravel())
    view = LayerView(
        key=layer_key(layer), kind=layer.kind, module=str(layer.settings.get("module", "")),
        shape=tuple(x.shape), group_word=word, over=over, sigmas=float(sigmas), mean=mean,
        std=std, group_labels=labels, members=int(grouped.shape[1]),
        max_abs_in=float(np.abs(x).max()), max_abs_out=float(np.abs(y).max()),
        outliers=outliers, outlier_values=int(np.count_nonzero(flags)), scatter_x=sx,
        scatter_y=sy, scatter_outlier=so, outlier_note=_outlier_note(layer.kind, word))
    view.notes.extend(_notes(layer, view))
    return view


def _outlier_note(kind: str, word: str) -> str:
    """What a layer of this kind can do to a value's distance from its group's mean, in σ."""
    table = ("Per channel: how many of its values are outliers; the largest |z| = |x − μ|/σ "
             "among them and where; the input x there, the layer's output y, and y's own |z| "
             f"among its {word}'s outputs. ")
    if kind in (NormKind.BATCH, NormKind.INSTANCE):
        # one γ and β per channel, and a group here lies within one channel
        return table + (f"Within one {word} this layer multiplies every value by the same "
                        "number and adds the same number, so y's |z| equals x's (or is 0 where "
                        "γ = 0): it leaves an outlier exactly as many σ out as it came in.")
    return table + ("Normalizing alone keeps every value's |z| (x̂ is x shifted and scaled by "
                    f"one μ and σ per {word}); γ and β, which differ from channel to channel, "
                    "are what can bring an outlier in (a γ near 0 shrinks its channel's "
                    "spread) or push it further out.")


def _scatter(x: np.ndarray, y: np.ndarray, flags: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All values if few, else an evenly spaced sample plus every outlier (up to a cap)."""
    if x.size <= SCATTER_POINTS:
        keep = np.arange(x.size)
    else:
        sample = np.linspace(0, x.size - 1, SCATTER_POINTS).astype(np.int64)
        outliers = np.flatnonzero(flags)
        if outliers.size > MAX_OUTLIER_POINTS:
            outliers = outliers[np.linspace(0, outliers.size - 1,
                                            MAX_OUTLIER_POINTS).astype(np.int64)]
        keep = np.union1d(sample, outliers)
    return x[keep], y[keep], flags[keep]


def _notes(layer: CapturedLayer, view: LayerView) -> list[str]:
    notes = []
    bound = max_sigmas(view.members)
    if view.sigmas >= bound and view.members == 1:
        notes.append(
            f"Each {view.group_word} here has a single value, which is its own mean: no "
            f"threshold, {view.sigmas:g} σ or any other, can find an outlier in this layer.")
    elif view.sigmas >= bound:
        notes.append(
            f"Each {view.group_word} here has {view.members} values, so none can lie more than "
            f"√{view.members - 1} ≈ {bound:.3g} σ from its mean: a threshold of "
            f"{view.sigmas:g} σ cannot find an outlier in this layer.")
    settings = layer.settings
    if layer.kind in (NormKind.BATCH, NormKind.INSTANCE) and not settings.get("use_batch_stats"):
        notes.append(
            f"This {layer.kind} ran in evaluation mode: it normalized with its "
            "running statistics, not with the per-channel μ and σ shown here, which describe "
            "this batch.")
    if layer.kind == NormKind.RMS:
        notes.append("RMSNorm divides by the root mean square and does not subtract μ; the μ "
                     "and σ here describe its input.")
    return notes


def capture_overview(model_file: ModelFile, sigmas: float = DEFAULT_SIGMAS) -> pd.DataFrame:
    """One row per captured layer: kind, input shape, what one group is and how many there are,
    the range of the groups' μ and σ, max |x| and |y|, and the channels holding outliers."""
    rows = []
    for layer in model_file.layers:
        view = layer_view(layer, model_file.arrays, sigmas)
        channels = view.outliers["channel"].tolist()
        rows.append({
            "layer": view.key, "kind": layer.kind, "module": view.module,
            "input shape": str(view.shape),
            "groups": f"{len(view.mean)} × {view.group_word}",
            "μ min": float(view.mean.min()), "μ max": float(view.mean.max()),
            "σ min": float(view.std.min()), "σ max": float(view.std.max()),
            "max |x|": view.max_abs_in, "max |y|": view.max_abs_out,
            "outlier channels": ", ".join(map(str, channels[:8]))
            + (f" (+{len(channels) - 8})" if len(channels) > 8 else "")})
    return pd.DataFrame(rows)


# --- The Explorer's settings for a captured layer ---------------------------------------------


@dataclass(frozen=True)
class ExplorerSetup:
    """How the Explorer shows a captured layer's input.

    Attributes:
        norm: the Explorer's name for the norm.
        layout: "NC", "NLC" or "NCHW".
        order: the input's axes in the Explorer's order (after ``add_batch_dim``).
        add_batch_dim: the input has no batch dim (one vector, an unbatched InstanceNorm).
        dims: LayerNorm/RMSNorm: trailing dims normalized over.
        groups: GroupNorm's groups.
        eps: the ε the Explorer starts at: the layer's, or the nearest it offers.
        gamma, beta: per feature (the Explorer's table), or None for 1 and 0.
        notes: what the Explorer cannot set as the layer had it.
    """

    norm: str
    layout: str
    order: tuple[int, ...]
    add_batch_dim: bool = False
    dims: int = 1
    groups: int = 1
    eps: float = 1e-5
    gamma: tuple[float, ...] | None = None
    beta: tuple[float, ...] | None = None
    notes: tuple[str, ...] = ()


def _float_eps(dtype: str) -> float:
    """torch's default ε of ``F.rms_norm`` (eps=None): the machine epsilon of the input's
    dtype (float32 for a half-precision capture, which is read as float32)."""
    return float(np.finfo(np.float64 if dtype == "float64" else np.float32).eps)


def explorer_setup(layer: CapturedLayer, shape: tuple[int, ...],
                   weight: np.ndarray | None = None, bias: np.ndarray | None = None
                   ) -> ExplorerSetup:
    """The Explorer's settings for a captured layer whose input has ``shape``: the norm, the
    layout and order of axes that put its channels where the Explorer's norm looks for them,
    ε, and γ and β per feature. Raises ValueError for an input the Explorer cannot show
    (more than 4 dims once it has a batch dim)."""
    settings, kind = layer.settings, layer.kind
    notes = []
    add_batch = len(shape) == 1 or (kind == NormKind.INSTANCE and not settings.get("batched", True))
    ndim = len(shape) + add_batch
    if ndim > 4:
        raise ValueError(f"{layer_key(layer)}'s input has shape {list(shape)}: the Explorer "
                         "shows tensors of up to 4 dims")
    layouts = {2: Layout.NC, 3: Layout.NLC, 4: Layout.NCHW}
    trailing = kind in (NormKind.LAYER, NormKind.RMS)
    # Channels first in the model (N, C, L) are last in the Explorer's NLC layout.
    order = tuple(range(ndim)) if trailing or ndim != 3 else (0, 2, 1)
    dims = len(settings.get("normalized_shape", [1]))
    if trailing and dims > ndim - 1:
        raise ValueError(f"{layer_key(layer)} normalizes over all {dims} dims of its input; "
                         "the Explorer keeps the first dim as the batch")
    raw_eps = settings.get("eps")
    if raw_eps is None:
        raw_eps = _float_eps(layer.dtype)
        notes.append(f"The layer's ε is torch's default for RMSNorm, the machine epsilon of "
                     f"its dtype: {raw_eps:.3g}.")
    eps = _nearest_eps(float(raw_eps))
    if eps != raw_eps:
        notes.append(f"The layer's ε = {raw_eps:.3g}; the Explorer's ε offers 0 and "
                     f"powers of ten, so it starts at the nearest, {eps:g}.")
    gamma = None if weight is None else np.asarray(weight, np.float64)
    beta = None if bias is None else np.asarray(bias, np.float64)
    if trailing and dims > 1 and (gamma is not None or beta is not None):
        notes.append(f"γ and β have shape {list((gamma if gamma is not None else beta).shape)}; "
                     "the Explorer takes one γ and β per feature, so they start at 1 and 0.")
        gamma = beta = None
    if kind in (NormKind.BATCH, NormKind.INSTANCE) and not settings.get("use_batch_stats", True):
        notes.append(f"The layer normalized with its running statistics (evaluation mode); the "
                     f"Explorer's {kind} uses this batch's own statistics, so its "
                     "output differs from the layer's. The Model inspector shows the layer's "
                     "own output.")
    if kind == NormKind.RMS and beta is not None:
        beta = None
    if gamma is not None or beta is not None:
        size = (gamma if gamma is not None else beta).size
        gamma = np.ones(size) if gamma is None else gamma
        beta = np.zeros(size) if beta is None else beta
    return ExplorerSetup(
        norm=kind, layout=layouts[ndim], order=order, add_batch_dim=add_batch,
        dims=dims if trailing else 1, groups=int(settings.get("num_groups", 1)), eps=eps,
        gamma=None if gamma is None else tuple(gamma.ravel().tolist()),
        beta=None if beta is None else tuple(beta.ravel().tolist()), notes=tuple(notes))


def _nearest_eps(eps: float) -> float:
    """The Explorer's ε nearest to ``eps`` on a log scale (0 for 0)."""
    if eps in EPSILONS:
        return eps
    if eps <= 0:
        return 0.0
    positive = [e for e in EPSILONS if e > 0]
    return min(positive, key=lambda e: (abs(math.log10(e) - math.log10(eps)), e))


def explorer_batch(values: np.ndarray, setup: ExplorerSetup) -> np.ndarray:
    """A captured input arranged as the Explorer's layout wants it (see :func:`explorer_setup`)."""
    if setup.add_batch_dim:
        values = values[None]
    return np.ascontiguousarray(np.transpose(values, setup.order))


def capture_layers(data: bytes, max_elements: int = MAX_ELEMENTS
                           ) -> tuple[CapturedLayer, ...] | None:
    """The layers of a capture file, or None for any other file (a capture whose description is
    damaged raises TensorFileError)."""
    if not (len(data) > 8 and data[8:9] == b"{"):
        return None
    try:
        metadata = safetensors_metadata(data, max_elements=max_elements)
    except TensorFileError:
        return None
    if metadata.get("lnviz") != CAPTURE_FORMAT:
        return None
    return tuple(read_capture(data, max_elements=max_elements))
