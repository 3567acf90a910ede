"""lnviz as a package: its wheel holds every module and every file the package reads at run time,
declares its dependencies, and works installed, imported from a directory outside the checkout.

The wheel is built here without a network (``--no-build-isolation``: setuptools comes with the
dev extra) and installed into a folder of its own; the dependencies (torch, numpy, ...) are the
test environment's. README's commands install the checkout editable (``pip install -e .[app]``
through requirements.txt), which a fresh clone in CI exercises.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow  # builds and installs a wheel, then starts a fresh Python


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # from a copy: setuptools writes build/ and lnviz.egg-info/ beside the sources it builds
    source = tmp_path_factory.mktemp("source")
    shutil.copytree(ROOT / "lnviz", source / "lnviz",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
                    "--no-build-isolation", "--wheel-dir", str(out), str(source)],
                   check=True, capture_output=True)
    (found,) = out.glob("lnviz-*.whl")
    return found


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                    "--no-compile", "--target", str(target), str(wheel)],
                   check=True, capture_output=True)
    return target


def _package_files() -> set[str]:
    """What the checkout's package holds: every file under lnviz/ but caches."""
    return {path.relative_to(ROOT).as_posix() for path in (ROOT / "lnviz").rglob("*")
            if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc"}


def test_the_wheel_holds_every_module_and_file_of_the_package(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = {name for name in archive.namelist() if name.startswith("lnviz/")}
    expected = _package_files()
    assert any(name.endswith(".js") for name in expected)  # the check sees the data files
    assert names == expected, (expected - names, names - expected)


def test_the_wheel_declares_the_core_dependencies_and_the_extras(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    requires = [line.split(": ", 1)[1] for line in lines if line.startswith("Requires-Dist: ")]
    core = sorted(r for r in requires if "extra ==" not in r)
    assert core == ["numpy>=1.26", "safetensors>=0.4", "torch<2.14,>=2.6"]
    extras = {line.split(": ", 1)[1] for line in lines if line.startswith("Provides-Extra: ")}
    assert extras == {"models", "app", "dev"}
    app = [r for r in requires if 'extra == "app"' in r]
    assert any(r.startswith("streamlit") for r in app)
    assert any(r.startswith("lnviz[models]") for r in app)


#: Run from a folder outside the checkout, lnviz the installed copy: the functional API against
#: torch, capture and patch on a model transformers builds, lnviz.nn against torch.nn, and the
#: package's own files.
_OUTSIDE = r"""
import json, sys, torch, lnviz
from pathlib import Path
x = torch.randn(4, 7, generator=torch.Generator().manual_seed(0))
r = lnviz.layer_norm(x, (7,))
expected = torch.nn.functional.layer_norm(x, (7,))
from transformers import BertConfig, BertModel
config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=32, max_position_embeddings=20)
torch.manual_seed(0)
bert = BertModel(config).eval()
ids = torch.tensor([[1, 5, 7, 2]])
cap = lnviz.capture(bert, ids)
name = "encoder.layer.0.attention.output.LayerNorm"
with torch.no_grad():
    plain = bert(ids).last_hidden_state
    with lnviz.patch(bert, {name: torch.zeros_like}):
        patched = bert(ids).last_hidden_state
    restored = bert(ids).last_hidden_state
import lnviz.nn as lnn
ours, theirs = lnn.BatchNorm2d(3).double(), torch.nn.BatchNorm2d(3).double()
images = torch.randn(4, 3, 5, 5, dtype=torch.float64)
bn = (ours(images) - theirs(images)).abs().max().item()
bn_running = (ours.running_var - theirs.running_var).abs().max().item()
import lnviz.capture
from lnviz.data.examples import FOLDER
from lnviz.lessons.performance import GPU_RUN_FILE
print(json.dumps({
    "file": lnviz.__file__,
    "layer_norm": (r.output - expected).abs().max().item(),
    "records": [rec.name for rec in cap.records],
    "replay": max((rec.replay().output - rec.output).abs().max().item() for rec in cap.records),
    "capture": type(lnviz.capture).__name__,
    "patched": (patched - plain).abs().max().item(),
    "restored": (restored - plain).abs().max().item(),
    "bn": bn, "bn_running": bn_running,
    "examples": sorted(p.name for p in FOLDER.glob("*.safetensors")),
    "gpu_run": GPU_RUN_FILE.is_file(),
}))
"""


def test_installed_lnviz_works_from_outside_the_checkout(installed: Path, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(installed), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", _OUTSIDE], capture_output=True, text=True,
                          cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert Path(out["file"]).is_relative_to(installed)  # the installed copy, not the checkout
    assert out["layer_norm"] < 1e-5
    # BertModel's norms: the embeddings' LayerNorm, then two per layer
    assert out["records"] == ["embeddings.LayerNorm",
                              *(f"encoder.layer.{i}.{part}.LayerNorm" for i in range(2)
                                for part in ("attention.output", "output"))]
    assert out["replay"] < 1e-5
    assert out["capture"] == "function"  # also after `import lnviz.capture`
    assert out["patched"] > 1e-3 and out["restored"] == 0  # lnviz.patch, and undone
    assert out["bn"] < 1e-10 and out["bn_running"] < 1e-12  # lnviz.nn against torch.nn
    assert out["examples"] == ["tiny_models.capture.safetensors",
                               "tiny_models.checkpoint.safetensors"]
    assert out["gpu_run"]
