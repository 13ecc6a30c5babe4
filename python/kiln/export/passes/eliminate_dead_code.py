"""Remove operators whose results are never used, and unused constants.

Why: canonicalization and folding leave dead nodes behind (the original of a
folded transpose, a weight that only fed a folded node, an unused output of a
split). Every dead operator would cost a kernel call and a buffer, and every
dead constant would be written to the file.
"""

from __future__ import annotations

from .manager import PassContext


def run(ctx: PassContext) -> None:
    for node in reversed(list(ctx.graph.nodes)):
        if node.users:
            continue
        if node.op == "call_function":
            ctx.graph.erase_node(node)
            ctx.count("dead_nodes_removed")
        elif node.op == "placeholder" and node in ctx.constants:
            del ctx.constants[node]
            ctx.graph.erase_node(node)
            ctx.count("dead_constants_removed")
