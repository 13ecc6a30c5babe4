"""Give every elementwise kernel inputs of its output dtype.

Why: ATen promotes mixed dtypes (int64 + float32 -> float32, int / int ->
float). kiln kernels take same-dtype inputs only, which keeps the kernel
library small; so where an input of add/sub/mul/div/where/masked_fill/cat has
another dtype than the node's output, an aten::_to_copy.default to the output
dtype is inserted in front of it. Casts of constants are folded away by
fold_constants, which runs next. (Python scalars are turned into 0-d
constants of the output dtype by the lowering, so they need no cast.)

Custom operators (torch.library) get no casts: a schema declares no tensor
dtypes, so their kernels receive the dtypes the model computes in, and the
kernel registry resolves them by those dtypes (MissingKernel at method load
names the ones it lacks).
"""

from __future__ import annotations

import torch
import torch.fx as fx

from ..operators import OP_SPECS, op_key
from .manager import PassContext, bound_args

aten = torch.ops.aten


def run(ctx: PassContext) -> None:
    for node in list(ctx.graph.nodes):
        if node.op != "call_function":
            continue
        spec = OP_SPECS.get(op_key(node.target))
        if spec is None or not spec.cast_args:
            continue
        out = node.meta.get("val")
        if not isinstance(out, torch.Tensor):
            continue
        schema_names = [a.name for a in node.target._schema.arguments]
        args = bound_args(node)
        changed = False
        for name in spec.cast_args:
            value = args.get(name)
            items = value if isinstance(value, (list, tuple)) else [value]
            new_items = []
            for item in items:
                if isinstance(item, fx.Node) and ctx.dtype(item) != out.dtype:
                    item = ctx.call(aten._to_copy.default, (item,), {"dtype": out.dtype},
                                    like=node)
                    changed = True
                    ctx.count("casts_inserted")
                new_items.append(item)
            args[name] = list(new_items) if isinstance(value, (list, tuple)) else new_items[0]
        if changed:
            positional = [args[n] for n, a in zip(schema_names, node.target._schema.arguments)
                          if not a.kwarg_only]
            kwargs = {n: args[n] for n, a in zip(schema_names, node.target._schema.arguments)
                      if a.kwarg_only and n in node.kwargs}
            node.args, node.kwargs = tuple(positional), kwargs
