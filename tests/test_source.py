"""The Explorer's upload: no stale results after changing an upload's axes, memory caps on what
an upload may cost a session, and downloads that stay available through a rerun."""

from __future__ import annotations

import io
import tracemalloc

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from pageutil import alerts, downloads, figures, open_page, set_live, step_table, trace_data
from streamlit.runtime.media_file_manager import MediaFileManager
from streamlit.runtime.memory_media_file_storage import MemoryMediaFileStorage
from streamlit.testing.v1 import AppTest, app_test

from lnviz.batch import grid_view, to_grid
from lnviz.charts.base import grid_labels
from lnviz.data import get_preset, random_batch
from lnviz.data.files import TensorFileError, TensorTooLargeError, load_arrays
from lnviz.limits import (
    DEMO_LIMITS,
    EXPLORER_BYTES_PER_VALUE,
    FULL_LIMITS,
    INSPECTOR_BYTES_PER_VALUE,
)
from lnviz.ui.cache import STORE_KEY, names_in

EXPLORER = "app_pages/explorer.py"


def npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array)
    return buffer.getvalue()


def uploaded(content: bytes, name: str = "t.npy"):
    at = open_page(EXPLORER)
    at.segmented_control(key="src").set_value("upload").run()
    at.file_uploader(key="upload").upload(name, content).run()
    assert not at.exception, at.exception
    return at


# --- 2. Changing an upload's axes recomputes everything ----------------------------------------


def input_grid(at) -> np.ndarray:
    return trace_data(at, 0, 0)  # the input heatmap: rows are (batch, seq), columns features


def test_choosing_another_batch_axis_regroups_figures_and_table():
    values = np.arange(27.0).reshape(3, 3, 3)
    at = uploaded(npy(values))
    np.testing.assert_array_equal(input_grid(at), values.reshape(9, 3))
    at.selectbox(key="ax_batch").set_value(2).run()
    seq = at.selectbox(key="ax_seq").value  # the sequence axis keeps its choice (1) if it can
    features = ({0, 1} - {seq}).pop()
    assert any(c.value.startswith(f"Features: axis {features}") for c in at.caption)
    arranged = values.transpose(2, seq, features)
    np.testing.assert_array_equal(input_grid(at), arranged.reshape(9, 3))
    # The step-by-step table works through group 0 (LayerNorm: token 0 of sample 0).
    group = arranged[0, 0]
    table = step_table(at)
    np.testing.assert_array_equal(table["x"].to_numpy(), group)
    expected = (group - group.mean()) / np.sqrt(group.var() + 1e-5)
    np.testing.assert_allclose(table["y"].to_numpy(), expected, rtol=1e-5)
    # With the sequence on axis 0, token 0 of sample 0 is x[0, :, 0] = 0, 3, 6.
    at.selectbox(key="ax_seq").set_value(0).run()
    np.testing.assert_array_equal(input_grid(at)[0], [0.0, 3.0, 6.0])
    table = step_table(at)
    np.testing.assert_array_equal(table["x"].to_numpy(), [0.0, 3.0, 6.0])


@pytest.mark.parametrize(("shape", "control", "value", "order"), [
    ((3, 3, 3), "ax_seq", 2, (0, 2, 1)),
    ((2, 2, 2, 2), "ax_ch", 2, (0, 2, 1, 3)),
    ((2, 2, 2, 2), "ax_batch", 3, (3, 1, 0, 2)),  # the channel axis stays 1
])
def test_every_axis_choice_of_a_cube_reaches_the_figures(shape, control, value, order):
    """Permuting the axes of a cube keeps its shape: only the order tells the batches apart."""
    values = np.arange(float(np.prod(shape))).reshape(shape)
    at = uploaded(npy(values))
    at.selectbox(key=control).set_value(value).run()
    arranged = values.transpose(order)
    # Grid rows: (batch, sequence) for NLC, (batch, channel) for NCHW.
    rows = arranged.shape[0] * arranged.shape[1]
    np.testing.assert_array_equal(input_grid(at), arranged.reshape(rows, -1))


# --- 3. What an upload may cost the server, and for how long -----------------------------------


@pytest.fixture(scope="module")
def zeros_50m() -> bytes:
    """The reported file: 50 million float64 zeros, 389 KB as np.savez_compressed writes them
    (400 MB decompressed)."""
    buffer = io.BytesIO()
    np.savez_compressed(buffer, x=np.zeros(50_000_000))
    return buffer.getvalue()


def test_the_caps_follow_from_the_memory_a_tensor_may_take():
    for limits in (FULL_LIMITS, DEMO_LIMITS):
        assert limits.tensor_values == min(
            limits.max_elements, limits.tensor_mb * 2**20 // EXPLORER_BYTES_PER_VALUE)
        # at the cap, the measured cost per value stays within the tensor's share of memory
        assert limits.tensor_values * EXPLORER_BYTES_PER_VALUE <= limits.tensor_mb * 2**20
    assert (FULL_LIMITS.tensor_values, DEMO_LIMITS.tensor_values) == (13_421_772, 419_430)
    # the reported files: 50 million values (389 KB) and, in demo mode, 2 million (15.7 KB)
    assert FULL_LIMITS.tensor_values < 50_000_000 and DEMO_LIMITS.tensor_values < 2_000_000


def test_a_capture_is_held_whole_under_its_own_cap_and_explored_one_layer_at_a_time(
        monkeypatch, tmp_path):
    """The inspector holds a file at INSPECTOR_BYTES_PER_VALUE a value (a 512-token SmolLM2
    capture, 36 M values, fits on a laptop: tests/test_smollm2.py); the Explorer opens one of its
    layers only if that layer's input fits its own cap, and says so otherwise."""
    for limits in (FULL_LIMITS, DEMO_LIMITS):
        assert limits.capture_values == min(
            limits.max_elements, limits.tensor_mb * 2**20 // INSPECTOR_BYTES_PER_VALUE)
        assert limits.capture_values > limits.tensor_values
    assert FULL_LIMITS.capture_values > 61 * 2 * 512 * 576
    monkeypatch.setenv("LNVIZ_DEMO", "1")
    from lnviz import capture

    tokens = DEMO_LIMITS.tensor_values // 640 + 1  # one layer's input just over the Explorer's cap
    x = torch.randn(1, tokens, 640, generator=torch.Generator().manual_seed(0))
    path = tmp_path / "wide.safetensors"
    capture(torch.nn.LayerNorm(640), x).save(path)
    at = open_page("app_pages/inspector.py", {"in_src": "Upload a file"})
    at.file_uploader(key="in_upload").upload(path.name, path.read_bytes()).run()
    assert not at.error and len(at.get("plotly_chart")) >= 2  # the inspector shows it
    at.button(key="in_open").click().run()
    assert not at.exception
    assert alerts(at)["error"] == [
        f"this layer's input holds {tokens * 640:,} values, more than the "
        f"{DEMO_LIMITS.tensor_values:,} the Explorer takes here (each costs it about "
        f"{EXPLORER_BYTES_PER_VALUE} bytes); the Model inspector shows it whole"]


def test_the_reported_npz_is_refused_before_it_is_decompressed(zeros_50m):
    assert len(zeros_50m) < 400_000
    tracemalloc.start()
    try:
        with pytest.raises(TensorTooLargeError, match="400000128 bytes uncompressed"):
            load_arrays(zeros_50m, max_elements=FULL_LIMITS.tensor_values, keep_float64=True)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2 * len(zeros_50m) + 2**20  # nothing near the 400 MB it would inflate to


@pytest.mark.parametrize("demo", [False, True])
def test_an_upload_over_the_cap_gets_a_clear_message_and_keeps_nothing(zeros_50m, demo,
                                                                       monkeypatch):
    if demo:
        monkeypatch.setenv("LNVIZ_DEMO", "1")
    limits = DEMO_LIMITS if demo else FULL_LIMITS
    at = uploaded(zeros_50m, "zeros.npz")
    message = (f"this file is too large: an uploaded tensor may hold at most "
               f"{limits.tensor_values:,} values here, because each value costs the Explorer "
               f"about {EXPLORER_BYTES_PER_VALUE} bytes for its copies and intermediates and "
               f"one learner's tensor may take {limits.tensor_mb:,} MB; save a slice or a "
               "smaller array")
    assert alerts(at)["error"] == [message]
    assert not figures(at) and "_upload" not in at.session_state
    uploader = at.file_uploader(key="upload")
    assert f"{limits.tensor_values:,} values" in uploader.proto.help


def test_demo_mode_refuses_the_reported_2m_value_file(monkeypatch):
    monkeypatch.setenv("LNVIZ_DEMO", "1")
    buffer = io.BytesIO()
    np.savez_compressed(buffer, x=np.zeros(2_000_000))
    at = uploaded(buffer.getvalue(), "zeros2m.npz")
    assert any(f"{DEMO_LIMITS.tensor_values:,} values" in e for e in alerts(at)["error"])
    at2 = uploaded(npy(np.zeros((DEMO_LIMITS.tensor_values,), np.float32)))  # at the cap: fine
    assert not at2.error and len(figures(at2)) == 3


def held(at) -> tuple[bool, list]:
    """Whether the session keeps an uploaded file, and the keys of its results from uploads."""
    cache = at.session_state[STORE_KEY] if STORE_KEY in at.session_state else {}  # noqa: SIM401 (no .get on AppTest's session state)
    keys = [key for _, key in cache
            if any(isinstance(name, tuple) and name[:1] == ("upload",) for name in names_in(key))]
    return "_upload" in at.session_state, keys


def test_the_upload_is_released_when_the_learner_moves_on():
    values = np.arange(12.0).reshape(3, 4)
    at = uploaded(npy(values))
    kept, results = held(at)
    assert kept and len(results) == 1
    set_live(at, eps=0.1)
    assert len(held(at)[1]) == 2  # two results of the upload (ε = 1e-5 and 0.1)
    at.segmented_control(key="src").set_value("preset").run()  # another source
    assert held(at) == (False, [])

    at.segmented_control(key="src").set_value("upload").run()
    assert held(at) == (False, [])  # Streamlit's uploader forgot the file as well
    at.file_uploader(key="upload").upload("t.npy", npy(values)).run()
    assert held(at)[0] and len(held(at)[1]) == 1
    at.switch_page("app_pages/home.py").run()  # another page
    assert held(at) == (False, [])

    at = uploaded(npy(values))
    first = held(at)[1]
    at.file_uploader(key="upload").upload("other.npy", npy(values + 1)).run()  # another file
    kept, results = held(at)
    assert kept and len(results) == 1 and results[0] not in first
    np.testing.assert_array_equal(input_grid(at), values + 1)


def test_size_refusals_are_told_apart_from_damaged_files():
    with pytest.raises(TensorTooLargeError):
        load_arrays(npy(np.zeros(11)), max_elements=10)
    with pytest.raises(TensorTooLargeError):
        load_arrays(b"\x93NUMPY" + bytes(2**21), max_elements=10)  # far more bytes than 10 values
    # a dimension over the cap beside a zero holds no values: refused, but not for its size
    with pytest.raises(TensorFileError) as refused:
        load_arrays(npy(np.zeros((0, 11))), max_elements=10)
    assert not isinstance(refused.value, TensorTooLargeError)


@given(shape=st.lists(st.integers(1, 6), min_size=2, max_size=4), rows=st.integers(1, 5),
       cols=st.integers(1, 5), mode=st.sampled_from(["slice", "downsample"]))
@settings(max_examples=60, deadline=None)
def test_labels_of_the_drawn_grid_are_those_of_the_full_grid(shape, rows, cols, mode):
    layout = {2: "NC", 3: "NLC", 4: "NCHW"}[len(shape)]
    grid = to_grid(np.zeros(shape), layout).shape
    view = grid_view(grid, max_rows=rows, max_cols=cols, mode=mode, start_row=1)
    all_rows, all_cols = grid_labels(tuple(shape), layout)
    assert (len(all_rows), len(all_cols)) == grid
    assert grid_labels(tuple(shape), layout, view=view) == (
        [all_rows[i] for i in view.rows], [all_cols[j] for j in view.cols])
    named = tuple(f"row {i}" for i in range(grid[0]))
    assert grid_labels(tuple(shape), layout, named, view)[0] == [named[i] for i in view.rows]


# --- 21. A download clicked while the page reruns --------------------------------------------


@pytest.fixture
def media(monkeypatch) -> MediaFileManager:
    """One media file manager for all runs of an AppTest, as a server has: each AppTest run
    otherwise starts with a new one, which would hide what one run leaves to the next."""
    shared = MediaFileManager(MemoryMediaFileStorage("/mock/media"))
    monkeypatch.setattr(app_test, "MediaFileManager", lambda storage: shared)
    return shared


def test_small_downloads_travel_with_the_page():
    """A click on a button of the run before, while the next run is in flight, asked the server
    for a file that it frees two clean-ups after the run that drew it (every run of every session
    ends with one: streamlit/runtime/media_file_manager.py), and a busy browser can be two runs
    behind: the browser got nothing. Now the bytes come with the button, and the server keeps no
    file that a click would need."""
    at = open_page(EXPLORER)  # the transformer article through LayerNorm
    shown = downloads(at)
    assert {"output.npy", "intermediates.npz", "input.npy", "output.csv", "mask.npy"} <= \
        set(shown)
    assert all("content" in sent for sent in shown.values())  # none is a server-side file
    preset = get_preset("padded_tokens")
    x = torch.tensor(preset.values, dtype=torch.float32)
    output = np.load(io.BytesIO(shown["output.npy"]["content"]))
    np.testing.assert_allclose(output, F.layer_norm(x, (3,), eps=1e-5).numpy(), atol=1e-6)
    np.testing.assert_array_equal(np.load(io.BytesIO(shown["input.npy"]["content"])), x)
    np.testing.assert_array_equal(np.load(io.BytesIO(shown["mask.npy"]["content"])),
                                  preset.mask)
    with np.load(io.BytesIO(shown["intermediates.npz"]["content"])) as saved:
        np.testing.assert_allclose(saved["output"], output)
    rows = shown["output.csv"]["content"].decode().splitlines()
    assert len(rows) == 2 * 4 * 3 + 1  # dim0,dim1,dim2,value and one line per value
    assert (shown["output.csv"]["mime"], shown["output.npy"]["mime"]) == \
        ("text/plain", "application/octet-stream")
    assert shown["output.npy"]["name"] == "output.npy"
    assert "normalized output" in shown["output.npy"]["help"]


def _two_downloads() -> None:
    """A script with a payload at the limit and one past it (AppTest runs it on its own)."""
    from functools import partial

    from lnviz.ui.downloads import INLINE_VALUES, download_button

    for values, name in ((INLINE_VALUES, "at.bin"), (INLINE_VALUES + 1, "past.bin")):
        download_button(None, name, partial(bytes, [values % 251]), name, values=values,
                        help=f"{values} values")


def test_the_limit_of_what_travels_with_the_page():
    at = AppTest.from_function(_two_downloads).run()
    shown = downloads(at)
    assert shown["at.bin"]["content"] == bytes([16_384 % 251])  # sent with the page
    assert shown["past.bin"]["proto"].deferred_file_id  # built on the server when clicked


def test_large_payloads_are_built_only_when_clicked(media):
    at = open_page(EXPLORER, {"src": "Random batch", "rn": "200", "rc": "100"})  # 20,000 values
    button = downloads(at)["output.npy"]["proto"]
    assert button.deferred_file_id and not button.url
    assert button.ignore_rerun  # the click asks for no rerun, which would cut a run short
    x = torch.from_numpy(random_batch((200, 100), feature_spread=1.0, seed=0)).float()
    url = media.execute_deferred(button.deferred_file_id)
    stored = media.read_file(url.rsplit("/", 1)[-1])
    np.testing.assert_allclose(np.load(io.BytesIO(stored.content)),
                               F.layer_norm(x, (100,), eps=1e-5).numpy(), atol=1e-5)


def test_an_uploaded_mask_follows_the_axes_the_learner_picks() -> None:
    """A square mask (batch size = sequence length) was applied in the file's axis order after
    the values had been turned: padding landed on real tokens, with no warning."""
    from lnviz.ui.source import _uploaded_mask

    x = np.arange(18.0).reshape(3, 3, 2)
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0]])
    # the file's axis 1 as the batch, axis 0 as the sequence: values (1, 0, 2)
    turned = x.transpose(1, 0, 2)
    np.testing.assert_array_equal(_uploaded_mask(mask, turned, "NLC", (1, 0, 2)), mask.T != 0)
    np.testing.assert_array_equal(_uploaded_mask(mask, x, "NLC", (0, 1, 2)), mask != 0)


def test_pages_read_uploads_through_one_helper():
    """``lnviz.ui.source.uploaded_files`` keeps one copy of an upload's bytes: a page whose
    globals held the UploadedFile kept another copy per rerun until the cycle collector ran
    (a 144 MB capture: 138 MB more per rerun, tools/inspector_memory.py). Only
    lnviz/ui/source.py calls st.file_uploader."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    callers = sorted(str(path.relative_to(root)) for folder in ("app_pages", "lnviz")
                     for path in (root / folder).rglob("*.py")
                     if "st.file_uploader(" in path.read_text())
    assert callers == ["lnviz/ui/source.py"]
