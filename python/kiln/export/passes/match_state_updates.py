"""Give every new state value the shape and dtype of its buffer.

Why: `self.buf.copy_(x)` broadcasts and casts x into the buffer, but
torch.export may record x itself as the buffer's new value (its
decompositions drop the broadcasting copy). A state tensor keeps its declared
shape and dtype across calls, so the new value is expanded and cast here,
like the copy would have.
"""

from __future__ import annotations

import torch

from ...errors import ExportError
from .manager import PassContext, same_shape

aten = torch.ops.aten


def run(ctx: PassContext) -> None:
    if not ctx.mutated:
        return
    output = next(n for n in ctx.graph.nodes if n.op == "output")
    results = list(output.args[0]) if isinstance(output.args[0], (list, tuple)) else [output.args[0]]
    for i, state in enumerate(ctx.mutated):
        new, want = results[i], state.meta["val"]
        got = new.meta.get("val")
        if not isinstance(got, torch.Tensor):
            raise ExportError(f"the new value of buffer '{ctx.state[state][0]}' is not a tensor")
        if got.dtype != want.dtype:
            new = ctx.call(aten._to_copy.default, (new,), {"dtype": want.dtype}, before=output,
                           val=got.to(want.dtype))
            ctx.count("state_updates_cast")
        if not same_shape(list(got.shape), list(want.shape)):
            new = ctx.call(aten.expand.default, (new, [int(s) for s in want.shape]), before=output,
                           val=torch.empty(want.shape, dtype=want.dtype, device="meta"))
            ctx.count("state_updates_expanded")
        results[i] = new
    output.args = (tuple(results) if isinstance(output.args[0], (list, tuple)) else results[0],)
