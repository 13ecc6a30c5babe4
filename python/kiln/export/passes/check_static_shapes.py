"""Refuse graphs with symbolic sizes.

Why: the memory plan, the view/expand size arguments and the slice bounds are
all computed from concrete sizes. Dynamic shapes will be represented by upper
bounds in Tensor.sizes plus Tensor.dynamic_dims (the IR is ready for it), but
until the runtime and this exporter implement them the export must fail early
with a clear message rather than produce a wrong plan.
"""

from __future__ import annotations

import torch

from ...errors import ExportError
from .manager import PassContext


def _symbolic(val) -> bool:
    if isinstance(val, torch.Tensor):
        return any(not isinstance(s, int) for s in val.shape)
    if isinstance(val, (list, tuple)):
        return any(_symbolic(v) for v in val)
    return isinstance(val, (torch.SymInt, torch.SymFloat, torch.SymBool))


def run(ctx: PassContext) -> None:
    for node in ctx.graph.nodes:
        val = node.meta.get("val")
        if val is not None and _symbolic(val):
            shape = tuple(val.shape) if isinstance(val, torch.Tensor) else val
            what = (f"input '{node.name}'" if node in ctx.user_inputs
                    else f"value '{node.name}'")
            raise ExportError(f"dynamic shapes are not supported yet: {what} of method "
                              f"'{ctx.method}' has size {shape}; export with static shapes "
                              "(dynamic_shapes=None)")
