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
"""

from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import sympy
import torch
import torch.fx as fx

from ..errors import ExportError


def symbolic_expr(x):
    """The sympy expression of a SymInt, of an FX node holding one, or of an int."""
    if isinstance(x, fx.Node):
        x = x.meta.get("val")
    if isinstance(x, torch.SymInt):
        return x.node.expr
    if isinstance(x, int) and not isinstance(x, bool):
        return sympy.Integer(x)
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
        self.declared = dict(getattr(ctx, "symbol_ranges", {}) or {})
        self.ranges.update({k: v for k, v in self.declared.items() if getattr(k, "is_Symbol", False)})

    def problem(self, s) -> Optional[str]:
        """Why kiln cannot plan for the size `s`, or None."""
        expr = symbolic_expr(s)
        unbound = sorted(str(x) for x in expr.free_symbols if x not in self.inputs)
        if unbound:
            if any(name.startswith("u") for name in unbound):
                return (f"it depends on {', '.join(unbound)}, a size that depends on tensor data, "
                        "which kiln cannot plan memory for")
            return (f"it depends on {', '.join(unbound)}, which kiln cannot read off an input "
                    "dimension (a dim must be a symbol s or a*s + b)")
        if self.upper_or_none(expr) is None:
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
        if upper is None or any(x not in self.inputs for x in expr.free_symbols):
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
                 input_value: Callable[[fx.Node], int]) -> None:
        self.sizes = sizes
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
