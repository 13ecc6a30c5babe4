"""What the exporter says about a node: where it comes from in the user's model,
and the report of every operator kiln cannot run (collected over all methods
before anything is written)."""

from __future__ import annotations

import operator
import os
from typing import Dict, List, Sequence, Tuple

import torch
import torch.fx as fx

from .operators import custom_operator_problem, is_custom_operator, op_key, spec_for
from .passes.manager import PassContext, is_size_arithmetic

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_KILN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


def module_path(node: fx.Node, prefix: str = "") -> Tuple[str, str]:
    """(path like "layers.0.attn", class name) of the innermost nn.Module the
    node was traced in; ("", "") if unknown."""
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, cls = list(stack.values())[-1]
    path = str(path)
    # Strict-mode spellings: L['self'].layers[0].attn -> layers.0.attn
    path = path.replace("L['self'].", "").replace("L['self']", "")
    path = path.replace("[", ".").replace("]", "").replace("'", "")
    if prefix:
        if path == prefix.rstrip("."):
            path = ""
        elif path.startswith(prefix):
            path = path[len(prefix):]
    cls = cls.__name__ if isinstance(cls, type) else str(cls).rsplit(".", 1)[-1]
    return path, cls


def user_frame(node: fx.Node) -> str:
    """'file.py:12: code' of the innermost stack frame outside torch and kiln."""
    trace = node.meta.get("stack_trace") or ""
    lines = trace.splitlines()
    best = ""
    for i, line in enumerate(lines):
        line = line.strip()
        if not line.startswith('File "'):
            continue
        try:
            filename = line.split('"', 2)[1]
            lineno = line.split(", line ", 1)[1].split(",", 1)[0]
        except IndexError:
            continue
        if filename.startswith(_TORCH_DIR) or filename.startswith(_KILN_DIR):
            continue
        code = lines[i + 1].strip() if i + 1 < len(lines) else ""
        best = f"{filename}:{lineno}" + (f": {code}" if code else "")
    return best


def describe_node(node: fx.Node, prefix: str = "") -> str:
    path, cls = module_path(node, prefix)
    where = f"module '{path}' ({cls})" if path else (f"the root module ({cls})" if cls else "")
    frame = user_frame(node)
    parts = [p for p in (where, f"at {frame}" if frame else "") if p]
    return ", ".join(parts) if parts else f"node '{node.name}'"


# -- unsupported operators --------------------------------------------------------

def _functionalized_target(node: fx.Node):
    """The operator wrapped by torch.export's auto_functionalized(_v2) node (what
    a mutating custom operator becomes), else None."""
    name = getattr(node.target, "__name__", "") or str(node.target)
    if "auto_functionalized" in name and node.args and hasattr(node.args[0], "_schema"):
        return node.args[0]
    return None


def find_unsupported(ctx: PassContext) -> List[Tuple[str, fx.Node]]:
    """(operator key, node) of every call kiln cannot run, in graph order.

    Operators of SUPPORTED_OPERATORS and functional custom operators (any
    namespace neither PyTorch nor kiln owns, see operators.spec_for) pass; whether a kernel
    exists for a custom operator is the runtime's business at method load.
    """
    out = []
    for node in ctx.graph.nodes:
        if node.op == "call_function":
            if node.target is operator.getitem or is_size_arithmetic(node):
                continue
            wrapped = _functionalized_target(node)
            if wrapped is not None:
                out.append((op_key(wrapped), node))
                continue
            if spec_for(node.target) is None:
                out.append((op_key(node.target), node))
        elif node.op == "call_module":
            out.append((f"call_module {node.target}", node))
    return out


def unsupported_reason(node: fx.Node) -> str:
    """Why a node found by find_unsupported cannot run ("" for an operator
    that is simply not in SUPPORTED_OPERATORS)."""
    wrapped = _functionalized_target(node)
    if wrapped is not None:
        if is_custom_operator(wrapped):
            return custom_operator_problem(wrapped) or "it mutates its arguments"
        return "it mutates its arguments in place"
    if node.op == "call_function" and is_custom_operator(node.target):
        return custom_operator_problem(node.target) or ""
    return ""


def format_unsupported(found: Sequence[Tuple[str, str, fx.Node, str]], max_locations: int = 5) -> str:
    """found: (method, key, node, module prefix) tuples."""
    by_key: Dict[str, List[Tuple[str, fx.Node, str]]] = {}
    for method, key, node, prefix in found:
        by_key.setdefault(key, []).append((method, node, prefix))
    lines = [f"the model uses {len(by_key)} operator(s) kiln cannot run "
             f"({len(found)} call(s) in total); no file was written:"]
    methods = {m for m, _, _, _ in found}
    for key, uses in by_key.items():
        reason = unsupported_reason(uses[0][1])
        lines.append(f"  {key}: {len(uses)} call(s)" + (f": {reason}" if reason else ""))
        for method, node, prefix in uses[:max_locations]:
            where = describe_node(node, prefix)
            lines.append(f"    - {where}" + (f" [method '{method}']" if len(methods) > 1 else ""))
        if len(uses) > max_locations:
            lines.append(f"    - ... and {len(uses) - max_locations} more")
    lines.append("ways forward: `kiln ops` (or docs/operators.md) lists the operators kiln runs, so the "
                 "model may be rewritten with those; or declare the missing piece as a custom operator "
                 "(torch.library.custom_op) and give it a kernel in a plugin library, as docs/extending.md "
                 "shows")
    return "\n".join(lines)
