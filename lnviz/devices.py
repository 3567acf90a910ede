"""Which devices and precisions this machine offers, and moving arrays onto them."""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch

__all__ = ["DEFAULT_THREADS", "DTYPES", "available_devices", "one_thread", "single_threaded",
           "supported_dtypes", "to_numpy", "to_tensor"]

#: The precisions a learner can pick, by the name shown in the app.
DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


def available_devices() -> list[str]:
    """The devices torch can use here: ``"cpu"`` first, then ``"cuda"``/``"mps"`` if present."""
    devices = ["cpu"]
    if torch.cuda.is_available():
        devices.append("cuda")
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        devices.append("mps")
    return devices


def supported_dtypes(device: str) -> list[str]:
    """The names in :data:`DTYPES` that ``device`` can compute in (MPS has no float64)."""
    return [name for name in DTYPES if not (device == "mps" and name == "float64")]


def to_tensor(
    values: np.ndarray | torch.Tensor, device: str = "cpu", dtype: str = "float32"
) -> torch.Tensor:
    """``values`` as a tensor of precision ``dtype`` (a key of :data:`DTYPES`) on ``device``.

    Raises ValueError, with the alternatives, for a device or precision this machine lacks.
    """
    if device not in available_devices():
        raise ValueError(f"device {device!r} is not available here; choose one of "
                         f"{available_devices()}")
    if dtype not in supported_dtypes(device):
        raise ValueError(f"precision {dtype!r} is not supported on {device}; choose one of "
                         f"{supported_dtypes(device)}")
    tensor = torch.as_tensor(values) if isinstance(values, np.ndarray) else values
    return tensor.to(device=device, dtype=DTYPES[dtype])


def to_numpy(tensor: torch.Tensor, dtype: torch.dtype = torch.float64) -> np.ndarray:
    """``tensor`` as a NumPy array of ``dtype`` (float64 unless told), detached from autograd and
    on the CPU: what figures and tables take. Shares memory with ``tensor`` when it already is
    one."""
    return tensor.detach().cpu().to(dtype).numpy()


#: torch's intra-op threads when this module was imported: what :func:`one_thread` restores.
DEFAULT_THREADS = torch.get_num_threads()


@contextmanager
def one_thread() -> Iterator[None]:
    """Run torch single-threaded inside the block. The toy transformers' tensors
    (:mod:`lnviz.analysis`, :mod:`lnviz.train`) are tiny (a few thousand values), so intra-op
    threads cannot speed them up; on a CPU that other work shares
    they wait on each other at every one of thousands of small operations instead: a 300-step
    race of 6 blocks took 434 s with torch's 2 threads against 14.5 s with one, on the 2-core
    machine this was written on while other work kept it busy (6.6 s against 6.1 s for 200
    steps when it was nearly idle). torch applies the setting to the calling thread (and to
    threads started meanwhile), so it is set back to the import-time default afterwards."""
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(DEFAULT_THREADS)


def single_threaded(func: Callable) -> Callable:
    """``func`` run inside :func:`one_thread`."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with one_thread():
            return func(*args, **kwargs)
    return wrapper
