"""FX graph (after the passes) -> kiln IR (MethodIR), plus the memory plan.

Every tensor of the graph becomes a value of the method's ValueTable
(values.py); every call becomes a KernelCall whose inputs are one value per
schema argument (arguments.py, with the conventions of kiln/export/operators.py);
sizes known only at run time become IntOps (symbolic.py). Buffers the method
updates are State, written back by Moves at the end. Then every planned tensor
gets its place in arena 0 by its lifetime (memory_plan.py).
"""

from __future__ import annotations

import operator
from typing import Dict, List, Optional, Tuple

import torch
import torch.fx as fx

from ...errors import ExportError
from ..diagnostics import describe_node
from ..operators import normalize_dims, op_key, spec_for, split_key
from ..passes.manager import PassContext, bound_args, is_size_arithmetic, nodes_in
from . import ir
from .arguments import ArgumentEncoder, scalar_read_hint
from .constants import ConstantPool
from .memory_plan import Lifetime, plan_memory, plan_state
from .symbolic import IntCompiler, SymbolicSizes
from .values import ValueTable

# Functional updates that kernels may run in place when out aliases self.
_IN_PLACE_UPDATES = frozenset({"aten::index_put.default", "aten::index_copy.default",
                               "aten::slice_scatter.default"})


class _MethodLowering:
    def __init__(self, ctx: PassContext, pool: ConstantPool):
        self.ctx = ctx
        self.m = ir.MethodIR(name=ctx.method)
        self.input_names = list(ctx.input_names)
        self.tensor_of: Dict[fx.Node, int] = {}
        self.multi_out: Dict[fx.Node, List[int]] = {}
        self.op_index: Dict[Tuple[str, str], int] = {}
        self.producer: Dict[int, int] = {}        # planned value -> instruction
        self.last_use: Dict[int, int] = {}        # value -> last instruction reading it
        self.state_of: Dict[fx.Node, int] = {}    # state placeholder -> STATE value
        self.sizes = SymbolicSizes(ctx)
        for sym, bounds in ctx.input_symbol_bounds.items():
            if self.sizes.shape_env.bound_sympy(sym) != bounds:
                raise ExportError(f"internal: a graph pass specialized the dynamic size {sym} "
                                  f"(bounds {bounds} became {self.sizes.shape_env.bound_sympy(sym)})")
        self.values = ValueTable(self.m, pool, self.sizes)
        self.ints = IntCompiler(self.sizes, new_int=lambda hint: self.values.add(ir.ScalarValue("Int", hint)),
                                const_int=lambda v: self.values.scalar("Int", v), emit=self._emit_int_op,
                                input_value=lambda node: self.tensor_of[node],
                                output_value=self._output_value)
        self.arguments = ArgumentEncoder(ctx, self.values, self.ints, self.tensor)
        # Data-dependent sizes by producer: read right after it runs (symbolic.DataDim).
        self.data_symbols: Dict[fx.Node, list] = {}
        for sym, src in self.sizes.data.items():
            self.data_symbols.setdefault(src.node, []).append(sym)

    def _output_value(self, node: fx.Node, index: int) -> int:
        outputs = self.multi_out.get(node)
        if outputs is not None:
            return outputs[index]
        if index == 0 and node in self.tensor_of:
            return self.tensor_of[node]
        raise ExportError(f"internal: output {index} of '{node.name}' is read before it is defined")

    def check_input_sizes(self, names: Dict[fx.Node, str]) -> None:
        """CheckEqual IntOps for input dims that torch.export declared related
        (the same Dim in two inputs, or a derived 2*s): a call that breaks the
        relation is InvalidInput, not a run on mismatched sizes."""
        for node, dim, expr in self.sizes.input_dims:
            src = self.sizes.inputs.get(expr) if expr.is_Symbol else None
            if src is not None and src.node is node and src.dim == dim:
                continue  # the dim the symbol is read from
            if any(x not in self.sizes.inputs for x in expr.free_symbols):
                continue  # refused with a clear message by check_shape_bounds
            message = (f"input '{names[node]}' dimension {dim} must be {expr} "
                       f"({', '.join(self._symbol_source(x, names) for x in sorted(expr.free_symbols, key=str))})")
            self._emit_int_op("CheckEqual", [self.ints.size_of(node, dim), self.ints.value(node.meta["val"].shape[dim]),
                                             self.values.scalar("String", message)],
                              self.values.add(ir.ScalarValue("Int", 0)))

    def _symbol_source(self, sym, names) -> str:
        src = self.sizes.inputs[sym]
        where = f"dimension {src.dim} of input '{names[src.node]}'"
        if (src.scale, src.offset) == (1, 0):
            return f"{sym} = {where}"
        return f"{sym} = ({where} - {src.offset}) // {src.scale}"

    def _emit_int_op(self, kind: str, inputs: List[int], output: int) -> None:
        index = len(self.m.instructions)
        for v in inputs:
            self._mark_use(v, index)
        self.m.instructions.append(ir.IntOp(kind, list(inputs), output))

    def tensor(self, node: fx.Node) -> int:
        index = self.tensor_of.get(node)
        if index is not None:
            return index
        if self.ctx.is_constant(node):
            index = self.tensor_of[node] = self.values.constant(self.ctx.constants[node], node.name)
            return index
        if node in self.state_of:
            return self.state_of[node]
        raise ExportError(f"internal: value '{node.name}' is used before it is defined")

    # instructions --------------------------------------------------------------------
    def call(self, node: fx.Node) -> None:
        key = op_key(node.target)
        out = node.meta.get("val")
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        spec = spec_for(node.target, num_outputs=len(outs))
        if spec is None:
            raise ExportError(f"internal: unsupported operator {key} reached the lowering")
        outs = outs[:spec.num_outputs]
        out_dtype = outs[0].dtype
        args = bound_args(node)
        schema = node.target._schema
        tensor_args = [v for a, v in zip(schema.arguments, args.values())
                       if isinstance(v, fx.Node) and isinstance(v.meta.get("val"), torch.Tensor)]
        in_shape = self.ctx.shape(tensor_args[0]) if tensor_args else []
        out_shape = self.ctx.shape(node) if not isinstance(out, (tuple, list)) else list(outs[0].shape)
        if spec.normalize is not None:
            spec.normalize(args, in_shape, out_shape)
        normalize_dims(args, spec, len(in_shape), len(out_shape))

        inputs = [self.arguments.encode(a, args[a.name], spec, out_dtype, node) for a in schema.arguments]
        index = len(self.m.instructions)
        in_place = self._updates_state_in_place(node, key, args)
        outputs = []
        for i, val in enumerate(outs):
            if i == 0 and in_place is not None:
                outputs.append(in_place)  # the kernel writes the state itself (out aliases self)
                continue
            v = self.values.planned(val, node.name if i == 0 else f"{node.name}.{i}")
            self.producer[v] = index
            outputs.append(v)
        if isinstance(out, (tuple, list)):
            self.multi_out[node] = outputs
        else:
            self.tensor_of[node] = outputs[0]
        for v in inputs:
            self._mark_use(v, index)
        op = split_key(key)
        if op not in self.op_index:
            self.op_index[op] = len(self.m.operators)
            self.m.operators.append(op)
        self.m.instructions.append(ir.Instruction(self.op_index[op], inputs, outputs))
        for sym in self.data_symbols.get(node, ()):
            self.ints.value(sym)  # SizeOf now, so later uses do not keep the output alive

    def _updates_state_in_place(self, node: fx.Node, key: str, args) -> Optional[int]:
        """The STATE value `node` may write in place, or None.

        A cache update (index_put, index_copy, slice_scatter of a mutated
        buffer) whose result is the buffer's new value may write into the
        buffer itself instead of a planned copy, which the method would then
        move back: that saves copying the whole cache on every call. Safe when
        nothing reads the old value after it, and the buffer is no other
        argument of the same call (its indices or values).
        """
        if key not in _IN_PLACE_UPDATES:
            return None
        target = args.get("self")
        if target not in self.state_of or self.new_value_of_state.get(target) is not node:
            return None
        here = self.order[node]
        if any(self.order[u] > here for u in target.users if u is not node):
            return None
        others = [v for name, v in args.items() if name != "self"]
        if any(n is target for n in nodes_in(others)):
            return None
        return self.state_of[target]

    def _mark_use(self, v: int, index: int) -> None:
        value = self.m.values[v]
        if isinstance(value, ir.ScalarValue) and value.kind == "TensorList":
            for item in value.value:
                self._mark_use(item, index)
        elif isinstance(value, ir.TensorValue):
            self.last_use[v] = index

    def getitem(self, node: fx.Node) -> None:
        src, i = node.args
        outputs = self.multi_out.get(src)
        if outputs is None:
            raise ExportError(f"internal: getitem on '{src.name}', which has one output")
        if i >= len(outputs):
            raise ExportError(
                f"output {i} of {op_key(src.target)} is used, but kiln's kernel computes only "
                f"{len(outputs)} output(s) ({describe_node(node, self.ctx.module_prefix)})")
        self.tensor_of[node] = outputs[i]

    # driver -------------------------------------------------------------------------
    def lower(self) -> ir.MethodIR:
        m = self.m
        names = self.input_names or [n.name for n in self.ctx.user_inputs]
        for node, name in zip(self.ctx.user_inputs, names):
            val = node.meta["val"]
            index = self.values.bound_input(val, name)
            self.tensor_of[node] = index
            m.inputs.append(index)
            m.input_names.append(name)
        self.check_input_sizes(dict(zip(self.ctx.user_inputs, names)))
        prefix = self.ctx.module_prefix
        for node, (name, tensor) in self.ctx.state.items():
            name = name[len(prefix):] if prefix and name.startswith(prefix) else name
            index = self.state_of[node] = self.values.state(name, tensor)
            m.state.append(index)
            m.state_names.append(name)
        self.order = {n: i for i, n in enumerate(self.ctx.graph.nodes)}
        output_node = next(n for n in self.ctx.graph.nodes if n.op == "output")
        results = output_node.args[0]
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        self.new_value_of_state = dict(zip(self.ctx.mutated, results))
        for node in self.ctx.graph.nodes:
            if node.op == "call_function":
                if node.target is operator.getitem:
                    self.getitem(node)
                elif not is_size_arithmetic(node):  # sizes are compiled where used
                    self.call(node)
            elif node.op == "output":
                self.outputs(node)
            elif node.op not in ("placeholder",):
                raise ExportError(f"internal: unexpected FX node {node.op} '{node.name}'")
        self.plan()
        return m

    def outputs(self, node: fx.Node) -> None:
        """User outputs, then the moves that store new state values."""
        m = self.m
        results = node.args[0]
        results = list(results) if isinstance(results, (list, tuple)) else [results]
        num_mutated = len(self.ctx.mutated)
        overwritten = {self.state_of[st] for st, new in zip(self.ctx.mutated, results)
                       if self.tensor(new) != self.state_of[st]}
        for i, r in enumerate(results[num_mutated:]):
            if not isinstance(r, fx.Node) or not isinstance(r.meta.get("val"), torch.Tensor):
                what = r.meta.get("val") if isinstance(r, fx.Node) else r
                raise ExportError(f"output {i} of method '{m.name}' is not a tensor "
                                  f"({what!r}); kiln methods return tensors only"
                                  f"{scalar_read_hint(r) if isinstance(r, fx.Node) else ''}")
            v = self.tensor(r)
            if v in overwritten:
                # The old value of a state tensor that is about to be replaced.
                v = self._copy(v, f"{r.name}.before_update")
            m.outputs.append(v)
            m.output_names.append(f"output_{i}")
        moves = [(self.tensor(new), self.state_of[st]) for st, new in zip(self.ctx.mutated, results)]
        moves = [(src, dst) for src, dst in moves if src != dst]
        # A new value that is the old value of another state (prev <- cur) is
        # copied first: the moves below may already have overwritten it.
        written = {dst for _, dst in moves}
        moves = [(self._copy(src, f"{m.values[src].name}.old") if src in written else src, dst)
                 for src, dst in moves]
        for src, dst in moves:
            index = len(m.instructions)
            self._mark_use(src, index)
            m.instructions.append(ir.Move(src, dst))

    def _copy(self, v: int, name: str) -> int:
        index = len(self.m.instructions)
        copy = self.values.copy_of(v, name)
        self.producer[copy] = index
        self._mark_use(v, index)
        self.m.instructions.append(ir.Move(v, copy))
        return copy

    def plan(self) -> None:
        m = self.m
        end = len(m.instructions)
        for v in m.outputs:
            if v in self.producer:
                self.last_use[v] = end
        planned = sorted(self.producer)
        lifetimes = [Lifetime(m.values[v].nbytes, self.producer[v],
                              max(self.producer[v], self.last_use.get(v, self.producer[v])))
                     for v in planned]
        result = plan_memory(lifetimes)
        for v, offset in zip(planned, result.offsets):
            m.values[v].arena = 0
            m.values[v].arena_offset = offset
        m.arena_sizes = [result.arena_size]
        m.naive_bytes = result.naive_size
        if m.state:
            # Arena 1 holds the state: never reused, kept across calls.
            offsets, size = plan_state([m.values[v].nbytes for v in m.state])
            for v, offset in zip(m.state, offsets):
                m.values[v].arena, m.values[v].arena_offset = 1, offset
            m.arena_sizes.append(size)


def lower_method(ctx: PassContext, pool: ConstantPool) -> ir.MethodIR:
    """The IR of one method, its constants added to `pool` (shared by the program's methods)."""
    return _MethodLowering(ctx, pool).lower()
