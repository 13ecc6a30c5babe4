"""PassContext (the graph being exported and its constants) and PassManager.

A pass is a module of kiln.export.passes with a `run(ctx: PassContext) -> None`
function that rewrites `ctx.graph` in place. The manager runs them in order
and, when one fails, says which pass failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import torch
import torch.fx as fx

from ...errors import ExportError

# Metadata copied from a node to the nodes that replace it (error messages
# point at the user's code through these).
# meta key: the name of the eager node whose value a node computes, for kiln.export.compare
# (comparison.py sets it on every node before the passes).
VALUE_OF = "kiln_value_of"
_PROVENANCE_KEYS = ("nn_module_stack", "stack_trace", "source_fn_stack", "from_node")


@dataclass
class PassContext:
    """The FX graph of one method plus what the passes need to know about it.

    The output node's arguments are the new values of the mutated buffers
    (`mutated[i]` names the state placeholder of output i) followed by the
    user outputs.

    Shapes may be symbolic (dynamic shapes): a dimension is an int or a
    torch.SymInt. Compare shapes with same_shape(), never with ==.

    What one pass leaves for a later pass or for the lowering is a field here,
    never an attribute set on the graph or its module.
    """

    graph: fx.Graph
    """The method's graph of core ATen (and kiln) operators, rewritten in place by each pass."""
    constants: Dict[fx.Node, torch.Tensor]
    """Placeholders that hold constants (parameters, buffers, lifted and folded constants) and their data."""
    user_inputs: List[fx.Node]
    """The placeholders that are the method's inputs, in the program's input order."""
    method: str = "forward"
    """The method's name (for messages)."""
    input_names: List[str] = field(default_factory=list)
    """The names the program gives its inputs (the method's parameter names), one per user input."""
    module_prefix: str = ""
    """Stripped from nn_module_stack paths: kiln's wrapper of a non-forward method, not the user's model."""
    stats: Dict[str, int] = field(default_factory=dict)
    """Counts of what the passes rewrote, by kind (count()): for debugging a pipeline."""
    fused: Dict[Tuple[str, str], int] = field(default_factory=dict)
    """{(what, into): count} of the fusion passes, e.g. ("batch_norm", "conv2d"): what the report says was fused."""
    state: Dict[fx.Node, Tuple[str, torch.Tensor]] = field(default_factory=dict)
    """Placeholders of the buffers the method updates: (buffer name, initial value)."""
    mutated: List[fx.Node] = field(default_factory=list)
    """The state placeholder whose new value is each of the first len(mutated) outputs."""
    input_symbol_bounds: Dict[object, object] = field(default_factory=dict)
    """{symbol: bounds} of the inputs' dynamic sizes as check_shape_bounds found them; the
    lowering checks that no later pass narrowed them."""
    symbol_ranges: Dict[object, object] = field(default_factory=dict)
    """torch.export's range_constraints: {symbol: declared range} of every dynamic size."""
    _constant_counter: int = field(default=0, repr=False)

    # -- queries -----------------------------------------------------------
    def is_constant(self, node) -> bool:
        return isinstance(node, fx.Node) and node in self.constants

    @staticmethod
    def val(node: fx.Node):
        """The FakeTensor (or tuple of them) torch.export recorded for `node`."""
        return node.meta.get("val")

    @staticmethod
    def shape(node: fx.Node) -> list:
        """Sizes of `node`'s tensor: ints, and torch.SymInt for dynamic dims."""
        return [s if isinstance(s, torch.SymInt) else int(s) for s in node.meta["val"].shape]

    @staticmethod
    def dtype(node: fx.Node) -> torch.dtype:
        return node.meta["val"].dtype

    def count(self, what: str, n: int = 1) -> None:
        self.stats[what] = self.stats.get(what, 0) + n

    def count_fusion(self, what: str, into: str) -> None:
        """Records that one `what` (batch_norm, residual_add, relu, ...) was fused into `into`."""
        self.fused[(what, into)] = self.fused.get((what, into), 0) + 1

    # -- rewriting ---------------------------------------------------------
    def add_constant(self, tensor: torch.Tensor, name_hint: str = "const") -> fx.Node:
        """A new placeholder node holding `tensor` as a constant."""
        tensor = tensor.detach()
        first = next((n for n in self.graph.nodes if n.op != "placeholder"), None)
        self._constant_counter += 1
        name = f"_kiln_{name_hint}_{self._constant_counter}"
        if first is None:
            node = self.graph.placeholder(name)
        else:
            with self.graph.inserting_before(first):
                node = self.graph.placeholder(name)
        node.meta["val"] = torch.empty(tensor.shape, dtype=tensor.dtype, device="meta")
        self.constants[node] = tensor
        return node

    def call(self, target, args, kwargs=None, *, like: Optional[fx.Node] = None,
             before: Optional[fx.Node] = None, val=None) -> fx.Node:
        """Inserts call_function(target, args, kwargs) before `before` (default:
        `like`), sets meta["val"] to `val` or infers it on the meta device, and
        copies provenance metadata from `like`."""
        kwargs = kwargs or {}
        anchor = before if before is not None else like
        with self.graph.inserting_before(anchor):
            node = self.graph.call_function(target, tuple(args), dict(kwargs))
        node.meta["val"] = val if val is not None else infer_val(target, node.args, node.kwargs)
        if like is not None:
            copy_provenance(like, node)
        return node

    def rewrote(self, node: fx.Node) -> None:
        """`node` was changed in place to compute something else than its eager
        value: kiln.export.compare must not meet it with that value."""
        node.meta.pop(VALUE_OF, None)

    def replace(self, old: fx.Node, new) -> None:
        """Replaces every use of `old` by `new` (a node), then erases `old`.
        `new` now computes old's value: it takes over the name of the eager
        value kiln.export.compare meets it with (meta[VALUE_OF])."""
        if VALUE_OF in old.meta:
            new.meta[VALUE_OF] = old.meta[VALUE_OF]
        old.replace_all_uses_with(new)
        if not old.users:
            self.graph.erase_node(old)


def nodes_in(x):
    """The FX nodes in an argument value (nested lists, tuples and dicts)."""
    if isinstance(x, fx.Node):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from nodes_in(y)
    elif isinstance(x, dict):
        for y in x.values():
            yield from nodes_in(y)


def is_symbolic(x) -> bool:
    return isinstance(x, (torch.SymInt, torch.SymFloat, torch.SymBool))


def is_size_arithmetic(node: fx.Node) -> bool:
    """sym_size, operator.mul, ... on symbolic sizes: not run as such; the
    lowering compiles the size expressions they produce (lowering/symbolic.py)."""
    return is_symbolic(node.meta.get("val"))


def same_shape(a: Sequence, b: Sequence) -> bool:
    """True if the shapes are equal for every value of their symbols (a
    symbolic comparison must not specialize a dynamic dimension)."""
    from torch.fx.experimental.symbolic_shapes import statically_known_true

    return len(a) == len(b) and all(
        x == y if not (is_symbolic(x) or is_symbolic(y)) else statically_known_true(x == y)
        for x, y in zip(a, b))


def copy_provenance(src: fx.Node, dst: fx.Node) -> None:
    for key in _PROVENANCE_KEYS:
        if key in src.meta and key not in dst.meta:
            dst.meta[key] = src.meta[key]


def _to_meta(x):
    if isinstance(x, fx.Node):
        val = x.meta.get("val")
        if isinstance(val, torch.Tensor) and not any(is_symbolic(s) for s in val.shape):
            return torch.empty([int(s) for s in val.shape], dtype=val.dtype, device="meta")
        return val
    if isinstance(x, (list, tuple)):
        return type(x)(_to_meta(y) for y in x)
    return x


def infer_val(target, args, kwargs):
    """Output metadata of target(*args, **kwargs), computed on the meta device."""
    return target(*_to_meta(tuple(args)), **{k: _to_meta(v) for k, v in kwargs.items()})


@dataclass
class Pass:
    name: str
    run: Callable[[PassContext], None]
    doc: str = ""


def load_pass(module) -> Pass:
    return Pass(module.__name__.rsplit(".", 1)[-1], module.run, (module.__doc__ or "").strip())


def user_pass(fn) -> Pass:
    """A pass of the user's (export(..., passes=[fn])): `fn(ctx: PassContext)`
    rewrites ctx.graph in place; an error in it is reported under its name."""
    if isinstance(fn, Pass):
        return fn
    if not callable(fn):
        raise ExportError(f"passes must be callables fn(ctx: kiln.export.PassContext), got "
                          f"{type(fn).__name__}")
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return Pass(f"user pass {name}", fn, (getattr(fn, "__doc__", None) or "").strip())


class PassManager:
    """Runs passes in order; a failure names the pass that failed."""

    def __init__(self, passes: Sequence[Pass], *, lint: bool = False) -> None:
        self.passes = list(passes)
        self.lint = lint
        self.timings: Dict[str, float] = {}

    def run(self, ctx: PassContext) -> PassContext:
        for p in self.passes:
            start = time.perf_counter()
            try:
                p.run(ctx)
                if self.lint:
                    ctx.graph.lint()
            except ExportError as e:
                # Deliberate, already user-facing: keep the message, record the pass.
                e.pass_name = p.name
                if hasattr(e, "add_note"):
                    e.add_note(f"(raised by kiln export pass '{p.name}' on method '{ctx.method}')")
                raise
            except Exception as e:
                raise ExportError(f"kiln export pass '{p.name}' failed on method "
                                  f"'{ctx.method}': {type(e).__name__}: {e}") from e
            self.timings[p.name] = self.timings.get(p.name, 0.0) + time.perf_counter() - start
        return ctx


def bound_args(node: fx.Node) -> Dict[str, object]:
    """{argument name: value} of an OpOverload call, defaults filled from the schema."""
    schema = node.target._schema
    out: Dict[str, object] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args) and not arg.kwarg_only:
            out[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            out[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            out[arg.name] = arg.default_value
        else:
            out[arg.name] = None
    return out


def getitem_users(node: fx.Node) -> Dict[int, List[fx.Node]]:
    """{output index: getitem nodes} for a multi-output node; a non-getitem
    user is recorded under index -1."""
    import operator

    users: Dict[int, List[fx.Node]] = {}
    for user in node.users:
        if user.op == "call_function" and user.target is operator.getitem:
            users.setdefault(int(user.args[1]), []).append(user)
        else:
            users.setdefault(-1, []).append(user)
    return users
