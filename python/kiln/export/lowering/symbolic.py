"""Symbolic sizes (dynamic shapes): their bounds, and the IntOps that compute them.

torch.export represents a dimension declared dynamic (torch.export.Dim) as a
sympy symbol, and every size derived from it as a sympy expression over such
symbols (4*s0, s0 - 1, (s0 + 1)//2, ...). kiln needs two things from them:

  * an upper bound for each expression, so that memory is planned once for
    the largest case (bound_sympy over the ranges torch.export recorded);
  * the value at run time: each symbol is the size of a dimension of a method
    input, read with an IntOp SizeOf, and each expression compiles to a few
    IntOp instructions (Add, Mul, FloorDiv, ...) that write an Int value.

Arguments that were symbolic in the graph (view sizes, slice ends, arange
ends, ...) then refer to those Int values, directly or through an
IntValueList.

Data-dependent sizes: the length of nonzero(x), masked_select, x[mask] or
unique(x) depends on the data. torch.export names it with an unbacked
symbol (u0, u1, ...). kiln reads such a symbol off the run-time size of the
producer's output (DataDim, like InputDim for inputs: a SizeOf emitted right
after the producer) and bounds it by what the producer can output at most
(the number of elements of its input, at the input's own bound), or by
torch's range for it if that is smaller; memory is planned for that bound
and the kernel resizes its output to the actual size.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional

import sympy
import torch
import torch.fx as fx

from ...errors import ExportError


def symbolic_expr(x):
    """The sympy expression of a SymInt, of an FX node holding one, or of an int."""
    if isinstance(x, fx.Node):
        x = x.meta.get("val")
    if isinstance(x, torch.SymInt):
        return x.node.expr
    if isinstance(x, int) and not isinstance(x, bool):
        return sympy.Integer(x)
    if isinstance(x, sympy.Expr):
        return x
    raise ExportError(f"internal: {x!r} is not an int or a symbolic int")


def is_symbolic_int(x) -> bool:
    """True for a torch.SymInt, or an FX node whose value is one."""
    if isinstance(x, fx.Node):
        x = x.meta.get("val")
    return isinstance(x, torch.SymInt)


def _finite(x) -> bool:
    return x not in (sympy.oo, -sympy.oo) and type(x).__name__ not in ("IntInfinity", "NegativeIntInfinity")


class InputDim:
    """A symbol read off an input: symbol = (size of dimension `dim` of `node` - offset) // scale."""

    def __init__(self, node: fx.Node, dim: int, scale: int = 1, offset: int = 0) -> None:
        self.node, self.dim, self.scale, self.offset = node, dim, scale, offset


class DataDim:
    """A data-dependent symbol: the run-time size of dimension `dim` of output
    `index` of `node` (nonzero, masked_select, index with a mask, _unique2)."""

    def __init__(self, node: fx.Node, index: int, dim: int, bound, trust_torch: bool = True) -> None:
        self.node, self.index, self.dim, self.bound = node, index, dim, bound
        self.trust_torch = trust_torch  # whether torch's range for the symbol may narrow `bound`


def _numel(val):
    n = sympy.Integer(1)
    for s in val.shape:
        n = n * symbolic_expr(s)
    return n


def _broadcast_numel(a, b):
    """An upper bound of the number of elements of broadcast(a, b)."""
    sa, sb = [symbolic_expr(s) for s in a.shape], [symbolic_expr(s) for s in b.shape]
    n = max(len(sa), len(sb))
    sa, sb = [sympy.Integer(1)] * (n - len(sa)) + sa, [sympy.Integer(1)] * (n - len(sb)) + sb
    out = sympy.Integer(1)
    for x, y in zip(sa, sb):
        out = out * (x if x == y else sympy.Max(x, y))
    return out


def _data_dependent_outputs(node: fx.Node):
    """[(output index, bound of any data-dependent dim of it, whether torch's range
    may narrow that bound)] of a supported producer of data-dependent sizes; []
    for any other node."""
    from ..operators import op_key

    if node.op != "call_function" or not hasattr(node.target, "_schema"):
        return []
    key = op_key(node.target)
    args = [a.meta.get("val") if isinstance(a, fx.Node) else a for a in node.args]
    if key in ("aten::nonzero.default", "aten::_unique2.default") and isinstance(args[0], torch.Tensor):
        bound = _numel(args[0])
        return [(0, bound, True), (2, bound, True)] if key == "aten::_unique2.default" else [(0, bound, True)]
    if key == "aten::masked_select.default" and all(isinstance(a, torch.Tensor) for a in args[:2]):
        # torch 2.13's fake masked_select bounds the size by self.numel(), too small when the
        # mask broadcasts self to more elements (self [10], mask [10, 10]): not trusted.
        return [(0, _broadcast_numel(args[0], args[1]), False)]
    if key == "aten::index.Tensor" and len(node.args) > 1:
        masks = [_numel(i.meta["val"]) for i in node.args[1] if isinstance(i, fx.Node)
                 and i.meta["val"].dtype in (torch.bool, torch.uint8)]
        if masks:
            return [(0, sympy.Min(*masks) if len(masks) > 1 else masks[0], True)]
    return []


def _is_unbacked(sym) -> bool:
    from torch.utils._sympy.symbol import SymT, symbol_is_type

    return symbol_is_type(sym, SymT.UNBACKED_INT)


class SymbolicSizes:
    """Which input dimension each symbol is read from, and the range of any expression.

    Ranges are those torch.export promises the program is valid for (its
    range_constraints: by default a dynamic dim may be 0 up to its maximum),
    not the narrower ones its tracer assumed internally (sizes 0 and 1 are
    traced as if they were at least 2): the runtime accepts every size the
    export declared valid, so memory is planned for all of them.
    """

    def __init__(self, ctx) -> None:
        self.inputs: Dict[sympy.Symbol, InputDim] = {}
        self.shape_env = None
        dims = []
        for node in ctx.user_inputs:
            for d, s in enumerate(node.meta["val"].shape):
                if isinstance(s, torch.SymInt):
                    self.shape_env = self.shape_env or s.node.shape_env
                    dims.append((node, d, s.node.expr))
        for node, d, expr in dims:          # dims sized by a symbol itself
            if expr.is_Symbol:
                self.inputs.setdefault(expr, InputDim(node, d))
        for node, d, expr in dims:          # dims sized a*s + b (torch.export derived dims)
            if len(expr.free_symbols) == 1 and next(iter(expr.free_symbols)) not in self.inputs:
                sym = next(iter(expr.free_symbols))
                poly = sympy.Poly(expr, sym) if expr.is_polynomial(sym) else None
                if poly is not None and poly.degree() == 1:
                    scale, offset = poly.all_coeffs()
                    if scale.is_Integer and offset.is_Integer and scale > 0:
                        self.inputs[sym] = InputDim(node, d, int(scale), int(offset))
        self.input_dims = dims
        self.ranges = dict(self.shape_env.var_to_range) if self.shape_env is not None else {}
        self.declared = dict(ctx.symbol_ranges)
        self.ranges.update({k: v for k, v in self.declared.items() if getattr(k, "is_Symbol", False)})
        self.data: Dict[sympy.Symbol, DataDim] = {}
        self._find_data_dependent(ctx)

    def _find_data_dependent(self, ctx) -> None:
        """Unbacked symbols that size an output of a supported producer, and their bounds."""
        from torch.utils._sympy.value_ranges import ValueRanges

        from ..operators import op_key

        self.defined_by: Dict[sympy.Symbol, str] = {}  # every unbacked symbol: the operator that makes it
        for node in ctx.graph.nodes:
            for sym in (node.meta.get("unbacked_bindings") or {}):
                self.defined_by.setdefault(sym, op_key(node.target))
            val = node.meta.get("val")
            vals = list(val) if isinstance(val, (tuple, list)) else [val]
            for index, bound, trust_torch in _data_dependent_outputs(node):
                out = vals[index] if index < len(vals) else None
                if not isinstance(out, torch.Tensor):
                    continue
                for d, size in enumerate(out.shape):
                    expr = symbolic_expr(size)
                    if not (expr.is_Symbol and _is_unbacked(expr)) or expr in self.data:
                        continue
                    if self.shape_env is None and isinstance(size, torch.SymInt):
                        self.shape_env = size.node.shape_env
                    self.data[expr] = DataDim(node, index, d, bound, trust_torch)
        for sym, src in self.data.items():
            # The producer's own bound, at its inputs' bounds, or torch's range if smaller.
            # (graph order: a bound over an earlier data-dependent size, nonzero(x[m]), has its range)
            derived = self.upper_or_none(src.bound)
            torch_upper = self._torch_upper(sym) if src.trust_torch or derived is None else None
            uppers = [u for u in (derived, torch_upper) if u is not None]
            if uppers:
                self.ranges[sym] = ValueRanges(0, max(min(uppers), 0))

    def _torch_upper(self, sym) -> Optional[int]:
        """torch's upper bound of a data-dependent size; None when it has none (for an
        unbacked size torch may record int64's maximum, which is no bound either)."""
        for table in (self.declared, self.ranges):
            r = table.get(sym)
            if r is not None and _finite(r.upper) and int(r.upper) < (1 << 62):
                return int(r.upper)
        return None

    def known(self, sym) -> bool:
        """True for a symbol kiln reads at run time (an input dim, or a data-dependent size)."""
        return sym in self.inputs or sym in self.data

    def problem(self, s) -> Optional[str]:
        """Why kiln cannot plan for the size `s`, or None."""
        expr = symbolic_expr(s)
        unbound = sorted(str(x) for x in expr.free_symbols if not self.known(x))
        if unbound:
            if any(name.startswith("u") for name in unbound):
                makers = sorted({self.defined_by[x] for x in expr.free_symbols if x in self.defined_by})
                by = f"by {', '.join(makers)} " if makers else ""
                return (f"it depends on {', '.join(unbound)}, a size computed from tensor data {by}that "
                        "kiln cannot read at run time (e.g. from .item() or .tolist()); kiln runs "
                        "data-dependent sizes only as the output sizes of nonzero, masked_select, "
                        "boolean-mask indexing (x[mask]) and unique")
            return (f"it depends on {', '.join(unbound)}, which kiln cannot read off an input "
                    "dimension (a dim must be a symbol s or a*s + b)")
        if self.upper_or_none(expr) is None:
            data = sorted(str(x) for x in expr.free_symbols if x in self.data)
            if data:
                return (f"it depends on the data-dependent size(s) {', '.join(data)}, which kiln "
                        "cannot bound: declare a maximum for every dynamic input dimension, or bound "
                        "it with torch._check, e.g. torch._check(n <= 1024)")
            names = ", ".join(sorted(str(x) for x in expr.free_symbols))
            return (f"it has no upper bound: declare a maximum for the dynamic dimension(s) "
                    f"{names}, e.g. torch.export.Dim('seq', max=512)")
        return None

    def _range(self, expr):
        from torch.utils._sympy.value_ranges import bound_sympy

        return bound_sympy(expr, self.ranges)

    def upper_or_none(self, expr) -> Optional[int]:
        if expr.is_Integer:
            return int(expr)
        upper = self._range(expr).upper
        return int(upper) if _finite(upper) else None

    def lower_bound(self, s) -> int:
        """The smallest value `s` takes (at least 0). An input dim's own range in
        range_constraints wins: for a derived dim (2*n) torch records it there,
        while n's own range is the narrower one its tracer assumed."""
        expr = symbolic_expr(s)
        declared = self.declared.get(expr)
        lower = expr if expr.is_Integer else declared.lower if declared is not None else self._range(expr).lower
        return max(int(lower), 0) if _finite(lower) else 0

    def upper_bound(self, s) -> int:
        """The largest value `s` takes for any input sizes within their bounds."""
        expr = symbolic_expr(s)
        upper = self.upper_or_none(expr)
        if upper is None or any(not self.known(x) for x in expr.free_symbols):
            raise ExportError(f"the size {expr} has no upper bound kiln can plan for: "
                              f"{self.problem(s)}")
        return max(upper, 0)


# sympy's and torch's (torch.utils._sympy.functions) n-ary operations, by class name.
_VARIADIC = {"Add": "Add", "Mul": "Mul", "Max": "Max", "Min": "Min"}


class IntCompiler:
    """Compiles size expressions into IntOp instructions, each expression once.

    `new_int(hint)` adds a fresh Int value (written at run time) and returns its
    index; `const_int(v)` returns the index of a constant Int value;
    `emit(kind, inputs, output)` appends an IntOp; `input_value(node)` is the
    value index of a method input.
    """

    def __init__(self, sizes: SymbolicSizes, new_int: Callable[[int], int],
                 const_int: Callable[[int], int], emit: Callable[[str, List[int], int], None],
                 input_value: Callable[[fx.Node], int],
                 output_value: Optional[Callable[[fx.Node, int], int]] = None) -> None:
        self.sizes = sizes
        self.output_value = output_value
        self.new_int = new_int
        self.const_int = const_int
        self.emit = emit
        self.input_value = input_value
        self.cache: Dict[object, int] = {}

    def size_of(self, node: fx.Node, dim: int) -> int:
        """Index of an Int holding the run-time size of dimension `dim` of input `node`."""
        key = ("size", node, dim)
        if key not in self.cache:
            self.cache[key] = self._op("SizeOf", [self.input_value(node), self.const_int(dim)], None)
        return self.cache[key]

    def value(self, x) -> int:
        """Index of an Int value holding `x` (an int, a SymInt or an FX node of one)."""
        return self._compile(symbolic_expr(x))

    def _op(self, kind: str, args: List[int], expr) -> int:
        # The value in the file is only what kernels see at method load (prepare):
        # the bound, like the sizes of dynamic tensors.
        out = self.new_int((self.sizes.upper_or_none(expr) if expr is not None else 0) or 0)
        self.emit(kind, args, out)
        return out

    def _compile(self, expr) -> int:
        if expr.is_Integer:
            return self.const_int(int(expr))
        cached = self.cache.get(expr)
        if cached is not None:
            return cached
        out = self._compile_new(expr)
        self.cache[expr] = out
        return out

    def _compile_new(self, expr) -> int:
        from torch.utils._sympy.functions import FloorDiv, PythonMod

        if expr.is_Symbol and expr in self.sizes.data:
            src = self.sizes.data[expr]
            if self.output_value is None:
                raise ExportError(f"internal: no producer values for the data-dependent size {expr}")
            return self._op("SizeOf", [self.output_value(src.node, src.index), self.const_int(src.dim)], expr)
        if expr.is_Symbol:
            if expr not in self.sizes.inputs:
                raise ExportError(f"the size symbol {expr} is not read off an input dimension")
            src = self.sizes.inputs[expr]
            size = self.size_of(src.node, src.dim)
            if src.offset:
                size = self._op("Sub", [size, self.const_int(src.offset)], expr)
            if src.scale != 1:
                size = self._op("FloorDiv", [size, self.const_int(src.scale)], expr)
            return size
        kind = _VARIADIC.get(type(expr).__name__)
        if kind is not None:
            terms = list(expr.args)
            if kind == "Mul" and sympy.Integer(-1) in terms:   # -x is Mul(-1, x)
                terms.remove(sympy.Integer(-1))
                return self._op("Neg", [self._compile(sympy.Mul(*terms))], expr)
            acc = self._compile(terms[0])
            for t in terms[1:]:
                acc = self._op(kind, [acc, self._compile(t)], expr)
            return acc
        if isinstance(expr, sympy.Pow) and expr.exp.is_Integer and int(expr.exp) > 0:
            base = self._compile(expr.base)
            acc = base
            for _ in range(int(expr.exp) - 1):
                acc = self._op("Mul", [acc, base], expr)
            return acc
        if isinstance(expr, FloorDiv):
            return self._op("FloorDiv", [self._compile(expr.args[0]), self._compile(expr.args[1])], expr)
        if isinstance(expr, (PythonMod, sympy.Mod)) or type(expr).__name__ == "Mod":
            # torch's own Mod is only built for non-negative operands, where it
            # agrees with Python's (floor) modulo.
            return self._op("Mod", [self._compile(expr.args[0]), self._compile(expr.args[1])], expr)
        raise ExportError(f"kiln cannot compute the size expression {expr} "
                          f"({type(expr).__name__}) at run time")
