"""lnviz's GGUF reader (lnviz.models.gguf_file) against gguf's own, for the language models'
tests: gguf's reader of a whole file, and the comparison of the two readings."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest


def ggufs_reader(path: Path):  # -> gguf.GGUFReader
    """gguf's own reader of the file at ``path``, over the file's bytes seen as a plain array
    instead of its ``numpy.memmap``: each of its many slices of a memmap goes through numpy's
    Python-level subclass hooks (12 s for Gemma 3's file here, 3 s this way). The parsing is
    gguf's, unchanged; transformers reads the reference models through it."""
    from gguf import GGUFReader

    class PlainReader(GGUFReader):
        @property
        def data(self) -> np.ndarray:
            return self._plain

        @data.setter
        def data(self, mapping: np.ndarray) -> None:
            self._plain = np.asarray(mapping)

    return PlainReader(path)


def transformers_reference(path: Path, reader, model_class):  # -> (tokenizer, model)
    """transformers' tokenizer and ``model_class`` (its ``…ForCausalLM``) from the GGUF file at
    ``path``, in float32 and evaluation mode. transformers reads the file with gguf's reader
    once for the tokenizer, the configuration and the weights each, and builds gguf's
    tensor-name map once per submodule: while they load, the reader it asks for is ``reader``
    (gguf's, read once by the caller), and the name map is built once per architecture and
    depth (both pure functions of their arguments)."""
    import functools

    import gguf
    import torch
    from transformers import AutoTokenizer

    def read(at, *args, **kwargs):
        same = Path(at).resolve() == path.resolve() and not args and not kwargs
        return reader if same else gguf.GGUFReader(at, *args, **kwargs)

    folder = str(path.parent)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "GGUFReader", read)
        patch.setattr(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map))
        tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=path.name)
        net = model_class.from_pretrained(folder, gguf_file=path.name, dtype=torch.float32)
    return tokenizer, net.eval()


def _same(ours, theirs) -> bool:
    """Equal, and of the same Python types all the way down (a list's items too)."""
    if isinstance(theirs, list):
        return (isinstance(ours, list) and len(ours) == len(theirs)
                and all(_same(a, b) for a, b in zip(ours, theirs, strict=True)))
    return type(ours) is type(theirs) and ours == theirs


def assert_reads_as_gguf(ours, theirs) -> None:
    """``ours`` (lnviz's :class:`~lnviz.models.gguf_file.GGUFFile`) holds what gguf's reader
    ``theirs`` read from the same bytes: the version, every metadata field's value in the
    file's order (gguf's ``contents()``, types included), and every tensor's name, type,
    dimensions and data (dtype, shape and values)."""
    header = ("GGUF.version", "GGUF.tensor_count", "GGUF.kv_count")
    assert ours.version == theirs.fields["GGUF.version"].contents()
    assert list(ours.fields) == [k for k in theirs.fields if k not in header]
    for key, field in theirs.fields.items():
        if key not in header:
            assert _same(ours.fields[key], field.contents()), key
    assert len(ours.tensors) == len(theirs.tensors)
    for mine, tensor in zip(ours.tensors, theirs.tensors, strict=True):
        assert (mine.name, mine.tensor_type) == (tensor.name, tensor.tensor_type)
        assert list(mine.shape) == tensor.shape.tolist(), mine.name
        assert mine.data.dtype == tensor.data.dtype, mine.name
        assert mine.data.shape == tensor.data.shape, mine.name
        assert np.array_equal(mine.data, tensor.data), mine.name
