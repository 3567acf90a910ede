"""The code the pages show (lnviz/snippets/): every file runs as it stands, and lnviz.snippets
fills in a view's values, notes and sections without breaking the code."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from importlib.resources import files
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lnviz.snippets import SNIPPETS, Code, snippet, snippet_source

ROOT = Path(__file__).resolve().parents[1]
#: The snippets that import lnviz: Padding's, to rebuild the page's generated batch, and the
#: Bug zoo's, whose seven functions the page shows apart (its view drops that import).
IMPORTS_LNVIZ = ("bug_zoo", "padding")


def test_every_snippet_file_runs_as_it_stands(tmp_path) -> None:
    """All of them in one fresh process (torch imported once), each in a namespace of its own,
    from a directory outside the checkout; none imports lnviz but IMPORTS_LNVIZ (last)."""
    names = sorted(SNIPPETS, key=lambda name: name in IMPORTS_LNVIZ)
    paths = [str(files("lnviz.snippets").joinpath(f"{name}.py")) for name in names]
    plain = len(SNIPPETS) - len(IMPORTS_LNVIZ)
    code = ("import runpy, sys\n"
            "for i, path in enumerate(sys.argv[1:]):\n"
            f"    if i == {plain}:\n"
            "        assert not [m for m in sys.modules if m.split('.')[0] == 'lnviz'], path\n"
            "    runpy.run_path(path, run_name='__main__')\n")
    # the checkout under test first on the path (an editable install may point at another)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-c", code, *paths], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def test_snippets_are_found_and_an_unknown_one_is_refused() -> None:
    assert {"bandwidth", "epsilon"} <= set(SNIPPETS)
    with pytest.raises(ValueError, match="no snippet 'nope'"):
        snippet_source("nope")


def test_values_sections_and_notes_are_filled_in_and_checked() -> None:
    shown = snippet("bandwidth", rows=64, cols=Code("2 ** 5"))
    assert "rows = 64\ncols = 2 ** 5\nx = torch.randn(rows, cols)\n" in shown
    with pytest.raises(ValueError, match="sets no depth"):
        snippet("bandwidth", depth=3)
    with pytest.raises(ValueError, match=r"notes its view needs \['where'\]"):
        snippet("epsilon")  # its «where» note is not given
    with pytest.raises(ValueError, match=r"does not have \['when'\]"):
        snippet("epsilon", notes={"where": "", "when": ""})
    with pytest.raises(ValueError, match="no section"):
        snippet("bandwidth", keep=["affine"])


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False, width=32), min_size=1,
                max_size=6),
       st.floats(min_value=0.0, max_value=1.0))
def test_any_values_keep_the_code_valid_and_are_read_back_exactly(values, eps) -> None:
    shown = snippet("epsilon", values=values, eps=eps, dtype=Code("torch.float64"),
                    notes={"where": "a note"})
    tree = ast.parse(shown)
    assigned = {node.targets[0].id: node.value for node in tree.body
                if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)}
    assert ast.literal_eval(assigned["values"]) == values
    assert ast.literal_eval(assigned["eps"]) == eps
    assert ast.unparse(assigned["dtype"]) == "torch.float64"
    assert "# a note" in shown and "«" not in shown


@pytest.mark.parametrize("norm", ["LayerNorm", "RMSNorm", "BatchNorm"])
def test_a_view_keeps_its_own_section_and_drops_the_others(norm) -> None:
    """The geometry file holds all three norms (and runs them all); a view keeps one, with the
    markers gone, and is valid code that assigns x_hat once."""
    shown = snippet("geometry", keep=[norm], notes={"count": "3", "h": "3", "flat": "plane"})
    assert "# [" not in shown
    calls = {"LayerNorm": "F.layer_norm(", "RMSNorm": "F.rms_norm(", "BatchNorm": "F.batch_norm("}
    assert [name for name, call in calls.items() if call in shown] == [norm]
    tree = ast.parse(shown)
    assert sum(isinstance(n, ast.Assign) and ast.unparse(n.targets[0]) == "x_hat"
               for n in tree.body) == 1
    with pytest.raises(ValueError, match="never closed"):
        from lnviz import snippets

        snippets._sections("# [a]\nx = 1\n", {"a"}, "probe")
