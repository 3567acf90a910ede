"""lnviz.ui.cache: the app's one cache, per session, bounded per computation, never copied."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
import streamlit as st
import torch

from lnviz.batch import Batch, NormSpec
from lnviz.ui.cache import ENTRIES, STORE_KEY, Named, cached, fingerprint, forget_named, names_in

CALLS: list[tuple] = []


def square(x: float, *, offset: float = 0.0) -> list[float]:
    CALLS.append((x, offset))
    return [x * x + offset]


def total(values: np.ndarray) -> float:
    CALLS.append(("total", values.shape))
    return float(values.sum())


@pytest.fixture(autouse=True)
def empty_store():
    """Outside a script run Streamlit keeps one session state for the whole process."""
    st.session_state.pop(STORE_KEY, None)
    CALLS.clear()
    yield
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
    assert [len(store) for store in st.session_state[STORE_KEY].values()] == [2, 1]


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
    (key,) = [k for k in st.session_state[STORE_KEY][f"{__name__}.total"]
              if ("upload", "file-1") in names_in(k)]
    assert list(names_in(key)) == [("upload", "file-1")]


def test_forget_named_drops_only_results_of_the_matching_names():
    cached(total, Named(np.ones(2), ("upload", "a")))
    cached(total, Named(np.ones(3), ("preset", "b")))
    cached(square, 2.0)
    forget_named(lambda name: name[:1] == ("upload",))
    kept = [list(names_in(key)) for store in st.session_state[STORE_KEY].values()
            for key in store]
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
