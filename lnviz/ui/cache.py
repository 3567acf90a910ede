"""The app's one cache: what a page computes, and the figures it draws, kept per learner.

Pages call the library's computations through :func:`cached` (``cached(explore, batch, spec,
...)`` instead of ``explore(batch, spec, ...)``), and :func:`lnviz.ui.figures.show_figure` keeps
its figures in the same store. Calls that take well under a millisecond (the ε page's worked
steps, Scale and shift's 16-sample demos) are made directly: keying them would cost about as
much as they do. The policy, and why:

- **Per session.** Results live in the learner's ``st.session_state``: nobody sees anything
  computed from anyone else's upload, and everything goes when the session ends. Sharing
  between learners would save only a learner's first visit to a view (the heaviest, Shapes'
  48-block stack, takes about 100 ms), and a shared cache cannot let go of one
  learner's upload when they move on, which :func:`forget_named` does.
- **Bounded per computation.** Each computation (a library function, a figure builder) keeps
  its last :data:`ENTRIES` results, most recently used last, so a page's computations never push
  each other out and the Explorer's memory budget (:data:`lnviz.limits.EXPLORER_BYTES_PER_VALUE`
  counts two results) holds.
- **Never copied.** A hit returns the very object computed on the miss: results that hold
  full-size tensors cost nothing to reuse (``st.cache_data`` unpickles a copy on every hit).
  Results are shared between reruns, so nothing may modify one.
- **One exception: shared resources.** A pretrained model's weights (90 MB for all-MiniLM-L6-v2)
  are read-only and the same for everyone: :func:`shared` loads them once per server, with
  ``st.cache_resource``, and every session uses that one copy. Results computed *from* them are
  per session again, through :func:`cached`.
- **Keyed by content.** Arguments are fingerprinted by value (arrays and tensors by a hash of
  their bytes), so a key cannot miss a setting the computation depends on. An input too large to
  hash on every rerun is passed as :class:`Named`: the data source's own name for it stands in
  for its content (the Explorer's batch, an upload).
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import sys
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ENTRIES", "Named", "cached", "fingerprint", "forget_named", "names_in", "remember",
           "shared"]

T = TypeVar("T")
#: Results kept per computation and session (the Explorer's memory budget counts two).
ENTRIES = 2
#: Session state holding the store: {computation: {key: result}}, most recently used last.
STORE_KEY = "_lnviz_cache"


@dataclasses.dataclass(frozen=True)
class Named:
    """An argument :func:`cached` knows by ``name`` instead of by its content.

    For an input too large to hash on every rerun whose source already names it: the Explorer's
    batch by its data-source key (``("random", "NC", (8, 6), ...)``, ``("upload", file id,
    ...)``). The name must tell apart every input the source can give.
    """

    value: Any
    name: Hashable


def remember(computation: str, key: Hashable, compute: Callable[[], T]) -> T:
    """``compute()``, or what it returned before for ``key`` in this session.

    ``computation`` names what is computed (a function, a figure builder): it keeps its own last
    :data:`ENTRIES` results. Most callers want :func:`cached`, which makes the key.
    """
    store: dict = st.session_state.setdefault(STORE_KEY, {}).setdefault(computation, {})
    if key in store:
        store[key] = store.pop(key)  # most recently used goes last
        return store[key]
    value = compute()
    store[key] = value
    while len(store) > ENTRIES:
        store.pop(next(iter(store)))
    return value


def cached(func: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` through the session's cache (see the module docstring).

    The key is the arguments' :func:`fingerprint`; a :class:`Named` argument is passed to
    ``func`` as its value and keyed by its name.
    """
    if "<" in func.__qualname__:  # two lambdas (or local functions) could share a name
        raise TypeError(f"cached takes a module-level function, not {func.__qualname__}")
    key = (fingerprint(args), fingerprint(kwargs))
    return remember(f"{func.__module__}.{func.__qualname__}", key, lambda: func(
        *[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()}))


def _unwrap(value: Any) -> Any:
    return value.value if isinstance(value, Named) else value


def fingerprint(value: Any) -> Hashable:
    """A hashable stand-in for ``value``, equal exactly when the values are: numbers tagged
    with their type (1, 1.0 and True differ; so do 0.0 and -0.0; NaN equals NaN), arrays and
    tensors by dtype, shape and a hash of their bytes, containers and dataclasses item by item,
    :class:`Named` by its name. Raises TypeError for anything else that is not hashable."""
    if value is None or isinstance(value, str | bytes):
        return value
    if isinstance(value, bool | int):
        return (type(value).__name__, value)
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, Named):
        return ("named", value.name)
    # numpy and torch are looked up, not imported: app.py reaches this module on a cold server
    # before it can show anything, and no value can come from a library that is not loaded.
    np = sys.modules.get("numpy")
    if np is not None and isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            return ("objects", value.shape, fingerprint(value.tolist()))
        return ("array", value.dtype.str, value.shape, _digest(value))
    if np is not None and isinstance(value, np.generic):
        return ("scalar", value.dtype.str, value.tobytes())
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        flat = value.detach().cpu().contiguous().reshape(-1)
        return ("tensor", str(value.dtype), str(value.device), tuple(value.shape),
                _digest(flat.view(torch.uint8).numpy()))
    if isinstance(value, list | tuple):
        return (type(value).__name__, *map(fingerprint, value))
    if isinstance(value, dict):
        return ("dict", *((fingerprint(k), fingerprint(v)) for k, v in value.items()))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value).__qualname__,
                *(fingerprint(getattr(value, f.name)) for f in dataclasses.fields(value)))
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"cannot fingerprint a {type(value).__name__}: pass it as Named(value, "
                        "name)") from None
    return (type(value).__qualname__, value)


def _digest(array: np.ndarray) -> bytes:
    return hashlib.blake2b(array.tobytes() if not array.flags.c_contiguous else
                           array.reshape(-1).view("u1"), digest_size=16).digest()


def names_in(key: Hashable) -> Iterator[Hashable]:
    """The names of the :class:`Named` arguments a cache key was made from."""
    if isinstance(key, tuple):
        if len(key) == 2 and key[0] == "named":
            yield key[1]
            return
        for part in key:
            yield from names_in(part)


def forget_named(match: Callable[[Hashable], bool]) -> None:
    """Drop every result of this session computed from a :class:`Named` argument whose name
    ``match`` accepts, releasing its memory (an upload the learner has moved on from)."""
    for store in st.session_state.get(STORE_KEY, {}).values():
        for key in [key for key in store if any(map(match, names_in(key)))]:
            del store[key]


def shared(load: Callable[[], T]) -> T:
    """``load()`` once per server process, the same object for every session: a read-only
    resource too large to keep per learner (``shared(lnviz.models.minilm)``). Nothing may
    modify what it returns. ``load`` is a module-level function taking no arguments."""
    if "<" in load.__qualname__:
        raise TypeError(f"shared takes a module-level function, not {load.__qualname__}")
    return _load_shared(load.__module__, load.__qualname__)


@st.cache_resource(show_spinner="Loading the model (once for the whole server)…")
def _load_shared(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)()
