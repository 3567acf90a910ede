"""The Model inspector: its example files, the checkpoint and capture computations (against
numpy, torch and hand-computed values), the Explorer settings of a captured layer (the
Explorer's output equals the layer's), the page, and its hand-off to the Explorer."""

from __future__ import annotations

import html
import io
import itertools
import json
import math
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from pageutil import alerts, decode, figures, open_page, shown_text, table_with, trace_data
from safetensors import numpy as st_numpy
from safetensors import torch as st_torch
from torch import nn

import lnviz
from lnviz.batch import NormSpec, normalize
from lnviz.capture import CapturedLayer, norm_kind, read_capture
from lnviz.charts import inspector as inspector_charts
from lnviz.charts.base import NARROW_PLOT_PX
from lnviz.data.examples import (
    EXAMPLE_CAPTURE,
    EXAMPLE_CHECKPOINT,
    OUTLIER_CHANNEL,
    TinyModels,
    example_inputs,
    example_model,
    write_examples,
)
from lnviz.data.files import TensorFileError, load_arrays, safetensors_metadata
from lnviz.lessons.inspector import (
    DEFAULT_SIGMAS,
    INSPECTOR_MAX_NORM_CHANNELS,
    MAX_OUTLIER_ROWS,
    SNIPPET,
    GroupLabels,
    capture_layers,
    capture_overview,
    explorer_batch,
    explorer_setup,
    extreme_channels,
    find_norm_layers,
    layer_key,
    layer_view,
    max_sigmas,
    near_zero_gamma,
    no_norm_message,
    open_model_file,
    parameter_table,
    running_stats,
)
from lnviz.ui.messages import plain

INSPECTOR = "app_pages/inspector.py"
EXPLORER = "app_pages/explorer.py"


def npy_bytes(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def capture_bytes(model: nn.Module, *inputs: torch.Tensor) -> bytes:
    return lnviz.capture(model, *inputs).to_bytes()


def opened(model: nn.Module, *inputs: torch.Tensor):
    return open_model_file(capture_bytes(model, *inputs))


# --- The example files ------------------------------------------------------------------------


def test_the_shipped_examples_are_what_the_generator_writes(tmp_path: Path) -> None:
    capture_path, checkpoint_path = write_examples(tmp_path)
    for shipped, fresh in ((EXAMPLE_CAPTURE, capture_path), (EXAMPLE_CHECKPOINT, checkpoint_path)):
        assert shipped.stat().st_size < 200_000
        old, new = load_arrays(shipped), load_arrays(fresh)
        assert list(old) == list(new)
        for key in old:  # float tolerance: another CPU may round a matmul differently
            np.testing.assert_allclose(old[key], new[key], rtol=1e-5, atol=1e-5, err_msg=key)
    assert read_capture(EXAMPLE_CAPTURE) == read_capture(capture_path)


def test_the_example_capture_has_every_kind_and_the_outlier_channel() -> None:
    model_file = open_model_file(EXAMPLE_CAPTURE.read_bytes())
    assert model_file.kind == "capture"
    assert [layer_key(layer) for layer in model_file.layers] == [
        "transformer.layers.0.norm1[0]", "transformer.layers.0.norm2[0]",
        "transformer.layers.1.norm1[0]", "transformer.layers.1.norm2[0]",
        "transformer.norm[0]", "cnn.1[0]", "cnn.4[0]", "cnn.7[0]"]
    overview = capture_overview(model_file)
    assert overview["outlier channels"].tolist() == [str(OUTLIER_CHANNEL)] * 5 + [""] * 3
    assert overview["kind"].tolist() == ["LayerNorm"] * 5 + ["BatchNorm", "GroupNorm",
                                                             "InstanceNorm"]


def test_the_snippet_runs_and_its_file_opens_in_the_inspector(tmp_path: Path,
                                                              monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace = {"model": example_model().transformer, "inputs": torch.randn(2, 5, 48)}
    exec(SNIPPET, namespace)
    model_file = open_model_file((tmp_path / "norms.safetensors").read_bytes())
    assert model_file.kind == "capture"
    assert len(model_file.layers) == 5
    assert isinstance(namespace["cap"].records[0], lnviz.NormRecord)
    assert SNIPPET.count("\n") == 3 and "lnviz.capture(model, inputs)" in SNIPPET


# --- Checkpoints ------------------------------------------------------------------------------


def test_norm_layers_are_recognised_by_name_shape_and_running_statistics() -> None:
    one = np.ones(4, np.float32)
    arrays = {
        "encoder.layer.0.attention.output.LayerNorm.weight": one,  # BERT
        "encoder.layer.0.attention.output.LayerNorm.bias": one * 0,
        "h.0.ln_1.weight": one, "h.0.ln_1.bias": one,  # GPT-2
        "model.layers.0.input_layernorm.weight": one,  # Llama: no bias
        "model.norm.weight": one,
        "bn1.weight": one, "bn1.bias": one, "bn1.running_mean": one, "bn1.running_var": one,
        "bn1.num_batches_tracked": np.array(7.0),
        "features.4.weight": one, "features.4.bias": one,  # an nn.Sequential's GroupNorm
        "fc.weight": np.ones((4, 4)), "fc.bias": one,  # a Linear: 2-D weight
        "act.weight": one,  # PReLU: 1-D weight, no bias, no norm in the name
        "conv.weight": np.ones((4, 3, 3, 3)),
        "proj_norm.weight": np.ones((4, 4)),  # 'norm' in the name, but a matrix
    }
    found = {layer.name: layer for layer in find_norm_layers(arrays)}
    assert list(found) == ["encoder.layer.0.attention.output.LayerNorm", "h.0.ln_1",
                           "model.layers.0.input_layernorm", "model.norm", "bn1", "features.4"]
    assert found["encoder.layer.0.attention.output.LayerNorm"].kind == "LayerNorm"
    assert found["h.0.ln_1"].kind == "LayerNorm"
    assert found["model.layers.0.input_layernorm"].kind == "LayerNorm"  # "layernorm" in it
    assert found["model.layers.0.input_layernorm"].bias is None
    assert found["model.norm"].how == "its name contains 'norm' ('norm')"
    assert found["bn1"].how == "holds running_mean and running_var"
    assert found["bn1"].num_batches_tracked == 7
    assert found["features.4"].how == "a 1-D weight and a bias of the same length"


@pytest.mark.parametrize("build", [TinyModels, lambda: nn.TransformerEncoder(
    nn.TransformerEncoderLayer(16, 4, 32, batch_first=True), 2, norm=nn.LayerNorm(16),
    enable_nested_tensor=False)])
def test_every_norm_module_of_a_torch_model_is_found_in_its_state_dict(build) -> None:
    model = build()
    expected = {name for name, module in model.named_modules()
                if norm_kind(module) is not None and getattr(module, "weight", None) is not None}
    arrays = {k: v.numpy() for k, v in model.state_dict().items()}
    assert {layer.name for layer in find_norm_layers(arrays)} == expected


def test_a_norm_wider_than_any_model_is_refused_before_it_is_tabulated() -> None:
    """1.5 KB of torch.save (one stored value repeated 13 million times) cost the checkpoint view
    19 s and 5 GB, one Python object per channel: a layer wider than
    `INSPECTOR_MAX_NORM_CHANNELS` is refused as the file is read, and one of that width opens."""
    buffer = io.BytesIO()
    torch.save({"norm.weight": torch.zeros(1).expand(13_421_772)}, buffer)
    assert len(buffer.getvalue()) < 2_000
    with pytest.raises(ValueError, match="13,421,772 channels, more than the 65,536"):
        open_model_file(buffer.getvalue())
    widest = find_norm_layers({"norm.weight": np.ones(INSPECTOR_MAX_NORM_CHANNELS, np.float32)})
    assert widest[0].channels == INSPECTOR_MAX_NORM_CHANNELS


@pytest.mark.parametrize("lead", [(), (7,), (2, 3), (2, 3, 4)])
def test_group_labels_are_the_leading_index_made_when_read(lead: tuple[int, ...]) -> None:
    """As np.ndindex names them: "(0, 3)", "3" with one leading dim, "all" with none; a
    layer of millions of groups keeps no list of them."""
    labels = GroupLabels(lead)
    expected = [str(p) if len(p) != 1 else str(p[0]) for p in np.ndindex(*lead)] \
        if lead else ["all"]
    assert list(labels) == expected and len(labels) == len(expected)
    assert labels[-1] == expected[-1] and labels[1:3] == expected[1:3]
    with pytest.raises(IndexError):
        labels[len(expected)]
    tall = GroupLabels((6_500_000,))
    assert len(tall) == 6_500_000 and tall[6_499_999] == "6499999"


def test_gammas_near_the_float64_limit_give_finite_statistics() -> None:
    """γ = 1e308, 1e308, −1e308, 1e308: the mean is 5e307 and the median 1e308 (their sums
    overflowed to inf), so channels 0, 1 and 3 lie at distance 0 and channel 2 is the one far
    out (all four were listed at "distance inf")."""
    gamma = np.array([1e308, 1e308, -1e308, 1e308])
    layers = find_norm_layers({"norm.weight": gamma})
    row = parameter_table(layers, 0.1).iloc[0]
    assert row["γ mean"] == pytest.approx(5e307, rel=1e-12)
    extremes = extreme_channels(layers, 4)
    assert extremes["layer median"].iloc[0] == pytest.approx(1e308, rel=1e-12)
    assert extremes["channel"].iloc[0] == 2
    assert extremes["distance"].tolist()[1:] == [0.0, 0.0, 0.0]


def test_near_zero_gamma_lists_at_most_a_hundred_channels_a_layer() -> None:
    layers = find_norm_layers({"a.norm.weight": np.zeros(500), "b.norm.weight": np.ones(3),
                               "c.norm.weight": np.array([0.0, 1.0, 0.05])})
    table = near_zero_gamma(layers, 0.1)
    assert table["layer"].value_counts().to_dict() == {"a.norm": MAX_OUTLIER_ROWS, "c.norm": 2}
    assert table["channel"].tolist() == [*range(MAX_OUTLIER_ROWS), 0, 2]
    assert table["γ"].tolist() == [0.0] * (MAX_OUTLIER_ROWS + 1) + [pytest.approx(0.05)]
    assert parameter_table(layers, 0.1)["γ ≈ 0"].tolist() == [500, 0, 2]


def test_parameter_table_extremes_and_near_zero_gamma_against_numpy() -> None:
    arrays = {k: v.numpy() for k, v in example_model().state_dict().items()}
    layers = find_norm_layers(arrays)
    table = parameter_table(layers, 0.1).set_index("layer")
    gamma = arrays["transformer.layers.0.norm1.weight"].astype(np.float64)
    row = table.loc["transformer.layers.0.norm1"]
    assert row["γ mean"] == pytest.approx(gamma.mean())
    assert row["γ min"] == pytest.approx(0.05)
    assert row["γ max"] == pytest.approx(gamma.max())
    assert row["γ ≈ 0"] == 1 and row["channels"] == 48
    zero = near_zero_gamma(layers, 0.1)
    assert zero[["layer", "channel"]].values.tolist() == [["transformer.layers.0.norm1",
                                                            OUTLIER_CHANNEL]]
    assert near_zero_gamma(layers, 0.01).empty
    # hand-computed: γ = [1, 1.1, 0.2, 1] has median 1; distances 0, 0.1, 0.8, 0
    hand = find_norm_layers({"norm.weight": np.array([1.0, 1.1, 0.2, 1.0]),
                             "norm.bias": np.array([0.0, 0.0, 0.0, 0.5])})
    extremes = extreme_channels(hand, 2)
    assert extremes[["parameter", "channel"]].values.tolist() == [["γ", 2], ["γ", 1], ["β", 3],
                                                                   ["β", 0]]
    assert extremes["distance"].tolist() == pytest.approx([0.8, 0.1, 0.5, 0.0])


def test_running_statistics_are_the_modules() -> None:
    model = example_model()
    arrays = {k: v.numpy() for k, v in model.state_dict().items()}
    (bn,) = [layer for layer in find_norm_layers(arrays) if layer.running_mean is not None]
    mean, var = running_stats(bn)
    np.testing.assert_array_equal(mean, model.cnn[1].running_mean.numpy())
    np.testing.assert_array_equal(var, model.cnn[1].running_var.numpy())
    assert bn.num_batches_tracked == 5


def test_files_without_norms_say_what_they_hold() -> None:
    npy = open_model_file(npy_bytes(np.zeros((3, 4), np.float32)))
    assert npy.kind == "checkpoint" and find_norm_layers(npy.arrays) == []
    assert "one unnamed array of shape (3, 4)" in no_norm_message(npy)
    linear = nn.Linear(3, 2)
    torch_file = io.BytesIO()
    torch.save(linear.state_dict(), torch_file)
    plain = open_model_file(torch_file.getvalue())
    assert find_norm_layers(plain.arrays) == []
    assert "no normalization layer found among the 2 arrays of this file (weight, bias)" in \
        no_norm_message(plain)
    with pytest.raises(TensorFileError):
        open_model_file(b"junk" * 10)


def test_a_capture_with_a_damaged_description_is_refused() -> None:
    data = bytearray(EXAMPLE_CAPTURE.read_bytes())
    start = data.index(b'"lnviz.records"')
    data[start + 20:start + 24] = b"!!!!"  # inside the JSON list of records
    with pytest.raises(TensorFileError, match="damaged"):
        open_model_file(bytes(data))


# --- Captures ---------------------------------------------------------------------------------


def test_layer_view_of_a_layer_norm_against_torch_and_by_hand() -> None:
    # token 0: 49 zeros and one 7.0 → |z| = √49 = 7 exactly (Samuelson's bound for 50 values)
    x = torch.zeros(1, 3, 50)
    x[0, 0, 11] = 7.0
    x[0, 1] = torch.linspace(-1, 1, 50)
    x[0, 2] = torch.randn(50, generator=torch.Generator().manual_seed(0))
    norm = nn.LayerNorm(50)
    with torch.no_grad():
        norm.weight.fill_(2.0)
        norm.weight[11] = 0.5
        norm.bias.fill_(0.25)
    model_file = opened(norm, x)
    norm.requires_grad_(False)
    (layer,) = model_file.layers
    view = layer_view(layer, model_file.arrays, DEFAULT_SIGMAS)
    x64 = x.double()
    np.testing.assert_allclose(view.mean, x64.mean(-1).ravel().numpy(), atol=1e-12)
    np.testing.assert_allclose(view.std, x64.var(-1, unbiased=False).sqrt().ravel().numpy(),
                               atol=1e-12)
    assert view.group_word == "token" and view.members == 50 and len(view.mean) == 3
    assert view.max_abs_in == 7.0
    assert view.max_abs_out == pytest.approx(float(norm(x).abs().max()), rel=1e-6)
    assert view.outlier_values == 1
    (row,) = view.outliers.to_dict("records")
    assert row["channel"] == 11 and row["outlier values"] == 1 and row["of"] == 3
    assert row["largest |z| (σ)"] == pytest.approx(7.0)
    assert row["at token"] == "(0, 0)"
    assert row["input x"] == 7.0
    assert row["output y"] == pytest.approx(float(norm(x)[0, 0, 11]), rel=1e-6)
    # y = 0.5·x̂ + 0.25 against 2·x̂ + 0.25 elsewhere: y's own |z| among the token's outputs
    y = norm(x)[0, 0].detach().double()
    assert row["y's |z| after (σ)"] == pytest.approx(
        float((y[11] - y.mean()).abs() / y.std(unbiased=False)), rel=1e-6)
    assert row["γ"] == 0.5 and row["β"] == 0.25
    assert max_sigmas(50) == 7.0
    plain = opened(nn.LayerNorm(50), x)  # γ = 1, β = 0: normalizing alone keeps |z|
    (kept,) = layer_view(plain.layers[0], plain.arrays).outliers.to_dict("records")
    assert kept["y's |z| after (σ)"] == pytest.approx(7.0, rel=1e-5)
    assert layer_view(layer, model_file.arrays, 7.5).outliers.empty
    # every point drawn, one of them orange
    assert len(view.scatter_x) == 150 and view.scatter_outlier.sum() == 1


def test_a_threshold_beyond_samuelsons_bound_is_named() -> None:
    model_file = opened(nn.LayerNorm(16), torch.randn(2, 16))
    view = layer_view(model_file.layers[0], model_file.arrays, 6.0)
    assert view.outliers.empty
    assert "none can lie more than √15 ≈ 3.87 σ" in view.notes[0]
    assert layer_view(model_file.layers[0], model_file.arrays, 3.0).notes == []


def test_layer_view_of_batch_norm_and_group_norm_against_torch() -> None:
    x = torch.randn(4, 6, 5, 5, generator=torch.Generator().manual_seed(3))
    x[2, 5, 1, 3] = 60.0  # channel 5
    for module, word, groups in ((nn.BatchNorm2d(6), "channel", 6),
                                 (nn.GroupNorm(3, 6), "channel group", 12),
                                 (nn.InstanceNorm2d(6), "channel of a sample", 24)):
        model_file = opened(module.train(), x)
        # 4.5 σ: an InstanceNorm group here has 25 values, so none is more than √24 ≈ 4.9 σ out
        view = layer_view(model_file.layers[0], model_file.arrays, 4.5)
        assert view.group_word == word and len(view.mean) == groups
        if word == "channel":
            expected_mean, expected_var = x.double().mean((0, 2, 3)), \
                x.double().var((0, 2, 3), unbiased=False)
        else:
            per = x.double().reshape(4, groups // 4, -1)
            expected_mean, expected_var = per.mean(-1).ravel(), per.var(-1, unbiased=False).ravel()
        np.testing.assert_allclose(view.mean, expected_mean.numpy(), atol=1e-12)
        np.testing.assert_allclose(view.std, expected_var.sqrt().numpy(), atol=1e-12)
        assert view.outliers["channel"].tolist()[0] == 5, word
        assert view.outliers["input x"].tolist()[0] == 60.0
        if word != "channel group":  # one γ, β per group: the layer keeps |z| as it was
            np.testing.assert_allclose(view.outliers["y's |z| after (σ)"],
                                       view.outliers["largest |z| (σ)"], rtol=1e-5)
            assert "y's |z| equals x's" in view.outlier_note
        else:
            assert "γ and β, which differ from channel to channel" in view.outlier_note
    label = layer_view(opened(nn.GroupNorm(3, 6), x).layers[0],
                       opened(nn.GroupNorm(3, 6), x).arrays, 4.5).outliers["at channel group"][0]
    assert label == "(2, 2)"  # sample 2, group 2 (channels 4 and 5)


def test_eval_batch_norm_says_it_used_running_statistics() -> None:
    model_file = open_model_file(EXAMPLE_CAPTURE.read_bytes())
    layer = next(layer for layer in model_file.layers if layer.kind == "BatchNorm")
    view = layer_view(layer, model_file.arrays)
    assert any("evaluation mode" in note for note in view.notes)


# --- The Explorer's settings for a captured layer ----------------------------------------------


def explorer_output(layer: CapturedLayer, arrays: dict[str, np.ndarray]) -> np.ndarray:
    """What the Explorer computes for the layer with the settings explorer_setup gives, back in
    the layer's own axis order."""
    values = arrays[layer.arrays["input"]]
    setup = explorer_setup(layer, values.shape, arrays.get(layer.arrays.get("weight", "")),
                           arrays.get(layer.arrays.get("bias", "")))
    spec = NormSpec(norm=setup.norm, dims=setup.dims, groups=setup.groups, eps=setup.eps,
                    gamma=setup.gamma or 1.0, beta=setup.beta or 0.0)
    out = normalize(torch.from_numpy(explorer_batch(values, setup)), setup.layout, spec).output
    out = np.transpose(out.numpy(), np.argsort(setup.order))
    return out[0] if setup.add_batch_dim else out


def test_the_explorer_settings_reproduce_every_layer_in_training_mode() -> None:
    model = example_model()
    model.cnn.train()
    model_file = open_model_file(capture_bytes(model, *example_inputs()))
    for layer in model_file.layers:
        np.testing.assert_allclose(explorer_output(layer, model_file.arrays),
                                   model_file.arrays[layer.arrays["output"]], rtol=1e-4,
                                   atol=1e-4, err_msg=layer_key(layer))


def test_explorer_setup_of_each_kind() -> None:
    model_file = open_model_file(EXAMPLE_CAPTURE.read_bytes())
    arrays = model_file.arrays
    setups = {layer_key(layer): explorer_setup(
        layer, arrays[layer.arrays["input"]].shape, arrays[layer.arrays["weight"]],
        arrays[layer.arrays["bias"]]) for layer in model_file.layers}
    ln = setups["transformer.layers.0.norm1[0]"]
    assert (ln.norm, ln.layout, ln.order, ln.dims, ln.eps) == ("LayerNorm", "NLC", (0, 1, 2),
                                                               1, 1e-5)
    assert ln.gamma[OUTLIER_CHANNEL] == pytest.approx(0.05) and len(ln.beta) == 48
    gn = setups["cnn.4[0]"]
    assert (gn.norm, gn.layout, gn.groups) == ("GroupNorm", "NCHW", 4)
    bn = setups["cnn.1[0]"]
    assert bn.norm == "BatchNorm" and "running statistics" in bn.notes[0]


def test_channels_first_inputs_and_odd_settings() -> None:
    x = torch.randn(3, 5, 7)
    model_file = opened(nn.BatchNorm1d(5).train(), x)  # (N, C, L)
    (layer,) = model_file.layers
    setup = explorer_setup(layer, (3, 5, 7))
    assert (setup.layout, setup.order) == ("NLC", (0, 2, 1))
    assert explorer_batch(x.numpy(), setup).shape == (3, 7, 5)
    np.testing.assert_allclose(explorer_output(layer, model_file.arrays),
                               model_file.arrays[layer.arrays["output"]], atol=1e-5)
    rms = opened(nn.RMSNorm(7), x).layers[0]  # eps=None: torch's machine epsilon
    setup = explorer_setup(rms, (3, 5, 7))
    assert setup.eps == 1e-7
    assert "1.19e-07" in setup.notes[0] and "nearest, 1e-07" in setup.notes[1]
    unbatched = opened(nn.InstanceNorm1d(5), torch.randn(5, 7)).layers[0]
    setup = explorer_setup(unbatched, (5, 7))
    assert setup.add_batch_dim and setup.order == (0, 2, 1)
    three_d = opened(nn.BatchNorm3d(2).train(), torch.randn(2, 2, 3, 3, 3)).layers[0]
    with pytest.raises(ValueError, match="up to 4 dims"):
        explorer_setup(three_d, (2, 2, 3, 3, 3))


def test_capture_layers_is_none_for_other_files() -> None:
    assert capture_layers(EXAMPLE_CHECKPOINT.read_bytes()) is None
    assert capture_layers(b"\x93NUMPY") is None
    assert len(capture_layers(EXAMPLE_CAPTURE.read_bytes())) == 8


# --- The page ---------------------------------------------------------------------------------


def test_the_page_opens_on_the_example_capture() -> None:
    at = open_page(INSPECTOR)
    assert alerts(at)["error"] == [] and alerts(at)["warning"] == []
    overview = table_with(at, "outlier channels").value
    assert len(overview) == 8
    assert "lnviz.capture(model, inputs)" in at.code[0].value
    model_file = open_model_file(EXAMPLE_CAPTURE.read_bytes())
    view = layer_view(model_file.layers[0], model_file.arrays)
    assert [m.value for m in at.metric] == ["(2, 10, 48)", f"{view.max_abs_in:.4g}",
                                            f"{view.max_abs_out:.4g}",
                                            f"{view.outlier_values:,}"]
    outliers = table_with(at, "largest |z| (σ)").value
    assert outliers["channel"].tolist() == [OUTLIER_CHANNEL]
    assert len(figures(at)) == 3
    np.testing.assert_allclose(trace_data(at, 1, 0, "y"), view.mean, rtol=1e-6)
    at.number_input(key="in_sigma").set_value(7.0).run()  # above √47 ≈ 6.86
    assert any("√47" in note for note in alerts(at)["info"])
    assert not any("largest |z| (σ)" in d.value.columns for d in at.dataframe)


def test_the_page_shows_the_example_checkpoint() -> None:
    at = open_page(INSPECTOR, {"in_src": "Example checkpoint"})
    assert alerts(at)["error"] == [] and alerts(at)["warning"] == []
    table = table_with(at, "recognised as").value
    assert len(table) == 8
    assert table_with(at, "γ").value["channel"].tolist() == [OUTLIER_CHANNEL]
    assert len(figures(at)) == 2
    np.testing.assert_allclose(trace_data(at, 1, 0, "y"),
                               example_model().cnn[1].running_mean.numpy(), rtol=1e-6)


@pytest.mark.parametrize(("name", "content", "kind", "message"), [
    ("acts.npy", npy_bytes(np.zeros(2, np.float32)), "warning",
     "one unnamed array of shape (2,)"),
    ("junk.pt", b"junk" * 20, "error", "Cannot open junk.pt"),
])
def test_odd_uploads_get_a_message(name, content, kind, message) -> None:
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload(name, content).run()
    assert not at.exception
    assert any(message in text for text in alerts(at)[kind]), alerts(at)


def test_a_checkpoint_without_norms_is_explained() -> None:
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    buffer = io.BytesIO()
    torch.save(nn.Linear(3, 2).state_dict(), buffer)
    at.file_uploader(key="in_upload").upload("linear.pt", buffer.getvalue()).run()
    assert any("no normalization layer found" in w for w in alerts(at)["warning"])


def test_an_uploaded_capture_opens_in_the_explorer_with_the_layers_settings() -> None:
    model = nn.Sequential(nn.Linear(6, 6), nn.GroupNorm(2, 6))
    with torch.no_grad():
        model[1].weight.copy_(torch.tensor([0.5, 1.0, 1.5, 2.0, 2.5, 3.0]))
    x = torch.randn(4, 6, generator=torch.Generator().manual_seed(0))
    cap = lnviz.capture(model, x)
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload("norms.safetensors", cap.to_bytes()).run()
    assert table_with(at, "outlier channels").value["layer"].tolist() == ["1[0]"]
    at.button(key="in_open").click().run()
    assert not at.exception
    # a link to this view (the layer is the first, the selectbox's default: left out)
    assert dict(at.query_params) == {"src": "Captured layer"}
    assert at.segmented_control(key="src").value == "capture"
    assert at.segmented_control(key="norm").value == "GroupNorm"
    assert at.select_slider(key="groups").value == 2
    assert at.radio(key="affine").value == "per feature"
    np.testing.assert_allclose(trace_data(at, 0, 1), cap.records[0].output.numpy(), atol=1e-5)
    assert "matches" in alerts(at)["success"][0]


def test_the_explorer_opens_the_example_capture_by_itself() -> None:
    at = open_page(EXPLORER, {"src": "Captured layer"})
    assert at.segmented_control(key="norm").value == "LayerNorm"
    model_file = open_model_file(EXAMPLE_CAPTURE.read_bytes())
    layer = model_file.layers[0]
    expected = model_file.arrays[layer.arrays["output"]].reshape(20, 48)
    np.testing.assert_allclose(trace_data(at, 0, 1), expected, atol=1e-4)
    at.selectbox(key="layer").set_value("cnn.1[0]").run()
    assert at.segmented_control(key="norm").value == "BatchNorm"
    assert any("running statistics" in c.value for c in at.caption)
    at.segmented_control(key="norm").set_value("LayerNorm").run()  # the learner's choice stays
    assert at.segmented_control(key="norm").value == "LayerNorm"


def test_a_capture_uploaded_to_the_explorer_sets_its_layer(tmp_path: Path) -> None:
    at = open_page(EXPLORER, {"src": "Upload a file"})
    at.file_uploader(key="upload").upload("caps.safetensors",
                                          EXAMPLE_CAPTURE.read_bytes()).run()
    picker = at.selectbox(key="array")
    assert "transformer.layers.0.norm1[0].input  (2, 10, 48)" in picker.options
    # it opens on the first layer's input, not on the first tensor the file lists
    assert picker.value.endswith("[0].input") and picker.index == next(
        k for k, option in enumerate(picker.options) if "].input" in option)
    picker.set_value("cnn.4[0].input").run()
    assert at.segmented_control(key="norm").value == "GroupNorm"
    assert at.select_slider(key="groups").value == 4
    # arranged as the layer saw it: no axis to pick
    assert not [box for box in at.selectbox if box.key == "ax_ch"]
    assert "A captured layer's input: arranged as the layer saw it (NCHW)." in [
        c.value for c in at.caption]
    assert "matches" in alerts(at)["success"][0]


def test_an_uploaded_capture_of_an_unbatched_instance_norm_keeps_its_groups(
        tmp_path: Path) -> None:
    """An InstanceNorm2d called on one (C, H, W) image: the upload gave the Explorer 15 groups
    of 4 (the channels taken as a batch) where the layer has 3 channels of 20 values, and an
    InstanceNorm1d on (C, L) was refused as a table; both now open as the layer saw them."""
    torch.manual_seed(0)
    for module, x, groups in ((nn.InstanceNorm2d(3), torch.randn(3, 4, 5), 3),
                              (nn.InstanceNorm1d(3), torch.randn(3, 4), 3)):
        path = tmp_path / "in.safetensors"
        lnviz.capture(module, x).save(path)
        at = open_page(EXPLORER, {"src": "Upload a file"})
        at.file_uploader(key="upload").upload("in.safetensors", path.read_bytes()).run()
        assert not at.exception and at.segmented_control(key="norm").value == "InstanceNorm"
        assert f"{groups} groups." in " ".join(c.value for c in at.caption)
        assert "matches" in alerts(at)["success"][0]


def test_a_state_dict_uploaded_to_the_explorer_lists_its_arrays_with_shapes() -> None:
    buffer = io.BytesIO()
    torch.save({"model": nn.Linear(3, 2).state_dict(), "step": 3}, buffer)
    at = open_page(EXPLORER, {"src": "Upload a file"})
    at.file_uploader(key="upload").upload("ckpt.pth", buffer.getvalue()).run()
    assert at.selectbox(key="array").options == ["model.weight  (2, 3)", "model.bias  (2,)"]
    assert not at.exception and "matches" in alerts(at)["success"][0]


def test_every_uploader_accepts_the_tensor_file_types() -> None:
    at = open_page(EXPLORER, {"src": "Upload a file"})
    assert sorted(at.file_uploader(key="upload").proto.type) == sorted(
        [".npy", ".npz", ".safetensors", ".pt", ".pth"])
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    assert sorted(at.file_uploader(key="in_upload").proto.type) == sorted(
        [".npy", ".npz", ".safetensors", ".pt", ".pth"])



@pytest.mark.parametrize("suffix", ["safetensors", "pt"])
def test_the_training_pages_uploader_reads_mnist_arrays_in_the_new_formats(suffix) -> None:
    from safetensors.torch import save

    from lnviz.data.sequences import load_files

    rng = np.random.default_rng(0)
    arrays = {"x_train": torch.from_numpy(rng.integers(0, 255, (6, 28, 28), np.uint8)),
              "y_train": torch.arange(6) % 10, "x_test": torch.zeros(2, 28, 28, dtype=torch.uint8),
              "y_test": torch.tensor([3, 4])}
    if suffix == "safetensors":
        data = save(arrays)
    else:
        buffer = io.BytesIO()
        torch.save(arrays, buffer)
        data = buffer.getvalue()
    npz = io.BytesIO()
    np.savez(npz, **{k: v.numpy() for k, v in arrays.items()})
    loaded, expected = load_files({f"mnist.{suffix}": data}), load_files({"mnist.npz":
                                                                          npz.getvalue()})
    np.testing.assert_array_equal(loaded.x_train, expected.x_train)
    np.testing.assert_array_equal(loaded.y_test, [3, 4])


def test_a_link_to_a_captured_layer_keeps_the_settings_it_carries() -> None:
    label = "cnn.1[0] · BatchNorm · input (4, 8, 8, 8)"
    at = open_page(EXPLORER, {"src": "Captured layer", "layer": label})
    assert at.selectbox(key="layer").value == "cnn.1[0]"
    assert at.segmented_control(key="norm").value == "BatchNorm"  # the layer's own
    at = open_page(EXPLORER, {"src": "Captured layer", "layer": label, "norm": "LayerNorm"})
    assert at.segmented_control(key="norm").value == "LayerNorm"  # the link's
    at.selectbox(key="layer").set_value("cnn.4[0]").run()  # a layer picked: its settings
    assert at.segmented_control(key="norm").value == "GroupNorm"


def test_gamma_and_beta_of_an_outlier_are_its_channels() -> None:
    """GroupNorm of 8 channels in 4 groups on 2 × 2 images: a group holds 8 values, as many as
    there are channels, so only the channel (not the place in the group) may pick γ and β."""
    x = torch.randn(3, 8, 2, 2, generator=torch.Generator().manual_seed(5))
    x[1, 5, 1, 1] = 30.0  # 8th of its group: γ[7] if the place in the group picked it
    norm = nn.GroupNorm(4, 8)
    with torch.no_grad():
        norm.weight.copy_(torch.arange(8.0) + 1)
        norm.bias.copy_(-torch.arange(8.0))
    model_file = opened(norm, x)
    table = layer_view(model_file.layers[0], model_file.arrays, 2.5).outliers
    (row,) = table[table["channel"] == 5].to_dict("records")
    assert (row["channel"], row["γ"], row["β"], row["at channel group"]) == (5, 6.0, -5.0,
                                                                             "(1, 2)")
    assert row["of"] == 12  # channel 5: 3 samples × 4 positions


def test_the_readme_shows_the_snippet_the_page_shows() -> None:
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    section = readme[readme.index("## Inspect your own model"):]
    for line in ("cap = lnviz.capture(model, inputs)", 'cap.save("norms.safetensors")'):
        assert line in SNIPPET and line in section[:section.index("\n## ", 3)]


def test_a_capture_without_layers_and_a_layer_the_explorer_cannot_show() -> None:
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload("none.safetensors",
                                             capture_bytes(nn.Linear(3, 2), torch.ones(1, 3))).run()
    assert any("holds no layer" in text for text in alerts(at)["info"])
    at.file_uploader(key="in_upload").upload(
        "bn3d.safetensors", capture_bytes(nn.BatchNorm3d(2), torch.randn(2, 2, 3, 3, 3))).run()
    at.button(key="in_open").click().run()
    assert not at.exception
    assert any("up to 4 dims" in text for text in alerts(at)["error"]), alerts(at)


def test_the_inspectors_file_is_forgotten_when_the_learner_leaves() -> None:
    from lnviz.ui.cache import STORE_KEY, names_in

    def held(at) -> bool:
        return any(name[:1] == ("inspector",) for _, key in at.session_state[STORE_KEY]
                   for name in names_in(key))

    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload("norms.safetensors",
                                             EXAMPLE_CAPTURE.read_bytes()).run()
    assert held(at)
    at.switch_page("app_pages/home.py").run()
    assert not held(at)


# --- Layers on an axis: one category each, in model order, as plain text -----------------------


def _category_counts(fig: dict, trace: int) -> dict[str, int]:
    values = fig["data"][trace]["x"]
    return {name: values.count(name) for name in dict.fromkeys(values)}


def test_layers_that_end_alike_stay_one_category_each_in_model_order() -> None:
    """all-MiniLM-L6-v2's six ``encoder.layer.N.attention.output.LayerNorm`` end in the same
    characters: each is its own bar, in the order the model called them, labelled by its
    shortened name and hovered by its whole one."""
    names = ["embeddings.LayerNorm[0]"] + [
        f"encoder.layer.{i}.{part}.LayerNorm[0]" for i in range(6)
        for part in ("attention.output", "output")]
    values = np.arange(1.0, 14.0)
    fig = inspector_charts.layers_figure(names, values, values, values, values + 1
                                               ).to_plotly_json()
    assert fig["data"][0]["x"] == names
    assert fig["layout"]["xaxis"]["categoryarray"] == names
    axis = fig["layout"]["xaxis"]
    assert axis["tickvals"][0] == names[0] and set(axis["tickvals"]) <= set(names)
    assert all(len(t) <= 22 and name.endswith(t.lstrip("…"))
               for t, name in zip(axis["ticktext"], axis["tickvals"], strict=True))
    np.testing.assert_array_equal(decode(fig["data"][0]["y"]), values)


@pytest.mark.parametrize("count", [8, 53, 2000])
def test_layer_labels_on_a_phone_are_as_many_as_fit(count: int) -> None:
    """53 BatchNorms of a ResNet-like checkpoint wrote 53 slanted labels into one grey block on
    a 390-px phone: the labels shown are those that fit, upright, a line of text apart."""
    names = [f"layer{i // 4}.{i % 4}.bn{i % 3}" for i in range(count)]
    ones = [np.ones(2)] * count
    fig = inspector_charts.parameters_figure(names, ones, ones).to_plotly_json()
    axis, layout = fig["layout"]["xaxis"], fig["layout"]
    panel_px = NARROW_PLOT_PX * (axis["domain"][1] - axis["domain"][0])
    shown = [names.index(v) for v in axis["tickvals"]]
    gap_px = panel_px / count * min(b - a for a, b in itertools.pairwise(shown)) \
        if len(shown) > 1 else panel_px
    assert axis["tickangle"] == -90 and gap_px >= 15  # a line of 12-px text
    assert len(shown) >= min(count, 4)
    assert layout["xaxis"]["categoryarray"] == names



def test_a_checkpoints_boxes_are_one_per_layer_with_that_layers_gammas() -> None:
    """A BERT-style checkpoint whose layer i has γ = 1 + i: 25 boxes, in key order, each holding
    exactly its layer's channels (the shortened names once pooled twelve layers into one box)."""
    arrays = {}
    for i in range(12):
        for part in ("attention.output", "output"):
            arrays[f"bert.encoder.layer.{i}.{part}.LayerNorm.weight"] = np.full(4, 1.0 + i)
            arrays[f"bert.encoder.layer.{i}.{part}.LayerNorm.bias"] = np.zeros(4)
    arrays["bert.embeddings.LayerNorm.weight"] = np.full(4, 50.0)
    arrays["bert.embeddings.LayerNorm.bias"] = np.zeros(4)
    layers = find_norm_layers(arrays)
    assert len(layers) == 25
    fig = inspector_charts.parameters_figure(
        [layer.name for layer in layers], [layer.weight for layer in layers],
        [layer.bias for layer in layers]).to_plotly_json()
    names = [layer.name for layer in layers]
    assert fig["layout"]["xaxis"]["categoryarray"] == names
    assert _category_counts(fig, 0) == {name: 1 for name in names}
    box = fig["data"][0]
    for key in ("q1", "median", "q3", "lowerfence", "upperfence"):
        np.testing.assert_array_equal(decode(box[key]), [layer.weight[0] for layer in layers])
    assert fig["data"][2]["x"] == []  # no channel beyond the whiskers


def test_a_box_is_computed_from_its_channels_and_its_size_does_not_grow_with_them() -> None:
    """Hand-computed: γ = 1, 2, …, 8 and 100 has quartiles 3, 5, 7 (numpy's linear method),
    whiskers 1 and 8 (within 7 + 1.5 × 4 = 13), and 100 beyond them. A layer of 200,000
    channels, 1,000 of them far out, sends its five numbers and the 100 farthest points."""
    gamma = np.array([1, 2, 3, 4, 5, 6, 7, 8, 100], dtype=np.float32)
    fig = inspector_charts.parameters_figure(["ln"], [gamma], [None]).to_plotly_json()
    box, beyond = fig["data"][0], fig["data"][2]
    assert [decode(box[k])[0] for k in ("lowerfence", "q1", "median", "q3", "upperfence")] == [
        1, 3, 5, 7, 8]
    assert beyond["x"] == ["ln"] and decode(beyond["y"]).tolist() == [100]
    assert fig["data"][1]["x"] == [] and fig["data"][3]["x"] == []  # no β: no box

    rng = np.random.default_rng(0)
    wide = rng.normal(1.0, 0.01, 200_000)
    wide[:500], wide[500:1000] = -50 - np.arange(500), 50 + np.arange(500)
    built = inspector_charts.parameters_figure(["wide"], [wide], [wide])
    assert len(built.to_json()) < 20_000
    points = decode(built.to_plotly_json()["data"][2]["y"])
    assert points.size == inspector_charts.MAX_OUTLIERS_SHOWN
    assert sorted(points) == sorted(np.concatenate([-50 - np.arange(499, 449, -1),
                                                    50 + np.arange(450, 500)]))
    q1, median, q3 = np.percentile(wide, [25, 50, 75])
    box = built.to_plotly_json()["data"][0]
    assert decode(box["q1"])[0] == pytest.approx(q1, rel=1e-6)
    assert decode(box["median"])[0] == pytest.approx(median, rel=1e-6)
    assert decode(box["q3"])[0] == pytest.approx(q3, rel=1e-6)


def test_markup_in_a_layer_name_is_shown_as_typed_in_the_figures() -> None:
    """A name from a file is text: Plotly renders <a href>, <b> and <br> in labels and hover,
    so they arrive escaped, as the characters the file holds."""
    evil = '<a href="//e.io">X</a><b>bold</b>'
    built = inspector_charts.layers_figure([evil, "ln"], [1.0, 2.0], [1.0, 2.0], [1.0, 1.0],
                                           [2.0, 2.0])
    assert "<a " not in built.to_json() and "<b>bold" not in built.to_json()
    fig = built.to_plotly_json()
    assert html.unescape(fig["layout"]["xaxis"]["ticktext"][0]).endswith(evil[-21:])
    assert html.unescape(fig["data"][0]["x"][0]) == evil
    box = inspector_charts.parameters_figure([evil], [np.ones(2)], [None]).to_json()
    assert "<a " not in box and "<b>bold" not in box


# --- What a file declares is checked when it is read ----------------------------------------


def with_records(edit: Callable[[list[dict]], object]) -> bytes:
    """The example capture with its description of the layers changed by ``edit`` (which
    changes the list in place, or returns what to write instead)."""
    data = EXAMPLE_CAPTURE.read_bytes()
    metadata = safetensors_metadata(data)
    records = json.loads(metadata["lnviz.records"])
    replaced = edit(records)
    metadata["lnviz.records"] = json.dumps(records if replaced is None else replaced)
    return st_torch.save(st_torch.load(data), metadata=metadata)


def setting(index: int, key: str, value: object) -> Callable[[list[dict]], None]:
    def edit(records: list[dict]) -> None:
        if value is _MISSING:
            del records[index]["settings"][key]
        else:
            records[index]["settings"][key] = value
    return edit


_MISSING = object()
#: the example capture's records: a LayerNorm, a BatchNorm, a GroupNorm, an InstanceNorm
_LN, _BN, _GN, _IN = 0, 5, 6, 7


@pytest.mark.parametrize("edit, message", [
    (setting(_GN, "num_groups", 0), "num_groups = 0 does not divide its 8 channels"),
    (setting(_GN, "num_groups", 16), "num_groups = 16 does not divide its 8 channels"),
    (setting(_GN, "num_groups", "4"), "num_groups = '4'"),
    (setting(_LN, "normalized_shape", _MISSING), "normalized_shape None"),
    (setting(_LN, "normalized_shape", 48), "normalized_shape 48"),
    (setting(_LN, "normalized_shape", [10, 48]), "its weight has shape [48], not [10, 48]"),
    (setting(_LN, "normalized_shape", [2, 10, 48, 1]), "not the last dims of its input"),
    (setting(_LN, "eps", [1]), "ε = [1] is not a number"),
    (setting(_LN, "eps", "1e-5"), "ε = '1e-5' is not a number"),
    (setting(_LN, "eps", -1.0), "ε = -1.0"),
    (setting(_BN, "use_batch_stats", "no"), "training flags"),
    (setting(_BN, "num_batches_tracked", -3), "num_batches_tracked"),
    (setting(_LN, "module", {"a": 1}), "module name is not text"),
    (lambda records: records[_LN].update(settings=[["eps", 1e-5]]), "settings and arrays"),
    (lambda records: records[_LN].update(call=True), "whole number"),
    (lambda records: {"not": "a list"}, "not a list"),
    (lambda records: records[_BN]["arrays"].update(bias=records[_LN]["arrays"]["bias"]),
     "its bias has shape [48], not [8]"),
    (setting(_LN, "eps", 10**400), "ε = 1000"),
    (setting(_BN, "momentum", 10**400), "training flags, momentum"),
    (lambda records: records.append(dict(records[_LN])), "is described twice"),
    (lambda records: records.append(dict(records[_LN], call=1)), "which is already the input"),
    (lambda records: records[_LN]["arrays"].update(output=records[_LN]["arrays"]["input"]),
     "its output is tensor"),
    (setting(_BN, "batched", False), "only an InstanceNorm record does"),
    (setting(_GN, "batched", False), "only an InstanceNorm record does"),
    # a sixth hostile pass: settings the schema passed and replay() indexed or torch overflowed
    (setting(_LN, "eps", 10**300), "ε = 1000"),
    (setting(_LN, "eps", _MISSING), "ε = None"),
    (setting(_BN, "momentum", _MISSING), "training flags, momentum"),
    (setting(_IN, "batched", _MISSING), "does not say whether its input has a batch dim"),
    (lambda records: records[_LN].update(name="norm\ud800"), "valid Unicode"),
    (setting(_LN, "module", "\ud800"), "module name is not text"),
], ids=["groups-0", "groups-above-channels", "groups-text", "shape-missing", "shape-int",
        "shape-longer-than-weight", "shape-longer-than-input", "eps-list", "eps-text",
        "eps-negative", "flag-text", "tracked-negative", "module-object", "settings-list",
        "call-bool", "records-object", "bias-of-another-layer", "eps-401-digits",
        "momentum-401-digits", "record-twice", "tensor-of-two-records", "output-is-input",
        "batchnorm-unbatched", "groupnorm-unbatched", "eps-int-beyond-float",
        "eps-missing", "momentum-missing", "instancenorm-batched-missing",
        "name-lone-surrogate", "module-lone-surrogate"])
def test_a_captures_description_is_checked_against_its_tensors(edit, message) -> None:
    """Metadata a file declares is refused when it is read, saying what does not fit, instead of
    crashing the inspector or the Explorer later (num_groups 0 divided by zero; eps "1e-5" met
    a number format; eps [1] reached the Explorer's ε; a 401-digit ε overflowed a float) or
    costing minutes of CPU (one large tensor named by thousands of records)."""
    with pytest.raises(TensorFileError, match="description of its layers is damaged") as err:
        open_model_file(with_records(edit))
    assert message in str(err.value)


def test_the_inspector_refuses_a_damaged_capture_with_a_message() -> None:
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload(
        "norms.safetensors", with_records(setting(_LN, "eps", [1]))).run()
    assert not at.exception
    assert any("Cannot open norms.safetensors" in e and "ε = [1]" in e
               for e in alerts(at)["error"]), alerts(at)


def test_markup_in_a_captures_module_name_is_shown_as_typed() -> None:
    """Everything a file says is plain text on the page: a module name made of markdown shows
    its characters, not a link, bold, colour or LaTeX."""
    evil = "[click me](https://evil.example) **BOLD** :red[RED] $x^2$"
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload(
        "norms.safetensors", with_records(setting(_LN, "module", evil))).run()
    assert not at.exception
    caption = next(c.value for c in at.caption if "one group is one" in c.value)
    assert f"LayerNorm ({evil})" in shown_text(caption)
    assert caption == plain(shown_text(caption))


def checkpoint_bytes(**changes: torch.Tensor) -> bytes:
    """A state dict with a BatchNorm (``bn``) and a LayerNorm (``ln``), some tensors replaced."""
    model = nn.Sequential()
    model.add_module("bn", nn.BatchNorm1d(4))
    model.add_module("ln", nn.LayerNorm(4))
    state = model.state_dict() | changes
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


@pytest.mark.parametrize("changes, message", [
    ({"bn.bias": torch.zeros(2)}, "bn: its weight has 4 channels, its bias 2"),
    ({"bn.running_var": torch.ones(3)}, "bn: its weight has 4 channels, its running_var 3"),
    ({"bn.num_batches_tracked": torch.tensor(float("nan"))}, "num_batches_tracked = nan"),
    ({"bn.num_batches_tracked": torch.tensor(float("inf"))}, "num_batches_tracked = inf"),
    ({"bn.num_batches_tracked": torch.tensor([1, 2])}, "num_batches_tracked holds 2 values"),
], ids=["bias-shorter", "running-var-shorter", "tracked-nan", "tracked-inf", "tracked-two"])
def test_a_checkpoint_whose_norm_tensors_disagree_is_refused(changes, message) -> None:
    """A BatchNorm whose bias is shorter than its weight (an IndexError in the γ ≈ 0 table) or
    whose num_batches_tracked is not a count (a ValueError outside the refusal) is refused when
    the file is opened."""
    with pytest.raises(ValueError, match="is not read") as err:
        open_model_file(checkpoint_bytes(**changes))
    assert message in str(err.value)
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload("ckpt.pt", checkpoint_bytes(**changes)).run()
    assert not at.exception
    assert any(message in e for e in alerts(at)["error"]), alerts(at)


@pytest.mark.parametrize("tensor, message", [
    (torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), "a nested tensor"),
    (torch.zeros(2, dtype=torch.float4_e2m1fn_x2), "unsupported dtype float4_e2m1fn_x2"),
], ids=["nested", "float4"])
def test_odd_tensors_in_a_checkpoint_get_a_message_on_the_page(tensor, message) -> None:
    buffer = io.BytesIO()
    torch.save({"ln.weight": torch.ones(4), "odd": tensor}, buffer)
    at = open_page(INSPECTOR, {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload("ckpt.pt", buffer.getvalue()).run()
    assert not at.exception
    assert any(message in e for e in alerts(at)["error"]), alerts(at)



def test_a_capture_listing_one_tensor_thousands_of_times_is_refused_at_once() -> None:
    """4.4 MB that named one 400,000-value tensor as the input and output of 16,900 records cost
    the server about 8 minutes of CPU in the overview: refused when read, in well under a
    second."""
    x = torch.randn(50_000, 8)
    record = {"name": "", "kind": "layer_norm", "dtype": "float32",
              "settings": {"normalized_shape": [8], "eps": 0},
              "arrays": {"input": "a", "output": "a"}}
    records = [dict(record, call=i) for i in range(16_900)]
    data = st_torch.save({"a": x}, metadata={"lnviz": "capture", "lnviz.version": "1",
                                             "lnviz.records": json.dumps(records)})
    start = time.thread_time()  # the work's CPU, not a busy machine's wall clock
    with pytest.raises(TensorFileError, match="its output is tensor 'a', which is already"):
        open_model_file(data)
    assert time.thread_time() - start < 5


def test_a_batchnorm_with_an_outlier_in_every_channel_is_read_in_a_second() -> None:
    """A BatchNorm's groups are a strided view of its input, and each outlier channel copied the
    whole tensor: 2 × 104,857 values at a 0.5 σ threshold took 188 s. Now one copy is made."""
    x = np.random.default_rng(0).standard_normal((2, 104_857)).astype(np.float32)
    record = {"name": "bn", "call": 0, "kind": "batch_norm", "dtype": "float32",
              "settings": {"module": "BatchNorm1d", "eps": 1e-5, "momentum": 0.1,
                           "training": True, "use_batch_stats": True,
                           "track_running_stats": True},
              "arrays": {"input": "bn[0].input", "output": "bn[0].output"}}
    data = st_numpy.save({"bn[0].input": x, "bn[0].output": x.copy()},
                         metadata={"lnviz": "capture", "lnviz.version": "1",
                                   "lnviz.records": json.dumps([record])})
    model_file = open_model_file(data)
    start = time.process_time()
    view = layer_view(model_file.layers[0], model_file.arrays, 0.5)
    assert time.process_time() - start < 10
    assert len(view.outliers) == MAX_OUTLIER_ROWS  # every channel has outliers; 100 listed


def test_an_outlier_near_the_float64_limit_is_found_with_a_finite_sigma(tmp_path: Path) -> None:
    """A float64 capture whose input holds one 1e160 among ones: σ² overflowed (σ = inf, every
    z 0) and the page said no value lay beyond 6 σ; it lies 9.95 σ out (√99 for 1 of 100)."""
    x = torch.ones(2, 100, dtype=torch.float64)
    x[0, 5] = 1e160
    path = tmp_path / "huge.safetensors"
    lnviz.capture(nn.LayerNorm(100, elementwise_affine=False).double(), x).save(path)
    model_file = open_model_file(path.read_bytes())
    view = layer_view(model_file.layers[0], model_file.arrays)
    assert np.isfinite(view.std).all()
    assert view.std[0] == pytest.approx(1e160 * math.sqrt(99) / 100, rel=1e-9)
    assert view.outlier_values == 1
    assert view.outliers["largest |z| (σ)"].iloc[0] == pytest.approx(math.sqrt(99), rel=1e-9)


def test_a_group_of_one_value_has_no_outlier_and_the_note_says_so_in_words() -> None:
    """A LayerNorm over one feature: every token is its own mean (|z| = 0 always), said as
    such, not as "1 values … √0 σ"; two features keep the bound √(n − 1)."""
    x = torch.randn(4, 1, generator=torch.Generator().manual_seed(0))
    one = open_model_file(capture_bytes(nn.LayerNorm(1), x))
    view = layer_view(one.layers[0], one.arrays, 6.0)
    assert view.outlier_values == 0
    assert view.notes[0] == ("Each token here has a single value, which is its own mean: no "
                             "threshold, 6 σ or any other, can find an outlier in this layer.")
    two = open_model_file(capture_bytes(nn.LayerNorm(2), torch.randn(4, 2)))
    assert "has 2 values, so none can lie more than √1 ≈ 1 σ" in layer_view(
        two.layers[0], two.arrays, 6.0).notes[0]
