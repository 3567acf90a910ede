"""Inside a real transformer: the findings the page states, asserted on all-MiniLM-L6-v2 itself
(lnviz.lessons.minilm), and the page run headless with AppTest.

The model's forward against transformers' BertModel is tests/test_models_bert.py; here each finding
is checked on several sentences, so that the page's sentences, computed from the run, say what
the numbers show.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from pageutil import alerts, asks_first, figures, held_result, open_page, shown_text

import lnviz
from lnviz.capture import load_capture, read_capture
from lnviz.lessons import minilm as tf
from lnviz.lessons.common import defined
from lnviz.models.bert import layer_norm_names
from lnviz.ui.messages import code_span

PAGE = "app_pages/minilm.py"
SENTENCES = [*tf.PRESETS[:4], "a"]


@pytest.fixture(scope="module")
def model() -> lnviz.models.MiniLM:
    return lnviz.models.minilm()


@pytest.fixture(scope="module")
def runs(model) -> dict[str, tf.TransformerRun]:
    return {text: tf.analyze(model, text) for text in SENTENCES}


# --- Massive activations ----------------------------------------------------------------------


@pytest.mark.parametrize("text", SENTENCES)
def test_cls_feature_99_dominates_the_first_ffn_layer_norm_input(runs, text: str) -> None:
    m = runs[text].massive
    assert (m.token, m.feature) == (0, 99)
    assert 200 < m.value < 235  # near 222 for every sentence
    assert m.ratio > 300  # hundreds of times the median |x|
    # [CLS] holds most of the input's Σx² at that LayerNorm
    assert m.share[0] > 0.9
    # the LN divides the row by σ ≈ 11 and squashes the row's other features
    assert 10 < m.sigma < 12.5
    # its x̂ before γ and β: near LayerNorm's bound √(C − 1) = √383 ≈ 19.57 for one value
    assert 19 < m.x_hat <= 383 ** 0.5 + 1e-4
    assert m.row_others < 0.2 * m.rest_others
    # across layers it stays large, then fades: large in layers 0-2, small by layer 5
    assert m.per_layer[:3].min() > 100 and m.per_layer[5] < 20
    assert np.all(m.per_layer[3:] < m.per_layer[2])


def test_massive_value_is_nearly_the_same_for_every_sentence(model) -> None:
    table = tf.across_sentences(model, 99)
    values = table["[CLS] value"].to_numpy()
    assert values.max() - values.min() < 0.03 * values.mean()


def test_without_special_tokens_the_first_word_takes_it(model) -> None:
    for text in SENTENCES[:3]:
        token, feature, value = tf.first_word_run(model, text)
        first = model.run(text, special_tokens=False).tokens[0]
        assert (token, feature) == (first, 99) and value > 150
    assert tf.first_word_run(model, "   ") is None


def test_massive_text_states_the_runs_numbers(runs) -> None:
    run = runs[tf.PRESETS[0]]
    text = tf.massive_text(run)
    assert "“[CLS]” (token 0) has **222.5** in feature **99**" in text
    assert f"σ = **{run.massive.sigma:.3g}**" in text
    m = run.massive
    assert (f"feature 99's x̂ is {m.x_hat:.3g}, which γ and β there turn into "
            f"{m.out_value:.3g}") in text
    assert "223, 121, 191, 76.5, 23, 10.9" in text
    # the short sentence: [CLS] holds more than half of Σx² in layers 0-4, said as computed
    short = tf.massive_text(runs["a"])
    held = [i for i, s in enumerate(runs["a"].massive.share) if s >= 0.5]
    assert f"In layers {', '.join(map(str, held[:-1]))} and {held[-1]}" in short


# --- Outlier features, attention sink -----------------------------------------------------------


@pytest.mark.parametrize("text", SENTENCES[:4])
def test_outlier_feature_223_grows_in_every_token_and_gamma_is_extreme_there(runs, text) -> None:
    o = runs[text].outliers
    assert o.feature == 223
    names = layer_norm_names()
    assert o.median[0] < 0.15  # at the embeddings
    assert o.median[names.index("encoder.layer.2.output.LayerNorm")] > 5  # by layer 2
    # |γ| of 223 is among the 3 largest in the attention LayerNorms of layers 1-4, and among the
    # 5 smallest after those layers' feed-forward
    attn = [names.index(f"encoder.layer.{i}.attention.output.LayerNorm") for i in range(1, 5)]
    ffn = [names.index(f"encoder.layer.{i}.output.LayerNorm") for i in range(1, 5)]
    assert o.gamma_rank[attn].max() <= 3
    assert o.gamma_rank[ffn].min() >= 380


@pytest.mark.parametrize("text", SENTENCES[:4])
def test_layers_1_to_4_send_about_half_their_attention_to_cls(runs, text) -> None:
    sink = runs[text].sink
    assert np.all(sink.share[1:5] > 0.45) and np.all(sink.share[1:5] < 0.8)
    assert sink.share[1:5].min() > max(sink.share[0], sink.share[5]) - 0.05
    assert np.all(sink.share[1:5] > 3 * sink.uniform)
    assert set(sink.sink_layers()) >= {1, 2}
    # each query's attention sums to 1, so the share is a fraction
    torch.testing.assert_close(torch.from_numpy(sink.mean_map.sum(-1)),
                               torch.ones(sink.mean_map.shape[:2]))


def test_sink_text_names_the_computed_layers(runs) -> None:
    text = tf.sink_text(runs[tf.PRESETS[0]])
    assert text.startswith("Layers 1, 2, 3 and 4 send at least half")
    assert "32%, 62%, 63%, 61%, 68%, 38%" in text


# --- Ablation -----------------------------------------------------------------------------------


def test_the_control_feature_is_a_typical_one(model) -> None:
    control = tf.control_feature(model)
    assert control not in (99, 223, 63, 267, 303)
    gammas = torch.stack([model.weights[f"{n}.weight"].abs() for n in layer_norm_names()])
    mean = gammas.mean(0)
    assert int((mean < mean[control]).sum()) == 192  # the median of 384


@pytest.mark.parametrize("text", SENTENCES)
def test_ablating_feature_99_breaks_the_embedding_and_the_control_does_not(model, text) -> None:
    control = tf.control_feature(model)
    result = tf.ablation(model, text, 99, control)
    assert result.cosine < 0.75
    assert result.control_cosine > 0.99
    assert result.control_cosine - result.cosine > 0.25


def test_pair_similarities_move_without_feature_99_and_not_without_the_control(model) -> None:
    control = tf.control_feature(model)
    pairs = tf.pair_similarities(model, 99, control)
    moved = (pairs["without feature 99"] - pairs["similarity"]).abs()
    kept = (pairs[f"without feature {control} (control)"] - pairs["similarity"]).abs()
    assert moved.max() > 0.1 and kept.max() < 0.02
    # the close pairs are closer than the far pair, originally
    assert pairs["similarity"].iloc[[0, 1, 3]].min() > pairs["similarity"].iloc[2] + 0.3
    # the originals agree with the model's embeddings
    a, b = tf.PAIRS[0]
    assert pairs["similarity"].iloc[0] == pytest.approx(float(
        model.run(a).embedding @ model.run(b).embedding), abs=1e-6)


def test_ablation_text(model) -> None:
    control = tf.control_feature(model)
    result = tf.ablation(model, tf.PRESETS[0], 99, control)
    text = tf.ablation_text(result, tf.pair_similarities(model, 99, control))
    assert f"cosine of **{result.cosine:.3f}**" in text
    assert f"without the control feature {control}, **{result.control_cosine:.3f}**" in text


# --- int8 ---------------------------------------------------------------------------------------


def absmax(x: np.ndarray, scale) -> np.ndarray:
    return np.clip(np.round(x / scale), -127, 127) * scale


@pytest.mark.parametrize("text", SENTENCES[:4])
def test_int8_per_tensor_zeroes_most_values_and_the_fixes_work(runs, text) -> None:
    run = runs[text]
    x = run.records[layer_norm_names().index(tf.FIRST_FFN)].input[0].double().numpy()
    table, outliers = tf.int8_errors(x)
    assert 99 in outliers
    zero = table["values turned to 0"].to_numpy()
    rel = table["relative error (tokens after the first)"].to_numpy()
    assert zero[0] > 0.5  # per tensor: most values become 0
    assert zero[1] < 0.4 and zero[2] < 0.1
    assert rel[0] > 0.4 and rel[1] < 0.05 and rel[2] < 0.05
    # the numbers, recomputed here from the definitions
    q = absmax(x, np.abs(x).max() / 127)
    assert zero[0] == pytest.approx(((q == 0) & (x != 0)).mean())
    assert rel[0] == pytest.approx(np.linalg.norm((q - x)[1:]) / np.linalg.norm(x[1:]))
    q = absmax(x, np.abs(x).max(axis=1, keepdims=True) / 127)
    assert rel[1] == pytest.approx(np.linalg.norm((q - x)[1:]) / np.linalg.norm(x[1:]))


def test_int8_without_outliers_keeps_nothing() -> None:
    x = np.array([[0.5, -1.0, 2.0], [1.0, 0.25, -0.5]])
    table, outliers = tf.int8_errors(x)
    assert outliers == []
    assert "none passes the threshold here, so it is the whole-tensor scale again" in \
        tf.int8_text(table, outliers)


# --- The run's records, the Explorer and capture files -------------------------------------------


def test_capture_file_holds_the_13_layer_norms(runs) -> None:
    run = runs[tf.PRESETS[0]]
    data = tf.capture_bytes(run)
    layers = read_capture(data)
    assert [layer.name for layer in layers] == layer_norm_names()
    records = load_capture(data)
    for saved, record in zip(records, run.records, strict=True):
        torch.testing.assert_close(saved.input, record.input, rtol=0, atol=0)
        torch.testing.assert_close(saved.replay().output, record.output, rtol=0, atol=1e-5)


def test_explorer_batch_is_the_layer_norm_input(runs) -> None:
    run = runs[tf.PRESETS[0]]
    batch = tf.explorer_batch(run, tf.FIRST_FFN)
    assert batch.layout == "NLC" and batch.values.shape == (1, len(run.tokens), 384)
    assert batch.row_labels[0] == "0 [CLS]" and len(set(batch.row_labels)) == len(run.tokens)
    assert batch.values[0, 0, 99] == pytest.approx(run.massive.value)


def test_layer_view_statistics_are_lnvizs(runs) -> None:
    run = runs[tf.PRESETS[0]]
    view = tf.layer_view(run, tf.FIRST_FFN)
    x = torch.from_numpy(view.input).double()
    torch.testing.assert_close(torch.from_numpy(view.mean).double(), x.mean(-1))
    torch.testing.assert_close(torch.from_numpy(view.std).double(), x.std(-1, unbiased=False))
    assert view.std[0] == pytest.approx(run.massive.sigma)


def test_text_limits(model) -> None:
    with pytest.raises(ValueError, match="at most 5,000"):
        tf.analyze(model, "x" * (tf.MODEL_MAX_CHARS + 1))
    with pytest.raises(ValueError, match="empty"):
        tf.analyze(model, "  \n")
    # zero-width spaces are no whitespace to Python, but the tokenizer keeps nothing of them
    assert model.run("\u200b\u200b").tokens == ["[CLS]", "[SEP]"]
    with pytest.raises(ValueError, match="keeps nothing of this text"):
        tf.analyze(model, "\u200b\u200b")
    long = tf.analyze(model, "word " * 700)
    assert len(long.tokens) == 512 and long.truncated
    assert "702 tokens" in tf.truncation_note(long)
    assert tf.truncation_note(tf.analyze(model, "short")) is None


# --- The page -------------------------------------------------------------------------------------


def markdown(at) -> str:
    return "\n".join(shown_text(m.value) for m in at.markdown)


def test_the_page_asks_which_token_holds_the_largest_value_before_it_shows_it(runs) -> None:
    """A shared link opens the question with the LayerNorm's figures, the overview and the
    massive activation held back; every option gets its reply, "Right" for the place the run's
    largest |x| (layer 0's feed-forward LayerNorm, the default) has; another layer asks again."""
    right = tf.peak_answer(runs[tf.PRESETS[0]], tf.FIRST_FFN).option
    assert right == "the first token"  # [CLS]'s feature 99
    at = asks_first(PAGE, "tf_guess_2", right)
    assert "token 0, [CLS], feature 99." in markdown(at)
    # the answer opened all 13 at a glance: another LayerNorm shows its reply, not the question
    at.selectbox(key="tf_ln").set_value(10).run()
    assert not [r for r in at.radio if r.key == "tf_guess_10"]
    reason = tf.peak_answer(runs[tf.PRESETS[0]], layer_norm_names()[10]).reason
    (reply,) = [m.value for m in at.markdown if reason in m.value]
    assert reply == reason  # no verdict: nothing was asked
    assert any(s.value.startswith("2 · All 13") for s in at.subheader)
    # another sentence is a question of its own again
    at.text_area(key="tf_text").input("The dog sat on the rug.").run(timeout=120)
    assert at.radio(key="tf_guess_10").value is None
    assert not any(s.value.startswith("2 · All 13") for s in at.subheader)


def test_page_shows_every_finding_from_its_run() -> None:
    at = open_page(PAGE, timeout=120)
    shown = markdown(at)
    assert len(figures(at)) == 8
    assert "“[CLS]” (token 0) has **222.5** in feature **99**" in shown
    assert "Feature **223** is the largest" in shown
    assert "Layers 1, 2, 3 and 4 send at least half" in shown
    assert "keeps a cosine of **0.621**" in shown
    # int8: the LayerNorm output the matmuls read, then its input, whose massive value zeroes most
    assert "turns **13%** of the values into 0" in shown
    assert "with one scale: 86% of its values turned into 0" in shown
    assert "the next layer's Q, K and V read it" in shown
    captions = " ".join(c.value for c in at.caption)
    for paper in ("Sun et al. 2024", "Kovaleva et al. 2021", "Xiao et al. 2024",
                  "Dettmers et al. 2022"):
        assert paper in captions
    assert not alerts(at)["error"] and not alerts(at)["warning"]
    # the terms the page introduces are defined where first used (lnviz.lessons.common.GLOSSARY)
    for term in ("massive activation", "attention sink", "absmax"):
        assert defined(term) in shown + captions, term


def test_page_follows_a_typed_sentence_and_warns_when_it_truncates() -> None:
    at = open_page(PAGE, {"tf_text": "I love deep learning"}, timeout=120)
    assert "**6 tokens:**" in markdown(at)
    at.text_area(key="tf_text").input("Héllo wörld 東京 " * 200).run(timeout=120)
    assert not at.exception
    (warning,) = alerts(at)["warning"]
    assert "802 tokens" in warning and "512" in warning
    assert "**512 tokens:**" in markdown(at)


def test_learners_share_the_runs_of_the_pages_sentences_and_keep_their_own() -> None:
    """What the model makes of the page's example sentences is computed once for the server
    (lnviz.ui.cache, for_all); a typed sentence's run is the learner's alone."""
    from lnviz.ui import cache

    analyze = "lnviz.lessons.minilm.analyze"
    first = held_result(open_page(PAGE, timeout=120), analyze)[1]
    at = open_page(PAGE, timeout=120)  # another learner, on the same sentence
    slot, again = held_result(at, analyze)
    assert again is first and cache._for_all_kept(slot).value is first
    typed = "my own words, typed here"
    assert typed not in tf.PRESETS
    at.text_area(key="tf_text").input(typed).run(timeout=120)
    slot, own = held_result(at, analyze)
    assert typed in slot[1][0] and own.tokens[1:3] == ["my", "own"]
    assert not [s for s in cache._FOR_ALL if typed in str(s)]
    assert cache._for_all_kept(slot) is None


def test_a_text_longer_than_the_page_reads_is_cut_with_a_word() -> None:
    """A paste over MODEL_MAX_CHARS characters is not dropped: the page reads its first
    MODEL_MAX_CHARS and says so."""
    at = open_page(PAGE, timeout=120)
    # one word of 6,800 letters: the tokenizer makes it one [UNK], so the model's run is short
    at.text_area(key="tf_text").input("x" * 6_800).run(timeout=120)
    assert not at.exception
    assert any("6,800 characters" in w and "first 5,000" in w for w in alerts(at)["warning"])
    assert "**3 tokens:** `[CLS]` · `[UNK]` · `[SEP]`" in markdown(at)


def test_backticks_in_the_sentence_keep_the_tokens_line_whole() -> None:
    """Each token is one code span showing its own characters, a backtick included."""
    at = open_page(PAGE, {"tf_text": "a ` b ` c"}, timeout=120)
    line = next(m.value for m in at.markdown if "tokens:**" in m.value)
    assert line == "**7 tokens:** `[CLS]` · `a` · `` ` `` · `b` · `` ` `` · `c` · `[SEP]`"


@pytest.mark.parametrize("text, span", [("a", "`a`"), ("`", "`` ` ``"), ("a``b", "```a``b```"),
                                        ("x\ny", "`x y`")])
def test_code_span_fences_a_text_with_backticks(text: str, span: str) -> None:
    assert code_span(text) == span


def test_page_layer_picker_and_preset() -> None:
    # a bound selectbox keeps its option's label in the URL
    at = open_page(PAGE, {"tf_ln": "3: layer 1 · after attention"}, timeout=120)
    assert at.subheader[0].value == "1 · LayerNorm 3: layer 1 · after attention"
    at.selectbox(key="tf_text_example").select(tf.PRESETS[2]).run(timeout=120)
    assert at.text_area(key="tf_text").value == tf.PRESETS[2]
    assert "**9 tokens:** `[CLS]` · `paris`" in markdown(at)


def test_open_in_explorer_hands_over_the_layer_norm_input() -> None:
    at = open_page(PAGE, timeout=120)
    at.button(key="tf_open").click().run(timeout=120)
    assert not at.exception
    assert at.segmented_control(key="src").value == "handed"
    assert "From Inside a real transformer" in str(at.segmented_control(key="src").options)
    assert "(1, 9, 384)" in " ".join(c.value for c in at.caption)


def test_explorer_link_without_a_handed_batch_falls_back_to_the_presets() -> None:
    at = open_page("app_pages/explorer.py", {"src": "From Inside a real transformer"})
    assert at.segmented_control(key="src").value == "preset"
    assert "handed" not in at.segmented_control(key="src").options


def test_the_layer_text_names_the_value_of_largest_size_with_its_sign(runs) -> None:
    """The value the paragraph names is the largest |x| (at layer 4's feed-forward LayerNorm a
    negative one), printed with its true minus sign; the output it names is the largest |y|,
    called so."""
    run = runs[tf.PRESETS[0]]
    name = layer_norm_names()[10]
    view = tf.layer_view(run, name)
    text = tf.layer_text(run, view)
    record = run.records[run.names.index(name)]
    x = record.input[0].double()
    token, feature = divmod(int(x.abs().argmax()), x.shape[1])
    value = float(x[token, feature])
    assert value < 0 and abs(value) == float(x.abs().max())  # the objection: not the largest x
    assert f"the input value of largest size is **{tf.short(value, 4)}**" in text
    assert "−" in tf.short(value, 4) and "largest input value" not in text
    y = record.output[0].double()
    assert f"Its largest output in size, |y|, is {float(y.abs().max()):.3g}." in text


def test_the_run_without_specials_says_a_typed_special_token_stays(model) -> None:
    """Leaving out the [CLS] and [SEP] the tokenizer adds keeps one typed in the text: the
    sentence says so where the first token is one, and only there."""
    typed = tf.first_word_run(model, "[CLS] [CLS] hi")
    assert typed[0] == "[CLS]"
    text = tf.first_word_text(typed, typed[1])
    assert "the [CLS] and [SEP] the tokenizer adds around it" in text
    assert "typed in the text itself, it stays" in text
    plain = tf.first_word_run(model, tf.PRESETS[0])
    assert plain[0] not in ("[CLS]", "[SEP]")
    assert "typed in the text" not in tf.first_word_text(plain, plain[1])


def test_the_outlier_feature_is_taken_over_ordinary_tokens_and_said_once(model) -> None:
    """Typed special tokens are read as special ([CLS] [CLS] [SEP]): no ordinary tokens, so no
    claim about "every token"; on the default sentence the median is over its ordinary tokens,
    and where the outlier feature is the massive one its ranks are given once."""
    typed = tf.analyze(model, "[CLS]")
    assert typed.outliers.ordinary == 0
    assert "too few for a median over every token" in tf.outlier_text(typed)
    run = tf.analyze(model, tf.PRESETS[0])
    ordinary = [t for t in run.tokens if t not in tf.SPECIAL_TOKENS]
    assert run.outliers.ordinary == len(ordinary) >= tf.MIN_ORDINARY
    text = tf.outlier_text(run)
    assert f"over the {len(ordinary)} ordinary tokens" in text
    # on the default sentence the two features differ (223 and 99): both are ranked
    assert run.outliers.feature != run.massive.feature
    assert "the massive activation's feature too" not in text
    assert f"feature {run.outliers.feature} ranks " in text
    assert f"and feature {run.massive.feature} ranks " in text
    # where they are one feature (a run made so), it is named once and its ranks given once
    same = dataclasses.replace(run, massive=dataclasses.replace(
        run.massive, feature=run.outliers.feature))
    text = tf.outlier_text(same)
    assert f"feature {run.outliers.feature}, the massive activation's feature too, ranks " in text
    assert "and feature" not in text
    attn = tf.indices_after(run.names, "attention")
    ranks = ", ".join(str(int(run.outliers.gamma_rank[i])) for i in attn)
    assert text.count(f"ranks {ranks}") == 1


def test_the_control_feature_is_never_the_removed_one(model) -> None:
    """Removing the control feature itself is compared with the next typical feature, not with
    itself (whose cosine would match by construction)."""
    control = tf.control_feature(model)
    other = tf.control_feature(model, control)
    assert other != control and tf.control_feature(model, 99) == control
    names = [n for n in model.weights if n.endswith("LayerNorm.weight")]
    mean_gamma = torch.stack([model.weights[n].abs() for n in names]).mean(dim=0)
    assert sorted(mean_gamma.tolist()).index(float(mean_gamma[other])) == 384 // 2 + 1


def test_int8_rounds_what_the_matmuls_read_the_layer_norms_output(runs) -> None:
    """Post-LN: the next layer's matmuls read the LayerNorm's output (largest |y| about 8), so
    one int8 scale costs little there; the input with its massive activation would lose most
    of its values, which the page says of it, and no matmul reads it."""
    run = runs[tf.PRESETS[0]]
    k = layer_norm_names().index(tf.FIRST_FFN)
    outputs, _ = tf.int8_errors(run.records[k].output[0].double().numpy())
    inputs, _ = tf.int8_errors(run.records[k].input[0].double().numpy())
    rel = "relative error (tokens after the first)"
    assert outputs[rel].iloc[0] < 0.1 < 0.4 < inputs[rel].iloc[0]
    assert outputs["values turned to 0"].iloc[0] < 0.3 < inputs["values turned to 0"].iloc[0]
    ratio = run.peak[k] / run.median[k]
    lead = tf.token_lead(run, tf.FIRST_FFN)
    assert ratio > tf.MASSIVE_RATIO and lead > tf.MASSIVE_LEAD
    assert lead == pytest.approx(float(tf.peak_answer(run, tf.FIRST_FFN).reason.split(
        ", ")[-1].split(" times")[0]), rel=0.01)  # the reply's "… times smaller"
    hat, _ = tf.int8_errors(run.records[k].replay().x_hat[0].double().numpy())
    text = tf.int8_input_text(inputs, outputs, ratio, lead, hat)
    assert "a massive activation" in text and "the LayerNorm keeps it out of" in text
    # the embeddings' largest |x| is 100 times the median |x| but only ~3 times the other
    # tokens' largest: an outlier, not one token's massive activation (the 27th review)
    first = layer_norm_names()[0]
    inputs0, _ = tf.int8_errors(run.records[0].input[0].double().numpy())
    outputs0, _ = tf.int8_errors(run.records[0].output[0].double().numpy())
    ratio0, lead0 = run.peak[0] / run.median[0], tf.token_lead(run, first)
    assert ratio0 > tf.MASSIVE_RATIO and 1.5 < lead0 < tf.MASSIVE_LEAD
    hat0, _ = tf.int8_errors(run.records[0].replay().x_hat[0].double().numpy())
    text0 = tf.int8_input_text(inputs0, outputs0, ratio0, lead0, hat0)
    assert "massive activation" not in text0.replace("not one token's massive activation", "")
    assert f"but only {tf.short(lead0)} times the other tokens' largest" in text0
    assert f"a relative error of {inputs[rel].iloc[0]:.1%}" in text
    # who reads each LayerNorm's output in this post-LN encoder
    names = layer_norm_names()
    assert tf.int8_reader(names, k) == "the next layer's Q, K and V read it"
    assert tf.int8_reader(names, 1) == "this layer's feed-forward reads it"  # after attention
    assert tf.int8_reader(names, 0) == "layer 0's Q, K and V read it"  # the embeddings'
    assert tf.int8_reader(names, 12).startswith("no matrix multiplication reads it")
    # the page's opening says so without calling it what a matmul reads (the 28th review)
    assert tf.int8_intro(names, 12).startswith("LLM.int8() rounds what a matrix "
                                               "multiplication reads. No matrix multiplication "
                                               "reads the output of LayerNorm 12")
    assert "Here that is" not in tf.int8_intro(names, 12)
    assert tf.int8_intro(names, k).endswith(": the next layer's Q, K and V read it.")


def test_int8_after_attention_says_which_step_makes_the_output_harder(runs) -> None:
    """LayerNorms after attention (1, 3, 5…): the input holds no massive activation and the
    output is the harder one to round. The sentence names the step that made it so from x̂'s
    own rounding: on LayerNorm 1 the [CLS] spike survives normalizing (x̂ ≈ 18, the 33rd
    review) and x̂ rounds no worse than the input, so γ is what takes the error up; the
    sentence never says γ made the outlier."""
    run = runs[tf.PRESETS[0]]
    rel = "relative error (tokens after the first)"
    checked = 0
    for k in (1, 3, 5, 7, 9, 11):
        record = run.records[k]
        outputs, _ = tf.int8_errors(record.output[0].double().numpy())
        inputs, _ = tf.int8_errors(record.input[0].double().numpy())
        hat, _ = tf.int8_errors(record.replay().x_hat[0].double().numpy())
        ratio = run.peak[k] / run.median[k]
        text = tf.int8_input_text(inputs, outputs, ratio,
                                  tf.token_lead(run, layer_norm_names()[k]), hat)
        assert "makes its outlier" not in text
        if outputs[rel].iloc[0] <= inputs[rel].iloc[0]:
            continue
        checked += 1
        assert ratio < tf.MASSIVE_RATIO and "massive" not in text
        assert f"relative error of {hat[rel].iloc[0]:.1%}" in text
        assert f"to {outputs[rel].iloc[0]:.1%}" in text
        if hat[rel].iloc[0] <= inputs[rel].iloc[0]:
            assert "no worse than the input: γ and β take it to" in text
        else:
            assert "normalizing alone makes it harder to round than the input" in text
    assert checked >= 3
    # LayerNorm 1: the output's largest value is where the input's is, [CLS], and x̂ there is
    # most of it already; γ there is not what makes it
    record = run.records[1]
    x_hat = record.replay().x_hat[0]
    where = int(record.output[0].abs().argmax())
    assert where == int(record.input[0].abs().argmax())
    assert float(x_hat.flatten()[where].abs()) > 15
