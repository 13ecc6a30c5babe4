"""ExportReport: what `kiln.export.export` did. Torch-free."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .quantize.summary import QuantizedSummary

# How the report names what the fusion passes fused (activations by their own name).
_FUSED_NAMES = {"batch_norm": ("batch norm", "batch norms"), "residual_add": ("residual add", "residual adds"),
                "attention": ("matmul-softmax-matmul attention", "matmul-softmax-matmul attentions"),
                "cache_gather": ("key/value cache gather", "key/value cache gathers")}


def _bytes(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _count(what: str, n: int) -> str:
    one, many = _FUSED_NAMES.get(what, (what, what))
    return f"{n} {one if n == 1 else many}"


def fused_summary(fused: Dict[Tuple[str, str], int]) -> str:
    """{(what, into): count} as "12 batch norms folded into conv2d; 3 residual adds and 10 relu into conv2d"."""
    parts = []
    for into in sorted({into for _, into in fused}):
        folded = fused.get(("batch_norm", into), 0)
        if folded:
            parts.append(f"{_count('batch_norm', folded)} folded into {into}")
        epilogues = [_count(what, n) for (what, i), n in sorted(
            fused.items(), key=lambda item: (item[0][0] != "residual_add", item[0][0]))
            if i == into and what != "batch_norm"]
        if epilogues:
            listed = ", ".join(epilogues[:-1]) + " and " + epilogues[-1] if len(epilogues) > 1 else epilogues[0]
            parts.append(f"{listed} into {into}")
    return "; ".join(parts) or "nothing"


@dataclass
class MethodReport:
    name: str
    num_instructions: int
    operators: List[str]        # "aten::linear.default"-style keys, in table order
    arena_bytes: int            # planned activation memory
    naive_bytes: int            # sum of every planned tensor, 64-byte aligned
    constant_bytes: int         # bytes of the distinct segments this method uses
    num_inputs: int = 0
    num_outputs: int = 0
    num_state: int = 0          # state tensors (buffers the method updates)
    # {(what, into): count} fused at export, e.g. ("batch_norm", "conv2d"): 12, ("relu", "conv2d"): 10
    fused: Dict[Tuple[str, str], int] = field(default_factory=dict)
    # How this machine's runtime serves the method (kernels_summary): instructions per
    # kernel tier, and the operators only a portable (reference) kernel serves.
    kernel_tiers: Dict[str, int] = field(default_factory=dict)
    portable_operators: List[str] = field(default_factory=list)
    load_error: str = ""        # why the method could not be loaded here, if it could not
    # kiln_quantized instructions by scheme, and the bytes of their weights (quantize/summary.py)
    quantized: Optional[QuantizedSummary] = None

    def kernels_summary(self) -> str:
        """"118 optimized, 38 portable (aten::slice.Tensor, ...)"."""
        if self.load_error:
            return f"not loaded here: {self.load_error}"
        text = ", ".join(f"{n} {tier}" for tier, n in sorted(self.kernel_tiers.items(), key=lambda kv: -kv[1]))
        if self.portable_operators:
            text += f" (portable: {', '.join(self.portable_operators)})"
        return text or "no kernel calls"

    def fused_summary(self) -> str:
        """"12 batch norms folded into conv2d; 3 residual adds and 10 relu into conv2d; ..."."""
        return fused_summary(self.fused)


@dataclass
class ExportReport:
    path: Optional[str]         # None when export(..., path=None) returned the bytes in `data`
    file_size: int
    export_seconds: float
    methods: Dict[str, MethodReport] = field(default_factory=dict)
    num_segments: int = 0
    constant_bytes: int = 0     # bytes of all segments in the file (after dedup)
    producer: str = ""
    notes: List[str] = field(default_factory=list)   # conversions the exporter made
    optimize: bool = True       # fusion passes ran (export(..., optimize=False) turns them off)
    isa: str = ""               # instruction-set level the methods were loaded with here
    packed_bytes: int = 0       # prepacked weights of the loaded methods (a runtime cost, on top of the file)
    data: Optional[bytes] = field(default=None, repr=False)  # the file's bytes, when no path was given

    def __str__(self) -> str:
        lines = [f"kiln export: {self.path if self.path is not None else 'in memory (report.data)'}",
                 f"  file size {self.file_size} bytes ({_bytes(self.file_size)}), "
                 f"{self.num_segments} constant segments ({_bytes(self.constant_bytes)}), "
                 f"exported in {self.export_seconds:.2f} s"]
        for m in self.methods.values():
            lines.append(f"  method '{m.name}': {m.num_instructions} instructions, "
                         f"{m.num_inputs} inputs, {m.num_outputs} outputs")
            lines.append(f"    memory: planned {m.arena_bytes} bytes (naive {m.naive_bytes})"
                         f", constants {m.constant_bytes} bytes")
            lines.append(f"    operators ({len(m.operators)}): {', '.join(m.operators)}")
            lines.append(f"    fused: {m.fused_summary()}" if self.optimize else
                         "    fused: nothing (optimize=False)")
            lines.append(f"    kernels here ({self.isa}): {m.kernels_summary()}")
            if m.quantized:
                lines.append(f"    quantized: {m.quantized.saved()}")
                lines.extend(f"      {line}" for line in m.quantized.lines())
        lines.append(f"  packed weights when loaded here: {self.packed_bytes} bytes ({_bytes(self.packed_bytes)})")
        lines.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(lines)
