"""Which kiln_quantized instructions a method has, with which scheme, and the bytes they save.

Torch-free: used by the export report (from the method's IR) and by `kiln
inspect` (from a .kiln file, read with the FlatBuffers schema; needs the
`flatbuffers` package of the export extra).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

_OPS = {"kiln_quantized::linear.default": "linear", "kiln_quantized::embedding.default": "embedding"}
# Argument positions (the schemas of ops.py): qweight, scales, mins, scheme, group_size.
_ARGS = {"linear": (1, 2, 3, 5, 6), "embedding": (0, 1, 2, 4, 5)}
_ELEMENT_SIZE = {0: 4, 1: 8, 2: 8, 3: 4, 4: 1, 5: 2, 6: 2, 7: 1, 8: 1}  # by ScalarType code
# (elements, bytes) per block of the block formats (blocks.py): qweight holds whole blocks.
_BLOCKS = {"q5_0": (32, 22), "q5_1": (32, 24), "q4_k": (256, 144), "q5_k": (256, 176), "q6_k": (256, 210),
           "f16": (32, 64), "bf16": (32, 64)}


@dataclass
class SchemeUse:
    instructions: int = 0
    weights: int = 0          # distinct quantized matrices
    quantized_bytes: int = 0  # their qweight + scales + mins
    float_bytes: int = 0      # the same matrices in float32


@dataclass
class QuantizedSummary:
    """{(op, scheme, group_size, compute): SchemeUse}; op is "linear" or "embedding", compute a
    linear's ("float32" or "int8"; "" for an embedding)."""

    uses: Dict[Tuple[str, str, int, str], SchemeUse] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.uses)

    @property
    def quantized_bytes(self) -> int:
        return sum(u.quantized_bytes for u in self.uses.values())

    @property
    def float_bytes(self) -> int:
        return sum(u.float_bytes for u in self.uses.values())

    def lines(self) -> List[str]:
        """"12 x linear q4_1/32: 7 weights, 1.2 MiB (float32 4.5 MiB)" per scheme ("linear q4_k/256
        int8" where the inputs are quantized to int8, "int8_row" per row)."""
        def tag(compute: str) -> str:
            return "" if compute in ("", "float32") else " " + compute

        return [f"{u.instructions} x {op} {scheme}/{group}{tag(compute)}: {u.weights} "
                f"weights, {_mib(u.quantized_bytes)} (float32 {_mib(u.float_bytes)})"
                for (op, scheme, group, compute), u in sorted(self.uses.items())]

    def saved(self) -> str:
        """"7.1 MiB of weights instead of 28.3 MiB in float32 (25%)"."""
        share = self.quantized_bytes / self.float_bytes if self.float_bytes else 0.0
        return (f"{_mib(self.quantized_bytes)} of quantized weights instead of {_mib(self.float_bytes)} in float32 "
                f"({share:.0%})")


def _mib(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def summarize(calls: Iterable[Tuple[str, Sequence[int]]], tensor, string, integer) -> QuantizedSummary:
    """calls: (operator key, input value indices) of each kernel call; tensor(i) -> (dtype code,
    sizes, storage key) of value i, string(i) and integer(i) its scalar value."""
    summary = QuantizedSummary()
    seen = set()
    for key, inputs in calls:
        op = _OPS.get(key)
        if op is None:
            continue
        q, scales, mins, scheme_at, group_at = (inputs[i] for i in _ARGS[op])
        scheme, group = string(scheme_at), integer(group_at)
        compute = string(inputs[7]) if op == "linear" and len(inputs) > 7 else ""
        use = summary.uses.setdefault((op, scheme, group, compute), SchemeUse())
        use.instructions += 1
        q_dtype, q_sizes, q_key = tensor(q)
        if q_key in seen:
            continue
        seen.add(q_key)
        use.weights += 1
        n, cols = q_sizes
        if scheme in _BLOCKS:
            k = cols // _BLOCKS[scheme][1] * _BLOCKS[scheme][0]
        else:
            k = cols * 2 if scheme != "q8_0" else cols
        use.float_bytes += n * k * 4
        for v in (q, scales, mins):
            if tensor(v) is None:
                continue
            dtype, sizes, _ = tensor(v)
            count = 1
            for s in sizes:
                count *= s
            use.quantized_bytes += count * _ELEMENT_SIZE[dtype]
    return summary


def summarize_method(method) -> QuantizedSummary:
    """From a kiln.export.lowering.ir.MethodIR."""
    from ..lowering.ir import Instruction, TensorValue

    keys = method.operator_keys()
    calls = [(keys[i.op], i.inputs) for i in method.instructions if isinstance(i, Instruction)]

    def tensor(i):
        v = method.values[i]
        return (v.dtype, list(v.sizes), (v.segment, v.dtype)) if isinstance(v, TensorValue) else None

    return summarize(calls, tensor, lambda i: method.values[i].value, lambda i: method.values[i].value)


def summarize_file(path) -> Optional[Dict[str, QuantizedSummary]]:
    """{method name: summary} of a .kiln file, or None without the flatbuffers package."""
    try:
        from .. import _schema as fb
    except ImportError:
        return None
    import mmap

    from ..lowering.serialize import parse_header

    with open(path, "rb") as f:
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    header = parse_header(data)
    program = fb.Program.GetRootAs(data, header.flatbuffer_offset)
    out = {}
    for mi in range(program.MethodsLength()):
        m = program.Methods(mi)
        keys = [f"{m.Operators(i).Name().decode()}.{m.Operators(i).Overload().decode()}"
                for i in range(m.OperatorsLength())]
        calls = []
        for ii in range(m.InstructionsLength()):
            ins = m.Instructions(ii)
            if ins.InstructionType() != fb.InstructionKind.KernelCall:
                continue
            call = fb.KernelCall()
            call.Init(ins.Instruction().Bytes, ins.Instruction().Pos)
            calls.append((keys[call.Op()], [call.Inputs(j) for j in range(call.InputsLength())]))

        def value(i, cls):
            v = m.Values(i)
            table = cls()
            table.Init(v.Value().Bytes, v.Value().Pos)
            return v.ValueType(), table

        def tensor(i):
            kind, t = value(i, fb.Tensor)
            if kind != fb.ValueKind.Tensor:
                return None
            return t.Dtype(), [t.Sizes(j) for j in range(t.SizesLength())], (t.Segment(), t.Dtype())

        out[m.Name().decode()] = summarize(calls, tensor, lambda i: value(i, fb.String)[1].Value().decode(),
                                           lambda i: value(i, fb.Int)[1].Value())
    return out
