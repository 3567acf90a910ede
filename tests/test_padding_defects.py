"""Padding page defects from issue 11: typed lengths are capped and the largest batch draws a
small, readable figure (item 9); a batch with one real token, or one position, keeps the
LayerNorm parts and explains what BatchNorm cannot do (item 18)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import alerts, decode, figures, open_page

from lnviz import charts
from lnviz.batch import Batch
from lnviz.data import padded_batch
from lnviz.lessons.padding import (
    MAX_PADDED_LENGTH,
    MAX_SEQUENCES,
    check_lengths,
    feature_stats,
    pad_token_steps,
    padding_outputs,
    padding_sweep,
)

PAGE = "app_pages/padding.py"


def _names(fig: dict) -> list[str]:
    return [t.get("name") for t in fig["data"]]


def _z(fig: dict, name: str) -> np.ndarray:
    return decode(next(t for t in fig["data"] if t.get("name") == name)["z"])


# --- Item 9: typed lengths are capped; the figure stays small and readable --------------------


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(-3, 40), max_size=40), padded=st.integers(1, 32))
def test_check_lengths_accepts_exactly_what_the_page_can_draw(lengths, padded):
    fits = (1 <= len(lengths) <= MAX_SEQUENCES
            and all(1 <= n <= padded for n in lengths))
    if fits:
        assert check_lengths(lengths, padded) == tuple(lengths)
    else:
        with pytest.raises(ValueError):
            check_lengths(lengths, padded)


def test_check_lengths_messages():
    with pytest.raises(ValueError, match="At most 16 sequences: you typed 200 lengths"):
        check_lengths([3] * 200, 6)
    with pytest.raises(ValueError, match="at least one real token, but length 2 is 0"):
        check_lengths([3, 0], 6)
    with pytest.raises(ValueError, match=r"Length 1 is 40 tokens, more than the padded length "
                                         r"of 6: raise “Padded length” \(up to 32\)"):
        check_lengths([40, 1], 6)
    with pytest.raises(ValueError, match="Type at least one length"):
        check_lengths((), 6)


def test_two_hundred_typed_lengths_are_refused_with_a_message():
    """The report: 200 typed lengths took 87 s and sent a 14 MB figure (1000: over 5 minutes).
    Old code: no message, and every figure drawn for 200 sequences."""
    at = open_page(PAGE, {"pd_src": "Generated", "pd_len": "32", "pd_d": "16"})
    at.text_input(key="pd_lengths").set_value(", ".join(["1"] * 200)).run()
    assert not at.exception
    assert alerts(at)["error"] == [
        "At most 16 sequences: you typed 200 lengths. Every position of every sequence is "
        "drawn, so the batch keeps to the “Sequences” control's range."]
    assert figures(at) == []


def test_the_largest_batch_draws_a_small_figure_with_pads_veiled_not_blackened():
    """16 sequences of one real token in 32 positions with 16 features: 496 of 512 rows are
    pads. Old code drew an opaque × on each of their 7,936 cells in each of 4 panels (a black
    heatmap, ~1 MB); now one translucent veil per run of pads."""
    at = open_page(PAGE, {"pd_src": "Generated", "pd_len": str(MAX_PADDED_LENGTH), "pd_d": "16",
                          "pd_lengths": ", ".join(["1"] * MAX_SEQUENCES)})
    assert not at.exception and not alerts(at)["error"]
    spec = at.get("plotly_chart")[0].proto.spec
    assert len(spec) < 300_000  # bytes sent for the tokens figure
    fig = figures(at)[0]
    assert [t["type"] for t in fig["data"]] == ["heatmap"] * 4  # no per-cell markers
    assert _z(fig, "input x").shape == (16 * 32, 16)
    shapes = fig["layout"]["shapes"]
    assert len(shapes) == 16 * 4  # one run of 31 pads per sequence, in each panel
    first = [(s["y0"], s["y1"]) for s in shapes[:16]]
    assert first == [(32 * k + 0.5, 32 * (k + 1) - 0.5) for k in range(16)]
    for shape in shapes:
        alpha = float(shape["fillcolor"].rsplit(",", 1)[1].rstrip(")"))
        assert alpha <= 0.4  # the colours under the veil stay visible
    assert [s.get("showlegend", False) for s in shapes].count(True) == 1


def test_tokens_figure_veils_each_run_of_pads():
    grid = np.arange(12, dtype=np.float32).reshape(6, 2)
    padding = np.array([False, True, True, False, False, True])
    fig = charts.padding.tokens_figure([("input x", grid), ("out", -grid)], padding)
    runs = [(s.y0, s.y1, s.xref) for s in fig.layout.shapes]
    assert runs == [(0.5, 2.5, "x"), (4.5, 5.5, "x"), (0.5, 2.5, "x2"), (4.5, 5.5, "x2")]
    assert {(s.x0, s.x1) for s in fig.layout.shapes} == {(-0.5, 1.5)}
    assert [t.type for t in fig.data] == ["heatmap", "heatmap"]


# --- Item 18: one real token, one position -----------------------------------------------------


def test_one_real_token_statistics():
    values, mask = padded_batch(1, 4, lengths=[1], max_len=6, pad_value=0.0)
    batch = Batch(values, "NLC", mask)
    stats = feature_stats(batch)
    assert (stats.real_tokens, stats.positions) == (1, 6)
    assert stats.counted_ok and not stats.masked_ok
    assert np.isnan(stats.mean_masked).all() and np.isnan(stats.std_masked).all()
    x = values.reshape(6, 4).astype(np.float64)
    np.testing.assert_allclose(stats.mean_with_pad, x.mean(0), rtol=1e-5)
    np.testing.assert_allclose(stats.std_with_pad, x.std(0), rtol=1e-4)
    assert list(stats.table().columns) == ["feature", "μ with pads", "σ with pads"]
    out = padding_outputs(batch)
    assert list(out) == ["input x", "BatchNorm, pads counted", "LayerNorm"]
    torch_x = torch.from_numpy(values)
    np.testing.assert_allclose(out["LayerNorm"], F.layer_norm(torch_x, (4,)), atol=1e-5)
    np.testing.assert_allclose(out["BatchNorm, pads counted"][0],
                               F.batch_norm(torch_x[0], None, None, training=True), atol=1e-4)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        F.batch_norm(torch_x[torch.from_numpy(mask)], None, None, training=True)  # as the page says


def test_one_real_token_sweep():
    values, mask = padded_batch(1, 3, lengths=[1], max_len=2, pad_value=2.0)
    sweep = padding_sweep(Batch(values, "NLC", mask), 2.0)
    token = values[0, 0].astype(np.float64)
    assert sweep.pads[0] == 0 and np.isnan(sweep.mean_with_pad[0]).all()
    p = sweep.pads[1:, None]
    np.testing.assert_allclose(sweep.mean_with_pad[1:], (token + 2.0 * p) / (1 + p), rtol=1e-5)
    assert np.isnan(sweep.mean_masked).all() and np.isnan(sweep.drift_masked).all()
    assert np.isnan(sweep.drift_with_pad).all()
    np.testing.assert_array_equal(sweep.drift_layer_norm, 0.0)
    fig = charts.padding.share_figure(
        sweep.fraction, sweep.mean_with_pad[:, 0], sweep.mean_masked[:, 0],
        sweep.std_with_pad[:, 0], sweep.std_masked[:, 0], sweep.drift_with_pad,
        sweep.drift_masked, sweep.drift_layer_norm)
    # No legend entry for a line that cannot be drawn.
    assert [(t.name, t.xaxis) for t in fig.data] == [
        ("BatchNorm, pads counted", "x"), ("BatchNorm, pads counted", "x2"), ("LayerNorm", "x3")]


@settings(max_examples=40, deadline=None)
@given(data=st.data(), batch_size=st.integers(1, 3), max_len=st.integers(1, 4),
       d_model=st.integers(1, 3), pad=st.sampled_from([0.0, -2.0, 5.0]))
def test_every_batch_the_page_allows_is_computed(data, batch_size, max_len, d_model, pad):
    """Whatever the lengths, every function the page calls answers, with NaN exactly where a
    BatchNorm has fewer than two values to pool."""
    lengths = data.draw(st.lists(st.integers(1, max_len), min_size=batch_size,
                                 max_size=batch_size))
    values, mask = padded_batch(batch_size, d_model, lengths=lengths, max_len=max_len,
                                pad_value=pad)
    batch = Batch(values, "NLC", mask)
    real, positions = sum(lengths), batch_size * max_len
    stats = feature_stats(batch)
    assert np.isnan(stats.mean_masked).all() == (real < 2)
    assert np.isnan(stats.mean_with_pad).all() == (positions < 2)
    out = padding_outputs(batch)
    assert ("BatchNorm, masked" in out) == (real >= 2)
    assert ("BatchNorm, pads counted" in out) == (positions >= 2)
    np.testing.assert_allclose(out["LayerNorm"], F.layer_norm(torch.from_numpy(values),
                                                              (d_model,)), atol=1e-5)
    sweep = padding_sweep(batch, pad, fractions=(0.0, 0.5))
    np.testing.assert_array_equal(sweep.drift_layer_norm, 0.0)
    steps = pad_token_steps(batch, beta=0.25)
    assert (steps is None) == bool(mask.all())


@pytest.mark.parametrize("query, real, panels", [
    ({"pd_lengths": "1"}, 1, ["input x", "BatchNorm, pads counted", "LayerNorm"]),
    ({"pd_lengths": "1", "pd_len": "1"}, 1, ["input x", "LayerNorm"]),
    ({"pd_bs": "1", "pd_len": "1"}, 1, ["input x", "LayerNorm"]),
    ({"pd_lengths": "1, 1", "pd_len": "1"}, 2,
     ["input x", "BatchNorm, pads counted", "BatchNorm, masked", "LayerNorm"]),
])
def test_degenerate_batches_keep_the_page(query, real, panels):
    """The report: `/padding?pd_src=Generated&pd_lengths=1` stopped the whole page with "needs
    more than one value per channel; this input has one (shape [1, 6, 4])"."""
    at = open_page(PAGE, {"pd_src": "Generated", **query})
    assert not at.exception and alerts(at)["error"] == []
    figs = figures(at)
    assert _names(figs[0]) == panels
    x = _z(figs[0], "input x")
    np.testing.assert_allclose(_z(figs[0], "LayerNorm"),
                               F.layer_norm(torch.tensor(x), x.shape[-1:]), atol=1e-5)
    assert "did not move at all" in alerts(at)["success"][0]  # the LayerNorm sweep
    warnings = alerts(at)["warning"]
    if real == 1:
        assert warnings[0].startswith("**Masked BatchNorm needs at least 2 real tokens**: it "
                                      "takes each feature's μ and σ over the real tokens alone, "
                                      "and this batch has 1 real token.")
        assert "one value per channel" in at.code[0].value
    else:
        assert warnings == []


def test_one_real_token_page_shows_the_pads_counted_numbers():
    at = open_page(PAGE, {"pd_src": "Generated", "pd_lengths": "1"})
    figs = figures(at)
    x = _z(figs[0], "input x")  # (6, 4): one real token, five zero pads
    stats = figs[1]
    assert _names(stats) == ["pads counted", "pads counted"]
    np.testing.assert_allclose(decode(stats["data"][0]["y"]), x.mean(0), rtol=1e-5)
    text = next(m.value for m in at.markdown if m.value.startswith("Feature 0"))
    assert text.endswith("real tokens only: none — masked BatchNorm needs at least 2 real "
                         "tokens.")
    assert "**1 sequence × 6 positions × 4 features**, 5 of 6 positions padding" in " ".join(
        m.value for m in at.markdown)
    np.testing.assert_array_equal(decode(figs[3]["data"][0]["y"]), [0.5] * 4)  # pad row: β
