"""The seeds' worked examples as named presets: each a small array and the lesson it shows.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


# eq=False: comparing or hashing numpy arrays field by field is ambiguous, so a preset compares
# by identity instead.
@dataclass(frozen=True, eq=False)
class Preset:
    """A small, named input batch that illustrates one idea about normalization.

    `values` holds the activations with features on the last axis. `mask` marks which positions
    are real tokens (True) and which are padding (False); it is None when nothing is padded.
    `labels`, when present, names each position (one label per row of features).
    """

    name: str
    description: str
    values: np.ndarray
    mask: np.ndarray | None
    labels: tuple[str, ...] | None = None
    source: str = ""


def _frozen(array: np.ndarray) -> np.ndarray:
    # The registry is shared by every caller, so its arrays are read-only; get_preset hands out
    # writable copies.
    array.setflags(write=False)
    return array


def _preset(
    name: str,
    description: str,
    values: object,
    mask: object = None,
    labels: tuple[str, ...] | None = None,
    source: str = "",
) -> Preset:
    return Preset(
        name=name,
        description=description,
        values=_frozen(np.array(values, dtype=np.float32)),
        mask=None if mask is None else _frozen(np.array(mask, dtype=bool)),
        labels=labels,
        source=source,
    )


def _far_from_zero_values() -> np.ndarray:
    rng = np.random.default_rng(7)
    return 1e4 + rng.standard_normal((4, 8))


def _different_scales_values() -> np.ndarray:
    rng = np.random.default_rng(11)
    base = rng.standard_normal((8, 4))
    return base * np.array([0.01, 1.0, 100.0, 1.0]) + np.array([0.0, 0.0, 0.0, 50.0])


PRESETS: dict[str, Preset] = {
    "padded_tokens": _preset(
        "Padded token batch",
        "Two sentences of different length; the shorter one ends in an all-zero pad token. "
        "Compare per-feature (BatchNorm) statistics with and without the pad.",
        [
            [[1, 2, 3], [2, 4, 6], [3, 6, 9], [4, 8, 12]],
            [[5, 10, 15], [6, 12, 18], [7, 13, 19], [0, 0, 0]],
        ],
        mask=[[True, True, True, True], [True, True, True, False]],
        labels=("I", "love", "deep", "learning", "Transformers", "are", "powerful", "<pad>"),
        source="from the transformer article",
    ),
    "two_words": _preset(
        "Two words, batch of one",
        "Two word vectors of size 3 laid out as (words, batch, embedding); under LayerNorm "
        "each word gets its own mean and variance.",
        [[[0.2, 0.1, 0.3]], [[0.5, 0.1, 0.1]]],
        source="from the two-word notes",
    ),
    "tiny_variance": _preset(
        "Almost constant vector",
        "Five nearly equal values whose variance is only 4e-9; watch how the choice of ε "
        "changes the normalized output.",
        [[0.001, 0.001, 0.0011, 0.0009, 0.001]],
        source="from the formula tutorial",
    ),
    "constant_row": _preset(
        "A constant row",
        "One row with no spread at all next to an ordinary row; under LayerNorm without ε the "
        "constant row would divide zero by zero.",
        [[3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 4.0, 7.0]],
        source="from the formula tutorial",
    ),
    "far_from_zero": _preset(
        "Far from zero",
        "Rows sitting near 10,000 with a spread of about 1; a variance computed as "
        "E[x²] − E[x]² loses its digits to cancellation here.",
        _far_from_zero_values(),
    ),
    "one_two_three": _preset(
        "The vector [1, 2, 3]",
        "The hand-worked example: mean 2, standard deviation about 0.816, so LayerNorm "
        "returns roughly [−1.22, 0, 1.22].",
        [[1.0, 2.0, 3.0]],
        labels=("I",),
        source="from the transformer article",
    ),
    "different_scales": _preset(
        "Features on different scales",
        "Eight samples whose four features differ wildly in size (×0.01, ×1, ×100, and "
        "shifted by +50): BatchNorm, one μ and σ per feature, removes the mismatch; LayerNorm, "
        "one μ and σ per sample taken across these features, does not.",
        _different_scales_values(),
    ),
}


def get_preset(key: str) -> Preset:
    """Return a copy of the preset stored under `key`, safe for the caller to modify."""
    if key not in PRESETS:
        valid = ", ".join(PRESETS)
        raise ValueError(f"unknown preset {key!r}; choose one of: {valid}")
    preset = PRESETS[key]
    return dataclasses.replace(
        preset,
        values=preset.values.copy(),
        mask=None if preset.mask is None else preset.mask.copy(),
    )
