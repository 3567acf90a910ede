"""The live panel's server side: what it is sent, and what a release writes back.

The browser's arithmetic (norms.js against lnviz) is tested with Node's test runner
(tests/js/, run from here); the panel in the running app in tests/test_browser_live.py.
"""

from __future__ import annotations

import base64
import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import streamlit as st
import torch
from pageutil import padded

from lnviz.batch import Batch, NormSpec, group_ids
from lnviz.lessons.explorer import explore
from lnviz.limits import LIVE_LIMIT
from lnviz.ui import live
from lnviz.ui.params import AFFINE_RANGE, EPSILONS, norm_control_help


@pytest.fixture(autouse=True)
def _static_folder(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The app's static folder, named as app.py names its own: the live payloads carry their
    numbers only where Plotly.js can be served."""
    from lnviz.ui import static

    if static._folder is None:
        static.serve_from(tmp_path_factory.getbasetemp() / "static")


def _decode(text: str) -> np.ndarray:
    return np.frombuffer(base64.b64decode(text), dtype="<f8")


@pytest.mark.parametrize("spec", [
    NormSpec("LayerNorm", eps=0.0, gamma=-1.5, beta=0.5),
    NormSpec("RMSNorm", eps=1e-3, gamma=(1.0, -2.0, 0.5)),
    NormSpec("BatchNorm", training=False, warmup_steps=4, eps=1e-5,
             gamma=(1.0, 2.0, 3.0), beta=(0.0, -1.0, 1.0)),
])
def test_the_controls_carry_the_input_and_the_settings(spec: NormSpec) -> None:
    """ε, γ and β are sent their settled values and help, and for a tensor the browser can
    follow, the input and who shares μ and σ (lnviz.batch.grouping)."""
    batch = padded()
    ex = explore(batch, spec)
    data = live.live_payload(batch, spec, ex)
    shape = tuple(ex.x.shape)
    assert data["shape"] == list(shape) and data["layout"] == "NLC"
    np.testing.assert_array_equal(_decode(data["x"]), ex.input_values.ravel())
    assert data["mask"] == batch.mask.astype(int).ravel().tolist()
    ids = np.frombuffer(base64.b64decode(data["groupIds"]), dtype="<i4")
    np.testing.assert_array_equal(ids, group_ids(shape, "NLC", spec).ravel())
    assert data["epsilons"][data["server"]["eps"]] == spec.eps == data["server"]["epsValue"]
    per_feature = isinstance(spec.gamma, tuple)
    assert data["perFeature"] is per_feature
    assert data["gamma"] == (list(spec.gamma) if per_feature else spec.gamma)
    assert data["help"] == norm_control_help(spec.norm)
    assert ("σ²" in data["help"]["eps"]) is (spec.norm != "RMSNorm")
    assert data["note"] == ("γ and β are per feature: edit them in the table below."
                            if per_feature else "")


def test_a_tensor_the_browser_cannot_follow_is_sent_without_its_values() -> None:
    """Over the live limit the controls still set ε, γ and β (on release), and say why the
    figures do not follow a drag; so do they when lnviz refused the settings (no numbers)."""
    batch = Batch(np.ones((33, 128), np.float32), "NC")  # 4,224 values
    spec = NormSpec("RMSNorm", gamma=2.0)
    data = live.live_payload(batch, spec, explore(batch, spec))
    assert "x" not in data and "groupIds" not in data and data["server"]["gamma"] == 2.0
    assert data["note"] == ("RMSNorm has no β: it shifts nothing. The figures follow when you "
                            "let go: this tensor has 4,224 values, more than the 4,096 your "
                            "browser recomputes at every step of a drag.")
    assert LIVE_LIMIT == 4096
    refused = live.live_payload(padded(), NormSpec("LayerNorm"), None)
    assert "x" not in refused and refused["note"] == ""


def test_without_plotly_js_the_controls_say_the_figures_follow_on_release(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A deployment whose static/ folder cannot take Plotly.js draws the figures with
    st.plotly_chart: the controls are not sent the input, and say why the figures wait."""
    monkeypatch.setattr(live, "plotly_js", lambda: False)
    batch, spec = padded(), NormSpec("LayerNorm")
    data = live.live_payload(batch, spec, explore(batch, spec))
    assert "x" not in data
    assert data["note"] == ("The figures follow when you let go: the app could not put "
                            "Plotly.js where your browser loads it from (its static/ folder).")


def test_plotly_js_is_the_plotly_packages_copy_in_the_apps_static_folder(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Plotly.js goes into the folder the app names (app.py: static/ beside it), never into the
    lnviz package; an app that names none, or a folder that cannot be written, draws its figures
    with st.plotly_chart."""
    import plotly

    from lnviz.ui import static

    monkeypatch.setattr(static, "_folder", None)
    assert not live.plotly_js()  # no folder named: nothing written anywhere
    static.serve_from(tmp_path / "static")
    assert live.plotly_js()
    shipped = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    assert (tmp_path / "static" / "plotly.min.js").read_bytes() == shipped.read_bytes()
    assert not list(Path(live.__file__).parents[2].rglob("plotly.min.js"))  # not in lnviz
    blocked = tmp_path / "a file"
    blocked.write_text("")
    static.serve_from(blocked / "static")  # its parent is a file: the folder cannot be made
    assert not live.plotly_js()


def test_nan_and_infinity_survive_the_trip_to_the_browser() -> None:
    """JSON has no NaN or ∞: the input goes as float64 bytes, so NaN and ±inf arrive; a figure
    drawn in the browser carries them as gaps (None), as plotly does."""
    x = np.array([[np.nan, 1.0, np.inf], [1.0, 2.0, 4.0]])
    batch = Batch(x, "NC")
    spec = NormSpec("LayerNorm")
    sent = _decode(live.live_payload(batch, spec, explore(batch, spec, dtype="float64"))["x"])
    assert np.isnan(sent[0]) and sent[2] == np.inf and sent[3:].tolist() == [1.0, 2.0, 4.0]
    assert live._plain({"a": [1.0, math.nan, -math.inf], "b": np.arange(2)}) == {
        "a": [1.0, None, None], "b": [0, 1]}


class _State(dict):
    """Stands in for st.session_state in the release callback."""


@pytest.mark.parametrize(("control", "value", "key", "expected"), [
    ("gamma", -1.5, "gamma", -1.5),
    ("gamma", 0.30000000000000004, "gamma", 0.3),
    ("beta", 42.0, "beta", AFFINE_RANGE[1]),
    ("beta", -1e9, "beta", AFFINE_RANGE[0]),
    ("eps", 0, "eps", 0.0),
    ("eps", 8, "eps", 1e-5),
    ("eps", 99, "eps", EPSILONS[-1]),
    ("eps", -3, "eps", EPSILONS[0]),
])
def test_a_release_is_written_into_range(monkeypatch: pytest.MonkeyPatch, control: str,
                                         value: float, key: str, expected: float) -> None:
    state = _State({live.LIVE_KEY: {"settle": {"control": control, "value": value}}})
    monkeypatch.setattr(st, "session_state", state)
    live._settle()
    assert state[key] == expected


@pytest.mark.parametrize("event", [
    None, "gamma", {"control": "gamma", "value": math.nan},
    {"control": "gamma", "value": math.inf}, {"control": "gamma", "value": "1"},
    {"control": "gamma", "value": True}, {"control": "norm", "value": 1.0},
    # what only a tampered connection sends: a control that is not a name, an integer of 400
    # digits (JSON has them; a float cannot hold one)
    {"control": ["eps"], "value": 1}, {"control": {"a": 1}, "value": 1},
    {"control": "gamma", "value": 10**400},
])
def test_a_release_the_page_cannot_use_changes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                       event: object) -> None:
    state = _State({live.LIVE_KEY: {"settle": event}, "gamma": 1.0})
    monkeypatch.setattr(st, "session_state", state)
    live._settle()
    assert state == {live.LIVE_KEY: {"settle": event}, "gamma": 1.0}


@pytest.mark.parametrize("state", ["str", [1], 5])
def test_a_panel_state_that_is_not_a_dict_changes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                          state: object) -> None:
    kept = _State({live.LIVE_KEY: state, "gamma": 1.0})
    monkeypatch.setattr(st, "session_state", kept)
    live._settle()
    assert kept == {live.LIVE_KEY: state, "gamma": 1.0}


@pytest.mark.parametrize(("seq", "kept"), [
    (7, 7), (0, 0), (2**53 - 1, 2**53 - 1), (-1, None), (2**53, None), (True, None), (2.0, None),
    ("7", None), (None, None),
])
def test_a_releases_number_is_kept_for_the_panels_next_data(
        monkeypatch: pytest.MonkeyPatch, seq: object, kept: int | None) -> None:
    """The panel numbers each value it sends and holds its controls until the data it is sent
    carries that number: a whole number from the browser is kept (whatever the value), anything
    else is not, and the data then carries the last number kept (0 before any)."""
    state = _State({live.LIVE_KEY: {"settle": {"control": "gamma", "value": 0.5, "seq": seq}}})
    monkeypatch.setattr(st, "session_state", state)
    live._settle()
    assert state["gamma"] == 0.5
    assert state.get("live_answered") == kept
    assert live._with_answer(live.LIVE_KEY, {"x": 1}) == {"x": 1, "seq": kept or 0}
    # a value the page cannot use is still answered: the panel stops waiting for it
    state[live.LIVE_KEY] = {"settle": {"control": "gamma", "value": math.nan, "seq": 9}}
    live._settle()
    answered = max(kept or 0, 9)
    assert state["gamma"] == 0.5 and state["live_answered"] == answered
    # a number replayed or out of order does not take the answer back
    state[live.LIVE_KEY] = {"settle": {"control": "gamma", "value": 0.7, "seq": 4}}
    live._settle()
    assert state["gamma"] == 0.7 and state["live_answered"] == answered


def test_the_panel_is_only_for_tensors_it_can_draw_whole() -> None:
    assert live.fits((8, 6), "NC") and live.fits((2, 4, 6, 6), "NCHW")
    assert live.fits((32, 128), "NC") and not live.fits((33, 128), "NC")  # 4,096 values
    assert not live.fits((1, 129), "NC") and not live.fits((129, 1), "NC")
    assert not live.fits((0, 3), "NC")
    assert "export default function" in live.live_js()
    assert "function liveNormalize" in live.live_js()


def test_the_scale_and_shift_panel_settles_into_its_own_sliders(
        monkeypatch: pytest.MonkeyPatch) -> None:
    state = _State({live.AFFINE_KEY: {"settle": {"control": "beta", "value": -3.04}}})
    monkeypatch.setattr(st, "session_state", state)
    live._settle(live.AFFINE_KEY, live.AFFINE_CONTROLS)
    assert state["ss_beta"] == -3.0 and "beta" not in state
    state[live.AFFINE_KEY] = {"settle": {"control": "eps", "value": 3}}  # it has no ε
    live._settle(live.AFFINE_KEY, live.AFFINE_CONTROLS)
    assert set(state) == {live.AFFINE_KEY, "ss_beta"}


# --- BatchNorm vs LayerNorm: the batch-size panel ------------------------------------------------


def test_the_batch_panels_payload_lets_the_browser_build_every_batch() -> None:
    """The panel is sent the fixed sample and one draw of 63 mates per re-draw (float32, exact):
    slicing them gives lnviz's batch of every size; its settled numbers are lnviz's."""
    from lnviz.lessons.bn_vs_ln import (
        BN_VS_LN_MAX_BATCH,
        batch_dependence,
        batch_mates,
        fixed_sample,
    )

    sample, mates = fixed_sample(5, 2), batch_mates(5, 4, 2)
    dependence, refused = batch_dependence(sample, 6, 4, 2), batch_dependence(sample, 1, 1, 2)
    data = live.batches_payload(sample, mates, dependence, refused, help="what it is")
    assert (data["redraws"], data["mateCount"], data["features"]) == (4, BN_VS_LN_MAX_BATCH - 1, 5)
    assert data["maxBatch"] == BN_VS_LN_MAX_BATCH and data["eps"] == 1e-5
    assert data["key"].startswith(f"{live.BATCHES_KEY}@") and data["help"] == "what it is"
    np.testing.assert_array_equal(_decode(data["sample"]), sample)
    sent = np.frombuffer(base64.b64decode(data["mates"]), dtype="<f4").reshape(mates.shape)
    np.testing.assert_array_equal(sent, mates)
    for size in (2, 6, BN_VS_LN_MAX_BATCH):  # the browser's batch of `size` is lnviz's
        batch = torch.from_numpy(np.concatenate(
            [np.broadcast_to(sample, (4, 1, 5)), sent[:, : size - 1]], axis=1))
        ours = torch.stack([torch.nn.functional.batch_norm(b, None, None, training=True)[0]
                            for b in batch])
        np.testing.assert_allclose(ours, batch_dependence(sample, size, 4, 2).batch_norm,
                                   atol=1e-5)
    assert data["refusal"] == refused.refusal and "shape [1, 5]" in data["refusal"]
    assert data["torchRefusal"].startswith("Expected more than 1 value per channel")
    server = data["server"]
    assert server["batch"] == 6
    np.testing.assert_array_equal(_decode(server["batchNorm"]), dependence.batch_norm.ravel())
    np.testing.assert_array_equal(_decode(server["layerNorm"]), dependence.layer_norm.ravel())
    assert server["bnSpread"] == dependence.batch_norm_spread
    assert server["lnSpread"] == dependence.layer_norm_spread == 0.0
    # at batch size 1 BatchNorm has no numbers (JSON carries no NaN): None, as the browser's
    one = live.batches_payload(sample, mates, refused, refused, help="")["server"]
    assert one["batch"] == 1 and one["batchNorm"] is None and one["bnSpread"] is None


@pytest.mark.parametrize(("value", "expected"), [
    (8, 8), (1, 1), (64, 64), (5.4, 5), (0, 1), (-7, 1), (65, 64), (1e12, 64),
])
def test_a_released_batch_size_is_written_into_range(monkeypatch: pytest.MonkeyPatch,
                                                     value: float, expected: int) -> None:
    state = _State({live.BATCHES_KEY: {"settle": {"control": "batch", "value": value}}})
    monkeypatch.setattr(st, "session_state", state)
    live._settle(live.BATCHES_KEY, live.BATCHES_CONTROLS)
    assert state["bl_b"] == expected and isinstance(state["bl_b"], int)


@pytest.mark.parametrize("event", [
    {"control": "batch", "value": "8"}, {"control": "batch", "value": math.nan},
    {"control": "batch", "value": None}, {"control": "gamma", "value": 1.0}, "batch", 8,
])
def test_a_batch_release_the_page_cannot_use_changes_nothing(monkeypatch: pytest.MonkeyPatch,
                                                             event: object) -> None:
    state = _State({live.BATCHES_KEY: {"settle": event}, "bl_b": 8})
    monkeypatch.setattr(st, "session_state", state)
    live._settle(live.BATCHES_KEY, live.BATCHES_CONTROLS)
    assert state == {live.BATCHES_KEY: {"settle": event}, "bl_b": 8}


@pytest.mark.parametrize("size", [1, 8, 64])
def test_the_bn_vs_ln_page_draws_the_batch_panel(size: int) -> None:
    """The page renders the panel without exception, sent lnviz's numbers at its batch size."""
    import json

    from pageutil import open_page

    from lnviz.lessons.bn_vs_ln import batch_dependence, fixed_sample

    at = open_page("app_pages/bn_vs_ln.py", {"bl_b": str(size), "bl_r": "5"})
    assert not at.exception
    panel = at.get_by_key(live.BATCHES_KEY).proto
    assert panel.component_name == "lnviz_live_batches"
    data = json.loads(panel.json)
    dependence = batch_dependence(fixed_sample(6, 0), size, 5, 0)
    assert data["server"]["batch"] == size and data["redraws"] == 5
    np.testing.assert_array_equal(_decode(data["server"]["layerNorm"]),
                                  dependence.layer_norm.ravel())
    if size == 1:
        assert data["server"]["batchNorm"] is None and data["refusal"] == dependence.refusal
    else:
        np.testing.assert_array_equal(_decode(data["server"]["batchNorm"]),
                                      dependence.batch_norm.ravel())


def test_the_trivial_yardstick_draws_the_paragraphs_it_is_asked_for():
    """tools/trivial_app.py, livebench's yardstick: ``?text=`` paragraphs stay the same from run
    to run, ``?changing=`` ones follow the slider, and nothing else is added to the one chart."""
    from pathlib import Path

    from streamlit.testing.v1 import AppTest

    app = Path(__file__).resolve().parents[1] / "tools" / "trivial_app.py"
    at = AppTest.from_file(str(app), default_timeout=30)
    at.query_params["text"] = "3"
    at.query_params["changing"] = "2"
    at.run()
    first = [m.value for m in at.markdown]
    assert first == [f"Paragraph {i}: the same on every run." for i in range(3)] + [
        f"Paragraph {i}: k is 5." for i in range(2)]
    at.slider(key="k").set_value(9).run()
    assert [m.value for m in at.markdown] == first[:3] + [
        f"Paragraph {i}: k is 9." for i in range(2)]
    assert len(at.get("plotly_chart")) == 1


def test_the_live_javascript_passes_its_node_tests(tmp_path: Path) -> None:
    """norms.js's arithmetic equals lnviz's on every case tools/live_fixtures.py writes (every
    norm and layout, ε = 0, eval-mode BatchNorm, masks, the ε sweep's gradient, the batch
    panel's re-drawn batches), checked by Node's own test runner on lnviz's numbers computed
    here and now."""
    from tools.live_fixtures import write

    node = shutil.which("node")
    if node is None:
        message = "the live panels' Node tests need `node` on PATH (apt-get install nodejs)"
        if os.environ.get("LNVIZ_REQUIRE_NODE") == "1":
            pytest.fail(f"{message}, and LNVIZ_REQUIRE_NODE=1 requires it", pytrace=False)
        pytest.skip(message)
    root = Path(__file__).resolve().parents[1]
    cases = write(tmp_path / "live_cases.json")
    run = subprocess.run([node, "--test", "tests/js/"], cwd=root, capture_output=True,
                         text=True, timeout=300, env={**os.environ, "LIVE_CASES": str(cases)})
    report = run.stdout + run.stderr
    assert run.returncode == 0, report[-4000:]
    passed = re.search(r"^# pass (\d+)$", report, re.M)
    assert passed and int(passed.group(1)) >= 25 and "# fail 0" in report, report[-2000:]
