"""Hand-built programs for tests that need what no exporter path produces
(backend calls, operators without kernels). Uses the exporter's torch-free IR
and serializer, so the files are written exactly as real exports are."""

from __future__ import annotations

import struct

from kiln.export.lowering.ir import (
    BOUND,
    FLOAT32,
    PLANNED,
    BackendCall,
    Delegate,
    Instruction,
    IntOp,
    MethodIR,
    ProgramIR,
    ScalarValue,
    TensorValue,
)
from kiln.export.lowering.serialize import write_program


def _vector_method(name: str, n: int) -> MethodIR:
    m = MethodIR(name=name)
    m.values = [TensorValue(FLOAT32, [n], BOUND), TensorValue(FLOAT32, [n], PLANNED, arena=0, arena_offset=0)]
    m.inputs, m.outputs = [0], [1]
    m.input_names, m.output_names = ["x"], ["y"]
    m.arena_sizes = [4 * n]
    return m


def backend_program(path, backend: str = "test_echo", scale: float = 3.0, n: int = 4) -> None:
    """forward(x) = backend(x), with `scale` as the delegate's processed blob."""
    m = _vector_method("forward", n)
    m.delegates = [Delegate(backend, segment=0)]
    m.instructions = [BackendCall(0, [0], [1])]
    write_program(ProgramIR([m], [struct.pack("<f", scale)], producer="tests"), path)


def single_op_program(path, op: str, overload: str = "default", n: int = 4) -> None:
    """forward(x) = op(x) for a unary operator."""
    m = _vector_method("forward", n)
    m.operators = [(op, overload)]
    m.instructions = [Instruction(0, [0], [1])]
    write_program(ProgramIR([m], [], producer="tests"), path)


def sized_view_program(path, ops, *, dim_value=0, state=None, n: int = 8) -> None:
    """forward(x f32[<=n]) = view(x, [k]) where k is computed at run time by `ops`.

    `ops` is a list of (kind, [operand names]) IntOps evaluated in order; names
    are "x" (the input tensor, for SizeOf), "dim" (an Int holding `dim_value`),
    "c<N>" (a constant Int N) or "r<i>" (the result of op i). The last result
    is the view size. `state` (a TensorValue) is added as a STATE value when given.
    """
    m = MethodIR(name="forward")
    m.values = [TensorValue(FLOAT32, [n], BOUND, dynamic_dims=[0]),
                TensorValue(FLOAT32, [n], PLANNED, arena=0, dynamic_dims=[0]),
                ScalarValue("Int", dim_value)]
    names = {"x": 0, "dim": 2}
    instructions = []
    for i, (kind, operands) in enumerate(ops):
        inputs = []
        for name in operands:
            if name not in names:  # a constant
                names[name] = len(m.values)
                m.values.append(ScalarValue("Int", int(name[1:])))
            inputs.append(names[name])
        names[f"r{i}"] = len(m.values)
        m.values.append(ScalarValue("Int", n))
        instructions.append(IntOp(kind, inputs, names[f"r{i}"]))
    size_list = len(m.values)
    m.values.append(ScalarValue("IntValueList", (names[f"r{len(ops) - 1}"],)))
    m.operators = [("aten::view", "default")]
    m.instructions = instructions + [Instruction(0, [0, size_list], [1])]
    m.inputs, m.outputs = [0], [1]
    m.input_names, m.output_names = ["x"], ["y"]
    m.arena_sizes = [4 * n]
    segments = []
    if state is not None:
        m.values.append(state)
        m.state, m.state_names = [len(m.values) - 1], ["buf"]
        m.arena_sizes.append(64)
        segments.append(b"\0" * 64)
    write_program(ProgramIR([m], segments, producer="tests"), path)
