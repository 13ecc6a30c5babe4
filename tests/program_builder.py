"""Hand-built programs for tests that need what no exporter path produces
(backend calls, operators without kernels). Uses the exporter's torch-free IR
and serializer, so the files are written exactly as real exports are."""

from __future__ import annotations

import struct

from kiln.export.ir import (BOUND, FLOAT32, PLANNED, BackendCall, Delegate, Instruction, MethodIR, ProgramIR,
                            TensorValue)
from kiln.export.serialize import write_program


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
