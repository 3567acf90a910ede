"""BatchNorm in a real network: the lesson's numbers from runs of EfficientNet-Lite0 (checked
against its reference implementation in tests/test_models_efficientnet.py), computed again by
hand here (per-sample norms by torch.nn.functional), and the page that asks before it shows
them.

The heavy parts run here on a small pool (two photos and their crops); the page runs the same
code on all seven."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from pageutil import asks_first, figures, held_result, open_page, page_text

from lnviz.capture import patch
from lnviz.data import photos as photo_module
from lnviz.lessons import efficientnet as lesson
from lnviz.models import efficientnet_lite0
from lnviz.models.efficientnet import batch_norm_names, preprocess

pytestmark = pytest.mark.slow

PAGE = "app_pages/efficientnet.py"
PARTS = {f"en_part{k}": "true" for k in range(2, 7)}
OWN = "a picture of your own (PNG or JPEG)"
ALONE = "lnviz.lessons.efficientnet.alone"


@pytest.fixture(scope="module")
def model():
    return efficientnet_lite0()


@pytest.fixture(scope="module")
def pool():
    return lesson.photo_pool()


@pytest.fixture(scope="module")
def small(pool):
    """The first two photos and their crops: 10 pictures."""
    keep = range(2 * (1 + lesson.CROPS))
    assert len({pool.sources[i] for i in keep}) == 2
    return lesson.Pool(pool.images[list(keep)], tuple(pool.sources[i] for i in keep),
                       tuple(pool.labels[i] for i in keep))


@pytest.fixture(scope="module")
def tiny(pool):
    """The first photo and its crops: 5 pictures, for the parts that run the network most."""
    keep = list(range(1 + lesson.CROPS))
    return lesson.Pool(pool.images[keep], tuple(pool.sources[i] for i in keep),
                       tuple(pool.labels[i] for i in keep))


def _kl(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    p, q = p.log_softmax(-1), q.log_softmax(-1)
    return (p.exp() * (p - q)).sum(-1)


def test_the_photos_are_the_packages_files_decoded():
    from PIL import Image
    from sklearn.datasets import load_sample_image

    pictures = photo_module.photos()
    assert list(pictures) == [p.name for p in photo_module.PHOTOS] and len(pictures) == 7
    # scikit-learn's own reader gives the same pixels
    np.testing.assert_array_equal(pictures["a temple in China"], load_sample_image("china.jpg"))
    cat = photo_module._file(photo_module.PHOTOS[2])
    np.testing.assert_array_equal(pictures["a cat"], np.asarray(Image.open(cat).convert("RGB")))
    # the cameraman is greyscale: three equal channels
    grey = pictures["a cameraman (greyscale)"]
    assert grey.shape[2] == 3 and np.array_equal(grey[..., 0], grey[..., 2])
    with pytest.raises(KeyError, match="no photo called"):
        photo_module.photo("a dog")


def test_a_missing_package_is_a_clear_error(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "skimage" else real(name, *a))
    with pytest.raises(photo_module.PhotoFileError, match="pip install --no-deps scikit-image"):
        photo_module.photo("a cat")


def test_the_pool_is_each_photo_and_four_crops(pool):
    assert pool.images.shape == (35, 3, 224, 224)
    assert pool.sources[:5] == ("a temple in China",) * 5
    assert pool.labels[:2] == ("a temple in China", "a temple in China, crop 1")
    first = photo_module.photo("a temple in China")
    torch.testing.assert_close(pool.images[0], preprocess(first)[0])
    assert len(pool.others("a temple in China")) == 30
    # a crop differs from the whole, and its mirror image is what every other crop is
    assert not torch.equal(pool.images[1], pool.images[0])
    picture = lesson.shown_picture(pool.images[:1])
    assert picture.shape == (224, 224, 3) and picture.dtype == np.uint8


def test_a_batch_of_one_in_train_mode_loses_the_class(model, pool):
    image = pool.images[:1]
    a = lesson.alone(model, image, pool)
    label = int(model.run(image, record=False).logits.argmax())
    assert a.label == model.class_names[label] == "palace"
    trained = model.run(image, training=True, record=False).probabilities[0]
    assert a.train_p == pytest.approx(float(trained[label]), rel=1e-6)
    assert a.eval_p > 0.3 and a.train_p < 0.01 and not a.same_top
    # the classifier's inputs of two photos, each alone in train mode, nearly parallel
    other = pool.images[5:6]  # the flower
    cos = F.cosine_similarity(model.run(image, training=True, record=False).features,
                              model.run(other, training=True, record=False).features)
    assert float(cos) > 0.6 and a.cos_train > 0.6 > 0.3 > a.cos_eval
    answer = lesson.alone_answer(a)
    assert answer.option == "the class is lost: another one comes first"
    assert f"{a.train_p:.2%}" in answer.reason and f"median cosine {a.cos_train:.2f}" in (
        answer.reason)


def test_alone_answer_follows_the_numbers():
    base = lesson.Alone([("x", 0.5)], [("x", 0.4)], "x", 0.5, 0.4, True, 0.1, 0.8)
    assert lesson.alone_answer(base).option == lesson.ALONE_OPTIONS[0]
    assert lesson.alone_answer(dataclasses.replace(base, train_p=0.1)).option == (
        lesson.ALONE_OPTIONS[1])


def test_batch_mates_are_drawn_from_the_other_photos(model, small):
    image = small.images[:1]
    crops = small.images[1:1 + lesson.CROPS]
    m = lesson.batch_mates(model, image, crops, small, small.sources[0])
    assert m.sizes == (1, 2, 4)  # five pictures of the other photo: batches up to 6
    label = int(model.run(image, record=False).logits.argmax())
    # one cell by hand: draw 1, a batch of 4
    order = np.random.default_rng(1).permutation(small.others(small.sources[0]))
    run = model.run(torch.cat([image, small.images[order[:3]]]), training=True, record=False)
    assert m.p[1, 2] == pytest.approx(float(run.probabilities[0, label]), rel=1e-6)
    assert m.top[1, 2] == (int(run.logits[0].argmax()) == label)
    own = model.run(torch.cat([image, crops]), training=True, record=False)
    assert m.own_p == pytest.approx(float(own.probabilities[0, label]), rel=1e-6)
    assert (m.p[:, 0] == m.p[0, 0]).all()  # alone: every draw is the same batch


def test_mates_answer_names_the_first_size_most_draws_bring_back():
    top = np.array([[False, False, True, True], [False, True, True, True],
                    [False, False, False, True]])
    m = lesson.Mates((1, 2, 4, 8), np.full((3, 4), 0.1), top, 0.5, 0.001,
                     np.array([0.02, 0.03, 0.04]), mates=20)
    assert lesson.first_size_back(m) == 4
    answer = lesson.mates_answer(m, "palace")
    assert answer.option == "with 2 to 4 pictures"
    assert "from a batch of 4" in answer.reason
    assert "At 8 pictures its probability is 10%, against 50% in eval mode." in answer.reason
    assert "do worse than any draw of others" in answer.reason
    never = dataclasses.replace(m, top=np.zeros((3, 4), dtype=bool), own_p=0.05)
    answer = lesson.mates_answer(never, "palace")
    assert answer.option == "only with 31, or not even then"
    assert "do worse" not in answer.reason
    # the 35th review: the last size holding every other picture is one batch, said once;
    # "worse" only where the printed numbers differ; a near-uniform eval class is named so
    whole = dataclasses.replace(m, mates=7, eval_p=0.0012, own_p=0.0012,
                                other_p=np.array([0.0012, 0.0015, 0.002]))
    answer = lesson.mates_answer(whole, "megalith")
    assert "with all 7 others as mates (one batch, whatever the draw), 10%" in answer.reason
    assert "close to a uniform guess's 0.1%" in answer.reason
    assert "do worse" not in answer.reason and "it gets 0.12%, against 0.12%" in answer.reason


def test_an_upload_of_a_page_photo_is_that_photo(pool):
    cat = photo_module.photo("a cat")
    assert lesson.source_of(pool, preprocess(cat)) == "a cat"
    assert lesson.source_of(pool, preprocess(cat[:, ::-1].copy())) is None


def test_one_batchnorm_in_train_mode_at_a_time(model, tiny):
    g = lesson.layer_gaps(model, tiny)
    names = batch_norm_names()
    assert g.names == names and g.cost.shape == g.gap.shape == (49,)
    images = lesson.gap_batch(tiny)
    assert g.pictures == len(images) == 2
    # one layer by hand: _blocks.15._bn1 with the batch's statistics, by torch's batch_norm
    name = "_blocks.15._bn1"
    bn = model.module.get_submodule(name)
    seen = {}

    def by_torch(x):
        seen["var"] = x.var(dim=(0, 2, 3), unbiased=False)
        return F.batch_norm(x, None, None, bn.weight, bn.bias, True, 0.0, bn.eps)

    with patch(model.module, {name: by_torch}), torch.no_grad():
        q = model.module(images)
    p = model.run(images, record=False).logits
    k = names.index(name)
    assert g.cost[k] == pytest.approx(float(_kl(p, q).mean()), rel=1e-3, abs=1e-6)
    live = bn.running_var > 0
    gap = ((seen["var"] + bn.eps) / (bn.running_var + bn.eps)).log().abs()[live].median()
    assert g.gap[k] == pytest.approx(float(gap), rel=1e-4)
    assert (g.cost >= -1e-9).all() and (g.gap >= 0).all()


def test_gaps_answer_is_where_the_costliest_batchnorm_sits():
    """The 35th review: a mean over a third is the few costly layers' alone; the answer is
    where the single costliest sits, with each third's median beside it."""
    names = batch_norm_names()
    cost = np.full(49, 0.02)
    cost[[45, 46, 47, 48]] = [0.38, 0.6, 0.17, 0.25]
    gap = np.full(49, 0.1)
    gap[46] = 0.56
    g = lesson.LayerGaps(names, gap=gap, cost=cost, pictures=14)
    answer = lesson.gaps_answer(g)
    assert answer.option == "in the last third"
    assert f"{names[46]} moves the predictions most: a mean KL divergence of 0.6 nats" in (
        answer.reason)
    assert f"next come {names[45]} (0.38) and {names[48]} (0.25)" in answer.reason
    assert "the median over each third of the 49 (first, middle, last) is 0.02, 0.02 and " \
           "0.02 nats" in answer.reason
    assert "is also the one whose batch variance is furthest" in answer.reason
    early = dataclasses.replace(g, cost=np.r_[0.9, cost[1:]])
    answer = lesson.gaps_answer(early)
    assert answer.option == "in the first third of the 49"
    assert "a layer's cost depends on how the layers after it" in answer.reason
    assert "The classifier reads" not in answer.reason


def test_folding_moves_the_logits_by_rounding(model, tiny):
    f = lesson.fold(model, tiny)
    assert 0 <= f.max_change < 1e-3 < f.largest
    assert f.same_top == f.pictures == 5
    channels = sum(model.module.get_submodule(n).num_features for n in batch_norm_names())
    assert f.parameters - f.folded_parameters == channels == 21_008
    assert f.buffers == 2 * channels
    assert f.ms > 0 and f.folded_ms > 0
    answer = lesson.fold_answer(f)
    assert answer.option == (lesson.FOLD_OPTIONS[0] if f.max_change == 0
                             else lesson.FOLD_OPTIONS[1])
    assert "21,008 fewer parameters" in answer.reason


def test_the_shifts_on_pixels():
    grey = (torch.full((1, 3, 8, 8), 200.0) - 127) / 128
    darker = lesson.shift(grey, "darker (pixels × 0.4)")
    torch.testing.assert_close(darker, torch.full_like(grey, (80 - 127) / 128))
    ramp = (torch.arange(64.0).reshape(1, 1, 8, 8).expand(1, 3, 8, 8) * 4 - 127) / 128
    flat = lesson.shift(ramp, "lower contrast (× 0.3 around each picture's mean)")
    torch.testing.assert_close(flat.mean(), ramp.mean())
    torch.testing.assert_close(flat.std(), 0.3 * ramp.std())
    # a blur keeps a flat picture flat and its mean
    blurred = lesson.shift(grey, "blurred (σ ≈ 1.7 pixels)")
    torch.testing.assert_close(blurred, grey)
    torch.testing.assert_close(lesson.shift(ramp, "blurred (σ ≈ 1.7 pixels)").mean(),
                               ramp.mean(), atol=0.02, rtol=0)


def test_shifted_pictures_and_the_statistics_re_estimated(model, tiny):
    how = "darker (pixels × 0.4)"
    s = lesson.shifted(model, tiny, how)
    clean = model.run(tiny.images, record=False).logits.argmax(1)
    images = lesson.shift(tiny.images, how)
    assert s.kept == int((model.run(images, record=False).logits.argmax(1) == clean).sum())
    # the first BatchNorm's statistics by hand: torch's mean and biased variance of its input
    stem = model.module._conv_stem(images)
    mean, var = stem.mean(dim=(0, 2, 3)), stem.var(dim=(0, 2, 3), unbiased=False)
    bn = model.module._bn0
    first = model.run(images, record=False, replace={"_bn0": lambda x: F.batch_norm(
        x, mean, var, bn.weight, bn.bias, False, 0.0, bn.eps)})
    assert s.kept_first == int((first.logits.argmax(1) == clean).sum())
    assert all(0 <= k <= s.pictures == 5 for k in (s.kept, s.kept_first, s.kept_all,
                                                     s.kept_clean_all))


def test_shifted_answer_follows_the_counts():
    s = lesson.Shifted("darker (pixels × 0.4)", 35, 24, 29, 13, 12)
    answer = lesson.shifted_answer(s)
    assert answer.option == lesson.REESTIMATE_OPTIONS[0] and not answer.accepted
    assert "Of the 35 pictures darkened, 24 keep" in answer.reason
    assert "76.7% to 62.2%" in answer.reason
    assert lesson.shifted_answer(dataclasses.replace(s, kept_first=20)).option == (
        lesson.REESTIMATE_OPTIONS[2])
    tie = lesson.shifted_answer(dataclasses.replace(s, kept_all=29))
    assert tie.option == lesson.REESTIMATE_OPTIONS[0]
    assert tie.accepted == (lesson.REESTIMATE_OPTIONS[1],)


def test_per_sample_norms_in_batchnorms_place(model, small):
    w = lesson.swapped(model, small)
    clean = model.run(small.images, record=False).logits.argmax(1)
    names = batch_norm_names()

    def by_torch(x, name):  # LayerNorm over each position's channels, by torch
        bn = model.module.get_submodule(name)
        return F.layer_norm(x.movedim(1, -1), (x.shape[1],), bn.weight, bn.bias,
                            bn.eps).movedim(-1, 1)

    run = model.run(small.images, record=False,
                    replace={n: (lambda x, n=n: by_torch(x, n)) for n in names})
    first = next(iter(lesson.SWAPS))
    assert w.kept[first] == int((run.logits.argmax(1) == clean).sum())
    assert w.top_p[first] == pytest.approx(float(run.probabilities.max(1).values.median()),
                                           rel=1e-3)
    # GroupNorm with one group, by torch
    run = model.run(small.images, record=False, replace={n: (
        lambda x, n=n: F.group_norm(x, 1, model.module.get_submodule(n).weight,
                                    model.module.get_submodule(n).bias,
                                    model.module.get_submodule(n).eps)) for n in names})
    assert w.kept[list(lesson.SWAPS)[1]] == int((run.logits.argmax(1) == clean).sum())
    # InstanceNorm in every BatchNorm's place is train mode on a batch of one, picture by
    # picture (part 6's reply says so)
    instance = model.run(small.images[:2], record=False, replace={n: (
        lambda x, n=n: F.instance_norm(x, weight=model.module.get_submodule(n).weight,
                                       bias=model.module.get_submodule(n).bias,
                                       eps=model.module.get_submodule(n).eps))
        for n in names}).logits
    alone = torch.cat([model.run(small.images[i:i + 1], training=True, record=False).logits
                       for i in range(2)])
    torch.testing.assert_close(instance, alone, rtol=1e-4, atol=1e-4)
    # none of the three keeps most pictures; the spread by hand for one layer
    assert all(2 * k <= w.pictures for k in w.kept.values())
    var = model.module.get_submodule("_blocks.2._bn0").running_var
    std = var[var > 0].sqrt()
    assert w.spread[names.index("_blocks.2._bn0")] == pytest.approx(float(std.max() / std.min()))
    table = lesson.swap_table(w)
    assert len(table) == 3 and table.iloc[0, 1] == w.kept[first]


def test_swap_answer_counts():
    w = lesson.Swapped(35, {k: 0 for k in lesson.SWAPS}, {k: 0.05 for k in lesson.SWAPS},
                       batch_norm_names(), np.linspace(2, 200, 49))
    assert lesson.swap_answer(w).option == "none"
    w = dataclasses.replace(w, kept={k: 20 for k in lesson.SWAPS})
    assert lesson.swap_answer(w).option == "most (over half)"
    assert "up to ×200 (in _bn1" in lesson.swap_answer(w).reason
    # InstanceNorm is part 1's batch of one, not a scale mismatch (the 35th review)
    assert "it is part 1's train mode with a batch of one" in lesson.swap_answer(w).reason


def test_the_page_asks_before_each_answer(model, pool):
    at = asks_first(PAGE, "en_alone_guess", "the class is lost: another one comes first",
                    hidden=("median cosine",))
    assert len(figures(at)) == 1
    at = open_page(PAGE, PARTS, asked=True, timeout=300)
    assert not figures(at) and not at.dataframe
    assert [r.key for r in at.radio] == ["en_alone_guess", "en_mates_guess", "en_gap_guess",
                                          "en_fold_guess", "en_shift", "en_shift_guess",
                                          "en_swap_guess"]
    text = page_text(at)
    for hidden in ("comes first again", "Mean KL divergence", "fewer parameters",
                   "keep their clean top class", "keep their top class;"):
        assert hidden not in text
    # part 2's answer tells part 1's: it waits, and its title does not say it (35th review)
    at.radio(key="en_mates_guess").set_value(lesson.MATES_OPTIONS[0]).run(timeout=300)
    assert not figures(at)
    assert any("Answer part 1's question first" in c.value for c in at.caption)
    assert "2 · Batch-mates in train mode" in [e.label for e in at.expander]
    # part 4 answered on the page: the lesson's answer to the page's pool
    at.radio(key="en_fold_guess").set_value(lesson.FOLD_OPTIONS[2]).run(timeout=300)
    reply = next(m.value for m in at.markdown if "The largest logit change" in m.value)
    assert reply.startswith("**Not quite:** the answer is “by float rounding only")
    assert "over the 35 pictures" in reply


def test_the_picture_choice_reruns_part_one(model, pool):
    at = open_page(PAGE, {"en_photo": "a cup of coffee"}, timeout=300)
    shown = next(m.value for m in at.markdown if m.value.startswith("In eval mode it says"))
    coffee = model.run(pool.images[15:16], record=False)
    assert pool.sources[15] == "a cup of coffee"
    assert f"**{coffee.top(1)[0][0]}** ({coffee.top(1)[0][1]:.1%})" in shown
    # the own-picture choice waits for an upload, with a note and no traceback
    at.selectbox(key="en_photo").set_value(OWN).run(timeout=300)
    assert not at.exception
    assert any("Upload a picture" in i.value for i in at.info)


def test_learners_share_what_the_network_makes_of_a_photo_and_keep_their_uploads(model, pool):
    """A class opening the page runs part 1 on a photo once for the whole server; a learner's
    upload is run in their session and kept nowhere else."""
    import io

    from PIL import Image

    from lnviz.ui import cache

    coffee = {"en_photo": "a cup of coffee"}
    first = held_result(open_page(PAGE, coffee, timeout=300), ALONE)[1]
    at = open_page(PAGE, coffee, timeout=300)  # another learner
    slot, again = held_result(at, ALONE)
    assert again is first and cache._for_all_kept(slot).value is first
    # the same learner uploads a picture of their own
    buffer = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 256, (300, 400, 3), np.uint8)).save(
        buffer, "PNG")
    at.selectbox(key="en_photo").set_value(OWN).run(timeout=300)
    at.file_uploader(key="en_upload").upload("mine.png", buffer.getvalue()).run(timeout=300)
    assert not at.exception
    slot, own = held_result(at, ALONE)
    assert own is not first and own.label
    assert any(name[0] == "en_upload" for name in cache.names_in(slot[1]))
    assert cache._for_all_kept(slot) is None
    assert not [slot for slot in cache._FOR_ALL
                if any(name[0] == "en_upload" for name in cache.names_in(slot[1])
                       if isinstance(name, tuple))]


def test_a_picture_decodes_and_runs(model):
    """What the page does with an upload, without the browser: load_image, then the model."""
    import io

    from PIL import Image

    from lnviz.data.files import load_image

    buffer = io.BytesIO()
    Image.fromarray(np.full((300, 200, 3), 90, dtype=np.uint8)).save(buffer, "PNG")
    picture = load_image(buffer.getvalue())
    a = lesson.alone(model, preprocess(picture), lesson.Pool(
        preprocess(photo_module.photo("a flower")), ("a flower",), ("a flower",)))
    assert len(a.eval_top) == 5 and 0 < a.eval_p <= 1
    assert lesson.own_crops(picture).shape == (lesson.CROPS, 3, 224, 224)


@pytest.mark.parametrize("shape", [(1, 1), (1, 500), (500, 1), (2, 3000), (3, 7), (9000, 2)])
def test_slivers_and_specks_are_prepared_like_any_picture(shape):
    """The 36th review: a crop one pixel wide, mirrored, has a negative stride torch refused
    (part 2 crashed), and a side over 8,192 pixels was refused outside any message."""
    picture = np.random.default_rng(0).integers(0, 256, (*shape, 3), dtype=np.uint8)
    image, crops = lesson.prepared(picture)
    assert image.shape == (1, 3, 224, 224) and crops.shape == (lesson.CROPS, 3, 224, 224)
    assert torch.isfinite(crops).all()


def test_an_upload_is_decoded_small_and_turned_upright():
    import io

    from PIL import Image

    array = np.zeros((1200, 3000, 3), dtype=np.uint8)
    array[:, :1500] = 255  # left half white
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to view": the white half ends on top
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, "JPEG", quality=90, exif=exif.tobytes())
    image, _ = lesson.prepared_upload(buffer.getvalue(), max_bytes=2**24, max_pixels=10**7)
    picture = lesson.shown_picture(image)
    assert picture[:100].mean() > 200 and picture[-100:].mean() < 50
