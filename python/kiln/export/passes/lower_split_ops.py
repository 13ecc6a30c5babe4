"""Turn split/chunk/unbind into one slice or select per used output.

Why: these ops return a list of views and are used through getitem nodes
(q, k, v = qkv.chunk(3, -1)). kiln kernels write exactly one output tensor, so
each used piece becomes its own aten::slice.Tensor (split) or aten::select.int
(unbind); unused pieces cost nothing.
"""

from __future__ import annotations

import torch

from ...errors import ExportError
from .manager import PassContext, bound_args, getitem_users

aten = torch.ops.aten


def _split_bounds(node, ctx):
    a = bound_args(node)
    dim = a["dim"]
    size = ctx.shape(a["self"])[dim]
    if not isinstance(size, int):
        raise ExportError(f"{node.target} splits dimension {dim}, which is dynamic; kiln splits "
                          "static dimensions only (make that dimension static)")
    if node.target is aten.split_with_sizes.default:
        sizes = list(a["split_sizes"])
    else:
        step = int(a["split_size"])
        sizes = [min(step, size - i) for i in range(0, size, step)] if step > 0 else [size]
    bounds, start = [], 0
    for s in sizes:
        bounds.append((start, start + s))
        start += s
    return a["self"], dim, bounds


def run(ctx: PassContext) -> None:
    split_ops = (aten.split_with_sizes.default, aten.split.Tensor)
    for node in list(ctx.graph.nodes):
        if node.op != "call_function":
            continue
        if node.target in split_ops:
            users = getitem_users(node)
            if -1 in users:
                continue  # used as a list: left alone, reported as unsupported
            x, dim, bounds = _split_bounds(node, ctx)
            for index, getitems in users.items():
                start, end = bounds[index]
                new = ctx.call(aten.slice.Tensor, (x, dim, start, end, 1), like=node,
                               before=getitems[0], val=getitems[0].meta["val"])
                for g in getitems:
                    ctx.replace(g, new)
            ctx.graph.erase_node(node)
            ctx.count("split_lowered")
        elif node.target is aten.unbind.int:
            users = getitem_users(node)
            if -1 in users:
                continue
            a = bound_args(node)
            for index, getitems in users.items():
                new = ctx.call(aten.select.int, (a["self"], a["dim"], index), like=node,
                               before=getitems[0], val=getitems[0].meta["val"])
                for g in getitems:
                    ctx.replace(g, new)
            ctx.graph.erase_node(node)
            ctx.count("unbind_lowered")
