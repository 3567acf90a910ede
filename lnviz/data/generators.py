"""Seeded random batches: feature tables, padded token sequences and images.

Everything here returns float32 numpy arrays with the features (the axis LayerNorm normalizes
over) last, except :func:`image_batch`, which uses the (N, C, H, W) image layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lnviz.limits import MAX_ELEMENTS

DISTRIBUTIONS = ("normal", "uniform", "heavy_tailed", "outliers")


# Bounds that keep every generated value comfortably inside float32's range (about 3.4e38),
# even after the outlier boost and the widest feature_spread.
_MAX_MAGNITUDE = 1e12
_MAX_SPREAD = 6.0
_MAX_DIMS = 5
_OUTLIER_SHARE = 0.01
_OUTLIER_FACTOR = 20.0
_CHANNEL_LIFT = 3.0


def check_whole(name: str, value: object, minimum: int) -> int:
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
    return [check_whole(f"{name}[{i}]", item, minimum) for i, item in enumerate(value)]


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
    rng = np.random.default_rng(check_whole("seed", seed, 0))
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
    batch_size = check_whole("batch_size", batch_size, 1)
    d_model = check_whole("d_model", d_model, 1)
    pad = _real("pad_value", pad_value, limit=_MAX_MAGNITUDE)
    kind = _check_distribution(distribution)
    rng = np.random.default_rng(check_whole("seed", seed, 0))
    if lengths is None:
        max_len = 8 if max_len is None else check_whole("max_len", max_len, 1)
        _check_count((batch_size, max_len, d_model))
        chosen = _random_lengths(rng, batch_size, max_len)
    else:
        chosen = _check_lengths(lengths, batch_size)
        longest = max(chosen)
        max_len = longest if max_len is None else check_whole("max_len", max_len, 1)
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
    n = check_whole("n", n, 1)
    channels = check_whole("channels", channels, 1)
    height = check_whole("height", height, 1)
    width = check_whole("width", width, 1)
    spread = _real("channel_spread", channel_spread, minimum=0.0, limit=_MAX_SPREAD)
    _check_count((n, channels, height, width))
    rng = np.random.default_rng(check_whole("seed", seed, 0))

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


def describe_shape(shape: Sequence[int]) -> str:
    """Describe a shape for people, e.g. (2, 4, 3) -> '2 × 4 × 3 (24 values)'."""
    dims = [int(dim) for dim in shape]
    count = math.prod(dims)
    noun = "value" if count == 1 else "values"
    layout = " × ".join(str(dim) for dim in dims) if dims else "scalar"
    return f"{layout} ({count:,} {noun})"
