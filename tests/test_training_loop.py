"""The training lesson's data loaders, chunked training loop, and the CLI of lnviz.train."""

from __future__ import annotations

import gzip
import json
import struct
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from lnviz.data.sequences import load_data, load_digits_data, load_files, load_mnist_npz, read_idx
from lnviz.lessons.training import TrainConfig, Training, summarize, to_json, train
from lnviz.train import main

TINY = TrainConfig(hidden_size=16, batch_size=32, steps=24, eval_every=8, lr=3e-2)


@pytest.fixture(autouse=True, scope="module")
def single_thread():
    """Train these tiny models on one thread. With two, every small matmul waits for the second
    core; when other processes keep that core busy, each wait costs milliseconds and the tests
    run ten times slower, though their numbers are the same."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="module")
def digits():
    return load_digits_data()


@pytest.fixture(scope="module")
def trained(digits):
    return train(digits, TINY)


def fake_mnist(n_train: int = 12, n_test: int = 6, side: int = 28):
    rng = np.random.default_rng(0)
    return (rng.integers(0, 256, (n_train, side, side), dtype=np.uint8),
            rng.integers(0, 10, n_train, dtype=np.uint8),
            rng.integers(0, 256, (n_test, side, side), dtype=np.uint8),
            rng.integers(0, 10, n_test, dtype=np.uint8))


def idx_bytes(array: np.ndarray) -> bytes:
    """An IDX file as MNIST's are written: magic (0, 0, type, ndim), big-endian sizes, data."""
    code = {np.uint8: 0x08, np.int16: 0x0B, np.float32: 0x0D}[array.dtype.type]
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(array.dtype.newbyteorder(">")).tobytes()


def write_idx_dir(folder: Path, gz: bool = False) -> None:
    names = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
             "t10k-labels-idx1-ubyte"]
    for name, array in zip(names, fake_mnist(), strict=True):
        data = idx_bytes(array)
        (folder / (name + ".gz" if gz else name)).write_bytes(gzip.compress(data) if gz
                                                             else data)


def test_digits_are_8_steps_of_8_with_a_fixed_held_out_split(digits) -> None:
    assert digits.x_train.shape == (1347, 8, 8) and digits.x_test.shape == (450, 8, 8)
    assert (digits.steps, digits.features, digits.num_classes) == (8, 8, 10)
    assert digits.x_train.min() == 0 and digits.x_train.max() == 1
    again = load_digits_data()
    np.testing.assert_array_equal(again.y_test, digits.y_test)
    assert set(np.unique(digits.y_test)) == set(range(10))


def test_mnist_npz_is_read_as_28_steps_of_28(tmp_path: Path) -> None:
    x_train, y_train, x_test, y_test = fake_mnist()
    np.savez_compressed(tmp_path / "mnist.npz", x_train=x_train, y_train=y_train,
                        x_test=x_test, y_test=y_test)
    data = load_data(tmp_path / "mnist.npz")
    assert data.x_train.shape == (12, 28, 28) and data.x_test.shape == (6, 28, 28)
    np.testing.assert_allclose(data.x_train, x_train / 255, atol=1e-6)
    np.testing.assert_array_equal(data.y_test, y_test)
    same = load_files({"mnist.npz": (tmp_path / "mnist.npz").read_bytes()})
    np.testing.assert_array_equal(same.x_test, data.x_test)


def test_bad_npz_files_are_refused_with_a_message(tmp_path: Path) -> None:
    x_train, y_train, x_test, _ = fake_mnist()
    np.savez(tmp_path / "partial.npz", x_train=x_train, y_train=y_train, x_test=x_test)
    with pytest.raises(ValueError, match="lacks y_test"):
        load_mnist_npz(tmp_path / "partial.npz")
    whole = (tmp_path / "partial.npz").read_bytes()
    with pytest.raises(ValueError, match=r"corrupt|truncated"):
        load_mnist_npz(whole[: len(whole) // 2])
    np.savez(tmp_path / "labels.npz", x_train=x_train, y_train=y_train[:3], x_test=x_test,
             y_test=y_train[:6])
    with pytest.raises(ValueError, match="one label per image"):
        load_mnist_npz(tmp_path / "labels.npz")


@pytest.mark.parametrize("gz", [False, True])
def test_idx_folder_gives_the_same_arrays(tmp_path: Path, gz: bool) -> None:
    write_idx_dir(tmp_path, gz=gz)
    data = load_data(tmp_path)
    x_train, y_train, _, y_test = fake_mnist()
    np.testing.assert_allclose(data.x_train, x_train / 255, atol=1e-6)
    np.testing.assert_array_equal(data.y_train, y_train)
    np.testing.assert_array_equal(data.y_test, y_test)


def test_read_idx_handles_other_types_and_refuses_broken_files() -> None:
    values = np.arange(6, dtype=np.int16).reshape(2, 3) - 2
    np.testing.assert_array_equal(read_idx(idx_bytes(values)), values)
    floats = np.linspace(-1, 1, 4, dtype=np.float32)
    np.testing.assert_array_equal(read_idx(idx_bytes(floats)), floats)
    good = idx_bytes(np.zeros((2, 4, 4), np.uint8))
    for broken, message in [
        (b"", "shorter than the 4-byte magic"),
        (b"\x01\x02" + good[2:], "two zero bytes"),
        (good[:2] + b"\x07" + good[3:], "unknown type code 0x07"),
        (good[:10], "ends inside the list of dimension sizes"),
        (good[:-1], "truncated"),
        (good + b"\x00", "trailing bytes"),
        (gzip.compress(good)[:-8], "corrupt .gz|truncated"),
    ]:
        with pytest.raises(ValueError, match=message):
            read_idx(broken)
    huge = bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 100_000, 1000, 1000)
    with pytest.raises(ValueError, match="more than"):
        read_idx(huge)


def test_idx_set_needs_all_four_files(tmp_path: Path) -> None:
    write_idx_dir(tmp_path)
    files = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    del files["t10k-labels-idx1-ubyte"]
    with pytest.raises(ValueError, match="missing t10k-labels"):
        load_files(files)
    files["t10k-labels-idx1-ubyte"] = b"\x00\x00\x08\x01\x00\x00\x00\x09"  # 9 labels, no data
    with pytest.raises(ValueError, match="t10k-labels: truncated"):
        load_files(files)


def test_short_training_lowers_the_loss_and_learns(trained) -> None:
    result = summarize(trained)
    for label, curve in result.curves.items():
        assert curve["step"] == [8, 16, 24]
        assert curve["loss"][-1] < curve["loss"][0] < 2.5, label
        assert curve["accuracy"][-1] > 0.3, label  # chance is 0.1
        assert np.shape(result.step_grad_norm[label]) == (1, 24)  # one seed, 24 steps
        assert np.isfinite(result.step_grad_norm[label]).all()
    assert result.gates["LN-LSTM"].shape == (5, 8, 5)


def test_same_seed_gives_identical_numbers(digits, trained) -> None:
    again = train(digits, TINY)
    for a, b in zip(trained.runs, again.runs, strict=True):
        assert a.curve == b.curve and a.step_loss == b.step_loss
    other = Training(digits, replace(TINY, seed=1, steps=8))
    other.advance(8)
    assert other.runs[0].step_loss != trained.runs[0].step_loss[:8]


def test_chunks_reproduce_a_single_run_and_stop_keeps_what_was_learned(digits, trained) -> None:
    chunked = Training(digits, TINY)
    chunked.advance(5)
    chunked.advance(11)
    assert chunked.step == 16 and not chunked.done
    assert chunked.runs[1].step_loss == trained.runs[1].step_loss[:16]
    chunked.stop()
    assert chunked.done
    result = summarize(chunked)
    assert result.stopped and result.steps_done == 16
    assert result.curves["LN-LSTM"]["step"] == [8, 16]


def test_summary_shows_batch_dependence_in_numbers(digits) -> None:
    training = Training(digits, replace(TINY, models=("ln-lstm", "bn-lstm"), steps=8))
    training.advance(8)
    rows = {(r.model, r.statistics): r for r in summarize(training).batch_sensitivity}
    ln = rows["LN-LSTM", "per sample (LayerNorm)"]
    bn_train = rows["BN-LSTM", "batch statistics (training mode)"]
    bn_eval = rows["BN-LSTM", "running averages (evaluation mode)"]
    assert ln.batch_sizes == (1, 64) and ln.max_difference < 1e-5
    assert bn_train.batch_sizes == (2, 64) and bn_train.max_difference > 1e-2
    assert bn_eval.max_difference < 1e-5


def test_config_is_checked() -> None:
    for bad in [dict(models=()), dict(models=("lstm", "lstm")), dict(models=("gru",)),
                dict(batch_size=1), dict(lr=0.0), dict(steps=0), dict(device="tpu")]:
        with pytest.raises(ValueError):
            TrainConfig(**bad)


def test_cli_writes_the_json_record(tmp_path: Path, capsys) -> None:
    out = tmp_path / "runs.json"
    status = main(["--models", "lstm", "ln-lstm", "bn-lstm", "--steps", "4", "--eval-every",
                   "2", "--hidden-size", "8", "--batch-size", "8", "--json", str(out)])
    assert status == 0
    record = json.loads(out.read_text())
    assert record["dataset"].startswith("digits")
    assert [run["model"] for run in record["runs"]] == ["lstm", "ln-lstm", "bn-lstm"]
    for run in record["runs"]:
        assert run["step"] == [2, 4]
        assert len(run["loss"]) == len(run["accuracy"]) == 2
        assert all(0 <= a <= 1 for a in run["accuracy"]) and run["seconds"] > 0
    assert "held-out accuracy" in capsys.readouterr().out


def test_to_json_matches_the_summary(trained) -> None:
    result = summarize(trained)
    record = to_json(result)
    assert record["config"]["models"] == ["lstm", "ln-lstm"]
    assert record["runs"][1]["accuracy"] == result.curves["LN-LSTM"]["accuracy"]
    json.dumps(record)  # plain JSON all the way down


def test_cli_help_and_bad_data(tmp_path: Path, capsys) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--help"])
    assert done.value.code == 0
    assert "--hidden-size" in capsys.readouterr().out
    (tmp_path / "mnist.npz").write_bytes(b"not a zip file")
    with pytest.raises(SystemExit) as done:
        main(["--data", str(tmp_path / "mnist.npz")])
    assert done.value.code == 2
    assert "not a .npy or .npz file" in capsys.readouterr().err


# --- What the page shows of a training ---------------------------------------------------------


def test_evaluation_interval_gives_about_thirty_points() -> None:
    from lnviz.lessons.training import evaluation_interval

    assert [evaluation_interval(s) for s in (1, 6, 44, 46, 300, 5000)] == [1, 1, 1, 2, 10, 167]
    assert evaluation_interval(300, evaluations=3) == 100


def test_progress_reports_steps_accuracies_and_curve_points(digits) -> None:
    training = Training(digits, TINY)
    start = training.progress()
    assert (start.fraction, start.text, start.evaluations) == (0.0, "Step 0 of 24", 0)
    assert start.chance == pytest.approx(0.1)  # ten digits
    training.advance(8)
    now = training.progress()
    assert now.fraction == pytest.approx(8 / 24) and now.evaluations == 2  # one point per model
    assert now.curves == training.curves()
    accuracy = {label: c["accuracy"][-1] for label, c in now.curves.items()}
    assert now.text == (f"Step 8 of 24 · held-out accuracy: LSTM {accuracy['LSTM']:.0%}, "
                        f"LN-LSTM {accuracy['LN-LSTM']:.0%}")


def test_gate_bands_pick_one_gate_or_all_of_them(trained) -> None:
    from lnviz.lessons.training import GATES

    result = summarize(trained)
    for label in ("LSTM", "LN-LSTM"):
        np.testing.assert_array_equal(result.gate_bands()[label], result.gates[label][4])
        for row, gate in enumerate(GATES):
            np.testing.assert_array_equal(result.gate_bands(gate)[label],
                                          result.gates[label][row])
            np.testing.assert_array_equal(result.gate_bands(gate, at_init=True)[label],
                                          result.gates_at_init[label][row])
        assert result.gate_bands("output o")[label].shape == (8, 5)  # 8 time steps, 5 quantiles
    assert result.chance == pytest.approx(0.1)


def test_batch_table_and_findings_say_what_the_check_found(digits) -> None:
    training = Training(digits, replace(TINY, models=("ln-lstm", "bn-lstm"), steps=8))
    training.advance(8)
    result = summarize(training)
    table = result.batch_table()
    assert table.columns.tolist() == ["model", "normalization statistics",
                                      "batch sizes compared", "max |difference| of the logits"]
    assert table["batch sizes compared"].tolist() == ["1 vs 64", "2 vs 64", "1 vs 64"]
    assert table["max |difference| of the logits"].tolist() == [
        r.max_difference for r in result.batch_sensitivity]
    ln, bn = result.batch_sensitivity[0].max_difference, result.batch_sensitivity[1].max_difference
    scale = result.batch_sensitivity[0].largest_logit
    assert result.batch_sensitivity[0].rounding and 1 < scale < 100
    assert result.batch_findings() == (
        "The same images, batched differently: the trained LN-LSTM gives each of 64 held-out "
        f"images the same logits alone as in a batch of 64 (largest difference {ln:.1e} on "
        f"logits up to {scale:.2g}: float32 rounding); the BN-LSTM with batch statistics changes "
        f"them by up to {bn:.2g} when the "
        "same images come in pairs instead (a single image cannot be batch-normalized at all: it "
        "has no spread across the batch).")
    plain = Training(digits, replace(TINY, models=("lstm",), steps=2))
    plain.advance(2)
    assert summarize(plain).batch_findings() is None


# --- Longer sequences from the same digits (issue 13, seed 001) ------------------------------


@pytest.mark.parametrize(("reading", "shape"), [("rows", (8, 8)), ("rows28", (28, 28)),
                                                ("pixels4", (16, 4)), ("pixels2", (32, 2))])
def test_digits_can_be_read_as_longer_sequences(digits, reading: str, shape) -> None:
    from lnviz.data.sequences import DIGIT_READINGS

    data = load_digits_data(reading=reading)
    assert DIGIT_READINGS[reading][0] == shape
    assert data.x_train.shape == (1347, *shape) and data.x_test.shape == (450, *shape)
    np.testing.assert_array_equal(data.y_test, digits.y_test)  # the same held-out digits
    assert data.x_train.min() >= 0 and data.x_train.max() == pytest.approx(1)
    if reading.startswith("pixels"):  # the same pixels, read a few at a time, row-major
        np.testing.assert_array_equal(data.x_train.reshape(1347, 8, 8), digits.x_train)
    with pytest.raises(ValueError, match="unknown reading"):
        load_digits_data(reading="columns")


def test_upsampling_is_torch_bilinear_interpolation() -> None:
    import torch.nn.functional as F

    from lnviz.data.sequences import upsample

    images = np.random.default_rng(0).random((3, 8, 8), dtype=np.float32)
    reference = F.interpolate(torch.from_numpy(images)[:, None], size=(28, 28), mode="bilinear",
                              align_corners=False)[:, 0].numpy()
    np.testing.assert_allclose(upsample(images, 28), reference, atol=1e-6)
    np.testing.assert_allclose(upsample(images, 8), images, atol=1e-6)  # same size: unchanged
