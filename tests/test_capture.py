"""lnviz.capture on models nobody in the project wrote: torch's TransformerEncoder, a small CNN,
nn.RMSNorm, an RMSNorm written as Hugging Face writes LlamaRMSNorm, a shared LayerNorm.

For every model and mode: every record replays (lnviz, from the recorded input and settings) to
the recorded output; cap.output equals a plain forward; the state dict after the capture equals
the one after a plain forward (running statistics updated once, by the forward); no hook is left.
"""

from __future__ import annotations

import copy
import io
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

import lnviz
from lnviz.capture import (
    KINDS,
    Capture,
    NormRecord,
    load_capture,
    norm_kind,
    read_capture,
)
from lnviz.data.files import TensorFileError, load_arrays, safetensors_metadata

D = 16


def assert_replays(result: lnviz.NormResult, record: lnviz.NormRecord) -> None:
    """lnviz's replay gives the layer's output to float32 rounding, which depends on the order
    the CPU's kernels sum in: a bound relative to the layer's output (on torch's portable
    kernels the replay differs by 8e-6 at 1.3, and in a saved capture's CNN layer by 9.1e-6,
    where AVX2's kernels agreed to 2e-6)."""
    scale = max(1.0, float(record.output.abs().max()))
    torch.testing.assert_close(result.output, record.output, rtol=1e-5, atol=1e-5 * scale,
                               msg=lambda m: f"{record.name}[{record.call}]: {m}")


# ---------------------------------------------------------------------------------------------
# Models
# ---------------------------------------------------------------------------------------------


class LlamaRMSNorm(nn.Module):
    """Written as transformers' LlamaRMSNorm is (modeling_llama.py)."""

    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class TinyLlama(nn.Module):
    """Embedding, two pre-norm blocks with an MLP, a final norm: the RMSNorm pattern of LLMs."""

    def __init__(self, vocab: int = 50, dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, D)
        self.layers = nn.ModuleList(
            nn.ModuleDict({"input_layernorm": LlamaRMSNorm(D, eps=1e-5),
                           "mlp": nn.Sequential(nn.Linear(D, 2 * D), nn.SiLU(),
                                                nn.Linear(2 * D, D))})
            for _ in range(2)
        )
        self.norm = LlamaRMSNorm(D, eps=1e-5)
        with torch.no_grad():
            for module in self.modules():
                if isinstance(module, LlamaRMSNorm):
                    module.weight.uniform_(0.5, 1.5)
        self.to(dtype)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        h = self.embed_tokens(input_ids)
        for layer in self.layers:
            h = h + layer["mlp"](layer["input_layernorm"](h))
        return self.norm(h)


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(inplace=True),
            nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU(inplace=True),
            nn.Conv2d(8, 8, 3, padding=1),
            nn.InstanceNorm2d(8, affine=True, track_running_stats=True), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        )
        self.head = nn.Sequential(nn.Linear(8, 6), nn.BatchNorm1d(6, momentum=None))
        with torch.no_grad():  # γ and β away from 1 and 0, so that a mix-up would show
            for module in self.modules():
                if getattr(module, "weight", None) is not None and norm_kind(module):
                    module.weight.uniform_(0.5, 2.0)
                    module.bias.uniform_(-1.0, 1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


class SharedNorm(nn.Module):
    """One LayerNorm applied twice: before and after a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(D)
        self.proj = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.proj(self.norm(x)) * 3 + 1)


class RMSNormModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pre = nn.RMSNorm(D)  # eps=None: torch's machine-epsilon default
        self.proj = nn.Linear(D, D)
        self.post = nn.RMSNorm([4, D], eps=1e-4)
        with torch.no_grad():
            self.post.weight.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.post(self.proj(self.pre(x)))


def transformer(norm_first: bool) -> nn.TransformerEncoder:
    layer = nn.TransformerEncoderLayer(D, nhead=4, dim_feedforward=32, batch_first=True,
                                       norm_first=norm_first)
    # torch offers its nested-tensor fast path to post-LN stacks only (and warns otherwise)
    return nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(D),
                                 enable_nested_tensor=not norm_first)


def trained(model: nn.Module, make_input: Callable[[], Any], steps: int = 3) -> nn.Module:
    """A few training forwards, so that BatchNorm's running statistics are not the defaults."""
    model.train()
    with torch.no_grad():
        for _ in range(steps):
            model(make_input())
    return model


TOKENS = torch.tensor([[1, 5, 9, 2], [7, 7, 3, 0], [4, 8, 15, 16]])


def tokens() -> torch.Tensor:
    return TOKENS


def seq() -> torch.Tensor:
    return torch.randn(3, 4, D, generator=torch.Generator().manual_seed(1)) * 2 + 0.5


def images() -> torch.Tensor:
    return torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(2)) * 3 - 1


# name, build, input, expected (name, call, kind) in call order
MODELS: dict[str, tuple[Callable[[], nn.Module], Callable[[], Any], list[tuple[str, int, str]]]] = {
    "transformer-post-ln": (lambda: transformer(False), seq, [
        ("layers.0.norm1", 0, "LayerNorm"), ("layers.0.norm2", 0, "LayerNorm"),
        ("layers.1.norm1", 0, "LayerNorm"), ("layers.1.norm2", 0, "LayerNorm"),
        ("norm", 0, "LayerNorm")]),
    "transformer-pre-ln": (lambda: transformer(True), seq, [
        ("layers.0.norm1", 0, "LayerNorm"), ("layers.0.norm2", 0, "LayerNorm"),
        ("layers.1.norm1", 0, "LayerNorm"), ("layers.1.norm2", 0, "LayerNorm"),
        ("norm", 0, "LayerNorm")]),
    "cnn": (SmallCNN, images, [
        ("features.1", 0, "BatchNorm"), ("features.4", 0, "GroupNorm"),
        ("features.7", 0, "InstanceNorm"), ("head.1", 0, "BatchNorm")]),
    "rms-norm": (RMSNormModel, lambda: seq().reshape(3, 4, D), [
        ("pre", 0, "RMSNorm"), ("post", 0, "RMSNorm")]),
    "llama-rms-norm": (TinyLlama, tokens, [
        ("layers.0.input_layernorm", 0, "RMSNorm"), ("layers.1.input_layernorm", 0, "RMSNorm"),
        ("norm", 0, "RMSNorm")]),
    "shared-layer-norm": (SharedNorm, seq, [
        ("norm", 0, "LayerNorm"), ("norm", 1, "LayerNorm")]),
}


def hooks_of(model: nn.Module) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every hook dict of every module, by handle id: equal before and after means none left."""
    found = []
    for name, module in model.named_modules():
        for attribute in ("_forward_hooks", "_forward_pre_hooks", "_forward_hooks_with_kwargs",
                          "_forward_pre_hooks_with_kwargs", "_forward_hooks_always_called",
                          "_backward_hooks", "_backward_pre_hooks"):
            found.append((name, attribute, tuple(getattr(module, attribute, {}))))
    return found


def assert_same_state(a: nn.Module, b: nn.Module) -> None:
    state_a, state_b = a.state_dict(), b.state_dict()
    assert list(state_a) == list(state_b)
    for key in state_a:
        assert torch.equal(state_a[key], state_b[key]), key


def plain_and_captured(build: Callable[[], nn.Module], make_input: Callable[[], Any], train: bool,
                       seed: int = 7) -> tuple[nn.Module, nn.Module, Any, Capture]:
    """The same model twice (one copy for a plain forward, one for the capture), run from the
    same random state (dropout)."""
    torch.manual_seed(0)
    model = trained(build(), make_input).train(train)
    plain = copy.deepcopy(model)
    torch.manual_seed(seed)
    with torch.no_grad():
        expected = plain(make_input())
    torch.manual_seed(seed)
    cap = lnviz.capture(model, make_input())
    return plain, model, expected, cap


# ---------------------------------------------------------------------------------------------
# The foreign models
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("train", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("model_name", list(MODELS))
def test_capture_records_replay_and_leave_the_model_as_a_plain_forward(
    model_name: str, train: bool
) -> None:
    build, make_input, expected_calls = MODELS[model_name]
    plain, model, expected, cap = plain_and_captured(build, make_input, train)
    hooks_before = hooks_of(build())

    assert [(r.name, r.call, r.kind) for r in cap.records] == expected_calls
    assert cap.skipped == []
    # the output: the same as a plain forward (the transformer's evaluation fast path, which a
    # plain forward takes, differs from its reference path by float rounding)
    torch.testing.assert_close(cap.output, expected, rtol=1e-5, atol=1e-5)
    if train or not model_name.startswith("transformer"):
        assert torch.equal(cap.output, expected)
    # the model: running statistics updated once, by the forward; no hook left
    assert_same_state(model, plain)
    assert hooks_of(model) == hooks_before
    for record in cap.records:
        assert record.kind in KINDS
        assert record.input.shape == record.output.shape
        for impl in ("scratch", "fast"):
            assert_replays(record.replay(impl=impl), record)


def test_records_are_copies_taken_at_the_call() -> None:
    """ReLU(inplace=True) after BatchNorm overwrites the BatchNorm's output tensor: the record
    keeps the values the layer returned, negatives included."""
    _, _, _, cap = plain_and_captured(SmallCNN, images, train=True)
    batch = cap.records[0]
    assert batch.name == "features.1" and (batch.output < 0).any()
    # the weights are copies too: changing the model afterwards leaves the record alone
    model = SmallCNN()
    cap = lnviz.capture(model, images())
    with torch.no_grad():
        model.features[1].weight.fill_(5.0)
    assert not torch.equal(cap.records[0].weight, model.features[1].weight)


def test_transformer_records_chain_into_each_other() -> None:
    """Post-LN: the final norm's input is the last layer's output, its norm2's output, and the
    final norm's output is cap.output. Pre-LN: the first norm1 sees the model's input."""
    cap = lnviz.capture(transformer(norm_first=False).eval(), seq())
    by_name = {r.name: r for r in cap.records}
    assert torch.equal(by_name["norm"].input, by_name["layers.1.norm2"].output)
    assert torch.equal(by_name["norm"].output, cap.output)
    cap = lnviz.capture(transformer(norm_first=True).eval(), seq())
    assert torch.equal(cap.records[0].input, seq())
    assert torch.equal(cap.records[-1].output, cap.output)


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors:UserWarning")
def test_transformer_fast_path_is_off_during_a_capture_and_restored() -> None:
    """In evaluation with a padding mask, a plain forward of nn.TransformerEncoder takes torch's
    fused fast path (nested tensors: 0 at padded positions, no norm module called). The capture
    turns it off, sees all five norms on ordinary tensors, and agrees with the plain forward
    wherever a token is real."""
    model = transformer(norm_first=False).eval()
    x = seq()
    padding = torch.tensor([[False, False, True, True], [False] * 4, [False, False, False, True]])
    with torch.no_grad():
        plain = model(x, src_key_padding_mask=padding)
    assert torch.equal(plain[padding], torch.zeros_like(plain[padding]))  # the fast path ran
    assert torch.backends.mha.get_fastpath_enabled()
    cap = lnviz.capture(model, x, src_key_padding_mask=padding)
    assert torch.backends.mha.get_fastpath_enabled()
    assert len(cap.records) == 5
    assert not any(r.input.is_nested for r in cap.records)
    assert (cap.output[padding] != 0).all()
    torch.testing.assert_close(cap.output[~padding], plain[~padding], rtol=1e-5, atol=1e-5)
    for record in cap.records:
        assert_replays(record.replay(), record)


def test_eval_batch_norm_replays_with_the_running_statistics_it_used() -> None:
    model = trained(SmallCNN(), images).eval()
    running_mean = model.features[1].running_mean.clone()
    cap = lnviz.capture(model, images())
    record = cap.records[0]
    assert record.settings["use_batch_stats"] is False and record.settings["training"] is False
    assert torch.equal(record.running_mean, running_mean)
    assert not torch.allclose(running_mean, torch.zeros_like(running_mean))
    result = record.replay()
    torch.testing.assert_close(result.mean.flatten(), running_mean)
    assert_replays(result, record)
    # with the batch's statistics instead, the replay would not match: the test can tell
    wrong = lnviz.batch_norm(record.input, None, None, record.weight, record.bias, training=True)
    assert not torch.allclose(wrong.output, record.output, atol=1e-3)


def test_train_batch_norm_records_the_statistics_before_the_call() -> None:
    model = trained(SmallCNN(), images)
    before = model.features[1].running_mean.clone()
    tracked = int(model.head[1].num_batches_tracked)
    cap = lnviz.capture(model, images())
    record = cap.records[0]
    assert record.settings["use_batch_stats"] is True
    assert torch.equal(record.running_mean, before)
    assert not torch.equal(model.features[1].running_mean, before)  # the forward updated it
    head = cap.records[-1]
    assert head.settings["momentum"] is None and head.settings["num_batches_tracked"] == tracked
    assert int(model.head[1].num_batches_tracked) == tracked + 1  # once, not twice


def test_replay_leaves_the_record_alone() -> None:
    model = trained(SmallCNN(), images)
    cap = lnviz.capture(model.eval(), images())
    record = cap.records[0]
    mean, var = record.running_mean.clone(), record.running_var.clone()
    record.replay()
    assert torch.equal(record.running_mean, mean) and torch.equal(record.running_var, var)
    train_cap = lnviz.capture(model.train(), images())
    updated = model.features[1].running_mean.clone()
    train_cap.records[0].replay()
    assert torch.equal(train_cap.records[0].running_mean, mean)  # before the call
    assert torch.equal(model.features[1].running_mean, updated)  # the replay updated nothing


def test_shared_layer_norm_gives_one_record_per_call() -> None:
    model = SharedNorm()
    x = seq()
    cap = lnviz.capture(model, x)
    first, second = cap.records
    assert (first.name, first.call, second.name, second.call) == ("norm", 0, "norm", 1)
    assert torch.equal(first.input, x)
    with torch.no_grad():
        assert torch.equal(second.input, model.proj(first.output) * 3 + 1)
    assert torch.equal(second.output, cap.output)


def test_a_second_capture_counts_calls_from_zero() -> None:
    model = SharedNorm()
    lnviz.capture(model, seq())
    assert [r.call for r in lnviz.capture(model, seq()).records] == [0, 1]


def test_hooks_are_removed_when_the_forward_raises() -> None:
    class Failing(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(D)
            self.bn = nn.BatchNorm1d(D)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.norm(x)
            raise RuntimeError("boom")

    model = Failing()
    own = model.norm.register_forward_hook(lambda m, a, o: None)  # the model's own stays
    before = hooks_of(model)
    with pytest.raises(RuntimeError, match="boom"):
        lnviz.capture(model, seq())
    assert hooks_of(model) == before
    assert torch.backends.mha.get_fastpath_enabled()
    own.remove()
    assert all(not hooks for _, _, hooks in hooks_of(model))


def test_the_models_own_hooks_see_and_change_what_they_did_before() -> None:
    """A forward hook of the model that changes a norm's output still does; the record keeps
    what the module itself returned."""
    model = SharedNorm()
    model.norm.register_forward_hook(lambda m, a, out: out * 0 + 1)
    cap = lnviz.capture(model, seq())
    assert torch.equal(cap.output, torch.ones_like(cap.output))
    first = cap.records[0]
    torch.testing.assert_close(first.replay().output, first.output)
    assert not torch.equal(first.output, torch.ones_like(first.output))


def test_llama_rms_norm_in_bfloat16_replays_to_bfloat16_rounding() -> None:
    """HF's RMSNorm rounds x̂ to bfloat16 before γ; lnviz rounds once: a bfloat16 step apart."""
    model = TinyLlama(dtype=torch.bfloat16)
    cap = lnviz.capture(model, TOKENS)
    assert [r.kind for r in cap.records] == ["RMSNorm"] * 3
    for record in cap.records:
        assert record.output.dtype == torch.bfloat16
        replayed = record.replay().output
        torch.testing.assert_close(replayed.float(), record.output.float(), rtol=2**-7, atol=1e-2)


def test_custom_classes_recognised_by_shape() -> None:
    class MyLayerNorm(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(D) * 2)
            self.bias = nn.Parameter(torch.zeros(D) + 0.5)
            self.eps = 1e-5

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return nn.functional.layer_norm(x, (D,), self.weight, self.bias, self.eps)

    class NoEpsLayerNorm(nn.Module):  # nanoGPT style: eps written into forward, not an attribute
        def __init__(self) -> None:
            super().__init__()
            self.weight = nn.Parameter(torch.ones(D))

    class ChannelsFirstLayerNorm(MyLayerNorm):  # ConvNeXt's channels_first: the norm over dim 1
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            u = x.mean(1, keepdim=True)
            s = (x - u).pow(2).mean(1, keepdim=True)
            x = (x - u) / torch.sqrt(s + self.eps)
            return self.weight[:, None, None] * x + self.bias[:, None, None]

    assert norm_kind(MyLayerNorm()) == "LayerNorm"
    assert norm_kind(LlamaRMSNorm(D)) == "RMSNorm"
    assert norm_kind(NoEpsLayerNorm()) is None
    assert norm_kind(nn.Linear(2, 2)) is None
    cap = lnviz.capture(MyLayerNorm(), seq())
    assert [(r.name, r.kind) for r in cap.records] == [("", "LayerNorm")]
    torch.testing.assert_close(cap.records[0].replay().output, cap.output)
    assert cap.records[0].settings == {"module": "MyLayerNorm", "normalized_shape": [D],
                                       "eps": 1e-5}
    cap = lnviz.capture(ChannelsFirstLayerNorm(), torch.randn(2, D, 3, 3))
    assert cap.records == []
    assert cap.skipped == [("", "its input's shape [2, 16, 3, 3] does not end in the weight's "
                                "shape [16] (a norm over other dims, such as channels first)")]


def test_unbatched_instance_norm_replays_without_a_batch_dim() -> None:
    norm = nn.InstanceNorm1d(3, affine=True)
    x = torch.randn(3, 7)
    cap = lnviz.capture(norm, x)
    record = cap.records[0]
    assert record.settings["batched"] is False
    result = record.replay()
    assert result.output.shape == (3, 7) and result.reduce_dims == (1,)
    torch.testing.assert_close(result.output, record.output)


def test_capture_refuses_what_is_not_a_module() -> None:
    with pytest.raises(TypeError, match=r"torch\.nn\.Module"):
        lnviz.capture(lambda x: x, seq())  # type: ignore[arg-type]


def test_norms_called_by_keyword_and_lazy_norms() -> None:
    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.input_layernorm = LlamaRMSNorm(D)
            self.bn = nn.LazyBatchNorm1d()  # its parameters take their shape in the forward

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.bn(self.input_layernorm(hidden_states=x))

    model = Block()
    cap = lnviz.capture(model, torch.randn(5, D))
    assert [(r.name, r.kind) for r in cap.records] == [("input_layernorm", "RMSNorm"),
                                                       ("bn", "BatchNorm")]
    assert cap.records[1].weight.shape == (D,)
    for record in cap.records:
        torch.testing.assert_close(record.replay().output, record.output)


@pytest.mark.slow  # a fresh process of its own
@pytest.mark.parametrize("first", ["import lnviz", "from lnviz.capture import NormRecord",
                                   "import lnviz.capture", "import lnviz.capture as module"])
def test_lnviz_capture_is_the_function_whatever_is_imported_first(first: str) -> None:
    """lnviz.capture is the function, whether reached through lazy loading or after the module
    lnviz.capture was imported (which would otherwise make the package's attribute the module);
    the module's names stay importable from it."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = (f"{first}\nimport lnviz, torch, types\n"
            "from lnviz.capture import Capture, read_capture\n"
            "cap = lnviz.capture(torch.nn.LayerNorm(3), torch.randn(2, 3))\n"
            "print(len(cap.records), type(lnviz.NormRecord).__name__,"
            " type(lnviz.capture).__name__, isinstance(cap, Capture))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=root)
    assert done.stdout.split() == ["1", "type", "function", "True"]


@pytest.mark.slow  # a fresh process of its own
def test_dir_lists_the_public_api_before_its_first_use() -> None:
    """A notebook's tab completion reads dir(lnviz): it lists the lazy names from the start."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    code = "import lnviz, sys\nprint(*dir(lnviz))\nprint('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, cwd=root)
    names, torch_loaded = done.stdout.splitlines()
    assert set(lnviz.__all__) | {"models"} <= set(names.split())
    assert torch_loaded == "False"  # listing them loads nothing


def test_public_names() -> None:
    assert lnviz.NormRecord is NormRecord
    cap = lnviz.capture(SharedNorm(), seq())
    assert isinstance(cap, Capture) and isinstance(cap.records[0], NormRecord)
    assert "capture" in lnviz.__all__ and "NormRecord" in lnviz.__all__


# ---------------------------------------------------------------------------------------------
# Capture files
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model_name", ["transformer-pre-ln", "cnn", "llama-rms-norm",
                                        "shared-layer-norm"])
def test_saved_capture_loads_and_describes_its_layers(model_name: str, tmp_path: Path) -> None:
    build, make_input, _ = MODELS[model_name]
    model = trained(build(), make_input).eval()
    cap = lnviz.capture(model, make_input())
    path = tmp_path / "capture.safetensors"
    cap.save(path)
    assert read_capture(cap.to_bytes()) == read_capture(path)  # the download holds the same

    arrays = load_arrays(path)
    layers = read_capture(path)
    assert [(x.name, x.call, x.kind) for x in layers] == [
        (r.name, r.call, r.kind) for r in cap.records
    ]
    keys = set()
    for layer, record in zip(layers, cap.records, strict=True):
        assert layer.settings == dict(record.settings)
        assert layer.dtype == "float32"
        for role, key in layer.arrays.items():
            np.testing.assert_array_equal(arrays[key], getattr(record, role).numpy())
            keys.add(key)
        assert {"input", "output"} <= set(layer.arrays)
        assert ("weight" in layer.arrays) == (record.weight is not None)
    assert keys == set(arrays)
    assert safetensors_metadata(path)["lnviz"] == "capture"
    # and the file replays: records rebuilt from it give the same outputs
    for loaded in load_capture(io.BytesIO(path.read_bytes())):
        assert_replays(loaded.replay(), loaded)


def test_capture_file_names_are_readable(tmp_path: Path) -> None:
    cap = lnviz.capture(SharedNorm(), seq())
    names = list(load_arrays(cap.to_bytes()))
    assert sorted(names) == sorted(
        f"norm[{call}].{role}" for call in (0, 1) for role in ("input", "output", "weight", "bias")
    )
    root = lnviz.capture(nn.LayerNorm(D), seq())
    assert "<model>[0].input" in load_arrays(root.to_bytes())
    layer = read_capture(root.to_bytes())[0]
    assert (layer.name, layer.arrays["input"]) == ("", "<model>[0].input")


def test_bfloat16_capture_is_stored_as_bfloat16_and_read_as_float32() -> None:
    cap = lnviz.capture(TinyLlama(dtype=torch.bfloat16), TOKENS)
    data = cap.to_bytes()
    layers = read_capture(data)
    assert {layer.dtype for layer in layers} == {"bfloat16"}
    arrays = load_arrays(data)
    first = cap.records[0]
    np.testing.assert_array_equal(arrays[layers[0].arrays["output"]], first.output.float().numpy())
    assert len(data) < sum(a.nbytes for a in arrays.values()) / 2 + 20_000  # 2 bytes a value


def test_read_capture_refuses_what_is_not_a_capture(tmp_path: Path) -> None:
    from safetensors.torch import save

    checkpoint = save({"w": torch.ones(2)})
    with pytest.raises(TensorFileError, match="not a capture"):
        read_capture(checkpoint)
    with pytest.raises(TensorFileError, match=r"not a \.safetensors file"):
        read_capture(b"\x93NUMPY junk")
    cap = lnviz.capture(SharedNorm(), seq())
    tensors = load_arrays(cap.to_bytes())
    damaged = {"lnviz": "capture", "lnviz.version": "1", "lnviz.records": "[{\"name\": 1"}
    with pytest.raises(TensorFileError, match="damaged"):
        read_capture(save({k: torch.from_numpy(v) for k, v in tensors.items()}, damaged))
    missing = damaged | {"lnviz.records": '[{"name": "a", "call": 0, "kind": "layer_norm", '
                                          '"settings": {}, "dtype": "float32", '
                                          '"arrays": {"input": "nope", "output": "nope"}}]'}
    with pytest.raises(TensorFileError, match="names tensors the file does not hold"):
        read_capture(save({"w": torch.ones(1)}, missing))
    future = damaged | {"lnviz.version": "99"}
    with pytest.raises(TensorFileError, match="version '99'"):
        read_capture(save({"w": torch.ones(1)}, future))


@pytest.mark.parametrize(("version", "kind", "reads"), [
    ("2", "LayerNorm", True), ("1", "layer_norm", True),  # each version's own spelling
    ("2", "layer_norm", False), ("1", "LayerNorm", False),  # the other's: refused
    ("2", "layer", False), ("2", ["LayerNorm"], False), ("2", 7, False)])
def test_a_captures_kinds_are_read_as_its_version_spells_them(version, kind, reads) -> None:
    """Version 2 files (written now) spell a kind as lnviz.terms.NormKind does, version 1 files
    by the function's name; each is read as a NormKind, anything else is refused with a
    message, never a traceback."""
    from safetensors.torch import save

    from lnviz.terms import NormKind

    written = lnviz.capture(nn.LayerNorm(3), torch.randn(2, 3)).to_bytes()
    header = json.loads(written[8:8 + int.from_bytes(written[:8], "little")])["__metadata__"]
    assert header["lnviz.version"] == "2"
    assert json.loads(header["lnviz.records"])[0]["kind"] == "LayerNorm"
    record = {"name": "", "call": 0, "kind": kind, "dtype": "float32",
              "settings": {"module": "LayerNorm", "eps": 1e-5, "normalized_shape": [3]},
              "arrays": {"input": "x", "output": "y", "weight": "w", "bias": "b"}}
    data = save({"x": torch.zeros(2, 3), "y": torch.zeros(2, 3), "w": torch.ones(3),
                 "b": torch.zeros(3)},
                {"lnviz": "capture", "lnviz.version": version,
                 "lnviz.records": json.dumps([record])})
    if reads:
        (layer,) = read_capture(data)
        assert layer.kind is NormKind.LAYER
    else:
        with pytest.raises(TensorFileError, match="unknown kind"):
            read_capture(data)


def test_a_capture_finds_a_record_by_name_and_names_the_others_when_it_cannot():
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4),
                                torch.nn.LayerNorm(4), torch.nn.LayerNorm(4))
    cap = lnviz.capture(model, torch.randn(2, 4))
    assert cap.record("2") is cap.records[1]
    with pytest.raises(KeyError, match=r"no norm named '9' in this run; its 3 are '1', '2', "
                                       r"…, '3'"):
        cap.record("9")
