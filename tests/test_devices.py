"""Devices and precisions: what the app may offer, and moving arrays there."""

import numpy as np
import pytest
import torch

from lnviz.devices import DTYPES, available_devices, supported_dtypes, to_numpy, to_tensor


def test_cpu_is_always_first():
    assert available_devices()[0] == "cpu"
    assert set(available_devices()) <= {"cpu", "cuda", "mps"}


def test_cuda_listed_exactly_when_torch_sees_it():
    assert ("cuda" in available_devices()) == torch.cuda.is_available()


def test_precisions():
    assert supported_dtypes("cpu") == ["float32", "float64", "float16", "bfloat16"]
    assert "float64" not in supported_dtypes("mps")


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_to_tensor_converts_values(device, dtype):
    values = np.array([[1.5, -2.0], [0.25, 4.0]], dtype=np.float32)
    tensor = to_tensor(values, device, dtype)
    assert tensor.dtype == DTYPES[dtype] and tensor.device.type == device
    assert tensor.cpu().double().tolist() == [[1.5, -2.0], [0.25, 4.0]]


def test_to_tensor_refuses_what_is_missing():
    with pytest.raises(ValueError, match="not available"):
        to_tensor(np.zeros(2), "tpu")
    with pytest.raises(ValueError, match="not supported"):
        to_tensor(np.zeros(2), "cpu", "float8")


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_to_numpy_brings_any_tensor_back_as_float64_or_as_asked(device, dtype):
    tensor = to_tensor(np.array([[1.5, -2.0], [0.25, 4.0]]), device, dtype).requires_grad_()
    values = to_numpy(tensor * 2)  # detached from the graph, on the CPU
    assert values.dtype == np.float64 and values.tolist() == [[3.0, -4.0], [0.5, 8.0]]
    assert to_numpy(tensor, torch.float32).dtype == np.float32
