"""Real pretrained models written out in plain torch, each verified against its reference
implementation in the tests: ``lnviz.models.minilm()``, all-MiniLM-L6-v2 (a BERT encoder,
:mod:`lnviz.models.bert`)."""

from lnviz.models.bert import MiniLM, ModelFileError, ModelRun, minilm

__all__ = ["MiniLM", "ModelFileError", "ModelRun", "minilm"]
