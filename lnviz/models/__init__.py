"""Real pretrained models written out in plain torch, each verified against its reference
implementation in the tests: ``lnviz.models.minilm()``, all-MiniLM-L6-v2 (a post-LN BERT
encoder, :mod:`lnviz.models.bert`); ``lnviz.models.smollm2()``, SmolLM2-135M-Instruct (a
pre-norm Llama decoder with RMSNorm, :mod:`lnviz.models.llama`); ``lnviz.models.gemma3()``,
Gemma 3 270M (sandwich norms, QK-norm and 1 + γ, :mod:`lnviz.models.gemma`);
``lnviz.models.efficientnet_lite0()``, EfficientNet-Lite0 (an image classifier with 49
BatchNorms, :mod:`lnviz.models.efficientnet`)."""

from lnviz.models.bert import MiniLM, ModelRun, minilm
from lnviz.models.efficientnet import EfficientNetLite0, ImageRun, efficientnet_lite0
from lnviz.models.gemma import Gemma3, gemma3
from lnviz.models.llama import DecoderRun, SmolLM2, smollm2
from lnviz.models.packaged import ModelFileError

__all__ = ["DecoderRun", "EfficientNetLite0", "Gemma3", "ImageRun", "MiniLM", "ModelFileError",
           "ModelRun", "SmolLM2", "efficientnet_lite0", "gemma3", "minilm", "smollm2"]
