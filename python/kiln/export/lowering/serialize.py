"""IR -> .kiln file bytes: 64-byte header, FlatBuffer, 64-byte aligned segments.

Layout (docs/format.md has the full description):

    [0, 64)                         header (little-endian, see HEADER_STRUCT)
    [64, 64 + flatbuffer_size)      FlatBuffer, root Program, identifier "KLNP"
    zero padding to a multiple of 64
    [segments_offset, file_size)    constant segments, each 64-byte aligned
                                    relative to segments_offset, zero padding
                                    between them

Needs the `flatbuffers` package and the generated object API `_schema`;
torch-free.
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
from dataclasses import dataclass
from typing import List, Sequence, Tuple

from .ir import CONSTANT, PLANNED, STATE, BackendCall, IntOp, MethodIR, Move, ProgramIR, ScalarValue, TensorValue

MAGIC = b"KILNPRG\0"
FORMAT_VERSION = 1
HEADER_SIZE = 64
FILE_IDENTIFIER = b"KLNP"
SEGMENT_ALIGNMENT = 64

# magic, format_version, header_size, flatbuffer_offset, flatbuffer_size,
# segments_offset, segments_size, file_size, 8 reserved zero bytes.
HEADER_STRUCT = struct.Struct("<8sIIQQQQQ8x")
assert HEADER_STRUCT.size == HEADER_SIZE


def _align(n: int, a: int = SEGMENT_ALIGNMENT) -> int:
    return (n + a - 1) // a * a


@dataclass(frozen=True)
class Header:
    format_version: int
    header_size: int
    flatbuffer_offset: int
    flatbuffer_size: int
    segments_offset: int
    segments_size: int
    file_size: int

    def pack(self) -> bytes:
        return HEADER_STRUCT.pack(MAGIC, self.format_version, self.header_size,
                                  self.flatbuffer_offset, self.flatbuffer_size,
                                  self.segments_offset, self.segments_size, self.file_size)


def parse_header(data: bytes) -> Header:
    """Parses and checks the first 64 bytes of a .kiln file."""
    if len(data) < HEADER_SIZE:
        raise ValueError("truncated header")
    fields = HEADER_STRUCT.unpack_from(data, 0)
    if fields[0] != MAGIC:
        raise ValueError(f"bad magic {fields[0]!r}")
    if data[56:64] != b"\0" * 8:
        raise ValueError("reserved header bytes are not zero")
    return Header(*fields[1:])


def segment_layout(sizes: Sequence[int]) -> Tuple[List[int], int]:
    """Offsets (relative to segments_offset) of segments of `sizes`, and the
    size of the segment area (end of the last segment, no trailing padding)."""
    offsets, end = [], 0
    for size in sizes:
        off = _align(end)
        offsets.append(off)
        end = off + size
    return offsets, end


def _value_t(value, S):
    if isinstance(value, TensorValue):
        t = S.TensorT()
        t.dtype = value.dtype
        t.sizes = [int(s) for s in value.sizes]
        t.dimOrder = list(range(len(value.sizes)))
        t.storage = value.storage
        if value.storage in (CONSTANT, STATE):
            t.segment, t.segmentOffset = value.segment, value.segment_offset
        if value.storage in (PLANNED, STATE):
            t.arena, t.arenaOffset = value.arena, value.arena_offset
        if value.dynamic_dims:
            t.dynamicDims = list(value.dynamic_dims)
        if value.min_sizes:
            t.minSizes = list(value.min_sizes)
        return S.ValueT(valueType=S.ValueKind.Tensor, value=t)
    assert isinstance(value, ScalarValue), value
    kind, v = value.kind, value.value
    if kind == "None":
        return S.ValueT(valueType=S.ValueKind.None_, value=S.None_T())
    table = {
        "Int": (S.IntT, "value"), "Double": (S.DoubleT, "value"), "Bool": (S.BoolT, "value"),
        "IntList": (S.IntListT, "items"), "DoubleList": (S.DoubleListT, "items"),
        "BoolList": (S.BoolListT, "items"), "TensorList": (S.TensorListT, "items"),
        "String": (S.StringT, "value"), "IntValueList": (S.IntValueListT, "items"),
    }
    cls, attr = table[kind]
    obj = cls()
    setattr(obj, attr, list(v) if isinstance(v, tuple) else v)
    return S.ValueT(valueType=getattr(S.ValueKind, kind), value=obj)


def _method_t(m: MethodIR, S):
    mt = S.MethodT()
    mt.name = m.name
    mt.values = [_value_t(v, S) for v in m.values]
    mt.operators = []
    for name, overload in m.operators:
        op = S.OperatorT()
        op.name, op.overload = name, overload
        mt.operators.append(op)
    mt.instructions = []
    for ins in m.instructions:
        if isinstance(ins, BackendCall):
            call = S.BackendCallT()
            call.delegate, call.inputs, call.outputs = ins.delegate, list(ins.inputs), list(ins.outputs)
            kind = S.InstructionKind.BackendCall
        elif isinstance(ins, Move):
            call = S.MoveT()
            call.src, call.dst = ins.src, ins.dst
            kind = S.InstructionKind.Move
        elif isinstance(ins, IntOp):
            call = S.IntOpT()
            call.kind = getattr(S.IntOpKind, ins.kind)
            call.inputs, call.output = list(ins.inputs), ins.output
            kind = S.InstructionKind.IntOp
        else:
            call = S.KernelCallT()
            call.op, call.inputs, call.outputs = ins.op, list(ins.inputs), list(ins.outputs)
            kind = S.InstructionKind.KernelCall
        mt.instructions.append(S.InstructionT(instructionType=kind, instruction=call))
    mt.delegates = []
    for d in m.delegates:
        dt = S.DelegateT()
        dt.backend, dt.segment = d.backend, d.segment
        dt.compileSpecs = []
        for key, value in d.compile_specs:
            spec = S.CompileSpecT()
            spec.key, spec.value = key, list(value)
            dt.compileSpecs.append(spec)
        mt.delegates.append(dt)
    mt.inputs = list(m.inputs)
    mt.outputs = list(m.outputs)
    mt.arenaSizes = list(m.arena_sizes)
    mt.inputNames = list(m.input_names)
    mt.outputNames = list(m.output_names)
    mt.state = list(m.state)
    mt.stateNames = list(m.state_names)
    return mt


def build_flatbuffer(program: ProgramIR, segment_offsets: Sequence[int]) -> bytes:
    import flatbuffers
    import numpy as np

    from .. import _schema as S

    pt = S.ProgramT()
    pt.methods = [_method_t(m, S) for m in program.methods]
    pt.segments = []
    for off, data in zip(segment_offsets, program.segments):
        seg = S.SegmentT()
        seg.offset, seg.size = off, memoryview(data).nbytes
        pt.segments.append(seg)
    pt.producer = program.producer
    pt.metadata = []
    for key, value in program.metadata.items():
        entry = S.MetadataT()
        entry.key = key
        entry.value = np.frombuffer(bytes(value), dtype=np.uint8)  # packed as one vector, not byte by byte
        pt.metadata.append(entry)
    builder = flatbuffers.Builder(1 << 16)
    builder.Finish(pt.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def _write(program: ProgramIR, f) -> int:
    """Writes the file's bytes to the binary stream `f`, segment by segment
    (never the whole file in memory at once); returns the file size."""
    sizes = [memoryview(s).nbytes for s in program.segments]
    offsets, segments_size = segment_layout(sizes)
    fb = build_flatbuffer(program, offsets)
    fb_offset = HEADER_SIZE
    segments_offset = _align(fb_offset + len(fb))
    file_size = segments_offset + segments_size
    header = Header(FORMAT_VERSION, HEADER_SIZE, fb_offset, len(fb), segments_offset,
                    segments_size, file_size)
    f.write(header.pack())
    f.write(fb)
    pos = fb_offset + len(fb)
    for off, data in zip(offsets, program.segments):
        start = segments_offset + off
        f.write(b"\0" * (start - pos))
        view = memoryview(data).cast("B")
        f.write(view)
        pos = start + view.nbytes
    f.write(b"\0" * (segments_offset - pos) if pos < segments_offset else b"")
    return file_size


def serialize(program: ProgramIR) -> bytes:
    """The bytes of the .kiln file of `program` (a ProgramIR, from lower() or
    built by hand): the last stage of kiln.export.export when it is given no
    path. kiln.load(data) runs them; write_program writes the same bytes to a file."""
    out = io.BytesIO()
    size = _write(program, out)
    data = out.getvalue()
    assert len(data) == size, (len(data), size)
    return data


def write_program(program: ProgramIR, path, check=None) -> int:
    """Writes the .kiln file of `program` to `path` and returns its size: the
    last stage of kiln.export.export. The bytes are those of serialize(program).
    `check(temporary_path)`, when given, runs on the complete file before the
    rename and may raise to refuse it.

    Atomic: the file is written under a temporary name in the same directory and
    renamed over `path` at the end, so a reader never sees a partial file and a
    failure (of this function or of anything before it) leaves no file, no
    temporary file, and whatever was at `path` before untouched."""
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".kiln-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            file_size = _write(program, f)
            assert f.tell() == file_size, (f.tell(), file_size)
        if check is not None:
            check(tmp)  # e.g. that this runtime loads it: refused before it takes its name
        # mkstemp makes the file 0600; a program file gets the permissions open() would give it.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return file_size
