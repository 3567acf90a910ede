"""Real pretrained models written out in plain torch, each verified against its reference
implementation in the tests: ``lnviz.models.minilm()``, all-MiniLM-L6-v2 (a post-LN BERT
encoder, :mod:`lnviz.models.bert`), and ``lnviz.models.smollm2()``, SmolLM2-135M-Instruct (a
pre-norm Llama decoder with RMSNorm, :mod:`lnviz.models.llama`)."""

from lnviz.models.bert import MiniLM, ModelFileError, ModelRun, minilm
from lnviz.models.llama import DecoderRun, SmolLM2, smollm2

__all__ = ["DecoderRun", "MiniLM", "ModelFileError", "ModelRun", "SmolLM2", "minilm", "smollm2"]
