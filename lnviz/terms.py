"""The words lnviz's layers share: the norms' kinds and the tensors' layouts, each with one
spelling everywhere (:class:`NormKind`, :class:`Layout`), and :func:`listed` for the sentences.

Both are :class:`enum.StrEnum`: a member *is* its spelling (``NormKind.LAYER == "LayerNorm"``,
``f"{NormKind.LAYER}"`` is ``"LayerNorm"``, and so is its repr), so a URL, a JSON file, a
message, a generated line of code or a learner's choice carries the same text that the code
compares. A norm's kind is the name learners read and torch's module
carries (``torch.nn.LayerNorm``); its function is ``lnviz.layer_norm`` (:attr:`NormKind.function`).
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

try:
    from enum import StrEnum
except ImportError:  # Python 3.10, which pyproject.toml admits: the same behaviour, written out
    class StrEnum(str, Enum):  # type: ignore[no-redef]
        """A str whose members print as their value (Python 3.11's enum.StrEnum)."""

        def __str__(self) -> str:
            return str(self.value)

        def __format__(self, spec: str) -> str:
            return str(self.value).__format__(spec)

__all__ = ["Layout", "NormKind", "listed"]


class _Term(StrEnum):
    """A member whose repr is its spelling's (``'LayerNorm'``): a message listing kinds, or code
    written with ``{kind!r}``, shows the text a learner types."""

    def __repr__(self) -> str:
        return repr(self.value)


class NormKind(_Term):
    """The five normalizations lnviz computes."""

    LAYER = "LayerNorm"
    RMS = "RMSNorm"
    BATCH = "BatchNorm"
    GROUP = "GroupNorm"
    INSTANCE = "InstanceNorm"

    @property
    def function(self) -> str:
        """The name of its function in :mod:`lnviz.norms` and ``torch.nn.functional``:
        "layer_norm", "rms_norm", …"""
        return _FUNCTIONS[self]

    @classmethod
    def parse(cls, text: str) -> NormKind:
        """The kind ``text`` names: its spelling here, or the function's name ("layer_norm", as
        capture files of version 1 wrote it), or the short name benchmark files of before wrote
        ("layer"). Raises ValueError for anything else."""
        for kind in cls:
            if text in (kind.value, kind.function, kind.function.removesuffix("_norm")):
                return kind
        raise ValueError(f"unknown norm {text!r}; expected one of {', '.join(cls)}")


_FUNCTIONS = {NormKind.LAYER: "layer_norm", NormKind.RMS: "rms_norm",
              NormKind.BATCH: "batch_norm", NormKind.GROUP: "group_norm",
              NormKind.INSTANCE: "instance_norm"}


class Layout(_Term):
    """How a tensor's dims are read: N the batch, C the features (channels), L a sequence's
    positions, H and W an image's."""

    NC = "NC"
    NLC = "NLC"
    NCHW = "NCHW"


def listed(items: Sequence[str], last: str = "and") -> str:
    """"a, b and c" (with ``last="or"``: "a, b or c"); one item alone; "" for none."""
    items = list(items)
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {last} {items[-1]}"
