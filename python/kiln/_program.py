"""Program and Method: load a .kiln file and run its methods on numpy/DLPack/buffer inputs."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from . import _kiln, _registry
from ._profile import Profile
from .errors import InvalidArgument, InvalidInput, MissingBackend, MissingKernel

DEFAULT_MAX_MEMORY_BYTES = 4 << 30

# kiln dtype names (runtime/include/kiln/tensor.h) -> numpy dtype names.
_NUMPY_DTYPES = {
    "f32": "float32", "f64": "float64", "i64": "int64", "i32": "int32", "bool": "bool",
    "f16": "float16", "bf16": "bfloat16", "u8": "uint8", "i8": "int8",
}


@dataclass(frozen=True)
class TensorSpec:
    """An input, output or state of a method: name, dtype (numpy name), largest
    shape, the dims that may be smaller at run time, and the smallest shape."""

    name: str
    dtype: str
    shape: tuple
    dynamic_dims: tuple
    min_shape: tuple = ()

    @classmethod
    def _from_native(cls, d: dict) -> "TensorSpec":
        return cls(d["name"], _NUMPY_DTYPES[d["dtype"]], tuple(d["shape"]), tuple(d["dynamic_dims"]),
                   tuple(d["min_shape"]))


@dataclass(frozen=True)
class MethodSpec:
    """What a method takes and returns, and its planned memory, read without loading it."""

    name: str
    input_specs: list
    output_specs: list
    arena_bytes: list
    num_instructions: int
    # Mutable state (module buffers the method updates), kept across calls.
    state_specs: list

    @classmethod
    def _from_native(cls, d: dict) -> "MethodSpec":
        return cls(d["name"], [TensorSpec._from_native(s) for s in d["inputs"]],
                   [TensorSpec._from_native(s) for s in d["outputs"]], list(d["arena_bytes"]),
                   d["num_instructions"], [TensorSpec._from_native(s) for s in d["state"]])


@dataclass(frozen=True)
class InstructionInfo:
    """How one instruction of a loaded method is served: its kind ("kernel",
    "backend", "move" or "int_op"), operator, the library and tier of the
    kernel that serves it (0: portable reference, 100: optimized), the bytes of
    packed weights it created and the scratch it planned."""

    kind: str
    op: str
    library: str
    tier: int
    packed_bytes: int
    scratch_bytes: int


def _as_input(x):
    """An input the native layer can take: tensors that require grad are
    detached (DLPack refuses them), arrays, DLPack and buffer objects pass
    through, anything else goes through np.asarray."""
    if isinstance(x, np.ndarray):
        return x
    if getattr(x, "requires_grad", False) and hasattr(x, "detach"):
        x = x.detach()  # DLPack refuses tensors that require grad; the values are the same
    if hasattr(x, "__dlpack__"):
        return x
    try:
        memoryview(x)
        return x
    except TypeError:
        return np.asarray(x)


class Method:
    """A loaded method: planned memory is allocated once, here, and reused by every call.

    Safe to call from many threads: calls on one Method take turns (a call waits,
    with the GIL released, for the one in progress), so each caller gets its own
    outputs and state advances one whole call at a time. For calls that run in
    parallel, give each thread its own Method (Program.load_method): they share
    the program's packed weights.
    """

    def __init__(self, native):
        self._native = native
        self.spec = MethodSpec._from_native(native.spec)
        self.name: str = self.spec.name
        self.input_specs = self.spec.input_specs
        self.output_specs = self.spec.output_specs
        self.state_specs = self.spec.state_specs
        self.arena_bytes: list[int] = self.spec.arena_bytes
        self.num_instructions: int = self.spec.num_instructions

    @property
    def instructions(self) -> list[InstructionInfo]:
        """Per instruction: which kernel (library, tier) or backend serves it."""
        return [InstructionInfo(*i) for i in self._native.instructions]

    @property
    def isa(self) -> str:
        """The instruction-set level the optimized kernels were prepared for."""
        return self._native.isa

    @property
    def gemm_precision(self) -> str:
        """"float32" or "bfloat16": how its products with a constant weight compute (kiln.load's gemm_precision)."""
        return self._native.gemm_precision

    def run(self, *inputs, **named) -> list[np.ndarray]:
        """Run the method on its inputs, given in order or by name (the names of
        input_specs); returns a list with one new numpy array per output."""
        if named:
            inputs = self._by_position(inputs, named)
        try:
            return self._native.run(inputs)
        except TypeError:
            # Not an array, DLPack or buffer object (a list, a scalar, a tensor
            # that requires grad): convert what can be converted and retry.
            pass
        args = tuple(_as_input(x) for x in inputs)
        try:
            return self._native.run(args)
        except TypeError as e:
            raise InvalidInput(f"method '{self.name}': an input is not an array, DLPack or buffer object: "
                               f"{e}") from None

    __call__ = run

    def profile(self, *inputs, runs: int = 1, **named) -> Profile:
        """Run the method `runs` times with the profiler on, for the same inputs
        (given as to run(); `runs` is taken, so an input of that name goes by
        position). Returns a Profile: per instruction the operator, the kernel
        that served it, its shapes and wall time; per thread-pool chunk its
        thread and time; profile.outputs are the last call's outputs."""
        if not isinstance(runs, int) or isinstance(runs, bool) or runs < 1:
            raise InvalidArgument(f"profile: runs must be a positive int, got {runs!r}")
        if named:
            inputs = self._by_position(inputs, named)
        args = tuple(_as_input(x) for x in inputs)
        native = _kiln.Profile()
        infos = self.instructions
        try:
            for _ in range(runs):
                outputs = self._native.run_profiled(args, native)
        except TypeError as e:
            raise InvalidInput(f"method '{self.name}': an input is not an array, DLPack or buffer object: "
                               f"{e}") from None
        return Profile(native, infos, outputs)

    def _by_position(self, inputs: tuple, named: dict) -> tuple:
        names = [s.name for s in self.input_specs]
        args = list(inputs) + [None] * (len(names) - len(inputs))
        given = [True] * len(inputs) + [False] * (len(names) - len(inputs))
        for key, value in named.items():
            if key not in names:
                raise InvalidInput(f"method '{self.name}' has no input named '{key}' (its inputs: {', '.join(names)})")
            i = names.index(key)
            if given[i]:
                raise InvalidInput(f"method '{self.name}': input '{key}' is given both by position and by name")
            args[i], given[i] = value, True
        missing = [n for n, g in zip(names, given) if not g]
        if missing:
            raise InvalidInput(f"method '{self.name}': missing input(s) {', '.join(missing)}")
        return tuple(args)

    def reset_state(self) -> None:
        """Restore this method's state (e.g. a KV cache) to its value in the file.

        State persists across calls of one loaded Method; each Method object
        (each Program.method() of each loaded Program) has its own copy.
        """
        self._native.reset_state()

    def __repr__(self) -> str:
        ins = ", ".join(f"{s.name}: {s.dtype}{list(s.shape)}" for s in self.input_specs)
        outs = ", ".join(f"{s.dtype}{list(s.shape)}" for s in self.output_specs)
        return f"<kiln.Method {self.name}({ins}) -> ({outs})>"


class Program:
    """A verified .kiln program. Methods are loaded on first use and then reused."""

    def __init__(self, native):
        self._native = native
        self._methods: dict[str, Method] = {}
        self._methods_lock = threading.Lock()

    @property
    def method_names(self) -> list[str]:
        return list(self._native.method_names)

    @property
    def size_bytes(self) -> int:
        return self._native.size_bytes

    @property
    def producer(self) -> str:
        return self._native.producer

    @property
    def packed_bytes(self) -> int:
        """Bytes of prepacked weights the loaded methods created (shared by all methods)."""
        return self._native.packed_bytes

    @property
    def packed_mapped_bytes(self) -> int:
        """The part of packed_bytes used in place from the packed-weight cache file (docs/memory.md)."""
        return self._native.packed_mapped_bytes

    @property
    def packed_cache_report(self) -> str:
        """What happened to the packed-weight cache file ("" when no cache was asked for)."""
        return self._native.packed_cache_report

    @property
    def metadata_keys(self) -> list[str]:
        """Keys of the program's named metadata, in file order (docs/format.md, Metadata)."""
        return list(self._native.metadata_keys)

    def metadata(self, key: str) -> bytes:
        """The bytes of metadata `key`; raises kiln.NotFound when the program has none."""
        return self._native.metadata(key)

    def method_spec(self, name: str = "forward") -> MethodSpec:
        """Inputs, outputs and planned memory of method `name`, without loading it
        (no kernel is resolved, no memory is allocated)."""
        return MethodSpec._from_native(self._native.method_spec(_method_name(name)))

    def method(self, name: str = "forward") -> Method:
        """The loaded method `name` (kernels resolved, memory planned) — loaded
        once and then reused, state included: prog.forward(...) calls it."""
        m = self._methods.get(name)
        if m is None:
            _method_name(name)
            # Many threads may ask first at once: they must all get one Method
            # (one state), so it is loaded once, under a lock.
            with self._methods_lock:
                m = self._methods.get(name)
                if m is None:
                    m = self._methods[name] = self.load_method(name)
        return m

    def load_method(self, name: str = "forward") -> Method:
        """A new, independent Method `name`: its own memory and its own state
        (e.g. a second KV cache for a second conversation)."""
        _method_name(name)
        try:
            native = self._native.load_method(name)
        except (MissingKernel, MissingBackend):
            # Installed plugins may provide it: load them once, then retry.
            if not _registry._load_plugins_once():
                raise
            native = self._native.load_method(name)
        return Method(native)

    def reset_state(self) -> None:
        """Reset the state of every method loaded through method() / attributes."""
        for m in self._methods.values():
            m.reset_state()

    def run(self, method_name: str, *inputs) -> list[np.ndarray]:
        return self.method(method_name).run(*inputs)

    def __getattr__(self, name: str):
        # prog.forward(x), prog.encode(y): methods of the program as attributes.
        if not name.startswith("_") and name in self._native.method_names:
            return self.method(name)
        raise AttributeError(f"kiln.Program has no attribute or method {name!r}")

    def __repr__(self) -> str:
        return f"<kiln.Program methods={self.method_names} size={self.size_bytes}B>"


def _method_name(name) -> str:
    if not isinstance(name, str):
        raise InvalidArgument(f"method name must be a str, not {type(name).__name__}")
    return name


def _packed_cache_option(packed_cache) -> str:
    """kiln.load's packed_cache as LoadOptions::packed_cache spells it."""
    if packed_cache is None:
        return ""  # KILN_PACKED_CACHE, else none
    if packed_cache is True or packed_cache is False:
        return "auto" if packed_cache else "off"
    if isinstance(packed_cache, (str, os.PathLike)):
        value = os.fsdecode(packed_cache)
        if value == "":
            raise InvalidArgument("kiln.load: packed_cache is an empty path (None: KILN_PACKED_CACHE; "
                                  "False: no cache)")
        return value
    raise InvalidArgument(f"kiln.load: packed_cache must be a directory, True, False or None, "
                          f"not {type(packed_cache).__name__}")


def _check_load_options(max_memory_bytes, kernels, isa, mmap, gemm_precision) -> None:
    if (not isinstance(max_memory_bytes, int) or isinstance(max_memory_bytes, bool)
            or not 1 <= max_memory_bytes < 2**64):
        raise InvalidArgument(f"kiln.load: max_memory_bytes must be an int from 1 to 2**64 - 1, "
                              f"got {max_memory_bytes!r}")
    for what, value in (("kernels", kernels), ("isa", isa), ("gemm_precision", gemm_precision)):
        if not isinstance(value, str):
            raise InvalidArgument(f"kiln.load: {what} must be a str, not {type(value).__name__}")
    if mmap is not True and mmap is not False:
        raise InvalidArgument(f"kiln.load: mmap must be True or False, got {mmap!r}")


def load(source, *, max_memory_bytes: int = DEFAULT_MAX_MEMORY_BYTES, kernels: str = "", isa: str = "",
         mmap: bool = True, packed_cache=None, gemm_precision: str = "") -> Program:
    """Load and verify a program from a path (memory-mapped), bytes, or any buffer object.

    `max_memory_bytes` bounds what a method may plan (arenas, kernel scratch)
    plus the program's packed weights. `kernels="portable"` forces the
    reference kernels (default: KILN_KERNELS, else "optimized": the fastest
    kernel that accepts each instruction); `isa` lowers the instruction set the
    optimized kernels use (a name of kiln.isa_levels(); default: KILN_ISA,
    else the best level of kiln.supported_isas()).

    A path is memory-mapped and its constants are used in place: while the
    program lives, replace the file by renaming a new one over it, never by
    writing or truncating it in place. `mmap=False` reads the whole file into
    memory the program owns instead. A bytes object is used in place when
    aligned; any other buffer is copied (docs/threads-and-files.md).

    `packed_cache` (a directory, True for ~/.cache/kiln/packed, False for none;
    default: KILN_PACKED_CACHE, else none) keeps the packed weights of a mapped
    program in a file that every later load maps read-only: processes that load
    the same file share one physical copy and skip packing (docs/memory.md).
    A cache that cannot be used never fails the load; `packed_cache_report`
    says what happened.

    `gemm_precision="bfloat16"` lets the products with a constant weight (linear,
    mm, addmm, matmul)
    round both operands to bfloat16 and sum in float32 (AVX512_BF16's
    vdpbf16ps where the CPU has it, the same bits emulated elsewhere; packed
    weights take half the memory); "float32" keeps them exact. Default:
    KILN_GEMM_PRECISION, else the program's own choice (bfloat16 for a model
    exported with bfloat16 linear weights, where the CPU has AVX512_BF16), else
    "float32". Method.gemm_precision says which one a method runs
    (docs/kernels.md, "bfloat16 GEMMs").

    Raises InvalidProgram if the file is malformed; nothing is trusted before
    it has been verified.
    """
    _check_load_options(max_memory_bytes, kernels, isa, mmap, gemm_precision)
    cache = _packed_cache_option(packed_cache)
    if isinstance(source, (str, os.PathLike)):
        return Program(_kiln.load_file(os.fsdecode(source), max_memory_bytes, kernels, isa, mmap, cache,
                                       gemm_precision))
    try:
        memoryview(source)
    except TypeError:
        raise InvalidArgument(
            f"kiln.load takes a path, bytes or a buffer object, not {type(source).__name__}"
        ) from None
    return Program(_kiln.load_buffer(source, max_memory_bytes, kernels, isa, cache, gemm_precision))
