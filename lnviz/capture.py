"""Capture what every normalization layer of a model does in one forward pass.

::

    cap = lnviz.capture(model, *args, **kwargs)  # runs model(*args, **kwargs) once, under no_grad
    cap.output          # what the model returned
    cap.records         # list[NormRecord], in the order the layers ran
    cap.save(path)      # .safetensors that load_arrays and the app's uploader open

How it works: a forward pre-hook and a forward hook are put on every normalization module of
the model (found with ``model.named_modules()``). The pre-hook copies what the module is about to
use: its input, γ and β, and for BatchNorm and InstanceNorm the running statistics and the
training flag *before* the call (the ones an evaluation-mode layer normalizes with). The hook
copies the output, before any later in-place operation (``ReLU(inplace=True)``) can change it.
The hooks observe and never change anything; they are removed when the forward ends, also when
it raises. A module called twice gives two records, ``call`` 0 and 1.

Recognised modules: torch's ``LayerNorm``, ``RMSNorm``, ``BatchNorm1d/2d/3d`` (and every other
subclass of its base, ``SyncBatchNorm`` and the lazy ones included), ``GroupNorm`` and
``InstanceNorm1d/2d/3d``, subclasses of them, and a model's own classes in the common shape: a
class whose name ends in ``LayerNorm`` or ``RMSNorm`` with a ``weight`` tensor and an ``eps`` or
``variance_epsilon`` number (HF's ``LlamaRMSNorm``, ``MistralRMSNorm``, ...), taken to compute
the textbook formula over the trailing ``weight.shape`` dims. Calls that do not fit (an input
whose trailing dims are not ``weight.shape``, an output that is not one tensor of the input's
shape, an RMSNorm with a bias) are listed in ``cap.skipped`` with the reason, not recorded.

What a replay can and cannot show:

- ``record.replay()`` recomputes the layer with :mod:`lnviz.norms` from the recorded input and
  the module's settings. For float32 and float64 models it equals the layer's output to that
  precision. For float16/bfloat16 ones lnviz rounds once, from float32, where a model's own
  class may round twice (HF's RMSNorm casts x̂ back to the input dtype before multiplying by
  γ): expect differences of the input dtype's rounding.
- A model's own class that departs from the textbook formula replays differently, which is what
  a replay is for: Gemma's RMSNorm multiplies by ``1 + weight`` and T5's ``T5LayerNorm`` is an
  RMSNorm under a LayerNorm name; both are recorded as their names say, and their replays
  differ from their outputs.
- torch's fused "fast path" for ``nn.TransformerEncoder``/``nn.MultiheadAttention`` in
  evaluation mode computes a whole layer in one kernel and never calls its norm modules. During
  a capture the fast path is off (``torch.backends.mha.set_fastpath_enabled(False)``, restored
  afterwards; process-wide for that time), so the layers run their reference code and every
  norm is seen. ``cap.output`` then equals a plain forward to float rounding, except where the
  fast path changes the result itself: with a ``src_key_padding_mask`` it returns 0 at padded
  positions, where the reference path computes values.
- Functional calls (``F.layer_norm`` inside a forward that is not a norm module's own) and
  TorchScript modules are not seen.
"""

from __future__ import annotations

import json
import math
import os
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, BinaryIO

import torch
from torch import nn

from lnviz.data.files import (
    TensorFileError,
    _read_safetensors_header,
    _read_source,
    load_arrays,
)
from lnviz.limits import MAX_ELEMENTS
from lnviz.norms import NormResult, batch_norm, group_norm, instance_norm, layer_norm, rms_norm
from lnviz.terms import NormKind

__all__ = [
    "CAPTURE_FORMAT",
    "KINDS",
    "Capture",
    "CapturedLayer",
    "NormRecord",
    "capture",
    "load_capture",
    "norm_kind",
    "read_capture",
]

#: The kinds of normalization a record can have.
KINDS = tuple(NormKind)
#: The value of the ``"lnviz"`` metadata key in a file written by :meth:`Capture.save`; its
#: ``"lnviz.version"`` is 2.
CAPTURE_FORMAT = "capture"
_VERSION = "2"
#: How each version of the format spells a record's kind: version 1 by the function's name
#: ("layer_norm"), version 2 as :class:`lnviz.terms.NormKind` does ("LayerNorm"). Both are read.
_KINDS_BY_VERSION = {"1": {kind.function: kind for kind in NormKind},
                     "2": {kind.value: kind for kind in NormKind}}
#: The tensors a record saves, in this order, each where it is not None.
_ROLES = ("input", "output", "weight", "bias", "running_mean", "running_var")

_Source = bytes | bytearray | memoryview | str | os.PathLike[str] | BinaryIO
#: What takes a norm module's place under :func:`patch`: its input in, its output out.
Replacement = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True, eq=False)
class NormRecord:
    """One call of one normalization module: what went in, what came out, and the settings to
    compute it again.

    Attributes:
        name: the module's path, as ``model.named_modules()`` gives it ("" for the model itself).
        call: 0 for the module's first call in the forward, 1 for its second, ...
        kind: one of :data:`KINDS`, the :class:`lnviz.terms.NormKind` ("LayerNorm", …); any
            spelling :meth:`~lnviz.terms.NormKind.parse` reads is taken ("layer_norm").
        input, output: copies of the tensor the module received and of the one it returned.
        weight, bias: copies of γ and β at the call (None where the module has none).
        settings: JSON-ready values: ``module`` (the class's name), ``eps`` and, by kind,
            ``normalized_shape`` (LayerNorm, RMSNorm), ``num_groups`` (GroupNorm), or
            ``training`` (the module's flag), ``use_batch_stats`` (whether the batch's own
            statistics normalized it, for BatchNorm and InstanceNorm), ``momentum``,
            ``track_running_stats``, ``num_batches_tracked`` (before the call; BatchNorm) and
            ``batched`` (False for an InstanceNorm input without its batch dim).
        running_mean, running_var: copies of the running statistics as they were before the
            call (BatchNorm and InstanceNorm with ``track_running_stats``; else None).
    """

    name: str
    call: int
    kind: NormKind
    input: torch.Tensor
    output: torch.Tensor
    weight: torch.Tensor | None
    bias: torch.Tensor | None
    settings: Mapping[str, Any] = field(default_factory=dict)
    running_mean: torch.Tensor | None = None
    running_var: torch.Tensor | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", NormKind.parse(self.kind))

    def replay(self, impl: str = "scratch") -> NormResult:
        """The layer computed again by :mod:`lnviz.norms` from :attr:`input` and the module's
        settings, with every intermediate (μ, σ², 1/√(σ² + ε), x̂). Nothing recorded changes:
        running statistics are passed as copies."""
        s = self.settings
        x = self.input
        if self.kind == NormKind.LAYER:
            return layer_norm(x, s["normalized_shape"], self.weight, self.bias, s["eps"],
                              impl=impl)
        if self.kind == NormKind.RMS:
            return rms_norm(x, s["normalized_shape"], self.weight, s["eps"], impl=impl)
        if self.kind == NormKind.GROUP:
            return group_norm(x, s["num_groups"], self.weight, self.bias, s["eps"], impl=impl)
        batch_stats = s["use_batch_stats"]
        # With the batch's statistics the running ones do not enter the output: none are passed,
        # so that nothing is updated; otherwise copies of the ones the layer used.
        mean = None if batch_stats else _copy(self.running_mean)
        var = None if batch_stats else _copy(self.running_var)
        if self.kind == NormKind.BATCH:
            return batch_norm(x, mean, var, self.weight, self.bias, batch_stats, s["momentum"],
                              s["eps"], impl=impl)
        if self.kind == NormKind.INSTANCE:
            if s["batched"]:
                return instance_norm(x, mean, var, self.weight, self.bias, batch_stats,
                                     _momentum(s["momentum"]), s["eps"], impl=impl)
            result = instance_norm(x.unsqueeze(0), mean, var, self.weight, self.bias, batch_stats,
                                   _momentum(s["momentum"]), s["eps"], impl=impl)
            return _without_batch_dim(result)
        raise ValueError(f"unknown kind {self.kind!r}; expected one of {', '.join(KINDS)}")


@dataclass(frozen=True, eq=False)
class Capture:
    """What :func:`capture` returns: the model's output, the records in call order, and the
    norm-like calls that could not be recorded, as ``(module name, reason)``."""

    output: Any
    records: list[NormRecord]
    skipped: list[tuple[str, str]] = field(default_factory=list)

    def record(self, name: str) -> NormRecord:
        """The (first) record of the module named ``name``; a KeyError naming the first and
        last records' names where there is none."""
        for record in self.records:
            if record.name == name:
                return record
        known = ("none" if not self.records else
                 ", ".join(repr(r.name) for r in self.records[:2])
                 + (f", …, {self.records[-1].name!r}" if len(self.records) > 2 else ""))
        raise KeyError(f"no norm named {name!r} in this run; its {len(self.records)} are "
                       f"{known}")

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the records to a .safetensors file that :func:`lnviz.load_arrays` opens.

        Each record's tensors are named ``"<name>[<call>].<role>"`` (``"layers.0.norm1[0].input"``;
        the model itself is ``"<model>"``), roles among input, output, weight, bias,
        running_mean and running_var. The metadata holds ``"lnviz": "capture"``,
        ``"lnviz.version": "2"`` and ``"lnviz.records"``, a JSON list with each record's name,
        call, kind, settings, dtype and the names of its tensors; :func:`read_capture` reads it
        back. Tensors keep their dtype (bfloat16 stays bfloat16 in the file).
        """
        from safetensors.torch import save_file

        tensors, metadata = self._serialized()
        save_file(tensors, os.fspath(path), metadata=metadata)

    def to_bytes(self) -> bytes:
        """The bytes :meth:`save` writes, for a download button."""
        from safetensors.torch import save

        tensors, metadata = self._serialized()
        return save(tensors, metadata=metadata)

    def _serialized(self) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
        tensors: dict[str, torch.Tensor] = {}
        described = []
        for record in self.records:
            prefix = f"{record.name or '<model>'}[{record.call}]"
            arrays = {}
            for role in _ROLES:
                value = getattr(record, role)
                if value is None:
                    continue
                key = f"{prefix}.{role}"
                # safetensors refuses views and shared memory: each gets its own contiguous copy.
                tensors[key] = value.detach().to("cpu", copy=True).contiguous()
                arrays[role] = key
            described.append({"name": record.name, "call": record.call, "kind": record.kind,
                              "dtype": str(record.input.dtype).removeprefix("torch."),
                              "settings": dict(record.settings), "arrays": arrays})
        metadata = {"lnviz": CAPTURE_FORMAT, "lnviz.version": _VERSION,
                    "lnviz.records": json.dumps(described)}
        return tensors, metadata


def norm_kind(module: nn.Module) -> NormKind | None:
    """The kind of normalization `module` is (one of :data:`KINDS`), or None for any other
    module: torch's norm modules and their subclasses, and a model's own ``…LayerNorm`` and
    ``…RMSNorm`` classes with a ``weight`` tensor and an ``eps`` or ``variance_epsilon``."""
    if isinstance(module, nn.LayerNorm):
        return NormKind.LAYER
    if isinstance(module, nn.RMSNorm):
        return NormKind.RMS
    if isinstance(module, nn.modules.batchnorm._BatchNorm):
        return NormKind.BATCH
    if isinstance(module, nn.GroupNorm):
        return NormKind.GROUP
    if isinstance(module, nn.modules.instancenorm._InstanceNorm):
        return NormKind.INSTANCE
    name = type(module).__name__
    if not name.endswith((NormKind.LAYER, NormKind.RMS)):
        return None
    if not isinstance(getattr(module, "weight", None), torch.Tensor) or _own_eps(module) is None:
        return None
    return NormKind.RMS if name.endswith(NormKind.RMS) else NormKind.LAYER


def capture(model: nn.Module, *args: Any, **kwargs: Any) -> Capture:
    """Run ``model(*args, **kwargs)`` once under ``torch.no_grad()`` and record the input,
    output, γ, β and settings of every normalization layer it calls, in call order.

    The model is left as a plain forward leaves it: no hook remains (also when the forward
    raises) and BatchNorm's running statistics are updated by the forward alone, once. See the
    module's docstring for what is recognised and for torch's transformer fast path, which is
    off during the capture.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    targets = [(name, module, kind) for name, module in model.named_modules()
               if (kind := norm_kind(module)) is not None]
    # One slot per call, taken when the call starts, so that records keep the order in which
    # the layers were called (a norm module inside another finishes first).
    slots: list[NormRecord | None] = []
    skipped: list[tuple[str, str]] = []
    calls: dict[int, int] = {}
    # the snapshots of the calls under way, per module (a stack, should a module call itself)
    under_way: dict[int, list[tuple[int, int, dict[str, Any]]]] = {}
    # The hooks sit on the modules, so they also see other threads' calls of a shared model
    # (another learner's run): only the calls made in this capture's own context count.
    mine = object()

    def before(module: nn.Module, args: tuple, kwargs: dict, kind: NormKind) -> None:
        if _CAPTURING.get() is not mine:
            return
        call = calls.get(id(module), 0)
        calls[id(module)] = call + 1
        slots.append(None)
        snapshot = _snapshot(module, kind, args, kwargs)
        under_way.setdefault(id(module), []).append((len(slots) - 1, call, snapshot))

    def after(module: nn.Module, output: Any, name: str, kind: NormKind) -> None:
        if _CAPTURING.get() is not mine:
            return
        slot, call, snapshot = under_way[id(module)].pop()
        problem = _problem(kind, snapshot, output)
        if problem:
            skipped.append((name, problem))
            return
        slots[slot] = NormRecord(name=name, call=call, kind=kind,
                                 output=output.detach().clone(), **snapshot)

    handles = []
    try:
        for name, module, kind in targets:
            # The pre-hook runs after the model's own pre-hooks (which may set the weight or
            # move the input), the hook before the model's own hooks (which may change the
            # output): both see what the module itself sees and returns.
            handles.append(module.register_forward_pre_hook(
                lambda m, a, k, kind=kind: before(m, a, k, kind), with_kwargs=True))
            handles.append(module.register_forward_hook(
                lambda m, a, k, out, name=name, kind=kind: after(m, out, name, kind),
                with_kwargs=True, prepend=True))
        token = _CAPTURING.set(mine)
        try:
            with torch.no_grad(), _transformer_fast_path_off():
                output = model(*args, **kwargs)
        finally:
            _CAPTURING.reset(token)
    finally:
        for handle in handles:
            handle.remove()
    return Capture(output, [record for record in slots if record is not None], skipped)


@contextmanager
def patch(model: nn.Module, replacements: Mapping[str, Replacement]) -> Iterator[nn.Module]:
    """Within the block, each module named in ``replacements`` (its path in
    ``model.named_modules()``) returns ``fn(its input)`` instead of computing itself::

        with lnviz.patch(model, {"model.layers.3.input_layernorm": lambda x: x}):
            out = model(**inputs)

    Works on any torch model, transformers' included. Only the module's own computation is
    replaced: its hooks still run (a :func:`capture` inside the block records ``fn``'s output
    beside the module's settings), and ``fn`` must return a tensor of its input's shape (a
    ``ValueError`` otherwise). A name the model does not have is a ``KeyError`` naming the
    model's norm modules.

    The replacement holds for the code of this block alone: another thread (another learner's
    session) running the same model meanwhile gets the model's own outputs. While any block
    patches a module, its ``forward`` is a small dispatcher that looks the replacement up in a
    context variable; after the last such block ends, also when it raises, the module is exactly
    as before. As in :func:`capture`, torch's transformer fast path, which computes a whole
    ``nn.TransformerEncoderLayer`` without calling its norm modules, is off in the block."""
    if not replacements:  # nothing to replace: the model as it is
        yield model
        return
    modules = dict(model.named_modules())
    for name, fn in replacements.items():
        if name not in modules:
            norms = [n for n, m in modules.items() if norm_kind(m) is not None]
            shown = ", ".join(norms[:6]) + (f", … ({len(norms)} in all)" if len(norms) > 6
                                            else "")
            raise KeyError(f"the model has no module named {name!r}; its norm modules: "
                           f"{shown or 'none'}")
        if not callable(fn):
            raise TypeError(f"the replacement for {name!r} must be callable, got "
                            f"{type(fn).__name__}")
    token = _PATCHED.set({**_PATCHED.get(), **{id(modules[name]): (name, fn)
                                               for name, fn in replacements.items()}})
    installed: list[nn.Module] = []
    try:
        for name in replacements:
            _install(modules[name])
            installed.append(modules[name])
        with _transformer_fast_path_off():
            yield model
    finally:
        try:
            _PATCHED.reset(token)
        finally:  # the modules get their forward back whatever resetting the context does
            for module in reversed(installed):
                _uninstall(module)


#: The replacements in force for the code running now, by the id of the module they replace:
#: (the module's name, the function). A context variable: each thread (each Streamlit session)
#: sees its own, so one learner's patch never reaches another's forward.
_PATCHED: ContextVar[Mapping[int, tuple[str, Replacement]]] = ContextVar(
    "lnviz_patched", default=MappingProxyType({}))
#: The capture whose hooks record the code running now (each capture's own token).
_CAPTURING: ContextVar[object | None] = ContextVar("lnviz_capturing", default=None)
#: While a capture or patch is under way: the fast-path setting to restore, then one entry per
#: block (:func:`_transformer_fast_path_off`).
_FAST_PATH_OFF: list[bool | None] = []
_FAST_PATH_LOCK = threading.Lock()
#: The modules whose forward is the dispatcher now: id -> [module, blocks patching it, whether
#: it had a forward of its own in its __dict__, and that forward].
_DISPATCHING: dict[int, list[Any]] = {}
_DISPATCHING_LOCK = threading.Lock()


def _install(module: nn.Module) -> None:
    """Put the dispatcher in ``module``'s forward (once, however many blocks patch it)."""
    with _DISPATCHING_LOCK:
        entry = _DISPATCHING.get(id(module))
        if entry is not None:
            entry[1] += 1
            return
        had_own = "forward" in module.__dict__
        previous = module.__dict__.get("forward")
        # a method bound to the module: a deep copy of the module rebinds it to the copy, which
        # then computes as itself (no replacement is ever registered for the copy)
        module.forward = types.MethodType(_dispatching_forward, module)
        _DISPATCHING[id(module)] = [module, 1, had_own, previous]


def _uninstall(module: nn.Module) -> None:
    """Give ``module`` its forward back once no block patches it."""
    with _DISPATCHING_LOCK:
        entry = _DISPATCHING[id(module)]
        entry[1] -= 1
        if entry[1]:
            return
        del _DISPATCHING[id(module)]
        _, _, had_own, previous = entry
        if had_own:
            module.forward = previous
        else:
            del module.forward


def _dispatching_forward(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
    """A patched module's forward: the replacement in force for the running code, if any, of
    the module's input (its first argument, positional or not), checked for its shape; else the
    module's own forward (one it had in its __dict__ before the patch, or its class's)."""
    replacement = _PATCHED.get().get(id(self))
    if replacement is None:
        entry = _DISPATCHING.get(id(self))
        own = entry[3] if entry is not None and entry[2] else type(self).forward.__get__(self)
        return own(*args, **kwargs)
    name, fn = replacement
    input = args[0] if args else next(iter(kwargs.values()))
    output = fn(input)
    if not isinstance(output, torch.Tensor) or output.shape != input.shape:
        got = (f"shape {tuple(output.shape)}" if isinstance(output, torch.Tensor)
               else type(output).__name__)
        raise ValueError(f"the replacement of {name} gave {got}, not shape "
                         f"{tuple(input.shape)}")
    return output


@dataclass(frozen=True)
class CapturedLayer:
    """One record as a capture file describes it (no tensors): name, call, kind, settings, the
    input's dtype (``"float32"``, ``"bfloat16"``, ...) and the names of its tensors in the file
    by role (input, output, weight, bias, running_mean, running_var), keys of
    :func:`lnviz.load_arrays`' result."""

    name: str
    call: int
    kind: NormKind
    settings: dict[str, Any]
    dtype: str
    arrays: dict[str, str]


def read_capture(source: _Source, *, max_elements: int = MAX_ELEMENTS) -> list[CapturedLayer]:
    """The layers described in a capture file (:meth:`Capture.save`), in call order, read from
    its header alone: no tensor is built. Raises TensorFileError for a file that is not a
    .safetensors file, or not a capture (a plain checkpoint), or whose description is damaged.
    """
    data = _read_source(source, max_elements * 8 + 1024 * 1024)
    return _read_layers(data, max_elements)


def load_capture(source: _Source, *, max_elements: int = MAX_ELEMENTS) -> list[NormRecord]:
    """The records of a capture file, tensors included, so that ``replay()`` works on them.

    Tensors come back through :func:`lnviz.load_arrays`: float16 and bfloat16 as float32, so a
    half-precision model's records replay in float32.
    """
    data = _read_source(source, max_elements * 8 + 1024 * 1024)
    layers = _read_layers(data, max_elements)
    arrays = load_arrays(data, max_elements=max_elements, keep_float64=True)
    tensors = {role: None for role in _ROLES}
    records = []
    for layer in layers:
        found = dict(tensors) | {role: torch.from_numpy(arrays[key])
                                 for role, key in layer.arrays.items()}
        records.append(NormRecord(name=layer.name, call=layer.call, kind=layer.kind,
                                  settings=layer.settings, **found))
    return records


# ---------------------------------------------------------------------------------------------


def _snapshot(module: nn.Module, kind: NormKind, args: tuple, kwargs: dict) -> dict[str, Any]:
    """What the module is about to use, copied before the call changes any of it."""
    x = args[0] if args else next(iter(kwargs.values()), None)
    weight = getattr(module, "weight", None)
    bias = getattr(module, "bias", None)
    settings: dict[str, Any] = {"module": type(module).__name__}
    running_mean = running_var = None
    if kind in (NormKind.LAYER, NormKind.RMS):
        if isinstance(module, nn.LayerNorm | nn.RMSNorm):
            shape = list(module.normalized_shape)
            eps = module.eps
        else:
            shape = list(weight.shape)
            eps = _own_eps(module)
        settings |= {"normalized_shape": shape, "eps": None if eps is None else float(eps)}
    elif kind == NormKind.GROUP:
        settings |= {"num_groups": module.num_groups, "eps": float(module.eps)}
    else:  # batch_norm, instance_norm
        running_mean, running_var = module.running_mean, module.running_var
        if kind == NormKind.BATCH:
            # nn.BatchNorm uses the batch's statistics in training, and in evaluation too when it
            # keeps no running ones (track_running_stats=False).
            use_batch = module.training or (running_mean is None and running_var is None)
        else:
            use_batch = module.training or not module.track_running_stats
        tracked = getattr(module, "num_batches_tracked", None)
        settings |= {
            "eps": float(module.eps),
            "momentum": module.momentum,
            "training": module.training,
            "use_batch_stats": use_batch,
            "track_running_stats": module.track_running_stats,
        }
        if kind == NormKind.BATCH:
            settings["num_batches_tracked"] = None if tracked is None else int(tracked)
        else:
            settings["batched"] = not (
                isinstance(x, torch.Tensor) and x.dim() == module._get_no_batch_dim()
            )
    return {
        "input": _copy(x) if isinstance(x, torch.Tensor) else x,
        "weight": _copy(weight) if isinstance(weight, torch.Tensor) else None,
        "bias": _copy(bias) if isinstance(bias, torch.Tensor) else None,
        "running_mean": _copy(running_mean),
        "running_var": _copy(running_var),
        "settings": settings,
    }


def _problem(kind: NormKind, snapshot: dict[str, Any], output: Any) -> str | None:
    """Why a call cannot be recorded (and replayed), or None."""
    x = snapshot["input"]
    if not isinstance(x, torch.Tensor):
        return f"its input is a {type(x).__name__}, not a tensor"
    if not isinstance(output, torch.Tensor):
        return f"it returned a {type(output).__name__}, not one tensor"
    if output.shape != x.shape:
        return f"it returned shape {list(output.shape)} for an input of {list(x.shape)}"
    if x.is_nested or not x.dtype.is_floating_point:
        return f"its input is a {'nested' if x.is_nested else str(x.dtype)} tensor"
    shape = snapshot["settings"].get("normalized_shape")
    if shape is not None and list(x.shape[len(x.shape) - len(shape):]) != shape:
        return (f"its input's shape {list(x.shape)} does not end in the weight's shape {shape} "
                "(a norm over other dims, such as channels first)")
    if kind == NormKind.RMS and snapshot["bias"] is not None:
        return "an RMSNorm with a bias, a term lnviz's rms_norm does not have"
    return None


def _own_eps(module: nn.Module) -> float | None:
    for attribute in ("eps", "variance_epsilon"):
        value = getattr(module, attribute, None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    return None


def _copy(tensor: torch.Tensor | None) -> torch.Tensor | None:
    return None if tensor is None else tensor.detach().clone()


def _momentum(momentum: float | None) -> float:
    return 0.0 if momentum is None else momentum  # as nn.InstanceNorm passes it


def _without_batch_dim(result: NormResult) -> NormResult:
    """A replay of an unbatched InstanceNorm input, given back without the batch dim added."""

    def drop(value: torch.Tensor | None) -> torch.Tensor | None:
        return None if value is None else value.squeeze(0)

    return NormResult(drop(result.output), drop(result.mean), drop(result.var),
                      drop(result.rstd), drop(result.x_hat),
                      tuple(d - 1 for d in result.reduce_dims))


@contextmanager
def _transformer_fast_path_off() -> Iterator[None]:
    """torch's transformer fast path off (process-wide) while any block of this kind runs, in
    any thread: the first to enter saves the setting, the last to leave restores it (each
    saving and restoring its own would let one thread's exit turn it back on inside another's
    block)."""
    mha = torch.backends.mha
    with _FAST_PATH_LOCK:
        if not _FAST_PATH_OFF:
            _FAST_PATH_OFF.append(mha.get_fastpath_enabled())  # the setting to restore
            mha.set_fastpath_enabled(False)
        _FAST_PATH_OFF.append(None)  # one entry per block under way
    try:
        yield
    finally:
        with _FAST_PATH_LOCK:
            _FAST_PATH_OFF.pop()
            if len(_FAST_PATH_OFF) == 1:
                mha.set_fastpath_enabled(_FAST_PATH_OFF.pop())


def _read_layers(data: bytes, max_elements: int) -> list[CapturedLayer]:
    if not (len(data) > 8 and data[8:9] == b"{"):
        raise TensorFileError(
            f"not a .safetensors file (it starts with {bytes(data[:8])!r}); a capture file is "
            "written by lnviz.capture(...).save(path)"
        )
    header = _read_safetensors_header(data, max_elements)
    metadata = header.metadata
    if metadata.get("lnviz") != CAPTURE_FORMAT:
        raise TensorFileError(
            "this .safetensors file is not a capture (its metadata has no \"lnviz\": "
            "\"capture\"); write one with lnviz.capture(model, x).save(path)"
        )
    version = metadata.get("lnviz.version")
    if version not in _KINDS_BY_VERSION:
        raise TensorFileError(
            f"capture format version {version!r} is not known to this lnviz, which reads "
            f"versions {' and '.join(_KINDS_BY_VERSION)}"
        )
    kinds = _KINDS_BY_VERSION[version]
    shapes = {entry.name: tuple(entry.shape) for entry in header.entries}
    try:
        described = json.loads(metadata.get("lnviz.records", ""))
        if not isinstance(described, list):
            raise TypeError(f"the records are a {type(described).__name__}, not a list")
        layers = [_layer(item, shapes, kinds) for item in described]
        _check_distinct(layers)
    except (ValueError, TypeError, KeyError, RecursionError, ArithmeticError) as err:
        raise TensorFileError(
            f"the capture's description of its layers is damaged ({str(err)[:160]})"
        ) from err
    return layers


def _layer(item: Any, shapes: Mapping[str, tuple[int, ...]], kinds: Mapping[str, NormKind]
           ) -> CapturedLayer:
    """One record of a capture's description, checked against what :meth:`Capture.save`
    writes and against the shapes of the file's tensors (a ValueError or TypeError says what
    does not fit): nothing a file declares reaches a page unchecked."""
    if not isinstance(item, dict):
        raise TypeError(f"a record is a {type(item).__name__}, not an object")
    name, call, kind = item["name"], item["call"], item["kind"]
    settings, arrays = item["settings"], item["arrays"]
    if not _text(name) or not _count(call) or not _text(item["dtype"]):
        raise TypeError("a record's name and dtype must be text (valid Unicode) and its call a "
                        "whole number")
    where = f"record {name!r}"
    if not isinstance(kind, str) or kind not in kinds:
        raise ValueError(f"{where}: unknown kind {kind!r}")
    kind = kinds[kind]
    if not isinstance(settings, dict) or not isinstance(arrays, dict):
        raise TypeError(f"{where}: its settings and arrays must be objects")
    if not all(isinstance(v, str) and v in shapes for v in arrays.values()) \
            or not set(arrays) <= set(_ROLES) or not {"input", "output"} <= set(arrays):
        raise ValueError(f"{where} names tensors the file does not hold")
    layer = CapturedLayer(name=name, call=call, kind=kind, settings=dict(settings),
                          dtype=item["dtype"], arrays=dict(arrays))
    _check_settings(layer, {role: shapes[key] for role, key in arrays.items()})
    return layer


def _check_settings(layer: CapturedLayer, shapes: dict[str, tuple[int, ...]]) -> None:
    """The settings :func:`_snapshot` writes for the layer's kind, with the types and ranges
    it writes them in, and consistent with the layer's tensors."""
    s, kind, where = layer.settings, layer.kind, f"record {layer.name!r}"

    def fail(what: str) -> ValueError:
        return ValueError(f"{where}: {what}")

    x = shapes["input"]
    if shapes["output"] != x:
        raise fail(f"its output has shape {list(shapes['output'])}, its input {list(x)}")
    if not _text(s.get("module", "")):
        raise fail("its module name is not text")
    eps = s.get("eps")
    if "eps" not in s or (
            not (_real(eps) and eps >= 0) and not (kind == NormKind.RMS and eps is None)):
        raise fail(f"ε = {eps!r} is not a number of at least 0")
    if kind in (NormKind.LAYER, NormKind.RMS):
        normalized = s.get("normalized_shape")
        if not (isinstance(normalized, list) and 1 <= len(normalized) <= len(x)
                and all(_count(n) for n in normalized)
                and tuple(normalized) == x[len(x) - len(normalized):]):
            raise fail(f"normalized_shape {normalized!r} is not the last dims of its input "
                       f"{list(x)}")
        per_channel = tuple(normalized)
    else:
        if kind != NormKind.INSTANCE and "batched" in s:
            raise fail(f"it says whether its input has a batch dim, which only an InstanceNorm "
                       f"record does (a {kind} always has one)")
        if kind == NormKind.INSTANCE and "batched" not in s:
            raise fail("it does not say whether its input has a batch dim (batched), which an "
                       "InstanceNorm record does")
        batched = s.get("batched", True)
        if not isinstance(batched, bool) or len(x) < 2 + (kind == NormKind.INSTANCE and batched):
            raise fail(f"its input of shape {list(x)} has no channel dim where a {kind} "
                       "expects one")
        per_channel = (x[1] if batched else x[0],)
    if kind == NormKind.GROUP:
        groups = s.get("num_groups")
        if not _count(groups) or groups == 0 or per_channel[0] % groups:
            raise fail(f"num_groups = {groups!r} does not divide its {per_channel[0]} channels")
    if kind in (NormKind.BATCH, NormKind.INSTANCE):
        flags = ("training", "use_batch_stats", "track_running_stats")
        momentum, tracked = s.get("momentum"), s.get("num_batches_tracked")
        if not all(isinstance(s.get(f), bool) for f in flags) or "momentum" not in s \
                or not (momentum is None or _real(momentum)) \
                or not (tracked is None or _count(tracked)):
            raise fail("its training flags, momentum or num_batches_tracked are not of the "
                       "kinds lnviz.capture writes")
    for role in ("weight", "bias", "running_mean", "running_var"):
        if role in shapes and shapes[role] != per_channel:
            raise fail(f"its {role} has shape {list(shapes[role])}, not {list(per_channel)}")


def _check_distinct(layers: list[CapturedLayer]) -> None:
    """Each record is one call of one module, and each tensor of the file belongs to one record
    in one role, as :meth:`Capture.save` writes them: so the work of reading every layer is
    bounded by the file's values, however many records it lists (one large tensor named by
    thousands of records once cost minutes of a server's CPU)."""
    calls: set[tuple[str, int]] = set()
    owners: dict[str, str] = {}
    for layer in layers:
        where = f"record {layer.name!r}, call {layer.call}"
        if (layer.name, layer.call) in calls:
            raise ValueError(f"{where} is described twice")
        calls.add((layer.name, layer.call))
        for role, key in layer.arrays.items():
            if key in owners:
                raise ValueError(f"{where}: its {role} is tensor {key!r}, which is already the "
                                 f"{owners[key]}")
            owners[key] = f"{role} of {where}"


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text(value: Any) -> bool:
    """Text a page can show: a str that is valid Unicode (JSON's "\\ud800" is not)."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _real(value: Any) -> bool:
    """A finite number: a float, or a whole number a float holds exactly (torch takes a larger
    one as an int64, and 10**300 overflows it)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, int):
        return abs(value) <= 2**53
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
