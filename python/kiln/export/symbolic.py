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


class SymbolicSizes:
    """Which input dimension each symbol is, and the bound of any expression."""

    def __init__(self, ctx) -> None:
        self.inputs: Dict[sympy.Symbol, Tuple[fx.Node, int]] = {}
        self.shape_env = None
        for node in ctx.user_inputs:
            for d, s in enumerate(node.meta["val"].shape):
                if isinstance(s, torch.SymInt):
                    self.shape_env = self.shape_env or s.node.shape_env
                    if s.node.expr.is_Symbol:
                        self.inputs.setdefault(s.node.expr, (node, d))

    def problem(self, s) -> Optional[str]:
        """Why kiln cannot plan for the size `s`, or None."""
        expr = symbolic_expr(s)
        unbound = sorted(str(x) for x in expr.free_symbols if x not in self.inputs)
        if unbound:
            return (f"it depends on {', '.join(unbound)}, which is not the size of an input "
                    "dimension (a size that depends on tensor data cannot be planned)")
        if self.upper_or_none(expr) is None:
            names = ", ".join(sorted(str(x) for x in expr.free_symbols))
            return (f"it has no upper bound: declare a maximum for the dynamic dimension(s) "
                    f"{names}, e.g. torch.export.Dim('seq', max=512)")
        return None

    def upper_or_none(self, expr) -> Optional[int]:
        if expr.is_Integer:
            return int(expr)
        if self.shape_env is None:
            return None
        upper = self.shape_env.bound_sympy(expr).upper
        if upper in (sympy.oo, -sympy.oo) or type(upper).__name__ in ("IntInfinity", "NegativeIntInfinity"):
            return None
        return int(upper)

    def upper_bound(self, s) -> int:
        """The largest value `s` takes for any input sizes within their bounds."""
        expr = symbolic_expr(s)
        upper = self.upper_or_none(expr)
        if upper is None or any(x not in self.inputs for x in expr.free_symbols):
            raise ExportError(f"the size {expr} has no upper bound kiln can plan for: "
                              f"{self.problem(s)}")
        return max(upper, 0)


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

    def value(self, x) -> int:
        """Index of an Int value holding `x` (an int, a SymInt or an FX node of one)."""
        return self._compile(symbolic_expr(x))

    def _op(self, kind: str, args: List[int], expr) -> int:
        # The value in the file is only what kernels see at method load (prepare):
        # the bound, like the sizes of dynamic tensors.
        out = self.new_int(self.sizes.upper_or_none(expr) or 0)
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
                raise ExportError(f"the size symbol {expr} is not the size of an input dimension")
            node, dim = self.sizes.inputs[expr]
            return self._op("SizeOf", [self.input_value(node), self.const_int(dim)], expr)
        if isinstance(expr, (sympy.Add, sympy.Mul, sympy.Max, sympy.Min)):
            kind = {sympy.Add: "Add", sympy.Mul: "Mul", sympy.Max: "Max", sympy.Min: "Min"}[type(expr)]
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
        if isinstance(expr, (PythonMod, sympy.Mod)):
            return self._op("Mod", [self._compile(expr.args[0]), self._compile(expr.args[1])], expr)
        raise ExportError(f"kiln cannot compute the size expression {expr} "
                          f"({type(expr).__name__}) at run time")
