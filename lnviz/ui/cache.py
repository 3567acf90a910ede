"""The app's one cache: what a page computes, and the figures it draws, kept per learner.

Pages call the library's computations through :func:`cached` (``cached(explore, batch, spec,
...)`` instead of ``explore(batch, spec, ...)``), and :func:`lnviz.ui.figures.show_figure` keeps
its figures in the same store. Calls that take well under a millisecond (the ε page's worked
steps, Scale and shift's 16-sample demos) are made directly: keying them would cost about as
much as they do. The policy, and why:

- **Per session.** Results live in the learner's ``st.session_state``: nobody sees anything
  computed from anyone else's upload, and everything goes when the session ends. A cache
  shared by everyone could not let go of one learner's upload when they move on, which
  :func:`forget_named` does (the app's own views are the exception below).
- **Bounded per computation and per session.** Each computation (a library function, a figure
  builder) keeps at most its last :data:`ENTRIES` results, so that a page's computations never
  push each other out and the Explorer's memory budget
  (:data:`lnviz.limits.EXPLORER_BYTES_PER_VALUE` counts two results) holds. And all of a
  session's results together hold at most :attr:`lnviz.limits.Limits.cache_mb`, counted by
  :func:`nbytes` from the arrays and tensors they hold (a shared model's weights not counted):
  over it, the least recently used result goes first, whichever computation it came from. The
  newest result always stays, for the run that reads it.
- **Per page.** A result belongs to the page that computed it: :func:`enter_page` (app.py, on
  every run) drops every result of the page the learner has left, so a tab holds only what the
  page it shows draws.
- **Never copied.** A hit returns the very object computed on the miss: results that hold
  full-size tensors cost nothing to reuse (``st.cache_data`` unpickles a copy on every hit).
  Results are shared between reruns, so nothing may modify one.
- **One exception: shared resources.** A pretrained model's weights (90 MB for all-MiniLM-L6-v2)
  are read-only and the same for everyone: :func:`shared` loads them once per server, with
  ``st.cache_resource``, and every session uses that one copy. Results computed *from* them are
  per session again, through :func:`cached`, but for the app's own views:
- **The app's own views, once per server.** A real model's page opens on the app's own input
  (EfficientNet's photos, an example sentence, Shapes' stack at the page's settings): its first
  view cost each learner 2.3 CPU-seconds on EfficientNet (tools/shared_views.py), so a class of
  thirty opening the page cost the server thirty copies of one result. A page computes such a
  result with ``cached(..., for_all=True)``: one copy for the whole server, computed by the
  first learner to ask while the others asking at once wait for it, and kept within one
  session's budget (:func:`session_budget`; least recently used first, the newest kept even
  when larger). Only where every input is the app's own (a shared model, the app's own pictures
  and texts, a control's value); never an upload or text a learner typed, whose results stay
  theirs and go with their session, nor a measurement that says it was taken now. Each
  session's store holds the same object, counted in its budget as before.
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
import threading
import types
from collections.abc import Callable, Hashable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

import streamlit as st

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ENTRIES", "Entry", "Named", "cached", "cached_through", "enter_page",
           "fingerprint", "forget_named", "held_bytes", "held_for_all_bytes", "names_in",
           "nbytes", "remember", "session_budget", "shared"]

T = TypeVar("T")
#: Results kept per computation and session (the Explorer's memory budget counts two).
ENTRIES = 2
#: Session state holding the store: {(computation, key): Entry}, most recently used last.
STORE_KEY = "_lnviz_cache"
#: Session state holding the page the results in the store belong to (:func:`enter_page`).
PAGE_KEY = "_lnviz_cache_page"


@dataclasses.dataclass
class Entry:
    """One result in the store: the value, what it holds in bytes (:func:`nbytes`), and the
    page that computed it (None outside the app's navigation)."""

    value: Any
    nbytes: int
    page: str | None


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
    :data:`ENTRIES` results, within the session's byte budget. Most callers want
    :func:`cached`, which makes the key.
    """
    store = _store()
    slot = (computation, key)
    if slot in store:
        store[slot] = store.pop(slot)  # most recently used goes last
        return store[slot].value
    value = compute()
    store[slot] = Entry(value, nbytes(value), st.session_state.get(PAGE_KEY))
    mine = [k for k in store if k[0] == computation]
    for old in mine[:-ENTRIES]:
        del store[old]
    budget, held = session_budget(), sum(entry.nbytes for entry in store.values())
    for old in list(store)[:-1]:  # least recently used first; never the one just computed
        if held <= budget:
            break
        held -= store.pop(old).nbytes
    return value


def _store() -> dict[tuple[str, Hashable], Entry]:
    return st.session_state.setdefault(STORE_KEY, {})


def session_budget() -> int:
    """The bytes one session's results may hold (:attr:`lnviz.limits.Limits.cache_mb`)."""
    from lnviz.limits import current_limits

    return current_limits().cache_mb * 2**20


def held_bytes() -> int:
    """What this session's results hold, in bytes (:func:`nbytes` of each)."""
    return sum(entry.nbytes for entry in st.session_state.get(STORE_KEY, {}).values())


def enter_page(page: str) -> None:
    """The learner is on ``page`` (its url_path): drop every result another page computed."""
    if st.session_state.get(PAGE_KEY) == page:
        return
    st.session_state[PAGE_KEY] = page
    store = _store()
    for slot in [slot for slot, entry in store.items() if entry.page != page]:
        del store[slot]


def cached(func: Callable[..., T], *args: Any, for_all: bool = False, **kwargs: Any) -> T:
    """``func(*args, **kwargs)`` through the session's cache (see the module docstring).

    The key is the arguments' :func:`fingerprint`; a :class:`Named` argument is passed to
    ``func`` as its value and keyed by its name. ``for_all``: the result is also kept once for
    every session of the server, for a computation whose every input is the app's own (see the
    module docstring); never for one from an upload or a learner's typed text.
    """
    return cached_through(_directly, func, *args, for_all=for_all, **kwargs)


def _directly(compute: Callable[[], T]) -> T:
    return compute()


def cached_through(through: Callable[[Callable[[], T]], T], func: Callable[..., T], *args: Any,
                   for_all: bool = False, **kwargs: Any) -> T:
    """:func:`cached`, with a miss computed as ``through(compute)``: a heavy computation waits
    its turn in the server's line (:func:`lnviz.ui.jobs.heavy_cached`); a hit waits for
    nothing. After ``compute()``, ``compute.computed`` says whether it ran ``func`` (False: the
    result was there when its turn came). ``for_all``: as for :func:`cached`."""
    if "<" in func.__qualname__:  # two lambdas (or local functions) could share a name
        raise TypeError(f"cached takes a module-level function, not {func.__qualname__}")
    computation, key = f"{func.__module__}.{func.__qualname__}", (fingerprint(args),
                                                                 fingerprint(kwargs))
    slot = (computation, key)

    def run() -> T:
        return func(*[_unwrap(a) for a in args], **{k: _unwrap(v) for k, v in kwargs.items()})

    compute = _Computation(slot, run, for_all)
    kept = _for_all_kept(slot) if for_all else None  # (a use keeps it there longest)
    if kept is not None and slot not in _store():  # another learner computed it: this
        return remember(computation, key, lambda: kept.value)  # session holds the same object
    return remember(computation, key, lambda: through(compute))


class _Computation:
    """A miss of :func:`cached_through`, computed when called: unless an earlier run of this
    session, or (``for_all``) another learner, computed it meanwhile (while this one waited in
    the server's line). ``computed``: whether this call ran it."""

    def __init__(self, slot: tuple[str, Hashable], run: Callable[[], Any], for_all: bool):
        self.slot, self.run, self.for_all, self.computed = slot, run, for_all, False

    def __call__(self) -> Any:
        done = _store().get(self.slot)
        if done is not None:
            return done.value
        if not self.for_all:
            self.computed = True
            return self.run()
        # learners asking at once for what nobody has yet: the first computes, the others wait
        # for it (a slot's lock is one of a few: two computations sharing one only wait longer)
        with _SLOT_LOCKS[hash(self.slot) % len(_SLOT_LOCKS)]:
            done = _for_all_kept(self.slot)
            if done is not None:
                return done.value
            self.computed = True
            value = self.run()
            _keep_for_all(self.slot, value)
            return value


#: The results kept for every session (``cached(..., for_all=True)``), most recently used last.
_FOR_ALL: dict[tuple[str, Hashable], Entry] = {}
_FOR_ALL_LOCK = threading.Lock()
#: One computation of a slot for everyone at a time (:class:`_Computation`).
_SLOT_LOCKS = [threading.Lock() for _ in range(16)]


def _for_all_kept(slot: tuple[str, Hashable]) -> Entry | None:
    with _FOR_ALL_LOCK:
        entry = _FOR_ALL.pop(slot, None)
        if entry is not None:
            _FOR_ALL[slot] = entry  # most recently used goes last
        return entry


def _keep_for_all(slot: tuple[str, Hashable], value: Any) -> None:
    """Keep ``value`` for every session, within one session's budget: the least recently used
    go first, never the one just kept."""
    entry, budget = Entry(value, nbytes(value), None), session_budget()
    with _FOR_ALL_LOCK:
        _FOR_ALL.pop(slot, None)
        _FOR_ALL[slot] = entry
        held = sum(kept.nbytes for kept in _FOR_ALL.values())
        for old in list(_FOR_ALL)[:-1]:
            if held <= budget:
                break
            held -= _FOR_ALL.pop(old).nbytes


def held_for_all_bytes() -> int:
    """What the results kept for every session hold, in bytes (:func:`nbytes` of each)."""
    with _FOR_ALL_LOCK:
        return sum(entry.nbytes for entry in _FOR_ALL.values())


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
    store = st.session_state.get(STORE_KEY, {})
    for slot in [slot for slot in store if any(map(match, names_in(slot[1])))]:
        del store[slot]


def shared(load: Callable[[], T]) -> T:
    """``load()`` once per server process, the same object for every session: a read-only
    resource too large to keep per learner (``shared(lnviz.models.minilm)``). Nothing may
    modify what it returns. ``load`` is a module-level function taking no arguments."""
    if "<" in load.__qualname__:
        raise TypeError(f"shared takes a module-level function, not {load.__qualname__}")
    resource = _load_shared(load.__module__, load.__qualname__)
    if id(resource) not in _SHARED:  # its tensors are nobody's results: nbytes skips them
        _SHARED[id(resource)] = resource
        _SHARED_STORAGES.update(_storages(resource, into_modules=True))
    return resource


@st.cache_resource(show_spinner="Loading the model (once for the whole server)…")
def _load_shared(module: str, name: str) -> Any:
    return getattr(importlib.import_module(module), name)()


# --- What a result holds -----------------------------------------------------------------------

#: The shared resources loaded in this process (by id), and the storages of their tensors.
_SHARED: dict[int, Any] = {}
_SHARED_STORAGES: set[tuple[str, int]] = set()


def _walk(value: Any, *, into_modules: bool) -> Iterator[Any]:
    """Every object reachable from ``value`` through containers, dataclasses and plain objects'
    attributes, each once; functions, classes and modules are not entered (a closure's weights
    are a model's), nor are torch modules unless ``into_modules``."""
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    seen: set[int] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        yield item
        if isinstance(item, str | bytes | bytearray | int | float | complex | type(None)):
            continue
        if (np is not None and isinstance(item, np.ndarray | np.generic)) or (
                torch is not None and isinstance(item, torch.Tensor)):
            continue
        if torch is not None and isinstance(item, torch.nn.Module):
            if into_modules:
                stack.extend(item.state_dict(keep_vars=True).values())
            continue
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif callable(item) or isinstance(item, type | types.ModuleType):
            continue
        elif hasattr(item, "to_dict") and hasattr(item, "_finished"):  # a finished figure
            stack.append(item._finished)
        else:
            pandas = sys.modules.get("pandas")
            if pandas is not None and isinstance(item, pandas.DataFrame | pandas.Series):
                continue
            attributes = getattr(item, "__dict__", None)
            if attributes is not None:
                stack.extend(attributes.values())
            for name in getattr(type(item), "__slots__", ()):
                if hasattr(item, name):
                    stack.append(getattr(item, name))


def _storages(value: Any, *, into_modules: bool = False) -> Iterator[tuple[str, int]]:
    torch = sys.modules.get("torch")
    for item in _walk(value, into_modules=into_modules):
        if torch is not None and isinstance(item, torch.Tensor):
            yield _storage_of(item)[0]


def _storage_of(tensor: Any) -> tuple[tuple[str, int], int]:
    """A tensor's storage, as (device, address), and its size in bytes (a tensor without one
    of its own, sparse or nested, by its elements)."""
    try:
        storage = tensor.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return (str(tensor.device), id(tensor)), tensor.numel() * tensor.element_size()
    return (str(tensor.device), storage.data_ptr()), storage.nbytes()


def nbytes(value: Any) -> int:
    """The bytes ``value`` holds in arrays, tensors, tables, text and Python numbers, each
    storage counted once (a view and its base are one), a shared model's weights
    (:func:`shared`) not at all. Containers count what they hold plus their own size."""
    np = sys.modules.get("numpy")
    torch = sys.modules.get("torch")
    pandas = sys.modules.get("pandas")
    total, storages = 0, set()
    for item in _walk(value, into_modules=False):
        if torch is not None and isinstance(item, torch.Tensor):
            where, size = _storage_of(item)
            if where not in storages and where not in _SHARED_STORAGES:
                storages.add(where)
                total += size
        elif np is not None and isinstance(item, np.ndarray):
            base = item
            while isinstance(base.base, np.ndarray):
                base = base.base
            where = ("cpu", base.__array_interface__["data"][0])
            if where not in storages and where not in _SHARED_STORAGES:
                storages.add(where)
                total += base.nbytes
        elif pandas is not None and isinstance(item, pandas.DataFrame | pandas.Series):
            total += int(np.sum(item.memory_usage(deep=True)))
        else:
            total += sys.getsizeof(item)
    return total
