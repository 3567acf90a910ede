"""Issue 11's training defects: a long-sequence upload that hung the server, and a Stop that took
minutes. A training is refused before it starts when it asks for too much (with a message saying
what to lower), and it advances in pieces of bounded work that Stop interrupts."""

from __future__ import annotations

import io
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import alerts, open_page
from test_training_loop import single_thread  # noqa: F401  (one thread: see its docstring)

import lnviz.data.sequences as sequences_module
import lnviz.lessons.training as training_module
from lnviz.data.sequences import MAX_SEQUENCE_STEPS, SequenceData, load_digits_data, load_files
from lnviz.lessons.training import (
    MAX_STEP_WORK,
    MODELS,
    TIME_STEP_OVERHEAD,
    TrainConfig,
    Training,
    check_work,
    step_work,
    training_work,
)
from lnviz.limits import DEMO_LIMITS, FULL_LIMITS

PAGE = "app_pages/training.py"
#: The largest comparison the page offers (full limits): eval_every as the page sets it.
LARGEST = TrainConfig(models=tuple(MODELS), hidden_size=256, batch_size=256, steps=5000,
                      eval_every=167)
SMALL = TrainConfig(models=("lstm", "ln-lstm", "bn-lstm"), hidden_size=8, batch_size=4,
                    steps=40, eval_every=1000)


def reported_upload() -> bytes:
    """The tester's file: 0.5 MB, images of 20 000 rows × 1 column (20 000 time steps)."""
    rng = np.random.default_rng(0)
    buffer = io.BytesIO()
    np.savez(buffer, x_train=rng.random((4, 20000, 1), np.float32), y_train=[0, 1, 0, 1],
             x_test=rng.random((2, 20000, 1), np.float32), y_test=[0, 1])
    return buffer.getvalue()


def shaped(steps: int, features: int, held_out: int = 2000) -> SequenceData:
    """Data of the given sequence shape (only the sizes matter to the work estimate)."""
    return SequenceData("test", np.zeros((2, steps, features), np.float32), np.arange(2),
                        np.zeros((held_out, steps, features), np.float32),
                        np.zeros(held_out, np.int64))


@pytest.fixture(scope="module")
def digits() -> SequenceData:
    return load_digits_data()


# --- Sequence length and features of an upload ------------------------------------------------


def test_the_reported_upload_is_refused_with_what_is_wrong() -> None:
    data = reported_upload()
    assert len(data) < 600_000
    with pytest.raises(ValueError, match=r"20000 rows, read as 20000 time steps; at most 128"):
        load_files({"mnist.npz": data})


@pytest.mark.parametrize(("rows", "columns", "message"), [
    (MAX_SEQUENCE_STEPS + 1, 28, "129 rows"),
    (28, 1025, "1025 columns, read as 1025 features per time step; at most 1024"),
])
def test_sequence_length_and_features_are_capped(rows: int, columns: int, message: str) -> None:
    buffer = io.BytesIO()
    np.savez(buffer, x_train=np.zeros((2, rows, columns), np.uint8), y_train=[0, 1],
             x_test=np.zeros((1, rows, columns), np.uint8), y_test=[1])
    with pytest.raises(ValueError, match=message):
        load_files({"mnist.npz": buffer.getvalue()})
    at_most = io.BytesIO()
    np.savez(at_most, x_train=np.zeros((2, min(rows, 128), min(columns, 1024)), np.uint8),
             y_train=[0, 1], x_test=np.zeros((1, min(rows, 128), min(columns, 1024)), np.uint8),
             y_test=[1])
    assert load_files({"mnist.npz": at_most.getvalue()}).steps == min(rows, 128)


def test_the_page_refuses_the_reported_upload_with_a_message() -> None:
    at = open_page(PAGE, {"tr_data": "MNIST (upload)"})
    at.file_uploader(key="tr_upload").upload("mnist.npz", reported_upload()).run()
    assert not at.exception, at.exception
    errors = alerts(at)["error"]
    assert any("Cannot read the upload: the images have 20000 rows" in e for e in errors), errors
    assert not any("Press **Run** to train" in i or "Press Run to train" in i
                   for i in alerts(at)["info"])  # nothing to train: no invitation to Run
    at.button(key="tr_run").click().run()
    assert not at.exception, at.exception
    assert any("Nothing to train yet" in w for w in alerts(at)["warning"])
    assert "tr_job" not in at.session_state and at.session_state["tr_results"] == {}


# --- The work a training asks for --------------------------------------------------------------


def test_training_work_by_hand() -> None:
    config = TrainConfig(models=("lstm",), hidden_size=2, batch_size=2, steps=3, eval_every=2)
    data = shaped(steps=4, features=3, held_out=5)
    # one forward pass of n sequences: 4 time steps × (n × 4H × (F + H) + the step's overhead)
    forward = [4 * (n * 4 * 2 * (3 + 2) + TIME_STEP_OVERHEAD) for n in (2, 5)]
    assert step_work(config, data) == 3 * forward[0]  # forward and backward
    # three steps; evaluations after steps 2 and 3, each of the 5 held-out sequences at once;
    # then the 5 read again with 0, 1, 2, 4 and 8 blank rows above (T/4, T/2, T and 2T)
    longer = sum((4 + m) * (5 * 4 * 2 * (3 + 2) + TIME_STEP_OVERHEAD) for m in (0, 1, 2, 4, 8))
    assert training_work(config, data) == 3 * 3 * forward[0] + 2 * forward[1] + longer
    # the BN-LSTM reads them twice: with its running statistics and with the test batch's
    bn = replace(config, models=("bn-lstm",))
    assert training_work(bn, data) == training_work(config, data) + longer
    two = replace(config, models=("lstm", "ln-lstm"))
    assert training_work(two, data) == 2 * training_work(config, data)


def test_the_largest_runs_the_page_offers_fit_the_full_limits(digits: SequenceData) -> None:
    for data in (digits, shaped(28, 28)):  # the 8×8 digits and MNIST's 28 × 28
        check_work(LARGEST, data, FULL_LIMITS)
    check_work(replace(LARGEST, steps=500, eval_every=17), shaped(28, 28, 2000),
               FULL_LIMITS)


def test_demo_mode_is_tighter_and_says_what_to_lower(digits: SequenceData) -> None:
    largest_demo = replace(LARGEST, steps=DEMO_LIMITS.max_training_steps, eval_every=17)
    check_work(largest_demo, digits, FULL_LIMITS)
    with pytest.raises(ValueError) as refused:
        check_work(largest_demo, digits, DEMO_LIMITS)
    message = str(refused.value)
    ratio = training_work(largest_demo, digits) / DEMO_LIMITS.max_training_work
    assert 2.7 < ratio < 2.8  # 2.69 before the sequence-length check was counted
    assert message == (
        "This training asks for too much work: 3 models × 500 steps of a batch of 256 sequences "
        "of 8 steps × 8 features with H = 256 is 2.8 times the most this server in demo mode "
        "allows for one run. Lower the training steps, the batch size, the hidden size H or the "
        "number of models.")
    # the defaults, and the same large settings with one model, are fine in demo mode
    check_work(TrainConfig(steps=300, eval_every=10), digits, DEMO_LIMITS)
    check_work(TrainConfig(steps=300, eval_every=10), shaped(28, 28), DEMO_LIMITS)
    check_work(replace(largest_demo, models=("ln-lstm",)), digits, DEMO_LIMITS)
    with pytest.raises(ValueError, match=r"the most this server allows for one run"):
        check_work(replace(LARGEST, steps=50_000), digits, FULL_LIMITS)


@pytest.mark.parametrize("limits", [FULL_LIMITS, DEMO_LIMITS])
def test_a_step_too_big_to_stop_is_refused_at_any_limit(limits) -> None:
    wide = shaped(MAX_SEQUENCE_STEPS, 1024)  # accepted as data, but not at batch 256, H = 256
    with pytest.raises(ValueError, match=r"One training step would be too big to stop promptly: "
                                         r"a batch of 256 sequences of 128 steps × 1024 "
                                         r"features with H = 256 is 16\.3 times the most one "
                                         r"step may take\. Lower the batch size or the hidden "
                                         r"size H\."):
        check_work(replace(LARGEST, steps=1), wide, limits)
    check_work(TrainConfig(hidden_size=16, batch_size=2, steps=1), wide, limits)


@settings(max_examples=60, deadline=None)
@given(models=st.integers(1, 3), hidden=st.sampled_from([16, 32, 64, 128, 256]),
       batch=st.sampled_from([2, 4, 8, 16, 32, 64, 128, 256]), steps=st.integers(1, 5000),
       rows=st.integers(1, MAX_SEQUENCE_STEPS), columns=st.integers(1, 1024),
       demo=st.booleans())
def test_check_work_refuses_exactly_what_is_over_a_limit(models, hidden, batch, steps, rows,
                                                         columns, demo) -> None:
    config = TrainConfig(models=MODELS[:models], hidden_size=hidden, batch_size=batch,
                         steps=steps, eval_every=max(1, round(steps / 30)))
    data, limits = shaped(rows, columns, 100), DEMO_LIMITS if demo else FULL_LIMITS
    work = training_work(config, data)
    over = step_work(config, data) > MAX_STEP_WORK or work > limits.max_training_work
    try:
        check_work(config, data, limits)
    except ValueError as err:
        assert over, err
        assert "Lower the" in str(err)
    else:
        assert not over
    # more steps, a wider state or a bigger batch never ask for less
    assert training_work(replace(config, steps=steps + 1), data) >= work
    assert training_work(replace(config, batch_size=batch * 2), data) > work
    assert training_work(replace(config, hidden_size=hidden * 2), data) > work


# --- Chunks of bounded work, and Stop within one piece -----------------------------------------


def ticking_clock(on_tick=None):
    """A clock that moves one second each time it is read: the pieces, not the machine's speed,
    decide how much work a chunk does."""
    now = [0.0]

    def clock() -> float:
        now[0] += 1
        if on_tick is not None:
            on_tick(now[0])
        return now[0]

    return clock


def test_a_chunk_does_pieces_of_the_model_furthest_behind_until_its_time_is_up(digits) -> None:
    training = Training(digits, SMALL)
    # the clock is read at the start and after each piece: 1 s per piece, so a 2.5 s chunk
    # ends after 3 pieces (the third pushes it past its time) and a 0 s chunk after one
    assert training.advance_for(2.5, clock=ticking_clock()) == 3
    assert [run.step for run in training.runs] == [1, 1, 1]
    assert training.advance_for(0, clock=ticking_clock()) == 1
    assert [run.step for run in training.runs] == [2, 1, 1]
    assert training.advance_for(4.5, clock=ticking_clock()) == 5
    assert [run.step for run in training.runs] == [3, 3, 3]  # all three advance together
    assert training.step == 3 and not training.done


def test_stop_ends_a_chunk_after_the_piece_under_way(digits) -> None:
    training = Training(digits, SMALL)
    stop_at_second_piece = ticking_clock(lambda now: now == 3 and training.stop())
    assert training.advance_for(1000, clock=stop_at_second_piece) == 2  # not 120 steps
    assert [run.step for run in training.runs] == [1, 1, 0]
    assert training.done
    assert training.advance_for(1000, clock=ticking_clock()) == 0


def test_chunks_finish_the_training_with_the_same_numbers_as_whole_steps(digits) -> None:
    config = replace(SMALL, steps=6, eval_every=4)
    whole, chunked = Training(digits, config), Training(digits, config)
    whole.advance(6)
    pieces = 0
    while not chunked.done:
        pieces += chunked.advance_for(0, clock=ticking_clock())
    # 3 models × (6 steps + an evaluation after steps 4 and 6, the 450 samples in one piece
    # + the sequence-length check: 256 samples at 5 lengths, one piece each)
    assert pieces == 3 * (6 + 2 + 5)
    for a, b in zip(whole.runs, chunked.runs, strict=True):
        assert a.curve == b.curve and a.step_loss == b.step_loss
        assert a.curve["step"] == [4, 6]


def test_a_long_evaluation_is_cut_into_pieces_and_counts_every_sample(monkeypatch,
                                                                      digits) -> None:
    config = replace(SMALL, models=("ln-lstm",), steps=2, eval_every=2)
    per_sample = digits.steps * 4 * 8 * (digits.features + 8)
    # room for exactly 100 held-out samples per piece: 450 are evaluated in 5 pieces
    monkeypatch.setattr(training_module, "MAX_STEP_WORK",
                        100 * per_sample + digits.steps * TIME_STEP_OVERHEAD)
    monkeypatch.setattr(training_module, "LENGTH_SAMPLES", 30)  # of the length check, below
    training = Training(digits, config)
    run = training.runs[0]
    assert run.eval_slice == 100
    assert training.advance_for(0, clock=ticking_clock()) == 1
    assert training.advance_for(0, clock=ticking_clock()) == 1
    assert run.step == 2 and run.evaluating and not training.done
    counts = [training.advance_for(0, clock=ticking_clock()) for _ in range(5)]
    assert counts == [1] * 5 and not run.evaluating and run.curve["step"] == [2]
    with torch.no_grad():
        logits = run.model.eval()(training.tensors.x_eval)
    expected = (logits.argmax(1) == training.tensors.y_eval).double().mean().item()
    assert math.isclose(run.curve["accuracy"][0], expected, abs_tol=1e-12)
    # then the sequence-length check, sliced for its longest sequences (8 + 16 rows): here the
    # fixed cost of 24 time steps alone is over this budget, so it reads one image per piece
    assert not training.done and run.length_slice == 1
    pieces = 0
    while not training.done:
        pieces += training.advance_for(0, clock=ticking_clock())
    assert pieces == 5 * 30
    x, y = training.tensors.x_eval[:30], training.tensors.y_eval[:30]
    for margin, hits in zip(run.length_margins, run.length_hits, strict=True):
        with torch.no_grad():
            longer = torch.cat([x.new_zeros(30, margin, 8), x], dim=1)
            assert hits == int((run.model(longer).argmax(1) == y).sum()), margin


# --- The page ----------------------------------------------------------------------------------


def test_demo_mode_refuses_a_run_too_large_and_starts_nothing(monkeypatch) -> None:
    monkeypatch.setenv("LNVIZ_DEMO", "1")
    at = open_page(PAGE)
    at.multiselect(key="tr_models").set_value(list(MODELS))
    at.select_slider(key="tr_hidden").set_value(256)
    at.select_slider(key="tr_batch").set_value(256)
    at.select_slider(key="tr_seeds").set_value(1)
    at.number_input(key="tr_steps").set_value(500).run()
    at.button(key="tr_run").click().run()
    assert not at.exception, at.exception
    errors = alerts(at)["error"]
    assert any(e.startswith("This training asks for too much work: 3 models × 500 steps")
               and "demo mode" in e for e in errors), errors
    assert "tr_job" not in at.session_state and at.session_state["tr_results"] == {}
    # with the page's 3 seeds, the message names them as something to lower
    at.select_slider(key="tr_seeds").set_value(3).run()
    at.button(key="tr_run").click().run()
    errors = alerts(at)["error"]
    assert any(e.startswith("This training asks for too much work: 3 models × 3 seeds × 500 "
                            "steps") and "the number of seeds" in e for e in errors), errors
    assert "tr_job" not in at.session_state and at.session_state["tr_results"] == {}


# --- Third hostile pass ------------------------------------------------------------------------

def test_a_stop_before_the_first_evaluation_still_ends_with_curves(digits) -> None:
    """Stopped after 3 of 40 steps with evaluations due every 1000: the summary evaluates the
    weights as they are, so the loss and accuracy charts are not empty."""
    from lnviz.lessons.training import summarize

    training = Training(digits, replace(SMALL, models=("lstm", "ln-lstm")))
    training.advance(3)
    training.stop()
    result = summarize(training)
    assert result.stopped and result.steps_done == 3
    for label, curve in result.curves.items():
        assert curve["step"] == [3], label
        assert curve["loss"][0] == pytest.approx(np.mean(result.step_loss[label]))
        assert 0.0 <= curve["accuracy"][0] <= 1.0


def _gzip(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data)


def _idx_header(code: int, shape: tuple[int, ...]) -> bytes:
    import struct

    return bytes([0, 0, code, len(shape)]) + struct.pack(f">{len(shape)}I", *shape)


def test_a_gzip_bomb_is_refused_from_its_declared_shape_before_inflating(monkeypatch) -> None:
    """The tester's 498 KB .gz declared 81,632 × 28 × 28 float64 values and was inflated
    (2.6 GB peak) before any check. Now the declared shape is judged first."""
    from lnviz.data.sequences import read_idx

    bomb = _gzip(_idx_header(0x0E, (81632, 28, 28)) + bytes(81632 * 28 * 28 * 8))
    inflated: list[int] = []
    real = sequences_module._gunzip
    monkeypatch.setattr(sequences_module, "_gunzip",
                        lambda data, limit: inflated.append(limit) or real(data, limit))
    with pytest.raises(ValueError, match="63,999,488 values, more than the 56,000,000 accepted"):
        read_idx(bomb, max_elements=FULL_LIMITS.training_values)
    assert inflated == []  # nothing was inflated
    small = _gzip(_idx_header(0x08, (2, 3)) + bytes(range(6)))
    np.testing.assert_array_equal(read_idx(small), np.arange(6).reshape(2, 3))
    assert inflated == [4 + 8 + 6]  # inflated to exactly the declared size


def test_the_four_files_share_one_limit_and_demo_is_tighter() -> None:
    def files(n: int) -> dict[str, bytes]:
        images = _idx_header(0x08, (n, 28, 28)) + bytes(n * 784)
        labels = _idx_header(0x08, (n,)) + bytes([i % 2 for i in range(n)])
        return {"train-images-idx3-ubyte": images, "train-labels-idx1-ubyte": labels,
                "t10k-images-idx3-ubyte": images, "t10k-labels-idx1-ubyte": labels}

    small = files(100)
    assert load_files(small, DEMO_LIMITS.training_values).x_train.shape[0] == 100
    big = files(6000)  # 2 × 6000 × 784 = 9.4M values: over demo's 8M, though each file is not
    with pytest.raises(ValueError, match="the four files share this limit"):
        load_files(big, DEMO_LIMITS.training_values)
    assert load_files(big, FULL_LIMITS.training_values).x_train.shape[0] == 6000
    # MNIST itself (70,000 images of 28 × 28 and their labels) fits the full limit
    assert FULL_LIMITS.training_values >= 70_000 * 785


def test_one_class_is_refused_by_counting_classes_not_the_largest_label() -> None:
    """Third hostile pass: one image labelled 5 was accepted as a 6-class problem."""
    buffer = io.BytesIO()
    np.savez(buffer, x_train=np.ones((3, 8, 8)), y_train=[5, 5, 5], x_test=np.ones((1, 8, 8)),
             y_test=[5])
    with pytest.raises(ValueError, match=r"a single class \(5\)"):
        load_files({"mnist.npz": buffer.getvalue()})
