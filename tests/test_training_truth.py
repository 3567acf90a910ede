"""Issue 13 on the LN-LSTM page: every sentence true. The paper's equations and where the app
differs, steps instead of seconds, several seeds with a band, sweeps, sentences about who wins
computed from the runs, BatchNorm on longer sequences, and seed 001's from-scratch LayerNorm."""

from __future__ import annotations

import math
import re
from dataclasses import replace

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pageutil import alerts, decode, figures, open_page
from test_training_loop import single_thread  # noqa: F401  (one thread: see its docstring)

import lnviz
from lnviz.data.sequences import load_digits_data
from lnviz.lessons.training import (
    CUSTOM_LAYER_NORM_CODE,
    MAX_RUNS,
    BatchNormLSTMCell,
    BatchSensitivity,
    LengthCheck,
    TrainConfig,
    Training,
    TrainingResult,
    check_work,
    custom_layer_norm,
    custom_layer_norm_table,
    first_step,
    length_margins,
    seed_band,
    summarize,
    train,
)
from lnviz.limits import FULL_LIMITS

PAGE = "app_pages/training.py"


@pytest.fixture(scope="module")
def digits():
    return load_digits_data()


def tiny_page(models: list[str], seeds: int = 1, steps: int = 4):
    at = open_page(PAGE)
    at.multiselect(key="tr_models").set_value(models)
    at.select_slider(key="tr_hidden").set_value(16)
    at.select_slider(key="tr_batch").set_value(16)
    at.number_input(key="tr_steps").set_value(steps)
    at.select_slider(key="tr_seeds").set_value(seeds)
    return at.run()


def fake_result(accuracy: dict[str, list[list[float]]], config: TrainConfig,
                steps: list[int] | None = None) -> TrainingResult:
    """A TrainingResult with these held-out accuracy curves (per series, one list per seed),
    evaluated at ``steps``, and nothing else: the findings read only the curves."""
    labels = {s.label for s in config.series()}
    assert set(accuracy) == labels, labels
    n = len(next(iter(accuracy.values()))[0])
    steps = steps or [10 * (k + 1) for k in range(n)]
    seed_curves = {label: [{"step": steps, "loss": [1.0] * n, "accuracy": a} for a in seeds]
                   for label, seeds in accuracy.items()}
    return TrainingResult(
        dataset="test", num_classes=10, config=config, steps_done=steps[-1], stopped=False,
        curves={label: seed_band(c) for label, c in seed_curves.items()},
        seed_curves=seed_curves,
        step_loss={label: [[1.0] * steps[-1]] * len(c) for label, c in seed_curves.items()},
        step_grad_norm={label: [[1.0] * steps[-1]] * len(c) for label, c in seed_curves.items()},
        seconds={}, parameters={}, gates={}, gates_at_init={})


# --- Point 7: the paper's equations, and where the app's differ ------------------------------


def test_the_paper_has_no_epsilon_and_the_first_step_shows_why_the_app_does() -> None:
    zero = first_step(64)
    assert (zero.size, zero.eps) == (256, 1e-5)
    assert zero.nan_without_eps == 256  # U h₀ = 0: (a − μ)/σ = 0/0 everywhere
    assert zero.with_eps == 0.0  # x̂ = 0/√ε = 0, so the output is β
    # the app's LN-LSTM at t = 0 is finite with h₀ = 0, and torch's LayerNorm agrees
    torch.testing.assert_close(lnviz.layer_norm(torch.zeros(2, 8), 8).output,
                               F.layer_norm(torch.zeros(2, 8), (8,)))


def test_the_page_shows_the_papers_b_and_says_where_the_app_differs() -> None:
    at = open_page(PAGE)
    latex = next(x.value for x in at.latex if r"\mathrm{LN}" in x.value)
    assert "+ b" in latex  # Ba et al.'s (f, i, o, g) = LN(W_h h) + LN(W_x x) + b
    assert r"\epsilon" not in latex and r"\frac{z - \mu}{\sigma}" in latex  # the paper's LN
    caption = next(c.value for c in at.caption if "Ba et al.'s LN-LSTM as the paper" in c.value)
    assert "No “+ b” by default" in caption and "*One shared bias* keeps b" in caption
    assert "An ε under the root" in caption and "ε = 1e-05" in caption
    assert "NaN in 256 of 256 entries" in caption  # H = 64 by default: 4H = 256
    at.select_slider(key="tr_hidden").set_value(16).run()
    caption = next(c.value for c in at.caption if "Ba et al.'s LN-LSTM as the paper" in c.value)
    assert "64 zeros with σ = 0" in caption and "NaN in 64 of 64 entries" in caption


def test_speed_is_reported_in_steps_not_seconds() -> None:
    at = tiny_page(["lstm", "ln-lstm"])
    at.button(key="tr_run").click().run()
    assert not at.exception, at.exception
    captions = [c.value for c in at.caption]
    assert not any(re.search(r"\d s of training", c) for c in captions), captions
    assert any("Speed is measured in steps, not seconds" in c for c in captions)
    result = next(iter(at.session_state["tr_results"].values()))
    for label in ("LSTM", "LN-LSTM"):
        assert result.reach_text(label) in captions


# --- Point 8: seeds, bands and sweeps -------------------------------------------------------


def test_seed_band_is_the_mean_and_the_range_over_seeds() -> None:
    curves = [{"step": [1, 2, 3], "loss": [3.0, 2.0, 1.0], "accuracy": [0.1, 0.5, 0.9]},
              {"step": [1, 2], "loss": [1.0, float("nan")], "accuracy": [0.3, 0.7]}]
    band = seed_band(curves)
    assert band["step"] == [1, 2]  # only the evaluations every seed has reached
    assert band["accuracy"] == pytest.approx([0.2, 0.6])
    assert band["accuracy_low"] == [0.1, 0.5] and band["accuracy_high"] == [0.3, 0.7]
    assert band["loss"][0] == 2.0 and math.isnan(band["loss"][1])  # a NaN seed is not hidden
    assert set(seed_band(curves[:1])) == {"step", "loss", "accuracy"}  # one seed: no band


def test_seeds_are_trained_and_drawn_as_a_mean_with_a_band() -> None:
    at = tiny_page(["lstm", "ln-lstm"], seeds=2)
    at.button(key="tr_run").click().run()
    assert not at.exception, at.exception
    result = next(iter(at.session_state["tr_results"].values()))
    assert result.seeds == (0, 1) and len(result.seed_curves["LN-LSTM"]) == 2
    first, second = (c["accuracy"] for c in result.seed_curves["LN-LSTM"])
    assert first != second  # two seeds are two different runs
    traces = {t["name"]: t for t in figures(at)[0]["data"] if t.get("yaxis") == "y2"}
    mean = decode(traces["LN-LSTM"]["y"])
    low, high = (decode(traces[f"LN-LSTM ({which} seed)"]["y"]) for which in ("lowest",
                                                                             "highest"))
    np.testing.assert_allclose(mean, (np.array(first) + np.array(second)) / 2)
    np.testing.assert_allclose(low, np.minimum(first, second))
    np.testing.assert_allclose(high, np.maximum(first, second))
    assert any("Lines: the mean over 2 seeds" in c.value for c in at.caption)
    assert any("seeds **0–1**" in c.value for c in at.caption)


def test_a_gamma_sweep_trains_the_plain_lstm_once_and_each_norm_at_every_gamma() -> None:
    config = TrainConfig(models=("lstm", "ln-lstm", "bn-lstm"), seeds=2, sweep="gamma_init",
                         sweep_values=(0.1, 3.0))
    assert [s.label for s in config.series()] == [
        "LSTM", "LN-LSTM · γ₀ 0.1", "LN-LSTM · γ₀ 3", "BN-LSTM · γ₀ 0.1", "BN-LSTM · γ₀ 3"]
    assert config.runs == 10
    ln3 = config.series()[2]
    run = config.run_config(ln3, 1)
    assert (run.models, run.gamma_init, run.seed, run.seeds, run.sweep) == (
        ("ln-lstm",), 3.0, 1, 1, None)
    lr_sweep = replace(config, sweep="lr", sweep_values=(1e-3, 1e-1))
    assert [s.label for s in lr_sweep.series()][:2] == ["LSTM · lr 0.001", "LSTM · lr 0.1"]
    for bad in [dict(sweep="lr"), dict(sweep_values=(0.1,)), dict(sweep="eps", sweep_values=(1.0,)),
                dict(sweep="lr", sweep_values=(0.1, 0.1)), dict(sweep="lr", sweep_values=(0.0,)),
                dict(seeds=0)]:
        with pytest.raises(ValueError):
            TrainConfig(**bad)


def test_gamma_at_initialization_sets_the_spread_of_the_ln_lstm_gates(digits) -> None:
    """Seed 000's exercise 3 on the page: the gates at initialization for each initial γ."""
    config = TrainConfig(models=("ln-lstm",), hidden_size=16, steps=1, sweep="gamma_init",
                         sweep_values=(0.1, 1.0, 3.0))
    training = Training(digits, config)
    training.advance(1)
    result = summarize(training)
    widths = {label: q[:, 4] - q[:, 0] for label, q in result.gate_bands(at_init=True).items()}
    # at t = 0 (h₀ = 0): z = γ x̂ of W x + β, so the 5–95 % band scales with γ exactly
    first = [widths[f"LN-LSTM · γ₀ {g}"][0] for g in ("0.1", "1", "3")]
    assert first[1] == pytest.approx(10 * first[0], rel=1e-4)
    assert first[2] == pytest.approx(3 * first[1], rel=1e-4)
    text = result.gate_findings(at_init=True)
    for label, width in widths.items():
        assert f"{label} {width[0]:.2g} → {width[-1]:.2g} (widest {width.max():.2g})" in text


def test_too_many_runs_are_refused_with_what_to_lower(digits) -> None:
    config = TrainConfig(models=("lstm", "ln-lstm", "bn-lstm"), seeds=5, sweep="lr",
                         sweep_values=(1e-3, 1e-2, 1e-1), steps=1)
    assert config.runs == 45 > MAX_RUNS
    with pytest.raises(ValueError, match=r"This comparison trains 45 runs \(3 models × 3 values "
                                         r"of the learning rate × 5 seeds\); at most 30 fit in "
                                         r"memory at once\. Choose fewer seeds, swept values or "
                                         r"models\."):
        check_work(config, digits, FULL_LIMITS)
    check_work(replace(config, seeds=3), digits, FULL_LIMITS)  # 27 runs
    gamma = replace(config, sweep="gamma_init", sweep_values=(0.1, 1.0, 3.0))
    with pytest.raises(ValueError, match=r"trains 35 runs \(3 models × 3 values of the initial "
                                         r"γ \(the LSTM once\) × 5 seeds\)"):
        check_work(gamma, digits, FULL_LIMITS)


def test_a_learning_rate_sweep_on_the_page() -> None:
    at = tiny_page(["lstm", "ln-lstm"], seeds=2, steps=3)
    at.selectbox(key="tr_sweep").set_value("lr").run()
    at.multiselect(key="tr_values_lr").set_value([0.01, 0.1]).run()
    assert at.select_slider(key="tr_lr").disabled  # the sweep sets it
    at.button(key="tr_run").click().run()
    assert not at.exception, at.exception
    result = next(iter(at.session_state["tr_results"].values()))
    assert result.config.runs == 8 and list(result.curves) == [
        "LSTM · lr 0.01", "LSTM · lr 0.1", "LN-LSTM · lr 0.01", "LN-LSTM · lr 0.1"]
    curves, sweep = figures(at)[:2]
    assert {t["name"] for t in curves["data"]} >= set(result.curves)
    lines = {t["name"]: decode(t["y"]) for t in sweep["data"]}
    finals = result.final_accuracy()
    np.testing.assert_allclose(lines["LN-LSTM"], [finals["LN-LSTM · lr 0.01"],
                                                  finals["LN-LSTM · lr 0.1"]])
    table = next(d.value for d in at.dataframe if "final accuracy (mean)" in d.value.columns)
    assert table["learning rate"].tolist() == ["0.01", "0.1", "0.01", "0.1"]
    findings = next(m.value for m in at.markdown if m.value.startswith("- At lr 0.01:"))
    assert findings == "\n".join(f"- {s}" for s in result.findings())
    # one setting at a time below: the gates show that setting's series only
    gates = figures(at)[3]
    assert {t["name"] for t in gates["data"]} == {
        f"{m} · lr 0.01 {part}" for m in ("LSTM", "LN-LSTM")
        for part in ("5–95 %", "25–75 %", "median")}
    at.selectbox(key="tr_setting").set_value("lr 0.1").run()
    assert "LN-LSTM · lr 0.1 median" in {t["name"] for t in figures(at)[3]["data"]}


# --- Point 8: who wins is computed from the runs shown --------------------------------------


def test_findings_follow_the_runs_where_the_plain_lstm_reaches_90_percent_first() -> None:
    """The reviewer's case: at lr 0.1 the plain LSTM reached 90 % first."""
    config = TrainConfig(seeds=3, sweep="lr", sweep_values=(0.01, 0.1))
    result = fake_result({
        "LSTM · lr 0.01": [[0.5, 0.8, 0.92, 0.95]] * 3,
        "LSTM · lr 0.1": [[0.91, 0.92, 0.9, 0.95], [0.85, 0.91, 0.92, 0.88],
                          [0.9, 0.6, 0.7, 0.78]],
        "LN-LSTM · lr 0.01": [[0.7, 0.93, 0.95, 0.97], [0.6, 0.91, 0.96, 0.98],
                              [0.7, 0.92, 0.94, 0.96]],
        "LN-LSTM · lr 0.1": [[0.5, 0.85, 0.93, 0.95], [0.6, 0.8, 0.91, 0.94],
                             [0.4, 0.86, 0.92, 0.96]],
    }, config)
    assert result.findings() == [
        "At lr 0.01: final held-out accuracy, mean of 3 seeds (lowest–highest seed): LN-LSTM "
        "97.0% (96.0%–98.0%), LSTM 95.0% (95.0%–95.0%). Every seed of the LN-LSTM ends above "
        "every seed of the LSTM.",
        "At lr 0.01: 90% first reached by the LN-LSTM (median step 20), then by the LSTM "
        "(median step 30).",
        "At lr 0.1: final held-out accuracy, mean of 3 seeds (lowest–highest seed): LN-LSTM "
        "95.0% (94.0%–96.0%), LSTM 87.0% (78.0%–95.0%). The LN-LSTM's and the LSTM's seed "
        "ranges overlap: other seeds could swap them.",
        "At lr 0.1: 90% first reached by the LSTM (median step 10), then by the LN-LSTM "
        "(median step 30).",
        "Seed 001 says LayerNorm lets an LSTM train with higher learning rates and converge "
        "faster. In these runs (means of 3 seeds), the LN-LSTM ends ahead of the LSTM at lr "
        "0.01 and 0.1 and behind at no learning rate tried; every LN-LSTM seed ends above every "
        "LSTM seed at lr 0.01; the LN-LSTM reaches 90% sooner (median step) at lr 0.01.",
    ]
    assert result.reach_text("LSTM · lr 0.1") == (
        "90% first reached: seed 0 at step 10, seed 1 at step 20, seed 2 at step 10")
    table = result.sweep_table()
    assert table["median step to 90%"].tolist() == ["30", "10", "20", "30"]
    assert table["seeds reaching 90%"].tolist() == ["3 of 3"] * 4
    assert table["final accuracy (mean)"].tolist() == pytest.approx([0.95, 0.87, 0.97, 0.95])
    assert result.reach_text("LSTM · lr 0.01") == (
        "90% first reached: seed 0 at step 30, seed 1 at step 30, seed 2 at step 30")
    slow = replace(result, seed_curves={**result.seed_curves, "LSTM · lr 0.1": [
        {"step": [10, 20], "loss": [1.0] * 2, "accuracy": a} for a in ([0.5, 0.95], [0.5, 0.6],
                                                                       [0.5, 0.6])]})
    assert slow.reach_text("LSTM · lr 0.1") == (
        "90% first reached: seed 0 at step 20, seed 1 never, seed 2 never")
    assert slow.sweep_table()["median step to 90%"][1] == "never, in most seeds"


def test_findings_with_one_seed_say_so_and_nobody_reaching_90_is_said_plainly() -> None:
    config = TrainConfig(models=("lstm", "ln-lstm", "bn-lstm"))
    result = fake_result({"LSTM": [[0.3, 0.5]], "LN-LSTM": [[0.4, 0.7]],
                          "BN-LSTM": [[0.2, 0.6]]}, config)
    assert replace(result, config=replace(config, seeds=2), seed_curves={
        **result.seed_curves, "LN-LSTM": [result.seed_curves["LN-LSTM"][0]] * 2}).reach_text(
        "LN-LSTM") == "no seed reached 90%"
    assert result.findings() == [
        "Final held-out accuracy, one seed each: LN-LSTM 70.0%, BN-LSTM 60.0%, LSTM 50.0%. One "
        "seed is one draw of the initial weights and the batches: raise Seeds before reading a "
        "winner into this.",
        "No model reached 90% held-out accuracy.",
    ]
    assert result.reach_text("LN-LSTM") == "never reached 90%"


@pytest.mark.parametrize("seed", range(8))
def test_the_ranking_sentence_orders_by_the_numbers_and_overlap_is_judged_right(seed) -> None:
    rng = np.random.default_rng(seed)
    config = TrainConfig(models=("lstm", "ln-lstm", "bn-lstm"), seeds=3)
    accuracy = {label: rng.uniform(0.5, 1.0, size=(3, 4)).round(3).tolist()
                for label in ("LSTM", "LN-LSTM", "BN-LSTM")}
    result = fake_result(accuracy, config)
    sentence = result.findings()[0]
    named = re.findall(r"(LSTM|LN-LSTM|BN-LSTM) \d", sentence)
    finals = result.final_accuracies()
    assert named == sorted(finals, key=lambda label: -np.mean(finals[label]))
    first, second = named[:2]
    apart = min(finals[first]) > max(finals[second])
    assert ("Every seed of the" in sentence) == apart
    assert ("overlap" in sentence) == (not apart)
    medians = result.median_steps_to()
    speed = result.findings()[1].split(";")[0]
    reached = [label for label in named if not math.isinf(medians[label])]
    if reached:  # in order of the median step, models that tie named together
        order = re.findall(r"the (LSTM|LN-LSTM|BN-LSTM)", speed)
        assert sorted(order) == sorted(reached)
        steps = [medians[label] for label in order]
        assert steps == sorted(steps)
        assert speed.count("then by") == len(set(steps)) - 1
        for step, text in re.findall(r"median step (\d+)( each)?", speed):
            assert (text == " each") == (steps.count(float(step)) > 1)


def test_the_try_this_and_explanation_no_longer_promise_a_winner() -> None:
    at = open_page(PAGE)
    text = "\n".join(m.value for m in at.markdown)
    assert "head start" not in text  # the seed's claim, asked as if settled
    assert "early steps of training are steadier" not in text
    assert "the runs above test it on this task" in text
    gates_caption = "so the LN-LSTM's bands stay put over time"
    assert not any(gates_caption in c.value for c in at.caption)


# --- Seed 001: BatchNorm on sequences longer than the training ones -------------------------


def test_steps_beyond_the_training_length_reuse_the_last_steps_statistics() -> None:
    torch.manual_seed(0)
    cell = BatchNormLSTMCell(3, 4, max_steps=8)
    with torch.no_grad():
        for which in ("ih", "hh", "c"):  # different statistics at every step
            getattr(cell, f"running_mean_{which}").normal_()
            getattr(cell, f"running_var_{which}").uniform_(0.5, 2)
    cell.eval()
    x, h, c = torch.randn(5, 3), torch.randn(5, 4), torch.randn(5, 4)
    last = cell(x, (h, c), step=7)
    for beyond in (8, 12, 100):  # no statistics of their own: step 7's
        for got, want in zip(cell(x, (h, c), step=beyond), last, strict=True):
            torch.testing.assert_close(got, want)
    assert not torch.allclose(cell(x, (h, c), step=6)[2], last[2])


def test_length_margins_are_fractions_of_the_training_length() -> None:
    assert length_margins(8) == (0, 2, 4, 8, 16)
    assert length_margins(28) == (0, 7, 14, 28, 56)
    assert length_margins(1) == (0, 1, 2)


def test_length_findings_are_computed_from_the_accuracies() -> None:
    check = LengthCheck(
        train_length=8, lengths=(8, 10, 12, 16, 24), samples=256, batch=256,
        accuracy={"LSTM": np.array([[0.96, 0.97, 0.97, 0.97, 0.97]]),
                  "LN-LSTM": np.array([[0.96, 0.94, 0.94, 0.93, 0.90]]),
                  "BN-LSTM": np.array([[0.98, 0.89, 0.83, 0.81, 0.80]])},
        batch_statistics={"BN-LSTM": np.array([[0.98, 0.98, 0.98, 0.98, 0.98]])},
        running_var={"BN-LSTM": np.linspace(0.1, 0.5, 8)})
    findings = check.findings()
    assert findings[0] == (
        "Read with 16 blank rows above the digit (24 steps, 3× the training length), the "
        "held-out accuracy is: LSTM 97% (from 96% at 8 steps), LN-LSTM 90% (from 96% at 8 "
        "steps), BN-LSTM 80% (from 98% at 8 steps).")
    assert findings[1].startswith("The BN-LSTM normalizing every step with the statistics of "
                                  "its test batch (256 images) instead of its running averages: "
                                  "98% at 24 steps (from 98% at 8)")
    assert findings[2] == "Largest drop: BN-LSTM, 18 percentage points."
    assert findings[3].startswith("The LN-LSTM loses 5 percentage points or more too")
    smaller = replace(check, accuracy={**check.accuracy,
                                       "LN-LSTM": np.array([[0.96, 0.95, 0.95, 0.94, 0.93]])})
    assert len(smaller.findings()) == 3  # a drop under 5 points is not explained away
    assert check.subset(["LSTM"]).findings() == [findings[0].replace(
        ", LN-LSTM 90% (from 96% at 8 steps), BN-LSTM 80% (from 98% at 8 steps)", "")]


@pytest.mark.slow
def test_batchnorm_loses_on_longer_sequences_and_its_test_batch_statistics_recover(
        digits) -> None:
    """Measured at H = 32, 150 steps, seeds 0–2: the BN-LSTM lost 20–29 points at 24 steps
    with its running statistics and none with the test batch's; the LSTM at most 1."""
    config = TrainConfig(models=("lstm", "ln-lstm", "bn-lstm"), hidden_size=32, steps=150,
                         eval_every=150)
    result = summarize(train(digits, config))
    check = result.length
    assert check.lengths == (8, 10, 12, 16, 24) and check.samples == 256
    means = check.mean()
    bn, batch = means["BN-LSTM"], check.batch_means()["BN-LSTM"]
    assert bn[0] > 0.9 and bn[0] - bn[-1] > 0.15  # lost with its running statistics
    assert abs(batch[-1] - batch[0]) < 0.03  # not with the test batch's own
    assert abs(means["LSTM"][-1] - means["LSTM"][0]) < 0.05
    assert check.running_var["BN-LSTM"].shape == (8,)  # statistics for the 8 steps only
    assert check.findings()[2].startswith("Largest drop: BN-LSTM")


def test_a_stopped_training_has_no_length_check_and_the_page_says_so(digits) -> None:
    training = Training(digits, TrainConfig(hidden_size=8, steps=3, eval_every=3))
    training.advance(2)
    training.stop()
    assert summarize(training).length is None
    at = open_page(PAGE)
    at.session_state["tr_job"] = ("earlier settings", training)
    at.run()
    assert any("this training was stopped before it was done" in c.value for c in at.caption)


def test_progress_says_when_it_reads_the_longer_sequences(digits) -> None:
    training = Training(digits, TrainConfig(models=("lstm",), hidden_size=8, steps=2,
                                            eval_every=2))
    training.advance(2)
    assert training.progress().text.endswith("reading longer test sequences")
    while not training.done:
        training.advance_for(10)
    assert "longer" not in training.progress().text


# --- The batch check's sentences hold for every result ---------------------------------------


def test_batch_findings_name_a_diverged_model_instead_of_calling_nan_rounding() -> None:
    result = replace(fake_result({"LN-LSTM": [[0.1]], "BN-LSTM": [[0.1]]},
                                 TrainConfig(models=("ln-lstm", "bn-lstm"))),
                     batch_sensitivity=[
                         BatchSensitivity("LN-LSTM", "per sample (LayerNorm)", (1, 64), math.nan),
                         BatchSensitivity("BN-LSTM", "batch statistics (training mode)", (2, 64),
                                          0.5)])
    text = result.batch_findings()
    assert "LN-LSTM gives NaN logits (it diverged)" in text and "rounding" not in text
    # "float32 rounding" is judged against the logits' size, not asserted
    for difference, logits, rounding in ((3.9e-3, 2.6e4, True), (1e-2, 10.0, False),
                                         (1e-6, 0.1, True)):
        row = BatchSensitivity("LN-LSTM", "per sample (LayerNorm)", (1, 64), difference, logits)
        assert row.rounding == rounding
        text = replace(result, batch_sensitivity=[row]).batch_findings()
        assert ("float32 rounding)" in text) == rounding
        assert ("more than float32 rounding explains" in text) == (not rounding)


def test_the_batch_check_pairs_an_even_number_of_images_and_counts_the_gates_images() -> None:
    rng = np.random.default_rng(0)
    data = lnviz.data.sequences.SequenceData(
        "odd", rng.random((20, 4, 3), dtype=np.float32), np.arange(20) % 3,
        rng.random((7, 4, 3), dtype=np.float32), np.arange(7) % 3)
    training = Training(data, TrainConfig(models=("ln-lstm", "bn-lstm"), hidden_size=8,
                                          batch_size=4, steps=2, eval_every=2))
    training.advance(2)
    result = summarize(training)
    sizes = {(r.model, r.statistics): r.batch_sizes for r in result.batch_sensitivity}
    assert sizes["BN-LSTM", "batch statistics (training mode)"] == (2, 6)
    assert sizes["LN-LSTM", "per sample (LayerNorm)"] == (1, 7)
    assert result.gate_samples == 7  # "7 held-out images", not 256


# --- Seed 001's CustomLayerNorm, from scratch ------------------------------------------------


def test_the_seeds_custom_layer_norm_matches_torch_and_lnviz() -> None:
    namespace: dict = {}
    exec(CUSTOM_LAYER_NORM_CODE, namespace)
    g = torch.Generator().manual_seed(0)
    layer = namespace["CustomLayerNorm"](12)
    with torch.no_grad():
        layer.gamma.copy_(torch.randn(12, generator=g))
        layer.beta.copy_(torch.randn(12, generator=g))
    x = torch.randn(2, 5, 12, generator=g) * 4 + 3  # (batch, sequence, features)
    y = layer(x)
    torch.testing.assert_close(y, F.layer_norm(x, (12,), layer.gamma, layer.beta, 1e-5))
    torch.testing.assert_close(y, lnviz.layer_norm(x, 12, layer.gamma, layer.beta).output)
    plain = namespace["CustomLayerNorm"](12)
    torch.testing.assert_close(plain(x), custom_layer_norm(x))
    # torch.var's default would divide by n − 1 and shrink x̂ by √((n − 1)/n)
    torch.testing.assert_close(custom_layer_norm(x, unbiased=True),
                               custom_layer_norm(x) * math.sqrt(11 / 12), rtol=1e-4, atol=1e-5)


def test_the_custom_layer_norm_table_shows_agreement_and_the_unbiased_slip() -> None:
    table = custom_layer_norm_table((16, 64))
    assert table["features n"].tolist() == [16, 16, 64, 64]
    biased, unbiased = table.iloc[::2], table.iloc[1::2]
    assert (biased["max |Δ| from torch"] < 1e-5).all()
    assert (biased["max |Δ| from lnviz"] < 1e-5).all()
    assert (unbiased["max |Δ| from torch"] > 1e-3).all()
    np.testing.assert_allclose(biased["spread of x̂"], 1.0, atol=1e-5)
    np.testing.assert_allclose(unbiased["spread of x̂"], unbiased["√((n − 1)/n)"], atol=1e-5)
    assert unbiased["√((n − 1)/n)"].tolist() == pytest.approx([math.sqrt(15 / 16),
                                                                math.sqrt(63 / 64)])


def test_the_page_shows_the_custom_layer_norm_for_its_hidden_size() -> None:
    at = open_page(PAGE, {"tr_hidden": "32"})
    assert any("class CustomLayerNorm" in code.value and "unbiased=False" in code.value
               for code in at.code)
    table = next(d.value for d in at.dataframe if "features n" in d.value.columns)
    assert sorted(set(table["features n"])) == [32, 128]  # H and 4H
    assert not alerts(at)["error"]


def test_the_cli_trains_seeds_and_sweeps_and_prints_the_findings(tmp_path, capsys) -> None:
    import json

    from lnviz.train import main

    out = tmp_path / "runs.json"
    assert main(["--models", "lstm", "ln-lstm", "--steps", "2", "--eval-every", "2",
                 "--hidden-size", "8", "--batch-size", "8", "--seeds", "2", "--sweep", "lr",
                 "--values", "0.01", "0.1", "--reading", "pixels4", "--json", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["dataset"].endswith("4 pixels at a time")
    assert [run["label"] for run in record["runs"]] == [
        "LSTM · lr 0.01", "LSTM · lr 0.1", "LN-LSTM · lr 0.01", "LN-LSTM · lr 0.1"]
    assert all(len(run["seeds"]) == 2 for run in record["runs"])
    printed = capsys.readouterr().out
    assert "At lr 0.1: final held-out accuracy, mean of 2 seeds" in printed
    assert "wall-clock (depends on this machine's load)" in printed


# --- Other sentences of the page, read against its settings ----------------------------------


def test_the_run_invitation_counts_the_runs_as_they_will_be_trained() -> None:
    at = open_page(PAGE)
    assert any(text == "Press **Run** to train 6 runs of 300 steps each (2 models × 3 seeds)."
               for text in alerts(at)["info"]), alerts(at)["info"]
    at.multiselect(key="tr_models").set_value(["lstm", "ln-lstm", "bn-lstm"])
    at.selectbox(key="tr_sweep").set_value("gamma_init").run()
    # γ is swept for the LN- and BN-LSTM only: (1 + 3 + 3) × 3 runs, not 3 × 3 × 3
    assert any(text == "Press **Run** to train 21 runs of 300 steps each (3 models × 3 values of "
               "the initial γ (the LSTM once) × 3 seeds)." for text in alerts(at)["info"])
    at.select_slider(key="tr_seeds").set_value(1).run()
    assert any(text.startswith("Press **Run** to train 7 runs") for text in alerts(at)["info"])


def test_help_texts_say_what_holds() -> None:
    at = open_page(PAGE)
    single_bias = at.toggle(key="tr_single_bias").help
    assert "as Ba et al. write it" not in single_bias  # they write both β's and a b
    assert "Ba et al. write both β's and a b" in single_bias
    assert "may be luck of the draw" in at.select_slider(key="tr_seeds").help
    assert "the sweep above sets it" in at.select_slider(key="tr_lr").help
    assert "from one seed or several" in at.caption[0].value
    caption = next(c.value for c in at.caption if "Random rows of n = H" in c.value)
    assert "(the last column), as the spread of x̂ shows" in caption


def test_a_whole_number_gamma_still_makes_learnable_float_parameters() -> None:
    """TrainConfig(gamma_init=10) made an integer γ, which torch refuses to give a gradient."""
    from lnviz.lessons.training import make_model

    model = make_model("ln-lstm", 3, 4, 2, gamma_init=10, beta_init=-1)
    assert model.cell.gamma_ih.dtype == torch.float32 and model.cell.gamma_ih.requires_grad
    assert model.cell.gamma_c[0].item() == 10.0 and model.cell.beta_c[0].item() == -1.0



def test_every_series_keeps_its_models_colour_in_the_sweep_figure() -> None:
    from lnviz import charts

    fig = charts.training.sweep_figure(
        [0.1, 3.0], {"LSTM (no norms)": ([0.9, 0.9],) * 3, "LN-LSTM": ([0.8, 0.7],) * 3},
        "initial γ")
    colours = {t.name: t.line.color for t in fig.data}
    assert colours == {"LSTM (no norms)": charts.training.COLORS["LSTM"],
                       "LN-LSTM": charts.training.COLORS["LN-LSTM"]}
