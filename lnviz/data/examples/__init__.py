"""The Model inspector's example files, and the small seeded models that make them.

Two models nobody has to download, built from a seed (untrained: their weights are torch's
initialisation, then set as :func:`example_model` describes):

- ``transformer``: an embedding and torch's ``nn.TransformerEncoder``, two pre-LN layers and a
  final LayerNorm, d_model 48. One embedding channel (:data:`OUTLIER_CHANNEL`) is multiplied
  by :data:`OUTLIER_SCALE`, as trained language models carry a few channels far larger than the
  rest ("massive activations"), so that the inspector has outliers to show.
- ``cnn``: convolutions with ``BatchNorm2d``, ``GroupNorm`` and ``InstanceNorm2d``; BatchNorm's
  running statistics come from :data:`WARMUP_PASSES` training forwards on random images.

:data:`EXAMPLE_CAPTURE` is ``lnviz.capture`` of both in evaluation mode on one seeded input;
:data:`EXAMPLE_CHECKPOINT` is their state dict as .safetensors. ``python -m
lnviz.data.examples`` writes both again; tests/test_inspector.py checks that the shipped files
equal what this module produces.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from lnviz.capture import Capture, capture

__all__ = [
    "D_MODEL",
    "EXAMPLE_CAPTURE",
    "EXAMPLE_CHECKPOINT",
    "OUTLIER_CHANNEL",
    "OUTLIER_SCALE",
    "SEED",
    "TinyModels",
    "example_capture",
    "example_inputs",
    "example_model",
    "write_examples",
]

FOLDER = Path(__file__).resolve().parent
EXAMPLE_CAPTURE = FOLDER / "tiny_models.capture.safetensors"
EXAMPLE_CHECKPOINT = FOLDER / "tiny_models.checkpoint.safetensors"
SEED = 0
D_MODEL = 48
VOCAB = 40
#: The embedding channel made large, and by how much.
OUTLIER_CHANNEL, OUTLIER_SCALE = 7, 40.0
WARMUP_PASSES = 5


class TinyModels(nn.Module):
    """A pre-LN transformer encoder on tokens and a small CNN on images, run side by side."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, nhead=4, dim_feedforward=D_MODEL,
                                           dropout=0.0, batch_first=True, norm_first=True)
        # torch offers its nested-tensor path to post-LN stacks only (and warns otherwise)
        self.transformer = nn.TransformerEncoder(layer, num_layers=2, norm=nn.LayerNorm(D_MODEL),
                                                 enable_nested_tensor=False)
        self.cnn = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(4, 8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.InstanceNorm2d(8, affine=True), nn.ReLU(),
        )

    def forward(self, tokens: torch.Tensor, images: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.transformer(self.embed(tokens)), self.cnn(images)


def example_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The capture's input: 2 sequences of 10 tokens, and 4 RGB images of 8 × 8."""
    generator = torch.Generator().manual_seed(SEED + 1)
    tokens = torch.randint(0, VOCAB, (2, 10), generator=generator)
    images = torch.randn(4, 3, 8, 8, generator=generator) * 2 + 0.5
    return tokens, images


def example_model() -> TinyModels:
    """The seeded model in evaluation mode: torch's initialisation from :data:`SEED`; every
    norm's γ drawn from 1 + 0.2·N(0, 1) and β from 0.1·N(0, 1); the outlier channel scaled in
    the embedding; and γ of that channel set to 0.05 in the first layer's first LayerNorm (a
    layer that nearly silences its outlier). BatchNorm's running statistics are then built by
    :data:`WARMUP_PASSES` training forwards of the CNN on random images."""
    torch.manual_seed(SEED)
    model = TinyModels()
    generator = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, nn.LayerNorm | nn.BatchNorm2d | nn.GroupNorm
                          | nn.InstanceNorm2d):
                module.weight.copy_(1 + 0.2 * torch.randn(module.weight.shape,
                                                          generator=generator))
                module.bias.copy_(0.1 * torch.randn(module.bias.shape, generator=generator))
        model.embed.weight[:, OUTLIER_CHANNEL] *= OUTLIER_SCALE
        model.transformer.layers[0].norm1.weight[OUTLIER_CHANNEL] = 0.05
        model.cnn.train()
        for _ in range(WARMUP_PASSES):
            model.cnn(torch.randn(4, 3, 8, 8, generator=generator) * 2 + 0.5)
    return model.eval()


def example_capture() -> Capture:
    """``lnviz.capture`` of :func:`example_model` on :func:`example_inputs`."""
    return capture(example_model(), *example_inputs())


def write_examples(folder: Path = FOLDER) -> tuple[Path, Path]:
    """Write the example capture and checkpoint into ``folder``; returns their paths."""
    from safetensors.torch import save_file

    capture_path = folder / EXAMPLE_CAPTURE.name
    checkpoint_path = folder / EXAMPLE_CHECKPOINT.name
    example_capture().save(capture_path)
    state = {key: value.detach().contiguous() for key, value in
             example_model().state_dict().items()}
    save_file(state, str(checkpoint_path))
    return capture_path, checkpoint_path
