"""Texts the model lessons start from (any typed text works)."""

from __future__ import annotations

__all__ = ["PAIRS"]

#: Sentence pairs whose similarity MiniLM's ablation compares: two close, two far apart; Beyond
#: LayerNorm's yardstick takes the first (two sentences of one meaning).
PAIRS = (
    ("A man is playing a guitar.", "Someone plays an instrument."),
    ("The cat sat on the mat.", "A kitten was resting on the rug."),
    ("The cat sat on the mat.", "Stock markets fell sharply today."),
    ("How do I bake bread?", "What is the recipe for a loaf of bread?"),
)
