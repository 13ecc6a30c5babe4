"""The kiln IR: what the exporter knows about a program just before it is written.

It mirrors schema/program.fbs one to one, in plain dataclasses, so that the
lowering, the memory planner and the serializer can be written and tested
separately. Torch-free.

Conventions (see docs/format.md):
  * A method's values are a flat list; instructions, inputs and outputs refer
    to them by index.
  * `TensorValue.sizes` are upper bounds. `dynamic_dims` lists the dimensions
    whose run-time size may be smaller (dynamic shapes); memory is planned for
    the bounds.
  * Symbolic sizes are Int values written at run time by IntOp instructions;
    an "IntValueList" scalar lists Int value indices (e.g. view sizes).
  * STATE tensors are module buffers the method updates: they live in an arena
    of their own, start from (and reset to) their constant segment, and persist
    across calls of one loaded method.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Tuple

# kiln ScalarType codes (schema/program.fbs, runtime/include/kiln/tensor.h).
FLOAT32, FLOAT64, INT64, INT32, BOOL, FLOAT16, BFLOAT16, UINT8, INT8 = range(9)

ELEMENT_SIZE = {FLOAT32: 4, FLOAT64: 8, INT64: 8, INT32: 4, BOOL: 1,
                FLOAT16: 2, BFLOAT16: 2, UINT8: 1, INT8: 1}
SCALAR_TYPE_NAMES = {FLOAT32: "f32", FLOAT64: "f64", INT64: "i64", INT32: "i32", BOOL: "bool",
                     FLOAT16: "f16", BFLOAT16: "bf16", UINT8: "u8", INT8: "i8"}

# Tensor storage kinds (schema TensorStorage).
CONSTANT, PLANNED, BOUND, STATE = 0, 1, 2, 3


@dataclass
class TensorValue:
    dtype: int
    sizes: List[int]
    storage: int
    segment: int = 0          # CONSTANT, STATE (initial bytes): index into Program.segments
    segment_offset: int = 0
    arena: int = 0            # PLANNED, STATE: arena index and byte offset
    arena_offset: int = 0
    dynamic_dims: List[int] = field(default_factory=list)
    min_sizes: List[int] = field(default_factory=list)   # BOUND inputs with dynamic dims
    name: str = ""            # debugging only; not written

    @property
    def numel(self) -> int:
        n = 1
        for s in self.sizes:
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * ELEMENT_SIZE[self.dtype]


@dataclass(frozen=True)
class ScalarValue:
    """A non-tensor value. `kind` is one of the ValueKind names of the schema:
    "None", "Int", "Double", "Bool", "IntList", "DoubleList", "BoolList",
    "TensorList" (items are value indices), "IntValueList" (items are indices
    of Int values) or "String"."""

    kind: str
    value: Any = None


@dataclass
class Instruction:
    op: int                   # index into Method.operators
    inputs: List[int]
    outputs: List[int]


@dataclass
class BackendCall:
    """Runs Method.delegates[delegate] on its backend (schema BackendCall)."""

    delegate: int
    inputs: List[int]
    outputs: List[int]


@dataclass
class Move:
    """Copies tensor value `src` into tensor value `dst` (schema Move)."""

    src: int
    dst: int


# IntOp kinds (schema IntOpKind).
INT_OPS = ("SizeOf", "Add", "Sub", "Mul", "FloorDiv", "Mod", "Min", "Max", "Neg", "CheckEqual")


@dataclass
class IntOp:
    """Computes an int at run time into Int value `output` (schema IntOp).
    SizeOf reads [tensor value, Int value of the dim]; the others read Int values."""

    kind: str
    inputs: List[int]
    output: int


@dataclass
class Delegate:
    """A subgraph handed to a backend: its name and the segment holding its blob."""

    backend: str
    segment: int
    compile_specs: List[Tuple[str, bytes]] = field(default_factory=list)


@dataclass
class MethodIR:
    name: str
    values: List[Any] = field(default_factory=list)          # TensorValue | ScalarValue
    operators: List[Tuple[str, str]] = field(default_factory=list)  # (name, overload)
    instructions: List[Any] = field(default_factory=list)     # Instruction | BackendCall | Move | IntOp
    delegates: List[Delegate] = field(default_factory=list)
    inputs: List[int] = field(default_factory=list)
    outputs: List[int] = field(default_factory=list)
    input_names: List[str] = field(default_factory=list)
    output_names: List[str] = field(default_factory=list)
    arena_sizes: List[int] = field(default_factory=list)
    state: List[int] = field(default_factory=list)            # STATE tensor values
    state_names: List[str] = field(default_factory=list)
    naive_bytes: int = 0      # report only: the arena size without reuse

    def operator_keys(self) -> List[str]:
        """"aten::linear.default"-style keys of the operators, in table order."""
        return [f"{name}.{overload}" for name, overload in self.operators]

    def constant_segments(self) -> List[int]:
        return sorted({v.segment for v in self.values
                       if isinstance(v, TensorValue) and v.storage in (CONSTANT, STATE)})


@dataclass
class ProgramIR:
    methods: List[MethodIR]
    segments: List[Any]       # bytes-like payloads, index = segment number
    producer: str = ""
    # Named metadata (docs/format.md, Metadata): key -> bytes, written in this order.
    metadata: Dict[str, bytes] = field(default_factory=dict)

    def __str__(self) -> str:
        # The dataclass repr lists every value and segment: this is the overview.
        sizes = [memoryview(s).nbytes for s in self.segments]
        lines = [f"kiln.export.ProgramIR: {len(self.methods)} method(s), {len(sizes)} constant segments "
                 f"({sum(sizes)} bytes), {len(self.metadata)} metadata entries"]
        for m in self.methods:
            lines.append(f"  method '{m.name}': {len(m.instructions)} instructions, {len(m.values)} values, "
                         f"arenas {m.arena_sizes} bytes (naive {m.naive_bytes}); "
                         f"operators: {', '.join(m.operator_keys()) or '(none)'}")
        return "\n".join(lines)
