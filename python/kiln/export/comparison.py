"""kiln.export.compare (this module is kiln.export.comparison): run a model in eager PyTorch and in kiln side by side
and find the operator where their results start to differ.

    from kiln.export import compare
    result = compare(model, (x,))
    print(result)                  # the first value that differs, its operator and module
    result.culprit                 # the first differing value whose inputs all agree

How: the model is traced and decomposed as export() does (trace(), then
TracedMethod.decompose()). Before the graph passes run, the graph is executed
in eager PyTorch on the example inputs and every intermediate value is kept.
Then the passes run (fusion included, unless optimize=False) and every
intermediate value the program still computes is made an output of a
temporary program, which kiln runs on the same inputs. A value
a pass replaced (a batch norm folded into its convolution, an activation fused
into its linear) is compared under the name of the value it replaced, so fused
kernels are checked against the eager operators they stand for.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import List, Optional

import numpy as np
import torch
import torch.fx as fx

from ..errors import ExportError
from .diagnostics import module_path
from .frontend.trace import trace
from .lowering.lower import lower
from .lowering.serialize import serialize
from .operators import op_key
from .passes import default_passes
from .passes.manager import VALUE_OF, PassManager, nodes_in
from .passes.pipeline import PassedProgram


@dataclass(frozen=True)
class ValueComparison:
    """One intermediate value: kiln's against eager PyTorch's.

    `error` is the largest absolute difference relative to the value's scale
    (its largest finite magnitude in eager), as outputs are measured against
    eager PyTorch (docs/profiling.md); `ok` says
    whether it is within the tolerance."""

    index: int          # position among the compared values (graph order)
    name: str           # the eager node (torch.export's name)
    op: str             # the operator kiln runs for it (e.g. kiln::fused_linear.default)
    eager_op: str       # the operator eager PyTorch ran (e.g. aten::relu.default)
    module: str         # "layers.0.attn (Attention)", or "" for the root module
    shape: tuple
    error: float
    max_abs_diff: float
    ok: bool
    inputs: tuple = ()  # indices of the compared values this one's kiln operator reads
    kernel: str = ""    # what served it in kiln: "optimized", "portable", "tier 200 (libmy_ops.so)", ...


@dataclass
class Comparison:
    method: str
    tolerance: float
    values: List[ValueComparison] = field(default_factory=list)
    outputs: List[float] = field(default_factory=list)  # error of each method output (same measure)
    kernels: str = ""

    @property
    def first_divergence(self) -> Optional[ValueComparison]:
        """The first value (in graph order) beyond the tolerance, or None."""
        return next((v for v in self.values if not v.ok), None)

    @property
    def culprit(self) -> Optional[ValueComparison]:
        """The first value beyond the tolerance whose compared inputs are all
        within it: the operator that introduced the difference."""
        for v in self.values:
            if not v.ok and all(self.values[i].ok for i in v.inputs):
                return v
        return None

    def __str__(self) -> str:
        lines = [f"kiln.export.compare: method '{self.method}', {len(self.values)} values compared with eager "
                 f"PyTorch (tolerance {self.tolerance:g} of each value's scale; {self.kernels})"]
        lines.append("outputs: " + ", ".join(f"output {i}: error {e:.3g}" for i, e in enumerate(self.outputs)))
        first, culprit = self.first_divergence, self.culprit
        if first is None:
            lines.append("every value agrees")
            return "\n".join(lines)
        if culprit is not None:
            lines.append(f"culprit: #{culprit.index} '{culprit.name}' ({culprit.eager_op}, run by kiln as "
                         f"{culprit.op}, kernel {culprit.kernel}) in {culprit.module or 'the root module'}: "
                         f"error {culprit.error:.3g}, while every value it reads agrees")
        bad = sum(not v.ok for v in self.values)
        lines.append(f"{bad} of {len(self.values)} values differ; the first is #{first.index} '{first.name}'")
        lines.append(f"{'#':>5}  {'value':<24} {'kiln operator':<30} {'kernel':<24} {'module':<28} {'error':>10}")
        start = max(0, first.index - 3)
        for v in self.values[start:first.index + 6]:
            mark = "" if v.ok else "  <-- differs"
            lines.append(f"{v.index:>5}  {v.name:<24} {v.op:<30} {v.kernel[:24]:<24} {v.module[:28]:<28} "
                         f"{v.error:>10.3g}{mark}")
        return "\n".join(lines)


def _error(actual: np.ndarray, expected: np.ndarray) -> tuple:
    """(error relative to the scale, max absolute difference), as conftest.assert_close measures."""
    a = actual.astype(np.float64).ravel()
    e = expected.astype(np.float64).ravel()
    if a.size == 0:
        return 0.0, 0.0
    finite = np.isfinite(e)
    scale = max(float(np.abs(e[finite]).max(initial=0.0)), 1e-6)
    with np.errstate(invalid="ignore"):
        diff = np.abs(a - e)
    diff[np.isnan(diff)] = np.inf
    diff[(a == e) | (np.isnan(a) & np.isnan(e))] = 0.0
    return float(diff.max() / scale), float(diff.max())


class _Recorder(fx.Interpreter):
    """Runs the graph eagerly and keeps every node's value by name."""

    def __init__(self, module, feeds):
        super().__init__(module)
        self.feeds = feeds
        self.values = {}

    def placeholder(self, target, args, kwargs):
        return self.feeds[self._current]

    def run_node(self, n):
        self._current = n
        result = super().run_node(n)
        self.values[n.name] = result
        return result


def _eager_values(ctx, args) -> dict:
    """{node name: value} of the graph (before the passes) on the example inputs."""
    feeds = {}
    user = dict(zip(ctx.user_inputs, args))
    for node in ctx.graph.nodes:
        if node.op != "placeholder":
            continue
        if node in user:
            feeds[node] = user[node]
        elif node in ctx.constants:
            feeds[node] = ctx.constants[node]
        elif node in ctx.state:
            feeds[node] = ctx.state[node][1].clone()
    recorder = _Recorder(ctx.graph.owning_module, feeds)
    with torch.no_grad():
        recorder.run(*[None] * len(feeds))
    return recorder.values


def _fits(shape, symbolic) -> bool:
    """The eager shape agrees with the graph's in rank and static sizes. A
    symbolic size is not compared: that would add a guard that specializes it."""
    return len(shape) == len(symbolic) and all(isinstance(b, torch.SymInt) or int(a) == int(b)
                                               for a, b in zip(shape, symbolic))


def _op_name(node: fx.Node) -> str:
    return op_key(node.target) if node.op == "call_function" and hasattr(node.target, "_schema") else str(node.target)


def _default_tier() -> str:
    """The tier kiln.load uses unless told otherwise: the highest named one."""
    import kiln

    return max(kiln.kernel_tiers().items(), key=lambda kv: kv[1])[0]


def compare(model, example_inputs, *, method: str = "forward", dynamic_shapes=None, optimize: bool = True,
            kernels: str = "", isa: str = "", tolerance: float = 1e-4, passes=()) -> Comparison:
    """Compares every intermediate value of `model.<method>(*example_inputs)` in
    eager PyTorch and in kiln; returns a Comparison (print it, or read
    .culprit / .first_divergence / .values).

    dynamic_shapes, optimize and passes are as for export(); kernels and isa as for
    kiln.load (kernels="portable" tells whether an optimized kernel is the
    cause). The example inputs are the ones compared.
    """
    import kiln

    if not isinstance(model, torch.nn.Module):
        raise ExportError(f"kiln.export.compare expects a torch.nn.Module, got {type(model).__name__}")
    traced = trace(model, None, methods={method: example_inputs}, dynamic_shapes=dynamic_shapes)
    model, args = traced.model, traced.methods[method].example_inputs  # float32, as exported
    ctx = traced.methods[method].decompose()
    # The operator and module of every eager node, kept before the passes
    # remove some (a fused activation, a folded batch norm).
    eager_info = {}
    for node in ctx.graph.nodes:
        node.meta[VALUE_OF] = node.name
        where, cls = module_path(node, ctx.module_prefix)
        eager_info[node.name] = (_op_name(node), f"{where} ({cls})" if where else "")
    eager = _eager_values(ctx, args)
    # run_passes' pipeline, on the graph whose eager values were just recorded.
    PassManager(default_passes(optimize, passes or ())).run(ctx)

    # Every intermediate tensor kiln computes, with an eager value to meet, becomes an output.
    output_node = next(n for n in ctx.graph.nodes if n.op == "output")
    results = output_node.args[0]
    results = list(results) if isinstance(results, (list, tuple)) else [results]
    compared: List[fx.Node] = []
    for node in ctx.graph.nodes:
        if node.op != "call_function" or not isinstance(node.meta.get("val"), torch.Tensor):
            continue
        name = node.meta.get(VALUE_OF)
        if isinstance(eager.get(name), torch.Tensor) and _fits(eager[name].shape, node.meta["val"].shape):
            compared.append(node)
    num_outputs = len(results) - len(ctx.mutated)
    output_node.args = (tuple(results + compared),)

    # lower() refuses unsupported operators, as export does.
    program = lower(PassedProgram(methods={method: ctx}, optimize=optimize))
    ir = program.methods[0]
    loaded = kiln.load(serialize(program), kernels=kernels, isa=isa)
    kiln_method = loaded.method(method)
    got = kiln_method(*[a.detach().contiguous().numpy() for a in args])

    comparison = Comparison(method=method, tolerance=tolerance,
                            kernels=f"kernels {kernels or os.environ.get('KILN_KERNELS') or _default_tier()}, "
                                    f"isa {kiln_method.isa}")
    with torch.no_grad():
        want = getattr(model, method)(*[a.clone() for a in args])
    want = [want] if isinstance(want, torch.Tensor) else list(want)
    comparison.outputs = [_error(g, w.detach().numpy())[0] for g, w in zip(got[:num_outputs], want)]
    # The instruction that produces each output value, and what serves it.
    producer = {}
    for k, ins in enumerate(ir.instructions):
        for v in getattr(ins, "outputs", None) or [getattr(ins, "dst", None)]:
            producer[v] = k
    infos = kiln_method.instructions
    runtime = os.path.basename(kiln.runtime_library_path() or "")

    def served_by(value_index: int) -> str:
        k = producer.get(value_index)
        if k is None or infos[k].kind not in ("kernel", "backend"):
            return "runtime"
        info = infos[k]
        what = kiln.kernel_tier_name(info.tier) if info.kind == "kernel" else "backend"
        lib = os.path.basename(info.library)
        return what if lib == runtime else f"{what} ({lib})"

    index_of = {node: i for i, node in enumerate(compared)}
    for i, (node, value) in enumerate(zip(compared, got[num_outputs:])):
        name = node.meta[VALUE_OF]
        expected = eager[name].detach().numpy()
        error, diff = _error(value, expected) if value.shape == expected.shape else (float("inf"), float("inf"))
        eager_op, module = eager_info[name]
        reads = tuple(sorted({index_of[n] for n in nodes_in((node.args, node.kwargs)) if n in index_of}))
        comparison.values.append(ValueComparison(
            index=i, name=name, op=_op_name(node), eager_op=eager_op, module=module, shape=tuple(value.shape),
            error=error, max_abs_diff=diff, ok=error <= tolerance, inputs=reads,
            kernel=served_by(ir.outputs[num_outputs + i])))
    return comparison
