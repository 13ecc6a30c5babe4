"""The value table of one method being lowered: every tensor and scalar the
program refers to by index, with constants and scalars stored once.

Tensors are Bound (method inputs), Constant (bytes in the program-wide
ConstantPool, which deduplicates them across methods), Planned (placed in
arena 0 by the memory plan) or State (buffers the method updates, arena 1).
"""

from __future__ import annotations

import struct
from typing import Dict, List, Tuple

import torch

from ...errors import ExportError
from . import ir
from .constants import ConstantPool
from .dtypes import WIDENED_CONSTANTS, kiln_dtype
from .symbolic import SymbolicSizes


def _double_key(x: float) -> bytes:
    return struct.pack("<d", float(x))


def tensor_bytes(tensor: torch.Tensor):
    """The tensor's bytes, contiguous, as a numpy uint8 array (for the constant pool)."""
    flat = tensor.contiguous().reshape(-1)
    if flat.numel() == 1 and flat.stride(0) != 1:
        # A one-element tensor counts as contiguous whatever its stride (an expanded 0-d one).
        flat = torch.empty((1,), dtype=flat.dtype).copy_(flat)
    return flat.view(torch.uint8).numpy()


class ValueTable:
    """Appends values to `method.values`; `scalar` and `constant` return the
    index of an equal value added before instead of adding it again."""

    def __init__(self, method: ir.MethodIR, pool: ConstantPool, sizes: SymbolicSizes) -> None:
        self.method = method
        self.pool = pool
        self.sizes = sizes
        self._scalars: Dict[tuple, int] = {}
        self._constants: Dict[tuple, int] = {}

    def __getitem__(self, index: int):
        return self.method.values[index]

    def add(self, value) -> int:
        self.method.values.append(value)
        return len(self.method.values) - 1

    def scalar(self, kind: str, value=None) -> int:
        if kind == "Double":
            key = (kind, _double_key(value))
        elif kind == "DoubleList":
            key = (kind, tuple(_double_key(v) for v in value))
        elif isinstance(value, list):
            key = (kind, tuple(value))
        else:
            key = (kind, value)
        index = self._scalars.get(key)
        if index is None:
            stored = tuple(value) if isinstance(value, list) else value
            index = self._scalars[key] = self.add(ir.ScalarValue(kind, stored))
        return index

    def constant(self, tensor: torch.Tensor, name: str = "", keep_half: bool = False) -> int:
        tensor = tensor.detach()
        if tensor.layout != torch.strided or tensor.is_quantized:
            raise ExportError(f"constant '{name}' has layout {tensor.layout}; kiln stores dense "
                              "tensors only")
        if not (keep_half and tensor.dtype == torch.float16):
            tensor = tensor.to(WIDENED_CONSTANTS.get(tensor.dtype, tensor.dtype))
        dtype = kiln_dtype(tensor.dtype, f"constant '{name}'")
        segment = self.pool.add(tensor_bytes(tensor))
        sizes = [int(s) for s in tensor.shape]
        key = (segment, dtype, tuple(sizes))
        index = self._constants.get(key)
        if index is None:
            index = self._constants[key] = self.add(ir.TensorValue(
                dtype=dtype, sizes=sizes, storage=ir.CONSTANT, segment=segment, name=name))
        return index

    def bounded_sizes(self, val) -> Tuple[List[int], List[int]]:
        """(sizes with dynamic dims at their upper bound, indices of the dynamic dims)."""
        sizes, dynamic = [], []
        for d, s in enumerate(val.shape):
            if isinstance(s, torch.SymInt):
                sizes.append(self.sizes.upper_bound(s))
                dynamic.append(d)
            else:
                sizes.append(int(s))
        return sizes, dynamic

    def planned(self, val, name: str) -> int:
        """A tensor in arena 0, sized for the largest value of its dynamic dims."""
        if not isinstance(val, torch.Tensor):
            raise ExportError(f"'{name}' is not a tensor ({type(val).__name__})")
        sizes, dynamic = self.bounded_sizes(val)
        return self.add(ir.TensorValue(dtype=kiln_dtype(val.dtype, f"value '{name}'"), sizes=sizes,
                                       dynamic_dims=dynamic, storage=ir.PLANNED, name=name))

    def bound_input(self, val, name: str) -> int:
        """A method input: sizes at their bounds, and the smallest sizes it accepts."""
        sizes, dynamic = self.bounded_sizes(val)
        mins = [self.sizes.lower_bound(s) if d in dynamic else s for d, s in enumerate(val.shape)]
        return self.add(ir.TensorValue(dtype=kiln_dtype(val.dtype, f"input '{name}'"),
                                       sizes=sizes, dynamic_dims=dynamic,
                                       min_sizes=[int(x) for x in mins] if dynamic else [],
                                       storage=ir.BOUND, name=name))

    def state(self, name: str, tensor: torch.Tensor) -> int:
        """A STATE tensor: its initial bytes go to the constant pool (zero-filled
        caches deduplicate to one segment); the lowering places it in arena 1. A float16
        or bfloat16 buffer stays one (a KV cache kept in 16 bits: kiln::sdpa_rows reads
        it); the operators that read or write it must have kernels for that dtype."""
        tensor = tensor.detach()
        dtype = kiln_dtype(tensor.dtype, f"buffer '{name}'")
        return self.add(ir.TensorValue(dtype=dtype, sizes=[int(s) for s in tensor.shape],
                                       storage=ir.STATE, segment=self.pool.add(tensor_bytes(tensor)),
                                       name=name))

    def copy_of(self, v: int, name: str) -> int:
        """A planned tensor shaped like value `v` (the destination of a Move)."""
        src = self.method.values[v]
        return self.add(ir.TensorValue(dtype=src.dtype, sizes=list(src.sizes),
                                       dynamic_dims=list(src.dynamic_dims), storage=ir.PLANNED,
                                       name=name))
