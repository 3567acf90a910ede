"""Tests for lnviz.data: presets match the seed documents, generators, and the number parser."""

import contextlib
import math
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from lnviz.data import (
    DISTRIBUTIONS,
    MAX_ELEMENTS,
    MAX_TEXT_CHARS,
    PRESETS,
    Preset,
    describe_shape,
    get_preset,
    image_batch,
    padded_batch,
    parse_lengths,
    parse_numbers,
    parse_table,
    random_batch,
)

EXPECTED_KEYS = {
    "padded_tokens",
    "two_words",
    "tiny_variance",
    "constant_row",
    "far_from_zero",
    "one_two_three",
}


def layer_norm(x: np.ndarray, eps: float = 1e-5) -> np.ndarray:
    x = x.astype(np.float64)
    mean = x.mean(axis=-1, keepdims=True)
    var = x.var(axis=-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps)


def excess_kurtosis(x: np.ndarray) -> float:
    x = x.astype(np.float64).ravel()
    centred = x - x.mean()
    return float((centred**4).mean() / (centred**2).mean() ** 2 - 3.0)


# --- presets ---------------------------------------------------------------------------------


def test_contract_keys_present():
    assert set(PRESETS) >= EXPECTED_KEYS


@pytest.mark.parametrize("key", list(PRESETS))
def test_every_preset_is_well_formed(key):
    preset = get_preset(key)
    assert isinstance(preset, Preset)
    assert preset.name.strip()
    assert preset.description.strip()
    assert "\n" not in preset.description
    assert preset.values.dtype == np.float32
    assert preset.values.ndim >= 2
    assert np.all(np.isfinite(preset.values))
    if preset.mask is not None:
        assert preset.mask.dtype == bool
        assert preset.mask.shape == preset.values.shape[:-1]
    if preset.labels is not None:
        assert len(preset.labels) == math.prod(preset.values.shape[:-1])


@pytest.mark.parametrize("key", list(PRESETS))
def test_get_preset_returns_copies(key):
    first = get_preset(key)
    first.values[...] = -123.0
    if first.mask is not None:
        first.mask[...] = False
    second = get_preset(key)
    assert not np.all(second.values == -123.0)
    if second.mask is not None:
        assert second.mask.any()


def test_registry_arrays_are_read_only():
    with pytest.raises(ValueError):
        PRESETS["one_two_three"].values[0, 0] = 5.0
    with pytest.raises(ValueError):
        PRESETS["padded_tokens"].mask[0, 0] = False


def test_unknown_preset_lists_valid_keys():
    with pytest.raises(ValueError, match="unknown preset") as info:
        get_preset("nope")
    for key in PRESETS:
        assert key in str(info.value)


def test_padded_tokens_are_the_two_sentences():
    preset = get_preset("padded_tokens")
    expected = np.array(
        [
            [[1, 2, 3], [2, 4, 6], [3, 6, 9], [4, 8, 12]],
            [[5, 10, 15], [6, 12, 18], [7, 13, 19], [0, 0, 0]],
        ],
        dtype=np.float32,
    )
    np.testing.assert_array_equal(preset.values, expected)
    np.testing.assert_array_equal(preset.values[1, 3], [0, 0, 0])
    np.testing.assert_array_equal(preset.mask, [[True] * 4, [True, True, True, False]])
    assert preset.labels == (
        "I",
        "love",
        "deep",
        "learning",
        "Transformers",
        "are",
        "powerful",
        "<pad>",
    )
    assert preset.source == "from the transformer article"


def test_padded_tokens_batchnorm_statistics_from_the_two_sentences():
    preset = get_preset("padded_tokens")
    feature_1 = preset.values[..., 0].ravel().astype(np.float64)
    np.testing.assert_array_equal(feature_1, [1, 2, 3, 4, 5, 6, 7, 0])
    assert feature_1.mean() == pytest.approx(3.5)
    assert feature_1.std() == pytest.approx(2.2913, abs=1e-4)
    assert round(feature_1.std(), 2) == 2.29
    # The seed's normalized values for "I" and "powerful".
    # The seed rounds the std to 2.29 before dividing, hence the loose match.
    assert (1 - 3.5) / feature_1.std() == pytest.approx(-1.09, abs=0.01)
    assert (7 - 3.5) / feature_1.std() == pytest.approx(1.52, abs=0.01)
    real = preset.values[..., 0][preset.mask]
    assert real.mean() == pytest.approx(4.0)


def test_padded_tokens_pad_row_has_zero_mean_and_variance():
    pad = get_preset("padded_tokens").values[1, 3].astype(np.float64)
    assert pad.mean() == 0.0
    assert pad.var() == 0.0


def test_two_words_matches_the_notes():
    preset = get_preset("two_words")
    expected = np.array([[[0.2, 0.1, 0.3]], [[0.5, 0.1, 0.1]]], dtype=np.float32)
    np.testing.assert_array_equal(preset.values, expected)
    assert preset.values.shape == (2, 1, 3)
    assert preset.mask is None
    x = preset.values.astype(np.float64)
    np.testing.assert_allclose(x.mean(-1).ravel(), [0.2, 0.2333], atol=1e-4)
    np.testing.assert_allclose(x.var(-1).ravel(), [0.0067, 0.0356], atol=1e-4)
    np.testing.assert_allclose(np.sqrt(x.var(-1) + 1e-5).ravel(), [0.0817, 0.1886], atol=1e-4)
    np.testing.assert_allclose(
        layer_norm(x).reshape(2, 3),
        [[0.0, -1.2238, 1.2238], [1.4140, -0.7070, -0.7070]],
        atol=1e-3,
    )


def test_tiny_variance_matches_the_formula_module():
    preset = get_preset("tiny_variance")
    expected = np.array([[0.001, 0.001, 0.0011, 0.0009, 0.001]], dtype=np.float32)
    np.testing.assert_array_equal(preset.values, expected)
    assert preset.values.shape == (1, 5)
    assert preset.values.astype(np.float64).var() == pytest.approx(4e-9, rel=1e-3)


def test_constant_row_has_one_row_without_spread():
    values = get_preset("constant_row").values
    assert values.ndim == 2
    variances = values.astype(np.float64).var(axis=-1)
    assert np.sum(variances == 0) == 1
    assert np.all(values[variances == 0] == 3.0)
    assert np.sum(variances > 0.1) == 1


def test_far_from_zero_breaks_the_shortcut_variance_formula():
    values = get_preset("far_from_zero").values
    assert values.shape == (4, 8)
    assert np.all(np.abs(values.mean(axis=-1) - 1e4) < 5)
    true_var = values.astype(np.float64).var(axis=-1)
    assert np.all((true_var > 0.1) & (true_var < 10))
    shortcut = (values**2).mean(axis=-1) - values.mean(axis=-1) ** 2
    assert np.max(np.abs(shortcut - true_var)) > 0.5


def test_one_two_three_worked_example():
    preset = get_preset("one_two_three")
    np.testing.assert_array_equal(preset.values, [[1, 2, 3]])
    assert preset.values.std() == pytest.approx(0.8165, abs=1e-4)
    np.testing.assert_allclose(layer_norm(preset.values, eps=0), [[-1.2247, 0, 1.2247]], atol=1e-4)


def test_different_scales_features_differ_by_orders_of_magnitude():
    values = get_preset("different_scales").values.astype(np.float64)
    assert values.shape == (8, 4)
    stds = values.std(axis=0)
    assert stds.max() / stds.min() > 1000
    assert values[:, 3].mean() == pytest.approx(50, abs=2)


# --- random_batch ----------------------------------------------------------------------------


@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_random_batch_shape_dtype_and_determinism(distribution):
    a = random_batch((3, 4, 5), distribution=distribution, seed=3)
    b = random_batch((3, 4, 5), distribution=distribution, seed=3)
    c = random_batch((3, 4, 5), distribution=distribution, seed=4)
    assert a.shape == (3, 4, 5)
    assert a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_normal_matches_loc_and_scale():
    x = random_batch((200_000,), loc=3.0, scale=2.0, seed=1).astype(np.float64)
    assert x.mean() == pytest.approx(3.0, abs=0.03)
    assert x.std() == pytest.approx(2.0, rel=0.02)


def test_uniform_stays_within_bounds():
    x = random_batch((100_000,), distribution="uniform", loc=1.0, scale=2.0, seed=2)
    assert x.min() >= -1.0
    assert x.max() <= 3.0
    assert x.min() < -0.99
    assert x.max() > 2.99
    assert x.mean() == pytest.approx(1.0, abs=0.03)


def test_outliers_are_present_and_rare():
    x = random_batch((100_000,), distribution="outliers", seed=5)
    far = np.abs(x) > 6
    assert far.any()
    assert far.mean() < 0.02
    # A plain normal sample of this size essentially never reaches 6 standard deviations.
    assert not (np.abs(random_batch((100_000,), seed=5)) > 6).any()


def test_tiny_outlier_batch_still_has_an_outlier():
    assert np.abs(random_batch((1, 4), distribution="outliers", seed=0)).max() > 1.0


def test_heavy_tails_have_more_kurtosis_than_normal():
    heavy = random_batch((100_000,), distribution="heavy_tailed", seed=6)
    normal = random_batch((100_000,), distribution="normal", seed=6)
    assert abs(excess_kurtosis(normal)) < 0.2
    assert excess_kurtosis(heavy) > excess_kurtosis(normal) + 5


def test_feature_spread_zero_shares_scale():
    x = random_batch((50_000, 4), seed=7).astype(np.float64)
    stds = x.std(axis=0)
    assert stds.max() / stds.min() < 1.1


def test_feature_spread_one_widens_features_by_orders_of_magnitude():
    x = random_batch((50_000, 5), loc=2.0, scale=1.0, feature_spread=1.0, seed=7)
    x = x.astype(np.float64)
    stds = x.std(axis=0)
    assert stds.max() / stds.min() > 10
    np.testing.assert_allclose(stds, [0.1, 10**-0.5, 1, 10**0.5, 10], rtol=0.03)
    # Narrowest feature sits above loc, widest below it.
    np.testing.assert_allclose(x.mean(axis=0), [3, 2.5, 2, 1.5, 1], atol=0.2)


def test_single_feature_ignores_spread():
    x = random_batch((50_000, 1), feature_spread=2.0, seed=8).astype(np.float64)
    assert x.std() == pytest.approx(1.0, rel=0.03)


@pytest.mark.parametrize("shape", [(0,), (0, 3), (4, 0), (2, 0, 5)])
def test_random_batch_allows_empty_dimensions(shape):
    x = random_batch(shape)
    assert x.shape == shape
    assert x.dtype == np.float32
    assert x.size == 0


def test_zero_scale_gives_constant_values():
    np.testing.assert_array_equal(random_batch((2, 3), loc=4.0, scale=0.0), np.full((2, 3), 4.0))


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"shape": ()}, "dimensions"),
        ({"shape": (1, 1, 1, 1, 1, 1)}, "dimensions"),
        ({"shape": (2, -1)}, "shape[1]"),
        ({"shape": (2.5, 3)}, "whole number"),
        ({"shape": (True, 3)}, "whole number"),
        ({"shape": 5}, "sequence"),
        ({"shape": "23"}, "sequence"),
        ({"shape": (3,), "distribution": "cauchy"}, "unknown distribution"),
        ({"shape": (3,), "scale": float("inf")}, "finite"),
        ({"shape": (3,), "scale": float("nan")}, "finite"),
        ({"shape": (3,), "scale": -1.0}, "scale"),
        ({"shape": (3,), "loc": float("-inf")}, "finite"),
        ({"shape": (3,), "loc": 1e30}, "loc"),
        ({"shape": (3,), "feature_spread": -0.5}, "feature_spread"),
        ({"shape": (3,), "feature_spread": 100.0}, "feature_spread"),
        ({"shape": (3,), "seed": -1}, "seed"),
        ({"shape": (3,), "seed": 1.5}, "seed"),
        ({"shape": (MAX_ELEMENTS + 1,)}, "too large"),
    ],
)
def test_random_batch_rejects_bad_parameters(kwargs, fragment):
    shape = kwargs.pop("shape")
    with pytest.raises(ValueError) as info:
        random_batch(shape, **kwargs)
    assert fragment in str(info.value)


def test_huge_request_is_refused_before_allocating():
    start = time.thread_time()  # the work's CPU, not a busy machine's wall clock
    with pytest.raises(ValueError, match="too large"):
        random_batch((10**6, 10**6))
    with pytest.raises(ValueError, match="too large"):
        random_batch((10**40, 10**40, 10**40))
    assert time.thread_time() - start < 0.5


def test_limit_is_inclusive():
    assert random_batch((MAX_ELEMENTS, 0)).shape == (MAX_ELEMENTS, 0)


def test_every_element_cap_comes_from_lnviz_limits():
    import inspect

    from lnviz import limits
    from lnviz.data import files, sequences

    assert MAX_ELEMENTS == limits.MAX_ELEMENTS == limits.FULL_LIMITS.max_elements == 50_000_000
    assert inspect.signature(files.load_arrays).parameters["max_elements"].default == 50_000_000
    for reader in (sequences.load_files, sequences.load_mnist_npz, sequences.load_mnist_idx,
                   sequences.read_idx):
        default = inspect.signature(reader).parameters["max_elements"].default
        assert default == limits.MAX_DATASET_VALUES == 64_000_000, reader


# --- padded_batch ----------------------------------------------------------------------------


def test_padded_batch_with_given_lengths():
    values, mask = padded_batch(3, 4, lengths=[2, 5, 1], pad_value=-7.0, seed=1)
    assert values.shape == (3, 5, 4)
    assert values.dtype == np.float32
    assert mask.shape == (3, 5)
    assert mask.dtype == bool
    np.testing.assert_array_equal(mask.sum(axis=1), [2, 5, 1])
    np.testing.assert_array_equal(mask[0], [True, True, False, False, False])
    assert np.all(values[~mask] == -7.0)
    assert not np.any(values[mask] == -7.0)


def test_sizes_may_be_numpy_arrays():
    assert random_batch(np.array([2, 3])).shape == (2, 3)
    _, mask = padded_batch(2, 3, lengths=np.array([1, 2]))
    np.testing.assert_array_equal(mask, [[True, False], [True, True]])


def test_padded_batch_explicit_max_len_adds_padding():
    values, mask = padded_batch(2, 3, lengths=[2, 3], max_len=6)
    assert values.shape == (2, 6, 3)
    np.testing.assert_array_equal(mask.sum(axis=1), [2, 3])
    assert np.all(values[:, 3:] == 0.0)


def test_padded_batch_random_lengths():
    values, mask = padded_batch(16, 3, max_len=10, seed=4)
    assert values.shape == (16, 10, 3)
    lengths = mask.sum(axis=1)
    assert lengths.min() >= 1
    assert lengths.max() == 10
    # Real tokens come first, padding after.
    np.testing.assert_array_equal(mask, np.arange(10) < lengths[:, None])


def test_padded_batch_default_max_len():
    values, mask = padded_batch(4, 2)
    assert values.shape == (4, 8, 2)
    assert mask.sum(axis=1).max() == 8


def test_padded_batch_is_deterministic():
    first = padded_batch(5, 4, max_len=7, seed=9)
    second = padded_batch(5, 4, max_len=7, seed=9)
    other = padded_batch(5, 4, max_len=7, seed=10)
    np.testing.assert_array_equal(first[0], second[0])
    np.testing.assert_array_equal(first[1], second[1])
    assert not np.array_equal(first[0], other[0])


def test_zero_padding_pulls_the_batchnorm_mean_down():
    values, mask = padded_batch(8, 4, lengths=[8, 2, 2, 2, 2, 2, 2, 2], seed=3)
    with_pad = values.reshape(-1, 4).mean(axis=0)
    real_only = values[mask].mean(axis=0)
    assert np.all(real_only > 1.0)
    assert np.all(with_pad < real_only - 0.5)


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((0, 3), {}, "batch_size"),
        ((2, 0), {}, "d_model"),
        ((2, 3), {"lengths": [1]}, "lengths has 1"),
        ((2, 3), {"lengths": [1, 0]}, "lengths[1]"),
        ((2, 3), {"lengths": [1, -4]}, "lengths[1]"),
        ((2, 3), {"lengths": [1, 2.5]}, "lengths[1]"),
        ((2, 3), {"lengths": [3, 4], "max_len": 3}, "max_len"),
        ((2, 3), {"lengths": 5}, "lengths"),
        ((2, 3), {"max_len": 0}, "max_len"),
        ((2, 3), {"pad_value": float("nan")}, "pad_value"),
        ((2, 3), {"distribution": "gamma"}, "unknown distribution"),
        ((2, 3), {"seed": -2}, "seed"),
        ((10**4, 10**4), {"max_len": 10**4}, "too large"),
        ((2, 10**8), {"lengths": [1, 1]}, "too large"),
    ],
)
def test_padded_batch_rejects_bad_parameters(args, kwargs, fragment):
    with pytest.raises(ValueError) as info:
        padded_batch(*args, **kwargs)
    assert fragment in str(info.value)


# --- image_batch -----------------------------------------------------------------------------


def test_image_batch_shape_and_channel_statistics():
    images = image_batch(4, 3, 16, 16, seed=2)
    assert images.shape == (4, 3, 16, 16)
    assert images.dtype == np.float32
    x = images.astype(np.float64)
    means = x.mean(axis=(0, 2, 3))
    stds = x.std(axis=(0, 2, 3))
    assert np.all(np.diff(means) > 0.5)
    assert np.all(np.diff(stds) > 0)
    assert stds.max() / stds.min() > 10


def test_image_batch_without_spread_puts_channels_on_one_footing():
    x = image_batch(8, 3, 16, 16, seed=2, channel_spread=0.0).astype(np.float64)
    assert np.all(np.abs(x.mean(axis=(0, 2, 3))) < 0.5)
    stds = x.std(axis=(0, 2, 3))
    assert stds.max() / stds.min() < 3


def test_image_batch_is_smooth():
    x = image_batch(2, 2, 32, 32, seed=1, channel_spread=0.0).astype(np.float64)
    neighbour_steps = np.abs(np.diff(x, axis=-1)).mean()
    assert neighbour_steps < 0.5 * x.std(axis=(2, 3)).mean()


def test_image_batch_is_deterministic():
    np.testing.assert_array_equal(image_batch(2, 3, 5, 6, seed=8), image_batch(2, 3, 5, 6, seed=8))
    assert not np.array_equal(image_batch(2, 3, 5, 6, seed=8), image_batch(2, 3, 5, 6, seed=9))


@pytest.mark.parametrize(
    ("args", "kwargs", "fragment"),
    [
        ((0, 3, 4, 4), {}, "n must"),
        ((1, 0, 4, 4), {}, "channels"),
        ((1, 3, -4, 4), {}, "height"),
        ((1, 3, 4, 0), {}, "width"),
        ((1, 3, 4, 4), {"channel_spread": -1.0}, "channel_spread"),
        ((1, 3, 4, 4), {"channel_spread": float("inf")}, "channel_spread"),
        ((1, 3, 4, 4), {"seed": -1}, "seed"),
        ((1000, 1000, 1000, 1000), {}, "too large"),
    ],
)
def test_image_batch_rejects_bad_parameters(args, kwargs, fragment):
    with pytest.raises(ValueError) as info:
        image_batch(*args, **kwargs)
    assert fragment in str(info.value)


# --- parse_numbers ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1, 2, 3", [[1, 2, 3]]),
        ("1 2 3", [[1, 2, 3]]),
        ("1\t2\t3", [[1, 2, 3]]),
        ("1,2,3\n4,5,6", [[1, 2, 3], [4, 5, 6]]),
        ("1 2 3\n4 5 6\n", [[1, 2, 3], [4, 5, 6]]),
        ("1, 2; 3, 4; 5, 6", [[1, 2], [3, 4], [5, 6]]),
        ("1 2;\n3 4", [[1, 2], [3, 4]]),
        ("\n\n  1 , 2\n\n 3,4  \n", [[1, 2], [3, 4]]),
        ("1, 2, 3,", [[1, 2, 3]]),
        ("1e-5, 2.5E+3, -.5, 3., +4", [[1e-5, 2500, -0.5, 3, 4]]),
        ("\u22121.5 2", [[-1.5, 2]]),
        ("7", [[7]]),
        ("1\n2\n3", [[1], [2], [3]]),
        ("[1, 2, 3]", [1, 2, 3]),
        ("[[1, 2], [3, 4]]", [[1, 2], [3, 4]]),
        ("[[1,2,],[3,4,],]", [[1, 2], [3, 4]]),
        ("[ [ 1 , 2 ] ,\n  [ 3 , 4 ] ]", [[1, 2], [3, 4]]),
        ("[[1. 2.]\n [3. 4.]]", [[1, 2], [3, 4]]),
        ("[[[1,2],[3,4]],[[5,6],[7,8]]]", [[[1, 2], [3, 4]], [[5, 6], [7, 8]]]),
        ("[[[[[1]]]]]", [[[[[1]]]]]),
        ("  [[0.2, 0.1, 0.3]]  \n", [[0.2, 0.1, 0.3]]),
    ],
)
def test_parse_good_inputs(text, expected):
    result = parse_numbers(text)
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, np.array(expected, dtype=np.float64))


def test_typed_numbers_keep_every_digit_typed():
    # 1.00000001 and 1.00000002 are one float32; typed numbers stay float64.
    close = parse_numbers("1.00000001, 1.00000002, 1.00000003")
    assert close.dtype == np.float64
    assert close[0, 1] - close[0, 0] == pytest.approx(1e-8, rel=1e-6)
    assert parse_numbers("1e300, -1e300")[0, 0] == 1e300


def test_parse_special_values():
    result = parse_numbers("nan inf -inf NaN")
    assert np.isnan(result[0, 0]) and np.isnan(result[0, 3])
    assert result[0, 1] == np.inf
    assert result[0, 2] == -np.inf
    nested = parse_numbers("[[nan, -inf], [Infinity, 0]]")
    assert np.isnan(nested[0, 0])
    assert nested[0, 1] == -np.inf
    assert nested[1, 0] == np.inf


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        ("1, 2, 3\n4, 5, abc", ["line 2, item 3", "'abc' is not a number"]),
        ("1 2 3\n4 5 6\n7 8", ["line 3 has 2 numbers but line 1 has 3", "same count"]),
        ("1 2; 3", ["line 1, row 2 has 1 numbers", "line 1, row 1 has 2"]),
        ("1,,2", ["line 1, item 2", "empty item"]),
        (",1", ["line 1, item 1", "empty item"]),
        ("1e309", ["line 1, item 1", "too large for any float"]),
        ("1_000", ["'1_000' is not a number"]),
        ("0x10", ["'0x10' is not a number"]),
        ("[[1, 2, 3], [4, 5]]", ["ragged nested list at depth 2", "expected 3 items, found 2"]),
        ("[[[1,2],[3,4]],[[5,6]]]", ["ragged nested list at depth 2", "expected 2 items, found 1"]),
        ("[[1, 2], [3, 4]]]", ["unbalanced brackets at character 17"]),
        ("[[1, 2], [3, 4]", ["unbalanced brackets at character 1", "never closed"]),
        ("[1, 2, abc]", ["character 8", "'abc' is not a number"]),
        ("[1, , 2]", ["character 5", "','"]),
        ("[, 1]", ["character 2"]),
        ("[]", ["character 1", "empty list"]),
        ("[[1], []]", ["character 7", "empty list"]),
        ("[1, [2]]", ["mixed numbers and lists", "character 6"]),
        ("[[1], 2]", ["mixed numbers and lists", "character 7"]),
        ("[1] [2]", ["character 5", "after the outer list"]),
        ("[1, 2]\n[3, 4]", ["character 8", "line 2, column 1"]),
        ("[[1, 2],\n [3, x]]", ["character 15", "line 2, column 6", "'x' is not a number"]),
        ("[[[[[[1]]]]]]", ["nesting deeper than 5", "character 6"]),
        ("[1e400]", ["character 2", "too large"]),
        ("", ["nothing to parse"]),
        ("   \n\t ", ["nothing to parse"]),
        (" ; ;", ["nothing to parse"]),
        ("tensor([[1, 2]])", ["line 1, item 1", "is not a number"]),
    ],
)
def test_parse_bad_inputs_say_where(text, fragments):
    with pytest.raises(ValueError) as info:
        parse_numbers(text)
    for fragment in fragments:
        assert fragment in str(info.value)


def test_parse_refuses_too_many_numbers():
    with pytest.raises(ValueError, match="too many numbers"):
        parse_numbers("1 " * 11, max_elements=10)
    with pytest.raises(ValueError, match="too many numbers"):
        parse_numbers("[" + "1," * 11 + "]", max_elements=10)
    assert parse_numbers("1 " * 10, max_elements=10).shape == (1, 10)


def test_parse_refuses_overlong_text_quickly():
    start = time.thread_time()  # the work's CPU, not a busy machine's wall clock
    with pytest.raises(ValueError, match="characters long"):
        parse_numbers("1 " * (MAX_TEXT_CHARS // 2 + 1))
    assert time.thread_time() - start < 0.5


def test_parse_rejects_non_text():
    with pytest.raises(ValueError, match="string"):
        parse_numbers(b"1 2 3")
    with pytest.raises(ValueError, match="max_elements"):
        parse_numbers("1", max_elements=0)


def test_parse_never_evaluates_code():
    with pytest.raises(ValueError):
        parse_numbers("[__import__('os').getcwd()]")


# --- describe_shape --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "text"),
    [
        ((2, 4, 3), "2 × 4 × 3 (24 values)"),
        ((1, 3), "1 × 3 (3 values)"),
        ((1,), "1 (1 value)"),
        ((0, 3), "0 × 3 (0 values)"),
        ((1000, 1000), "1000 × 1000 (1,000,000 values)"),
        ((), "scalar (1 value)"),
    ],
)
def test_describe_shape(shape, text):
    assert describe_shape(shape) == text


def test_describe_shape_accepts_numpy_shapes():
    assert describe_shape(np.zeros((2, 3)).shape) == "2 × 3 (6 values)"


# --- properties ------------------------------------------------------------------------------

FAST = settings(max_examples=150, deadline=None)

float32s = st.floats(width=32, allow_nan=True, allow_infinity=True)


def nested_text(array: np.ndarray) -> str:
    if array.ndim == 0:
        return repr(float(array))
    return "[" + ", ".join(nested_text(item) for item in array) + "]"


@FAST
@given(
    hnp.arrays(np.float32, hnp.array_shapes(min_dims=2, max_dims=2, max_side=6), elements=float32s),
    st.sampled_from([", ", " ", "\t", " , "]),
)
def test_rows_round_trip(array, separator):
    text = "\n".join(separator.join(repr(float(x)) for x in row) for row in array)
    np.testing.assert_array_equal(parse_numbers(text), array)


@FAST
@given(
    hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=3, max_side=4), elements=float32s)
)
def test_nested_round_trip(array):
    result = parse_numbers(nested_text(array))
    assert result.shape == array.shape
    np.testing.assert_array_equal(result, array)


@FAST
@given(st.text(max_size=200))
def test_any_text_gives_array_or_value_error(text):
    try:
        result = parse_numbers(text)
    except ValueError:
        return
    assert isinstance(result, np.ndarray)
    assert result.dtype == np.float64


@FAST
@given(st.text(alphabet="[], 0123456789.e-+;\n\tnaif", max_size=60))
def test_number_like_text_gives_array_or_value_error(text):
    try:
        result = parse_numbers(text)
    except ValueError:
        return
    assert result.dtype == np.float64
    assert 1 <= result.ndim <= 5


@FAST
@given(
    shape=st.lists(st.integers(0, 6), min_size=1, max_size=5),
    distribution=st.sampled_from(DISTRIBUTIONS),
    loc=st.floats(-1e6, 1e6),
    scale=st.floats(0, 1e6),
    spread=st.floats(0, 3),
    seed=st.integers(0, 2**32),
)
def test_random_batch_valid_parameters(shape, distribution, loc, scale, spread, seed):
    x = random_batch(
        shape, distribution=distribution, loc=loc, scale=scale, feature_spread=spread, seed=seed
    )
    assert x.shape == tuple(shape)
    assert x.dtype == np.float32
    assert np.all(np.isfinite(x))


@FAST
@given(
    batch_size=st.integers(1, 6),
    d_model=st.integers(1, 5),
    lengths=st.none() | st.lists(st.integers(1, 9), min_size=1, max_size=6),
    extra=st.none() | st.integers(0, 3),
    pad_value=st.floats(-100, 100),
    distribution=st.sampled_from(DISTRIBUTIONS),
    seed=st.integers(0, 1000),
)
def test_padded_batch_valid_parameters(
    batch_size, d_model, lengths, extra, pad_value, distribution, seed
):
    if lengths is not None:
        batch_size = len(lengths)
        max_len = None if extra is None else max(lengths) + extra
    else:
        max_len = None if extra is None else extra + 1
    values, mask = padded_batch(
        batch_size,
        d_model,
        lengths=lengths,
        max_len=max_len,
        pad_value=pad_value,
        distribution=distribution,
        seed=seed,
    )
    expected_len = max_len if max_len is not None else (max(lengths) if lengths else 8)
    assert values.shape == (batch_size, expected_len, d_model)
    assert mask.shape == (batch_size, expected_len)
    assert np.all(values[~mask] == np.float32(pad_value))
    counts = mask.sum(axis=1)
    np.testing.assert_array_equal(mask, np.arange(expected_len) < counts[:, None])
    if lengths is None:
        assert counts.min() >= 1
        assert counts.max() == expected_len
    else:
        np.testing.assert_array_equal(counts, lengths)


anything = st.one_of(
    st.none(),
    st.booleans(),
    # Small or absurd sizes only: a valid but large request would allocate for real.
    st.integers(-3, 10),
    st.just(10**20),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=5),
    st.lists(st.integers(-3, 3), max_size=7),
)


@FAST
@given(
    shape=anything,
    distribution=anything,
    loc=anything,
    scale=anything,
    spread=anything,
    seed=anything,
)
def test_random_batch_arbitrary_parameters_raise_only_value_error(
    shape, distribution, loc, scale, spread, seed
):
    with contextlib.suppress(ValueError):
        random_batch(
            shape, distribution=distribution, loc=loc, scale=scale, feature_spread=spread, seed=seed
        )


@FAST
@given(
    batch_size=anything,
    d_model=anything,
    lengths=anything,
    max_len=anything,
    pad_value=anything,
    seed=anything,
)
def test_padded_batch_arbitrary_parameters_raise_only_value_error(
    batch_size, d_model, lengths, max_len, pad_value, seed
):
    with contextlib.suppress(ValueError):
        padded_batch(
            batch_size, d_model, lengths=lengths, max_len=max_len, pad_value=pad_value, seed=seed
        )


def test_parse_lengths_names_the_bad_item_not_the_whole_text():
    assert parse_lengths("6, 3; 1,") == (6, 3, 1)
    assert parse_lengths("  ") is None
    long = "1, " * 2000 + "x" * 3000
    with pytest.raises(ValueError) as info:
        parse_lengths(long)
    assert f"item 2001 is '{'x' * 100}…'" in str(info.value)
    assert len(str(info.value)) < 200


def test_parse_table_reads_scientific_notation_and_names_bad_cells():
    import pandas as pd

    table = pd.DataFrame({"γ": ["1e-3", "2.5E-1", " -4 "], "β": [0.5, "nan", "\u22122"]},
                         index=["feature 0", "feature 1", "feature 2"])
    values = parse_table(table)
    assert values.dtype == np.float64
    np.testing.assert_array_equal(values[:, 0], [1e-3, 0.25, -4.0])
    assert values[0, 1] == 0.5 and np.isnan(values[1, 1]) and values[2, 1] == -2.0
    for bad, fragment in [("", "empty"), (None, "empty"), ("1e", "'1e' is not a number"),
                          ("1e999", "'1e999' is too large")]:
        table.iloc[2, 0] = bad
        with pytest.raises(ValueError, match=f"row feature 2, column γ: {fragment}"):
            parse_table(table)
