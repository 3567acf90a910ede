"""The LN-LSTM vs LSTM page, run through app.py with AppTest on a tiny training."""

from __future__ import annotations

import numpy as np
import pytest
from pageutil import alerts, decode, figures, open_page, table_with
from test_training_loop import single_thread  # noqa: F401  (one thread: see its docstring)

from lnviz.data.sequences import load_digits_data
from lnviz.lessons.training import TrainConfig, Training

PAGE = "app_pages/training.py"


def tiny_page(models: list[str]):
    at = open_page(PAGE)
    at.multiselect(key="tr_models").set_value(models)
    at.select_slider(key="tr_hidden").set_value(16)
    at.select_slider(key="tr_batch").set_value(16)
    at.number_input(key="tr_steps").set_value(6)
    at.select_slider(key="tr_seeds").set_value(1)
    return at.run()


@pytest.fixture(scope="module")
def trained_page():
    at = tiny_page(["lstm", "ln-lstm", "bn-lstm"])
    at.button(key="tr_run").click().run()
    assert not at.exception, at.exception
    return at


def test_page_explains_before_anything_is_trained() -> None:
    at = open_page(PAGE)
    assert any("Press **Run**" in text for text in alerts(at)["info"])
    assert any("class LayerNormLSTMCell" in code.value for code in at.code)
    assert any(r"\mathrm{LN}(W_x x_t" in latex.value for latex in at.latex)
    assert any("Try this" in md.value for md in at.markdown)
    assert at.session_state["tr_results"] == {}


def test_run_draws_curves_gradients_gates_and_the_batch_check(trained_page) -> None:
    at = trained_page
    curves, grads, gates, _ = figures(at)  # and the longer sequences
    names = {t["name"] for t in curves["data"]}
    assert names == {"LSTM", "LN-LSTM", "BN-LSTM"}
    steps = next(t["x"] for t in curves["data"] if t["name"] == "LN-LSTM")
    assert decode(steps).tolist() == [1, 2, 3, 4, 5, 6]  # 6 steps, evaluated after each
    assert len(grads["data"]) == 3
    assert len(gates["data"]) == 3 * 3  # two bands and a median per model
    table = table_with(at, "normalization statistics").value.set_index(
        ["model", "normalization statistics"])
    column = "max |difference| of the logits"
    assert table.loc[("LN-LSTM", "per sample (LayerNorm)"), column] < 1e-5
    assert table.loc[("BN-LSTM", "batch statistics (training mode)"), column] > 1e-2
    assert [m.label for m in at.metric] == [f"{m}: held-out accuracy"
                                           for m in ("LSTM", "LN-LSTM", "BN-LSTM")]
    assert not alerts(at)["error"]


def test_chart_options_do_not_retrain(trained_page) -> None:
    at = trained_page
    result = next(iter(at.session_state["tr_results"].values()))
    at.segmented_control(key="tr_gate").set_value("forget f").run()
    at.radio(key="tr_when").set_value("at initialization").run()
    assert not at.exception
    assert next(iter(at.session_state["tr_results"].values())) is result
    assert len(figures(at)) == 4


def test_stop_ends_a_running_training_and_keeps_its_curves() -> None:
    at = open_page(PAGE)
    training = Training(load_digits_data(), TrainConfig(hidden_size=8, steps=50, eval_every=2))
    training.advance(4)  # as if a rerun had interrupted it here
    at.session_state["tr_job"] = ("earlier settings", training)
    at.button(key="tr_stop").click().run()
    assert not at.exception, at.exception
    assert training.done and at.session_state["tr_job"] is None
    assert any("Stopped after 4 of 50 steps" in w for w in alerts(at)["warning"])
    assert decode(figures(at)[0]["data"][0]["x"]).tolist() == [2, 4]


def test_missing_upload_and_no_models_are_explained() -> None:
    at = open_page(PAGE, {"tr_data": "MNIST (upload)"})  # the URL holds the label
    assert any("Upload mnist.npz" in text for text in alerts(at)["info"])
    at.multiselect(key="tr_models").set_value([]).run()
    assert not at.exception
    assert any("at least one model" in text for text in alerts(at)["info"])
    at.button(key="tr_run").click().run()
    assert not at.exception and at.session_state["tr_results"] == {}


def test_the_curves_have_their_data_behind_the_figure(trained_page) -> None:
    at = trained_page
    assert [e.label for e in at.expander].count("Data behind this figure") == 4
    result = next(iter(at.session_state["tr_results"].values()))
    closed = len(at.dataframe)
    at.session_state["tr_curves_data"] = True  # the learner opens the curves' data
    at.run()
    assert not at.exception, at.exception
    assert len(at.dataframe) == closed + 1
    table = at.dataframe[0].value  # the curves come first on the page
    for label, curve in result.curves.items():
        rows = table[table["trace"] == label]  # the loss panel's trace, then the accuracy's
        assert rows["x"].tolist() == curve["step"] * 2
        np.testing.assert_allclose(rows["y"], curve["loss"] + curve["accuracy"])
