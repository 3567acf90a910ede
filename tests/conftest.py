"""Shared test setup: which devices to test on, and skipping what this machine cannot run."""

from __future__ import annotations

import pytest

from lnviz.devices import available_devices

GPU_DEVICES = [d for d in available_devices() if d != "cpu"]

#: "cpu" always; each accelerator present as a ``gpu``-marked parameter, and a skipped
#: placeholder where there is none, so the report says why no GPU case ran.
DEVICE_PARAMS = ["cpu"] + (
    [pytest.param(d, marks=pytest.mark.gpu, id=d) for d in GPU_DEVICES]
    or [pytest.param("cuda", marks=pytest.mark.gpu, id="cuda")]
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    no_gpu = pytest.mark.skip(reason="no CUDA or MPS device on this machine")
    for item in items:
        if "gpu" in item.keywords and not GPU_DEVICES:
            item.add_marker(no_gpu)


@pytest.fixture(scope="session", params=DEVICE_PARAMS)
def device(request: pytest.FixtureRequest) -> str:
    """Each device to run a test on: the CPU, and every GPU that is present."""
    return request.param
