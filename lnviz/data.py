"""Data sources for the explorer: worked-example presets, seeded random batches, and typed numbers.

Everything here returns float32 numpy arrays (numbers typed by hand: float64, so that the sidebar's
precision decides how they are rounded), with shapes that put the features (the axis LayerNorm
normalizes over) last, except `image_batch`, which uses the (N, C, H, W) image layout.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

MAX_ELEMENTS = 50_000_000
MAX_TEXT_CHARS = 2_000_000
MAX_DEPTH = 5
DISTRIBUTIONS = ("normal", "uniform", "heavy_tailed", "outliers")

# Bounds that keep every generated value comfortably inside float32's range (about 3.4e38),
# even after the outlier boost and the widest feature_spread.
_MAX_MAGNITUDE = 1e12
_MAX_SPREAD = 6.0
_MAX_DIMS = 5
_OUTLIER_SHARE = 0.01
_OUTLIER_FACTOR = 20.0
_CHANNEL_LIFT = 3.0


# ---------------------------------------------------------------------------------------------
# Presets
# ---------------------------------------------------------------------------------------------


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
        source="seed 002",
    ),
    "two_words": _preset(
        "Two words, batch of one",
        "Two word vectors of size 3 laid out as (words, batch, embedding); each word gets "
        "its own mean and variance.",
        [[[0.2, 0.1, 0.3]], [[0.5, 0.1, 0.1]]],
        source="seed 003",
    ),
    "tiny_variance": _preset(
        "Almost constant vector",
        "Five nearly equal values whose variance is only 4e-9; watch how the choice of ε "
        "changes the normalized output.",
        [[0.001, 0.001, 0.0011, 0.0009, 0.001]],
        source="seed 000",
    ),
    "constant_row": _preset(
        "A constant row",
        "One row with no spread at all next to an ordinary row; without ε the constant row "
        "would divide zero by zero.",
        [[3.0, 3.0, 3.0, 3.0], [1.0, 2.0, 4.0, 7.0]],
        source="seed 000",
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
        source="seed 002",
    ),
    "different_scales": _preset(
        "Features on different scales",
        "Eight samples whose four features differ wildly in size (×0.01, ×1, ×100, and "
        "shifted by +50): the mismatch normalization is meant to remove.",
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


# ---------------------------------------------------------------------------------------------
# Parameter checks
# ---------------------------------------------------------------------------------------------


def _whole(name: str, value: object, minimum: int) -> int:
    # bool is an int subclass, but True as a size is almost certainly a mistake.
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be a whole number, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


def _real(name: str, value: object, minimum: float | None = None, limit: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be a finite number, got {number}")
    if minimum is not None and number < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {number}")
    if abs(number) > limit:
        raise ValueError(f"{name} must be at most {limit:g} in size, got {number:g}")
    return number


def _check_count(shape: Sequence[int]) -> None:
    # Python ints cannot overflow, so this is safe to run before anything is allocated.
    count = math.prod(shape)
    if count > MAX_ELEMENTS:
        raise ValueError(
            f"{describe_shape(shape)} is too large; the limit is {MAX_ELEMENTS:,} values"
        )


def _whole_list(name: str, value: object, minimum: int) -> list[int]:
    # A 1-D numpy array is as natural a way to pass sizes as a list, but is not a Sequence.
    if isinstance(value, np.ndarray) and value.ndim == 1:
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{name} must be a sequence of whole numbers like (2, 4), got {value!r}")
    return [_whole(f"{name}[{i}]", item, minimum) for i, item in enumerate(value)]


def _check_shape(shape: object) -> tuple[int, ...]:
    dims = tuple(_whole_list("shape", shape, 0))
    if not 1 <= len(dims) <= _MAX_DIMS:
        raise ValueError(f"shape needs between 1 and {_MAX_DIMS} dimensions, got {len(dims)}")
    _check_count(dims)
    return dims


def _check_distribution(distribution: object) -> str:
    if distribution not in DISTRIBUTIONS:
        raise ValueError(
            f"unknown distribution {distribution!r}; choose one of: {', '.join(DISTRIBUTIONS)}"
        )
    return str(distribution)


# ---------------------------------------------------------------------------------------------
# Random generators
# ---------------------------------------------------------------------------------------------


def _standard_draws(
    rng: np.random.Generator, shape: tuple[int, ...], distribution: str
) -> np.ndarray:
    """Centred draws with a typical size of 1, before any per-feature location and scale."""
    if distribution == "uniform":
        return rng.uniform(-1.0, 1.0, shape)
    if distribution == "heavy_tailed":
        # Two degrees of freedom: the variance is infinite, so extreme values keep turning up.
        return rng.standard_t(2.0, shape)
    draws = rng.standard_normal(shape)
    if distribution == "outliers" and draws.size:
        # A fixed share (at least one) keeps even tiny batches showing an outlier.
        count = max(1, round(_OUTLIER_SHARE * draws.size))
        picked = rng.choice(draws.size, size=count, replace=False)
        draws.reshape(-1)[picked] *= _OUTLIER_FACTOR
    return draws


def _feature_offsets_and_scales(
    features: int, loc: float, scale: float, spread: float
) -> tuple[np.ndarray, np.ndarray]:
    # u runs evenly from -1 (narrowest feature) to +1 (widest); narrow features sit above loc
    # and wide ones below it, so both the centre and the width change along the feature axis.
    u = np.linspace(-1.0, 1.0, features) if features > 1 else np.zeros(features)
    scales = scale * 10.0 ** (spread * u)
    offsets = loc - spread * scale * u
    return offsets, scales


def _draw(
    rng: np.random.Generator,
    shape: tuple[int, ...],
    distribution: str,
    loc: float,
    scale: float,
    spread: float,
) -> np.ndarray:
    offsets, scales = _feature_offsets_and_scales(shape[-1], loc, scale, spread)
    draws = _standard_draws(rng, shape, distribution)
    # In place, so a batch near MAX_ELEMENTS needs one float64 buffer rather than three.
    draws *= scales
    draws += offsets
    return draws.astype(np.float32)


def random_batch(
    shape: Sequence[int],
    *,
    distribution: str = "normal",
    loc: float = 0.0,
    scale: float = 1.0,
    feature_spread: float = 0.0,
    seed: int = 0,
) -> np.ndarray:
    """Draw a reproducible batch of activations; the last axis holds the features.

    distribution:
        "normal" — bell curve with mean `loc` and standard deviation `scale`;
        "uniform" — flat between `loc - scale` and `loc + scale`;
        "heavy_tailed" — Student-t with 2 degrees of freedom, centred on `loc`, stretched by
        `scale`: mostly ordinary values with occasional very large ones;
        "outliers" — normal, but 1% of the entries (at least one) are multiplied by 20.
    feature_spread:
        0 gives every feature the same centre and width. Above 0, feature j (of d) gets
        u_j = -1 + 2j/(d-1), evenly from -1 to +1, and then width `scale * 10**(spread * u_j)`
        and centre `loc - spread * scale * u_j`. With spread 1 the widest feature is 100 times
        wider than the narrowest: the situation normalization layers are built for.
    seed:
        The same seed and parameters always give the same numbers.

    Shapes may contain zeros (the result is then empty), need 1 to 5 dimensions, and may
    hold at most MAX_ELEMENTS values. Bad parameters raise ValueError.
    """
    dims = _check_shape(shape)
    kind = _check_distribution(distribution)
    loc = _real("loc", loc, limit=_MAX_MAGNITUDE)
    scale = _real("scale", scale, minimum=0.0, limit=_MAX_MAGNITUDE)
    spread = _real("feature_spread", feature_spread, minimum=0.0, limit=_MAX_SPREAD)
    rng = np.random.default_rng(_whole("seed", seed, 0))
    return _draw(rng, dims, kind, loc, scale, spread)


def _check_lengths(lengths: object, batch_size: int) -> list[int]:
    checked = _whole_list("lengths", lengths, 1)
    if len(checked) != batch_size:
        raise ValueError(
            f"lengths has {len(checked)} entries but batch_size is {batch_size}; "
            "give one length per sequence"
        )
    return checked


def _random_lengths(rng: np.random.Generator, batch_size: int, max_len: int) -> list[int]:
    lengths = rng.integers(1, max_len, size=batch_size, endpoint=True)
    # One sequence always fills the batch, as in a real padded batch.
    lengths[rng.integers(batch_size)] = max_len
    return [int(length) for length in lengths]


def padded_batch(
    batch_size: int,
    d_model: int,
    *,
    lengths: Sequence[int] | None = None,
    max_len: int | None = None,
    pad_value: float = 0.0,
    distribution: str = "normal",
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """Make a batch of token sequences of unequal length, padded to a common length.

    Returns `(values, mask)`: values has shape (batch_size, max_len, d_model) and mask has
    shape (batch_size, max_len), True for real tokens and False for padding. Padding
    positions hold `pad_value`.

    Real tokens are centred near 2 with features on somewhat different scales
    (feature_spread 0.5 in `random_batch` terms), so zero padding visibly drags a
    per-feature (BatchNorm) mean down while leaving per-token (LayerNorm) statistics of the
    real tokens alone.

    Give `lengths` (one per sequence, each at least 1); `max_len` then defaults to the
    longest. Without `lengths`, each length is drawn uniformly from 1 to `max_len`
    (default 8), with at least one sequence at full length.
    """
    batch_size = _whole("batch_size", batch_size, 1)
    d_model = _whole("d_model", d_model, 1)
    pad = _real("pad_value", pad_value, limit=_MAX_MAGNITUDE)
    kind = _check_distribution(distribution)
    rng = np.random.default_rng(_whole("seed", seed, 0))
    if lengths is None:
        max_len = 8 if max_len is None else _whole("max_len", max_len, 1)
        _check_count((batch_size, max_len, d_model))
        chosen = _random_lengths(rng, batch_size, max_len)
    else:
        chosen = _check_lengths(lengths, batch_size)
        longest = max(chosen)
        max_len = longest if max_len is None else _whole("max_len", max_len, 1)
        if max_len < longest:
            raise ValueError(f"max_len is {max_len} but the longest sequence has {longest} tokens")
        _check_count((batch_size, max_len, d_model))
    mask = np.arange(max_len) < np.array(chosen)[:, None]
    values = _draw(rng, (batch_size, max_len, d_model), kind, loc=2.0, scale=1.0, spread=0.5)
    values[~mask] = pad
    return values, mask


def image_batch(
    n: int, channels: int, height: int, width: int, *, seed: int = 0, channel_spread: float = 1.0
) -> np.ndarray:
    """Make a batch of small synthetic images with shape (N, C, H, W), for GroupNorm/InstanceNorm.

    Each channel of each image is a smooth picture — a tilted brightness ramp plus a soft
    round blob — with a little pixel noise on top. `channel_spread` then sets each channel's
    size: the picture is lifted by 3 × spread and multiplied by 10**(spread * u), where u runs
    evenly from -1 (first channel) to +1 (last channel). With the default of 1 the channels
    differ tenfold and more in both mean and spread; 0 puts every channel on the same footing.
    """
    n = _whole("n", n, 1)
    channels = _whole("channels", channels, 1)
    height = _whole("height", height, 1)
    width = _whole("width", width, 1)
    spread = _real("channel_spread", channel_spread, minimum=0.0, limit=_MAX_SPREAD)
    _check_count((n, channels, height, width))
    rng = np.random.default_rng(_whole("seed", seed, 0))

    ys = np.linspace(0.0, 1.0, height)[:, None]
    xs = np.linspace(0.0, 1.0, width)[None, :]

    def per_picture(low: float, high: float) -> np.ndarray:
        return rng.uniform(low, high, (n, channels, 1, 1))

    angle = per_picture(0.0, 2.0 * np.pi)
    ramp = np.cos(angle) * (xs - 0.5) + np.sin(angle) * (ys - 0.5)
    centre_y, centre_x = per_picture(0.2, 0.8), per_picture(0.2, 0.8)
    radius, strength = per_picture(0.1, 0.3), per_picture(-1.5, 1.5)
    blob = strength * np.exp(-((ys - centre_y) ** 2 + (xs - centre_x) ** 2) / (2 * radius**2))
    noise = 0.1 * rng.standard_normal((n, channels, height, width))

    # The lift is scaled along with the picture, so a channel with large values also sits far
    # from zero, much like a busy feature map after a ReLU.
    _, scales = _feature_offsets_and_scales(channels, 0.0, 1.0, spread)
    pictures = scales[:, None, None] * (_CHANNEL_LIFT * spread + ramp + blob + noise)
    return pictures.astype(np.float32)


# ---------------------------------------------------------------------------------------------
# Numbers typed by hand
# ---------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:e[+-]?\d+)?|inf(?:inity)?|nan)", re.IGNORECASE)
_BRACKET_TOKEN = re.compile(r"\s+|[\[\],]|[^\s\[\],]+")


def _to_number(token: str) -> float | str:
    """The token's value, or a description of what is wrong with it."""
    if not _NUMBER.fullmatch(token):
        return f"{token!r} is not a number"
    value = float(token)
    # float() turns '1e400' into inf; only a literal 'inf' should mean infinity.
    if math.isinf(value) and "inf" not in token.lower():
        return f"{token!r} is too large for any float (float64 holds up to about ±1.8e308)"
    return value


def _too_many(max_elements: int) -> ValueError:
    return ValueError(f"too many numbers: the limit is {max_elements:,}")


def _row_items(row: str, where: str) -> list[str]:
    pieces = row.split(",")
    # A single trailing comma is harmless, as in Python lists.
    if len(pieces) > 1 and not pieces[-1].strip():
        pieces.pop()
    items: list[str] = []
    for piece in pieces:
        words = piece.split()
        if not words:
            raise ValueError(f"{where}, item {len(items) + 1}: empty item between commas")
        items.extend(words)
    return items


def _parse_rows(text: str, max_elements: int) -> np.ndarray:
    rows: list[list[float]] = []
    first_where = ""
    total = 0
    for line_number, line in enumerate(text.splitlines(), start=1):
        segments = [segment for segment in line.split(";") if segment.strip()]
        for segment_number, segment in enumerate(segments, start=1):
            where = f"line {line_number}"
            if len(segments) > 1:
                where += f", row {segment_number}"
            items = _row_items(segment, where)
            total += len(items)
            if total > max_elements:
                raise _too_many(max_elements)
            row = [_to_number(item) for item in items]
            for i, value in enumerate(row, start=1):
                if isinstance(value, str):
                    raise ValueError(f"{where}, item {i}: {value}")
            if rows and len(row) != len(rows[0]):
                raise ValueError(
                    f"{where} has {len(row)} numbers but {first_where} has {len(rows[0])}; "
                    "every row needs the same count"
                )
            first_where = first_where or where
            rows.append(row)
    if not rows:
        raise ValueError("nothing to parse: type some numbers")
    return np.array(rows, dtype=np.float64)


class _NestedParser:
    """Recursive-descent reader for bracketed lists such as [[1, 2], [3, 4]].

    Commas between items are optional, so numpy's printed form [[1. 2.] [3. 4.]] also
    reads. Depth 1 is the outermost list.
    """

    def __init__(self, text: str, max_elements: int) -> None:
        self.text = text
        self.max_elements = max_elements
        # Tokens are read lazily so an over-long input fails at the limit, not after a full scan.
        self.matches = _BRACKET_TOKEN.finditer(text)
        self.current: tuple[str, int] | None = None
        self.numbers: list[float] = []
        self.sizes: dict[int, int] = {}
        self.leaf_depth: int | None = None
        self.advance()

    def advance(self) -> None:
        self.current = None
        for match in self.matches:
            if not match.group().isspace():
                self.current = (match.group(), match.start())
                return

    def where(self, offset: int) -> str:
        place = f"character {offset + 1}"
        if "\n" in self.text:
            line = self.text.count("\n", 0, offset) + 1
            column = offset - (self.text.rfind("\n", 0, offset) + 1) + 1
            place += f" (line {line}, column {column})"
        return place

    def parse(self) -> np.ndarray:
        self.read_list(depth=1)
        if self.current is not None:
            token, offset = self.current
            if token == "]":
                raise ValueError(
                    f"unbalanced brackets at {self.where(offset)}: this ']' has no matching '['"
                )
            raise ValueError(
                f"{self.where(offset)}: unexpected {token!r} after the outer list closed; "
                "wrap everything in one pair of brackets"
            )
        shape = tuple(self.sizes[depth] for depth in range(1, (self.leaf_depth or 0) + 1))
        return np.array(self.numbers, dtype=np.float64).reshape(shape)

    def read_list(self, depth: int) -> None:
        _, start = self.current
        if depth > MAX_DEPTH:
            raise ValueError(
                f"nesting deeper than {MAX_DEPTH} levels at {self.where(start)}; "
                f"at most {MAX_DEPTH} pairs of brackets can nest"
            )
        self.advance()
        count = 0
        item_expected = True
        while self.current is not None:
            token, offset = self.current
            if token == "]":
                self.advance()
                self.close_list(depth, count, start)
                return
            if token == ",":
                if item_expected:
                    raise ValueError(f"{self.where(offset)}: ',' with no item before it")
                item_expected = True
                self.advance()
                continue
            if token == "[":
                self.read_list(depth + 1)
            else:
                self.read_number(token, offset, depth)
            count += 1
            item_expected = False
        raise ValueError(f"unbalanced brackets at {self.where(start)}: this '[' is never closed")

    def close_list(self, depth: int, count: int, start: int) -> None:
        if count == 0:
            raise ValueError(f"{self.where(start)}: empty list; every list needs numbers")
        expected = self.sizes.setdefault(depth, count)
        if count != expected:
            raise ValueError(
                f"ragged nested list at depth {depth}: expected {expected} items, found "
                f"{count} in the list starting at {self.where(start)}"
            )

    def read_number(self, token: str, offset: int, depth: int) -> None:
        if self.leaf_depth is None:
            self.leaf_depth = depth
        elif depth != self.leaf_depth:
            raise ValueError(
                f"mixed numbers and lists: the number at {self.where(offset)} is at depth "
                f"{depth}, but earlier numbers are at depth {self.leaf_depth}"
            )
        if len(self.numbers) >= self.max_elements:
            raise _too_many(self.max_elements)
        value = _to_number(token)
        if isinstance(value, str):
            raise ValueError(f"{self.where(offset)}: {value}")
        self.numbers.append(value)
        self.advance()


def parse_numbers(text: str, *, max_elements: int = 100_000) -> np.ndarray:
    """Turn numbers typed by hand into a float64 array (every digit typed is kept; the
    sidebar's precision rounds them later, and says when a value does not fit it).

    Two layouts are understood:

    * rows — one row per line (or rows separated by ';'), numbers separated by commas
      and/or spaces: "1, 2, 3\\n4 5 6" gives a 2 × 3 array; a single line gives shape (1, n);
    * nested lists — "[[1, 2], [3, 4]]", up to 5 levels deep; the brackets set the shape,
      so "[1, 2, 3]" gives shape (3,).

    Numbers may use decimals, exponents (1e-5), 'nan', 'inf' and '-inf'. Anything else
    raises ValueError saying where the problem is (line and item, or character position).
    Nothing is evaluated as code.
    """
    if not isinstance(text, str):
        raise ValueError(f"text must be a string, got {type(text).__name__}")
    max_elements = _whole("max_elements", max_elements, 1)
    if len(text) > MAX_TEXT_CHARS:
        raise ValueError(f"text is {len(text):,} characters long; the limit is {MAX_TEXT_CHARS:,}")
    # Text pasted from documents often uses the typographic minus sign.
    text = text.replace("\u2212", "-")
    if not text.strip():
        raise ValueError("nothing to parse: type some numbers")
    if text.lstrip().startswith("["):
        return _NestedParser(text, max_elements).parse()
    return _parse_rows(text, max_elements)


def parse_table(table: Any) -> np.ndarray:
    """The cells of a table typed by hand (a pandas DataFrame of text or numbers) as a float64
    array of its shape. Each cell is read as one number the way :func:`parse_numbers` reads
    them (1e-3, -2.5E+1, nan, inf); an empty or malformed cell raises ValueError naming its row
    and column.
    """
    cells = table.to_numpy(dtype=object)
    out = np.empty(cells.shape, dtype=np.float64)
    for (i, j), cell in np.ndenumerate(cells):
        where = f"row {table.index[i]}, column {table.columns[j]}"
        if isinstance(cell, (int, float, np.number)) and not isinstance(cell, bool):
            value: float | str = float(cell)
            if math.isnan(value):
                value = "empty"
        else:
            token = "" if cell is None else str(cell).strip().replace("\u2212", "-")
            value = _to_number(token) if token else "empty"
        if isinstance(value, str):
            raise ValueError(f"{where}: {value}; every cell needs a number, e.g. 0.5 or 1e-3")
        out[i, j] = value
    return out


def parse_lengths(text: str) -> tuple[int, ...] | None:
    """Sequence lengths typed by hand ("6, 3, 1"; commas or semicolons), or None for empty
    text. A piece that is not a whole number raises ValueError naming that piece alone (never
    the whole text, which may be long)."""
    if not text.strip():
        return None
    lengths = []
    for number, part in enumerate(text.replace(";", ",").split(","), start=1):
        piece = part.strip()
        if not piece:
            continue
        if not re.fullmatch(r"[+-]?\d{1,9}", piece):
            shown = piece if len(piece) <= 100 else piece[:100] + "…"
            raise ValueError(f"lengths must be whole numbers separated by commas; item {number} "
                             f"is {shown!r}")
        lengths.append(int(piece))
    return tuple(lengths)


def describe_shape(shape: Sequence[int]) -> str:
    """Describe a shape for people, e.g. (2, 4, 3) -> '2 × 4 × 3 (24 values)'."""
    dims = [int(dim) for dim in shape]
    count = math.prod(dims)
    noun = "value" if count == 1 else "values"
    layout = " × ".join(str(dim) for dim in dims) if dims else "scalar"
    return f"{layout} ({count:,} {noun})"
