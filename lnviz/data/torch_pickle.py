"""What a torch.save file's pickle may ask of its reader, checked before torch.load runs.

``torch.load(weights_only=True)`` runs no code from a file, but its allow-list still admits calls
whose cost the file chooses: ``builtins.bytearray(N)`` allocates N bytes, and
``_codecs.encode(text, "punycode")`` is pure Python and quadratic in the text. Nothing can stop
either once torch.load has started. So before it starts, :func:`check_tensor_pickle` reads the
pickle as an unpickler would, building nothing but a small stand-in for each value, and accepts
only what rebuilds tensors:

- torch's own rebuild functions (``_rebuild_tensor_v2``/``_v3``, ``_rebuild_parameter``) called
  on a storage of the file, with sizes and strides that stay inside that storage;
- storages named in the file, of the dtypes lnviz reads, whose declared size is the size of their
  record in the zip;
- ``collections.OrderedDict()`` (a state dict), dicts, lists and tuples of them, and the scalars a
  checkpoint holds beside its tensors: ints, floats, strings, bools and None.

Every other global, allow-listed by torch or not, is refused by name, and so is every opcode that
torch.save's pickle (protocol 2) does not write. The scan costs one pass over at most
`MAX_PICKLE_OPCODES` opcodes, and its stand-ins are no larger than the pickle itself; what
torch.load then builds is bounded by the same pickle and by the storages' sizes, which the caller
has checked against its element cap.
"""

from __future__ import annotations

import _compat_pickle
import pickletools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "ALLOWED_GLOBALS",
    "DTYPE_BYTES",
    "MAX_NDIM",
    "MAX_PICKLE_OPCODES",
    "PickleForeign",
    "PickleRefused",
    "check_tensor_pickle",
    "pickle_globals",
]

#: The most opcodes a torch.save pickle may hold. A state dict of 4,096 tensors with long names
#: (the most a file may hold) pickles to about 123,000; an Adam checkpoint's optimizer state adds
#: about as many again for its own tensors.
MAX_PICKLE_OPCODES = 500_000
#: Dims of one tensor, as .npy's reader allows (lnviz.data.files checks the same).
MAX_NDIM = 32

_REBUILD_V2 = "torch._utils._rebuild_tensor_v2"
_REBUILD_V3 = "torch._utils._rebuild_tensor_v3"
_REBUILD_PARAMETER = "torch._utils._rebuild_parameter"
_ORDERED_DICT = "collections.OrderedDict"
_UNTYPED = "torch.storage.UntypedStorage"
#: The dtypes lnviz reads (bytes per value), by the name torch gives them.
DTYPE_BYTES = {
    "bool": 1, "uint8": 1, "int8": 1, "int16": 2, "uint16": 2, "int32": 4, "uint32": 4,
    "int64": 8, "uint64": 8, "float16": 2, "bfloat16": 2, "float32": 4, "float64": 8,
    "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1, "float8_e5m2fnuz": 1,
}
#: torch.save's typed storage classes, by the dtype they hold.
_STORAGES = {
    "torch.BoolStorage": "bool", "torch.ByteStorage": "uint8", "torch.CharStorage": "int8",
    "torch.ShortStorage": "int16", "torch.IntStorage": "int32", "torch.LongStorage": "int64",
    "torch.HalfStorage": "float16", "torch.BFloat16Storage": "bfloat16",
    "torch.FloatStorage": "float32", "torch.DoubleStorage": "float64", _UNTYPED: "uint8",
}
_DTYPE_GLOBALS = {f"torch.{name}": name for name in DTYPE_BYTES}
ALLOWED_GLOBALS = frozenset(
    {_REBUILD_V2, _REBUILD_V3, _REBUILD_PARAMETER, _ORDERED_DICT} | set(_STORAGES)
    | set(_DTYPE_GLOBALS))
#: What torch.save writes with protocol 2 (the only one it uses unless told otherwise).
_OPCODES = frozenset({
    "PROTO", "STOP", "GLOBAL", "REDUCE", "BUILD", "BINPERSID", "MARK", "TUPLE", "EMPTY_TUPLE",
    "TUPLE1", "TUPLE2", "TUPLE3", "EMPTY_LIST", "APPEND", "APPENDS", "EMPTY_DICT", "SETITEM",
    "SETITEMS", "BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "BININT", "BININT1",
    "BININT2", "LONG1", "BINFLOAT", "NONE", "NEWTRUE", "NEWFALSE", "BINUNICODE",
})


class PickleRefused(ValueError):
    """The pickle asks for more than tensors; the message says what, for a learner."""


class PickleForeign(PickleRefused):
    """The pickle looks up globals outside `ALLOWED_GLOBALS`; `names` lists them all."""

    def __init__(self, names: list[str]) -> None:
        super().__init__(", ".join(names))
        self.names = names


@dataclass(frozen=True)
class _Global:
    name: str


@dataclass(frozen=True)
class _Storage:
    key: str
    dtype: str
    numel: int  # in values of dtype (bytes for an untyped storage)


@dataclass(frozen=True)
class _Tensor:
    dtype: str
    shape: tuple[int, ...]


class _OrderedDict(dict):
    """What ``collections.OrderedDict()`` returns, as the scan sees it."""

    built = False  # whether BUILD has set its state (torch.save does once: its ``_metadata``)


_MARK = object()


def pickle_globals(pickle_bytes: bytes) -> list[str]:
    """The module.name of every global a pickle would import, read without running it
    (pickletools only disassembles); best effort, for a message."""
    names: list[str] = []
    strings: list[str] = []
    try:
        for opcode, arg, _ in pickletools.genops(pickle_bytes):
            if opcode.name in ("GLOBAL", "INST"):
                names.append(_global_name(arg))
            elif isinstance(arg, str) and "UNICODE" in opcode.name:
                strings.append(arg)
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                names.append(f"{strings[-2]}.{strings[-1]}")
    except Exception:  # a damaged pickle: what was read so far
        pass
    return sorted(set(names))


def check_tensor_pickle(pickle_bytes: bytes, records: Mapping[str, int], *,
                        max_tensors: int) -> None:
    """Refuse, with `PickleRefused`, a torch.save pickle that asks for more than tensors.

    `records` maps each storage key of the file (the name after ``data/``) to its size in bytes;
    the pickle may rebuild at most `max_tensors` tensors. Raises `PickleForeign` naming every
    global outside `ALLOWED_GLOBALS` (a first pass), then `PickleRefused` for any other opcode,
    call, storage or argument that torch.save would not write for tensors, dicts, lists, tuples
    and plain scalars.
    """
    ops = list(_opcodes(pickle_bytes))
    foreign = sorted({_global_name(arg) for name, arg in ops if name == "GLOBAL"}
                     - ALLOWED_GLOBALS)
    if foreign:
        raise PickleForeign(foreign)
    for name, arg in ops:
        if name not in _OPCODES:
            raise PickleRefused(f"its pickle uses the operation {name}, which torch.save's "
                                "pickle does not write")
        if name == "PROTO" and arg != 2:
            raise PickleRefused(f"its pickle is protocol {arg}; torch.save writes protocol 2")
    _Scan(records, max_tensors).run(ops)


def _global_name(arg: Any) -> str:
    """``"module name"`` as Python 3 resolves it: a protocol 2 pickle may say ``__builtin__``
    for ``builtins`` (pickle's own fix_imports mapping)."""
    module, _, name = str(arg).partition(" ")
    if (module, name) in _compat_pickle.NAME_MAPPING:
        module, name = _compat_pickle.NAME_MAPPING[module, name]
    else:
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
    return f"{module}.{name}"


def _opcodes(pickle_bytes: bytes) -> Iterator[tuple[str, Any]]:
    count = 0
    try:
        for opcode, arg, _ in pickletools.genops(pickle_bytes):
            count += 1
            if count > MAX_PICKLE_OPCODES:
                raise PickleRefused(
                    f"its pickle holds more than {MAX_PICKLE_OPCODES:,} operations (a state dict "
                    "of 4,096 tensors needs about 123,000)")
            yield opcode.name, arg
    except PickleRefused:
        raise
    except Exception as err:  # genops' own ValueError for a damaged or truncated pickle
        raise PickleRefused(f"its pickle is damaged ({str(err)[:120]})") from err


class _Scan:
    """A stack machine for the opcodes in `_OPCODES` whose values are stand-ins: scalars as
    themselves, containers as plain ones, storages and tensors as `_Storage` and `_Tensor`."""

    def __init__(self, records: Mapping[str, int], max_tensors: int) -> None:
        self.records = records
        self.max_tensors = max_tensors
        self.rebuilt = 0
        self.stack: list[Any] = []
        self.memo: dict[int, Any] = {}
        self.dtypes: dict[str, str] = {}

    def run(self, ops: list[tuple[str, Any]]) -> None:
        stopped = False
        for name, arg in ops:
            if stopped:
                raise PickleRefused("its pickle goes on after its end (STOP)")
            try:
                stopped = self.step(name, arg)
            except PickleRefused:
                raise
            except (IndexError, KeyError, TypeError, AttributeError, RecursionError) as err:
                raise PickleRefused(f"its pickle is damaged ({name}: {str(err)[:80]})") from err
        if not stopped or len(self.stack) != 1 or self.stack[0] is _MARK:
            raise PickleRefused("its pickle is damaged (it does not end with one value)")

    def pop_mark(self) -> list[Any]:
        items: list[Any] = []
        while True:
            item = self.stack.pop()
            if item is _MARK:
                items.reverse()
                return items
            items.append(item)

    def step(self, name: str, arg: Any) -> bool:
        stack = self.stack
        if name == "STOP":
            return True
        if name in ("BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT", "BINUNICODE"):
            stack.append(arg)
        elif name in ("NONE", "NEWTRUE", "NEWFALSE"):
            stack.append({"NONE": None, "NEWTRUE": True, "NEWFALSE": False}[name])
        elif name == "GLOBAL":
            stack.append(_Global(_global_name(arg)))
        elif name == "MARK":
            stack.append(_MARK)
        elif name in ("EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3"):
            count = ("EMPTY_TUPLE", "TUPLE1", "TUPLE2", "TUPLE3").index(name)
            items = stack[len(stack) - count:] if count else []
            if len(items) != count or any(item is _MARK for item in items):
                raise PickleRefused("its pickle is damaged (a tuple without its items)")
            del stack[len(stack) - count:]
            stack.append(tuple(items))
        elif name == "TUPLE":
            stack.append(tuple(self.pop_mark()))
        elif name in ("EMPTY_LIST", "EMPTY_DICT"):
            stack.append([] if name == "EMPTY_LIST" else {})
        elif name in ("APPEND", "APPENDS"):
            items = [stack.pop()] if name == "APPEND" else self.pop_mark()
            _of(stack[-1], list, "appends to").extend(items)
        elif name in ("SETITEM", "SETITEMS"):
            items = stack[-2:] if name == "SETITEM" else self.pop_mark()
            if name == "SETITEM":
                del stack[-2:]
            if len(items) % 2:
                raise PickleRefused("its pickle is damaged (a key without its value)")
            target = _of(stack[-1], dict, "sets items of")
            for key, value in zip(items[::2], items[1::2], strict=True):
                if not _plain_key(key):
                    raise PickleRefused(f"its pickle has a dict key of type {type(key).__name__}"
                                        " outside what a checkpoint uses (text, or a whole "
                                        "number below 2**31)")
                target[key] = value
        elif name in ("BINPUT", "LONG_BINPUT"):
            self.memo[arg] = stack[-1]
        elif name in ("BINGET", "LONG_BINGET"):
            stack.append(self.memo[arg])
        elif name == "BINPERSID":
            stack.append(self.storage(stack.pop()))
        elif name == "REDUCE":
            args = stack.pop()
            stack[-1] = self.call(stack[-1], args)
        elif name == "BUILD":
            # torch's reader updates the object's __dict__ with the state at every BUILD: one
            # state dict of k keys built m times over costs k·m (137 s from 807 KB), so a state
            # dict is built once, with what torch.save writes there, its ``_metadata``
            state, target = stack.pop(), stack[-1]
            if not isinstance(target, _OrderedDict) or not isinstance(state, dict):
                raise PickleRefused("its pickle sets the state of an object other than a state "
                                    "dict (BUILD)")
            if target.built or not set(state) <= {"_metadata"}:
                raise PickleRefused("its pickle sets a state dict's state other than torch.save "
                                    "does (once, its _metadata)")
            target.built = True
        return False

    def storage(self, pid: Any) -> _Storage:
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"
                and isinstance(pid[1], _Global) and pid[1].name in _STORAGES
                and isinstance(pid[2], str) and isinstance(pid[3], str)
                and _natural(pid[4])):
            raise PickleRefused("its pickle refers to a storage in a form torch.save does not "
                                "write")
        _, kind, key, _location, numel = pid
        dtype = _STORAGES[kind.name]
        if key not in self.records:
            raise PickleRefused(f"its pickle names storage {key!r}, which the file does not hold")
        # torch keeps a storage by its key as first read: read again as another dtype, its bytes
        # would be other values than the ones checked here
        if self.dtypes.setdefault(key, dtype) != dtype:
            raise PickleRefused(f"its pickle reads storage {key!r} as {self.dtypes[key]} and as "
                                f"{dtype}")
        if self.records[key] != numel * DTYPE_BYTES[dtype]:
            raise PickleRefused(
                f"storage {key!r} is declared as {numel} values of {dtype} but its record holds "
                f"{self.records[key]} bytes; the file is damaged")
        return _Storage(key, dtype, numel)

    def call(self, function: Any, args: Any) -> Any:
        if not isinstance(function, _Global) or not isinstance(args, tuple):
            raise PickleRefused("its pickle calls something that is not a function it names")
        name = function.name
        if name == _ORDERED_DICT and args == ():
            return _OrderedDict()
        if name == _REBUILD_V2 and len(args) in (6, 7):
            return self.tensor(args[0], args[0].dtype if isinstance(args[0], _Storage) else "",
                               args[1:6], args[6:])
        if name == _REBUILD_V3 and len(args) in (7, 8) and isinstance(args[6], _Global) \
                and args[6].name in _DTYPE_GLOBALS:
            return self.tensor(args[0], _DTYPE_GLOBALS[args[6].name], args[1:6], args[7:])
        if name == _REBUILD_PARAMETER and len(args) == 3 and isinstance(args[0], _Tensor) \
                and isinstance(args[1], bool) and _empty_hooks(args[2]):
            return args[0]
        raise PickleRefused(f"its pickle calls {name} in a way torch.save does not write for a "
                            "tensor or a state dict")

    def tensor(self, storage: Any, dtype: str, args: tuple[Any, ...],
               metadata: tuple[Any, ...]) -> _Tensor:
        offset, size, stride, requires_grad, hooks = args
        # each rebuild is a tensor of its own, even from memoized arguments: 160,000 of them
        # cost seconds and 166 MB before the count of tensors was checked after torch.load
        self.rebuilt += 1
        if self.rebuilt > self.max_tensors:
            raise PickleRefused(f"its pickle rebuilds more than {self.max_tensors} tensors, the "
                                "most a file may hold")
        # metadata: torch.save writes a tensor's conj/neg bits there; set, numpy refuses them
        if not (isinstance(storage, _Storage) and _natural(offset) and _dims(size)
                and _dims(stride) and len(size) == len(stride) and isinstance(requires_grad, bool)
                and _empty_hooks(hooks)
                and all(isinstance(m, dict) and not any(m.values()) for m in metadata)):
            raise PickleRefused("its pickle rebuilds a tensor from arguments torch.save does not "
                                "write")
        if storage.dtype == "uint8" and dtype != "uint8":  # an untyped storage: bytes
            capacity = storage.numel // DTYPE_BYTES[dtype]
        elif storage.dtype != dtype:
            raise PickleRefused(f"its pickle reads a {storage.dtype} storage as {dtype}")
        else:
            capacity = storage.numel
        if offset > capacity or (all(size) and offset + sum(
                (n - 1) * s for n, s in zip(size, stride, strict=True)) >= capacity):
            raise PickleRefused(
                f"a tensor of shape {tuple(size)} reaches past the end of its storage "
                f"{storage.key!r} ({capacity} values); the file is damaged")
        return _Tensor(dtype, tuple(size))


def _plain_key(key: Any) -> bool:
    """A key a checkpoint uses: text, or a whole number below 2**31 (a parameter's index).
    Anything else is refused before it is hashed: a tuple nested 200,000 deep overflows the C
    stack in hash(), and whole numbers that differ by 2**61 − 1 all hash alike (a dict of them
    costs quadratic time to build)."""
    if isinstance(key, str):
        return True
    return isinstance(key, int) and not isinstance(key, bool) and -(2**31) < key < 2**31


def _natural(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _dims(value: Any) -> bool:
    """Sizes or strides: at most 32 whole numbers, each below 2**31 (no dim of a tensor within
    the caps is longer; an empty one beside dims of 2**62 overflowed numpy)."""
    return (isinstance(value, tuple) and len(value) <= MAX_NDIM
            and all(_natural(n) and n < 2**31 for n in value))


def _empty_hooks(value: Any) -> bool:
    return isinstance(value, dict) and not value


def _of(value: Any, kind: type, what: str) -> Any:
    if not isinstance(value, kind):
        raise PickleRefused(f"its pickle {what} a {type(value).__name__}")
    return value
