"""The passes stage: TracedProgram -> PassedProgram.

    passed = kiln.export.run_passes(traced, optimize=True)
    passed.methods["forward"].graph.print_tabular()   # the graph the lowering will see
    print(passed)                                       # what was fused, per method

Each method is decomposed afresh (TracedMethod.decompose) and run through
default_passes(): the traced program can go through the passes again, e.g.
with optimize=False to see what the fusions changed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Sequence

from ...errors import ExportError
from ..report import fused_summary
from . import default_passes
from .manager import PassContext, PassManager


@dataclass
class PassedProgram:
    """The output of run_passes(): every method's graph after the pass pipeline."""

    methods: Dict[str, PassContext]
    """{method name: PassContext}: the rewritten graph, its constants and state, and
    `fused`, the count of what the fusion passes fused."""
    optimize: bool = True
    """Whether the fusion passes ran."""
    timings: Dict[str, float] = field(default_factory=dict, repr=False)
    """Seconds spent in each pass, summed over the methods."""

    def __str__(self) -> str:
        lines = [f"kiln.export.PassedProgram: {len(self.methods)} method(s)"]
        for name, ctx in self.methods.items():
            calls = sum(n.op == "call_function" for n in ctx.graph.nodes)
            fused = fused_summary(ctx.fused) if self.optimize else "nothing (optimize=False)"
            lines.append(f"  method '{name}': {calls} operator calls, {len(ctx.constants)} constants, "
                         f"{len(ctx.state)} state tensors; fused: {fused}")
        return "\n".join(lines)


def run_passes(traced, *, optimize: bool = True, passes: Sequence = ()) -> PassedProgram:
    """Runs kiln's pass pipeline on every method of `traced` (a TracedProgram,
    from trace()): the second stage of kiln.export.export.

    optimize and passes are as for export(). The traced program is not changed.
    Raises kiln.errors.ExportError naming the pass that failed. Unsupported
    operators are not an error yet: lower() lists them all, so the graph that
    holds them can still be looked at here.
    """
    from ..frontend.trace import TracedProgram

    if not isinstance(traced, TracedProgram):
        raise ExportError(f"run_passes takes the TracedProgram of kiln.export.trace(), got "
                          f"{type(traced).__name__} (an ExportedProgram goes through trace() first)")
    manager = PassManager(default_passes(optimize, passes or ()))
    methods = {name: manager.run(method.decompose()) for name, method in traced.methods.items()}
    return PassedProgram(methods=methods, optimize=optimize, timings=dict(manager.timings))
