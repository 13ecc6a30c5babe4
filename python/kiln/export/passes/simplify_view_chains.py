"""Collapse chains of reshapes and of permutations into one operator.

Why: attention code reshapes and transposes back and forth
(view -> view, permute -> permute). In kiln every view/permute materializes
a contiguous copy, so view(view(x, a), b) == view(x, b) and
permute(permute(x, p), q) == permute(x, p∘q) save a kernel call and a buffer
each. A chain that composes to the identity is removed by remove_noop_ops,
which runs again later.
"""

from __future__ import annotations

import torch

from .manager import PassContext

aten = torch.ops.aten


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        if node.op != "call_function" or not node.args:
            continue
        src = node.args[0]
        if getattr(src, "op", None) != "call_function":
            continue
        if node.target is aten.view.default and src.target is aten.view.default:
            node.args = (src.args[0],) + tuple(node.args[1:])
            ctx.count("views_collapsed")
        elif node.target is aten.permute.default and src.target is aten.permute.default:
            inner, outer = list(src.args[1]), list(node.args[1])
            rank = len(inner)
            inner = [d % rank for d in inner]
            node.args = (src.args[0], [inner[d % rank] for d in outer])
            ctx.count("permutes_collapsed")
        else:
            continue
        if not src.users:
            ctx.graph.erase_node(src)
