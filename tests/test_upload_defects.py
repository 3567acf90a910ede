"""Defects of the Explorer's upload (issue 11): stale results after changing an upload's axes,
memory caps on what an upload may cost a session, and downloads that vanish in a rerun."""

from __future__ import annotations

import io

import numpy as np
import pytest
from pageutil import open_page, trace_data

EXPLORER = "pages/explorer.py"


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
    table = next(d.value for d in at.dataframe if "x" in d.value.columns)
    np.testing.assert_array_equal(table["x"].to_numpy(), group)
    expected = (group - group.mean()) / np.sqrt(group.var() + 1e-5)
    np.testing.assert_allclose(table["y"].to_numpy(), expected, rtol=1e-5)
    # With the sequence on axis 0, token 0 of sample 0 is x[0, :, 0] = 0, 3, 6.
    at.selectbox(key="ax_seq").set_value(0).run()
    np.testing.assert_array_equal(input_grid(at)[0], [0.0, 3.0, 6.0])
    table = next(d.value for d in at.dataframe if "x" in d.value.columns)
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
