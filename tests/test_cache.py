"""lnviz.ui.cache: the app's one cache, per session and page, bounded per computation and in
bytes per session, never copied."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest
import streamlit as st
import torch

from lnviz.batch import Batch, NormSpec
from lnviz.limits import DEMO_LIMITS
from lnviz.ui import cache
from lnviz.ui.cache import (
    ENTRIES,
    PAGE_KEY,
    STORE_KEY,
    Named,
    cached,
    cached_through,
    enter_page,
    fingerprint,
    forget_named,
    held_bytes,
    held_for_all_bytes,
    names_in,
    nbytes,
    shared,
)

CALLS: list[tuple] = []


def square(x: float, *, offset: float = 0.0) -> list[float]:
    CALLS.append((x, offset))
    return [x * x + offset]


def total(values: np.ndarray) -> float:
    CALLS.append(("total", values.shape))
    return float(values.sum())


@pytest.fixture(autouse=True)
def empty_store(monkeypatch: pytest.MonkeyPatch):
    """Outside a script run Streamlit keeps one session state for the whole process; the
    results kept for every session start empty too (the app's own are put back after)."""
    for key in (STORE_KEY, PAGE_KEY):
        st.session_state.pop(key, None)
    monkeypatch.setattr(cache, "_FOR_ALL", {})
    CALLS.clear()
    yield
    for key in (STORE_KEY, PAGE_KEY):
        st.session_state.pop(key, None)


def another_learner() -> None:
    """The next calls are another session's: its own store, empty."""
    st.session_state.pop(STORE_KEY, None)


def test_a_hit_returns_the_very_object_computed_once():
    first = cached(square, 3.0, offset=1.0)
    assert first == [10.0]
    assert cached(square, 3.0, offset=1.0) is first  # not a copy
    assert CALLS == [(3.0, 1.0)]
    assert cached(square, 3.0) == [9.0] and cached(square, 3.0, offset=2.0) == [11.0]
    assert len(CALLS) == 3


def test_each_computation_keeps_its_last_results_most_recently_used_last():
    assert ENTRIES == 2  # lnviz.limits.EXPLORER_BYTES_PER_VALUE counts two results
    cached(square, 1.0)
    cached(square, 2.0)
    cached(square, 1.0)  # a hit: 1.0 is now the most recently used
    cached(total, np.ones(3))  # another computation does not push square's results out
    cached(square, 3.0)  # evicts 2.0, the least recently used
    assert CALLS == [(1.0, 0.0), (2.0, 0.0), ("total", (3,)), (3.0, 0.0)]
    cached(square, 1.0)
    cached(total, np.ones(3))
    assert len(CALLS) == 4
    cached(square, 2.0)
    assert CALLS[-1] == (2.0, 0.0)
    held = [computation for computation, _ in st.session_state[STORE_KEY]]
    assert sorted(held) == [f"{__name__}.square"] * 2 + [f"{__name__}.total"]


def test_arrays_are_keyed_by_content_not_identity():
    values = np.arange(6.0)
    assert cached(total, values) == 15.0
    assert cached(total, values.copy()) == 15.0 and len(CALLS) == 1
    values[0] = 10.0  # same object, new numbers: computed again
    assert cached(total, values) == 25.0 and len(CALLS) == 2


def test_a_named_argument_is_passed_as_its_value_and_keyed_by_its_name():
    big = np.ones((4, 5))
    assert cached(total, Named(big, ("random", 4, 5))) == 20.0
    assert cached(total, Named(np.zeros(1), ("random", 4, 5))) == 20.0  # the name decides
    assert cached(total, Named(big, ("upload", "file-1"))) == 20.0
    assert len(CALLS) == 2
    (key,) = [k for computation, k in st.session_state[STORE_KEY]
              if computation == f"{__name__}.total" and ("upload", "file-1") in names_in(k)]
    assert list(names_in(key)) == [("upload", "file-1")]


def test_the_apps_own_views_are_computed_once_for_every_session():
    first = cached(square, 4.0, for_all=True)
    another_learner()
    assert cached(square, 4.0, for_all=True) is first  # not computed again, not a copy
    assert CALLS == [(4.0, 0.0)]
    # the second learner's store holds it too, counted in their budget
    assert [c for c, _ in st.session_state[STORE_KEY]] == [f"{__name__}.square"]
    assert held_bytes() == nbytes(first) == held_for_all_bytes() > 0
    # a plain result (an upload's, typed text's) is never another session's
    another_learner()
    assert cached(square, 5.0) == [25.0]
    another_learner()
    assert cached(square, 5.0) == [25.0]
    assert CALLS == [(4.0, 0.0), (5.0, 0.0), (5.0, 0.0)]
    assert [c for c, _ in cache._FOR_ALL] == [f"{__name__}.square"]
    assert held_for_all_bytes() == nbytes(first)


def test_another_learners_result_does_not_wait_in_line():
    lines = []

    def in_line(compute):
        lines.append("waited")
        return compute()

    first = cached_through(in_line, square, 6.0, for_all=True)
    another_learner()
    assert cached_through(in_line, square, 6.0, for_all=True) is first
    assert lines == ["waited"] and CALLS == [(6.0, 0.0)]


def slow_square(x: float) -> list[float]:
    CALLS.append(("slow", x))
    time.sleep(0.3)
    return [x * x]


def test_learners_asking_at_once_wait_for_the_first_and_say_they_computed_nothing():
    """Two learners ask for the same view for everyone at once: one computes, the other waits
    for it and reports that it computed nothing (so its time in the line sets no pace)."""
    computed, results = [], []

    def in_line(compute):
        value = compute()
        computed.append(compute.computed)
        return value

    def learner():
        results.append(cached_through(in_line, slow_square, 7.0, for_all=True))

    first = threading.Thread(target=learner)
    first.start()
    deadline = time.monotonic() + 30
    while not CALLS and time.monotonic() < deadline:  # the first is computing
        time.sleep(0.005)
    another_learner()
    learner()  # asks while the first computes
    first.join(timeout=30)
    assert CALLS == [("slow", 7.0)]
    assert sorted(computed) == [False, True] and results[0] is results[1]


def test_the_results_kept_for_everyone_hold_one_sessions_budget(budget_mb):
    third = budget_mb // 3 - 1
    for block in (block_a, block_b, block_c):
        cached(block, third, for_all=True)
        another_learner()
    assert budget_mb * 2**20 * 0.9 < held_for_all_bytes() <= budget_mb * 2**20
    cached(block_a, third, for_all=True)  # used again by another learner: the most recent
    cached(block_c, third, for_all=True)  # then c
    assert [c[-1] for c, _ in cache._FOR_ALL] == ["b", "a", "c"]
    cached(block_a, third, for_all=True)  # a again, from that learner's own store: it counts
    assert [c[-1] for c, _ in cache._FOR_ALL] == ["b", "c", "a"]
    another_learner()
    cached(block_d, third, for_all=True)  # over: the least recently used (b) goes
    assert sorted(c.rsplit(".", 1)[-1] for c, _ in cache._FOR_ALL) == [
        "block_a", "block_c", "block_d"]
    CALLS.clear()
    another_learner()
    cached(block_b, third, for_all=True)  # computed again; c goes now
    cached(block_a, third, for_all=True)
    assert list(CALLS) == [("b", third)]
    assert held_for_all_bytes() <= budget_mb * 2**20


def test_forget_named_drops_only_results_of_the_matching_names():
    cached(total, Named(np.ones(2), ("upload", "a")))
    cached(total, Named(np.ones(3), ("preset", "b")))
    cached(square, 2.0)
    forget_named(lambda name: name[:1] == ("upload",))
    kept = [list(names_in(key)) for _, key in st.session_state[STORE_KEY]]
    assert sorted(kept, key=len) == [[], [("preset", "b")]]
    cached(total, Named(np.ones(2), ("upload", "a")))
    assert CALLS.count(("total", (2,))) == 2  # computed again after being forgotten


def test_fingerprints_tell_apart_what_python_equality_merges():
    assert fingerprint(1) != fingerprint(1.0) != fingerprint(True)
    assert fingerprint(0.0) != fingerprint(-0.0)
    assert fingerprint(math.nan) == fingerprint(float("nan"))  # NaN == NaN here
    assert fingerprint(np.zeros(3, np.float32)) != fingerprint(np.zeros(3, np.float64))
    assert fingerprint(np.zeros((2, 3))) != fingerprint(np.zeros((3, 2)))
    assert fingerprint(np.arange(6).reshape(2, 3).T) == fingerprint(
        np.ascontiguousarray(np.arange(6).reshape(2, 3).T))
    assert fingerprint((1, 2)) != fingerprint([1, 2])
    assert fingerprint({"a": 1, "b": 2}) != fingerprint({"b": 2, "a": 1})  # order is drawn
    assert fingerprint(torch.ones(2, 3)) == fingerprint(torch.ones(2, 3))
    assert fingerprint(torch.ones(2, 3)) != fingerprint(torch.ones(3, 2))
    assert fingerprint(torch.ones(2)) != fingerprint(torch.ones(2, dtype=torch.float64))
    assert fingerprint(torch.ones(3, 2).T) == fingerprint(torch.ones(2, 3))
    assert fingerprint(np.float32(1.5)) != fingerprint(np.float64(1.5))


def test_dataclasses_are_fingerprinted_field_by_field():
    mask = np.array([[True, False]])
    values = np.zeros((1, 2, 3))
    assert fingerprint(Batch(values, "NLC", mask)) == fingerprint(Batch(values.copy(), "NLC",
                                                                        mask.copy()))
    assert fingerprint(Batch(values, "NLC", mask)) != fingerprint(Batch(values, "NLC", ~mask))
    assert fingerprint(NormSpec(norm="LayerNorm")) != fingerprint(NormSpec(norm="RMSNorm"))


def test_what_cannot_be_keyed_is_refused():
    @dataclass
    class Box:
        items: list

    assert fingerprint(Box([1])) == fingerprint(Box([1]))
    with pytest.raises(TypeError, match="Named"):
        fingerprint({1, 2})
    with pytest.raises(TypeError, match="module-level function"):
        cached(lambda x: x, 1)


def _block(name: str, megabytes: int) -> dict:
    """A result holding ``megabytes`` MiB in one float64 array."""
    CALLS.append((name, megabytes))
    return {"values": np.zeros(megabytes * 2**20 // 8)}


# four computations, so that the per-computation bound (ENTRIES) stays out of the way
def block_a(megabytes: int) -> dict:
    return _block("a", megabytes)


def block_b(megabytes: int) -> dict:
    return _block("b", megabytes)


def block_c(megabytes: int) -> dict:
    return _block("c", megabytes)


def block_d(megabytes: int) -> dict:
    return _block("d", megabytes)


def held_blocks() -> list[str]:
    """The blocks held, least recently used first."""
    return [c.rsplit("_", 1)[1] for c, _ in st.session_state[STORE_KEY] if ".block_" in c]


def test_nbytes_counts_each_storage_once_and_a_shared_models_weights_not_at_all():
    values = np.zeros((1000, 100))  # 800,000 bytes
    assert nbytes(values) == pytest.approx(800_000, abs=200)
    view_pair = {"whole": values, "rows": values[:10], "transposed": values.T}
    assert nbytes(view_pair) - 800_000 == pytest.approx(0, abs=2_000)  # one storage, 3 views
    tensor = torch.zeros(250_000)  # 1,000,000 bytes
    assert nbytes([tensor, tensor[5:], tensor.view(500, 500)]) == pytest.approx(
        1_000_000, abs=1_000)
    both = nbytes({"a": values, "t": tensor})
    assert 1_800_000 <= both <= 1_802_000
    frame = pd.DataFrame({"x": np.zeros(10_000), "y": np.ones(10_000, np.float32)})
    assert 120_000 <= nbytes(frame) <= 121_000  # 8 + 4 bytes a row, and a small index
    # a result that holds a shared model's weight (a norm's γ, say) does not count it
    weights = shared(tiny_model)
    assert nbytes({"gamma": weights.weight, "out": torch.zeros(1000)}) == pytest.approx(
        4000, abs=500)
    assert nbytes(weights.weight) < 200  # the tensor object alone: its storage is shared


def tiny_model() -> torch.nn.Linear:
    """A stand-in for a model the app loads once (lnviz.ui.cache.shared): 1,000 × 1,000."""
    return torch.nn.Linear(1000, 1000)


@pytest.fixture
def budget_mb(monkeypatch: pytest.MonkeyPatch) -> int:
    """The demo's per-session budget."""
    monkeypatch.setenv("LNVIZ_DEMO", "1")
    return DEMO_LIMITS.cache_mb


def test_over_the_session_budget_the_least_recently_used_result_goes_first(budget_mb):
    third = budget_mb // 3 - 1  # three fit, with room for small results beside them
    for block in (block_a, block_b, block_c):
        cached(block, third)
    assert budget_mb * 2**20 * 0.9 < held_bytes() <= budget_mb * 2**20
    cached(block_a, third)  # used again: now the most recent
    cached(square, 2.0)  # small: fits
    cached(block_d, third)  # over: the least recently used (b) goes, nothing else
    assert held_blocks() == ["c", "a", "d"]
    assert any(c.endswith(".square") for c, _ in st.session_state[STORE_KEY])
    assert held_bytes() <= budget_mb * 2**20
    CALLS.clear()
    cached(block_b, third)  # computed again; c goes now
    cached(block_a, third)
    assert list(CALLS) == [("b", third)]  # b alone computed again
    assert held_blocks() == ["d", "b", "a"]


def test_a_result_larger_than_the_budget_is_kept_alone_for_the_run_that_reads_it(budget_mb):
    cached(block_a, 1)
    cached(square, 3.0)
    large = cached(block_b, budget_mb + 8)
    assert held_blocks() == ["b"] and len(st.session_state[STORE_KEY]) == 1
    assert cached(block_b, budget_mb + 8) is large  # still a hit
    assert held_bytes() > budget_mb * 2**20


def test_entering_another_page_drops_the_results_of_the_page_left():
    enter_page("beyond")
    cached(block_a, 1)
    cached(square, 2.0)
    enter_page("beyond")  # a rerun of the same page keeps them
    assert len(st.session_state[STORE_KEY]) == 2
    enter_page("smollm2")
    assert st.session_state[STORE_KEY] == {}
    assert held_bytes() == 0
    cached(square, 2.0)
    assert CALLS[-1] == (2.0, 0.0)  # computed again, for the new page
    enter_page("beyond")
    assert [c for c, _ in st.session_state[STORE_KEY]] == []


def test_leaving_a_page_in_the_app_frees_its_results():
    from pageutil import open_page

    at = open_page("app_pages/gradients.py")
    held = at.session_state[STORE_KEY]
    assert held and {entry.page for entry in held.values()} == {"gradients"}
    assert all(entry.nbytes > 0 for entry in held.values())
    at.switch_page("app_pages/home.py").run()
    assert not at.exception
    assert not [slot for slot, entry in at.session_state[STORE_KEY].items()
                if entry.page != "home"]
