"""Refuse dynamic dimensions without an upper bound, and data-dependent sizes kiln cannot read.

Why: kiln plans memory once per loaded method, for the largest size every
tensor can have. A dimension declared dynamic at export (torch.export.Dim)
must therefore have a finite maximum, and every size must be computable at
run time from the input sizes and the data-dependent sizes kiln reads off
their producers (the length of nonzero(x), masked_select, x[mask], unique:
symbolic.DataDim, bounded by the producer's input). A size from .item() or
.tolist() has no producer whose output kiln could measure, nor a bound.
Failing here names the input or value, before any lowering.
"""

from __future__ import annotations

import torch

from ...errors import ExportError
from ..lowering.symbolic import SymbolicSizes
from .manager import PassContext


def run(ctx: PassContext) -> None:
    sizes = SymbolicSizes(ctx)
    # The lowering checks these again: a later pass that turned a dynamic size
    # into an int (int(s) on a SymInt) would have narrowed them silently.
    ctx.input_symbol_bounds = {sym: sizes.shape_env.bound_sympy(sym) for sym in sizes.inputs}
    for node in ctx.graph.nodes:
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            continue
        for d, s in enumerate(val.shape):
            if not isinstance(s, torch.SymInt):
                continue
            what = f"input '{node.name}'" if node in ctx.user_inputs else f"value '{node.name}'"
            where = f"{what} of method '{ctx.method}', dimension {d} (size {s})"
            problem = sizes.problem(s)
            if problem:
                raise ExportError(f"{where}: {problem}")
