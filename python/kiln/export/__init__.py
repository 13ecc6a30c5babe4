"""kiln.export: turn a PyTorch nn.Module into a .kiln program file.

    import kiln.export
    report = kiln.export.export(model, (x,), "model.kiln")
    print(report)
    print(kiln.export.compare(model, (x,)))   # where kiln and eager start to differ, if they do

export() is four stages chained; each is public, so that one can stop between
them and look at what the exporter made:

    traced = kiln.export.trace(model, (x,))          # TracedProgram: torch.export's programs
    passed = kiln.export.run_passes(traced)          # PassedProgram: graphs after the passes, what was fused
    program = kiln.export.lower(passed)              # ProgramIR: instructions, values, memory plan
    data = kiln.export.serialize(program)            # the file's bytes (kiln.load(data) runs them)
    kiln.export.write_program(program, "model.kiln") # or the same bytes written atomically

trace() also takes an ExportedProgram of the user's own torch.export.export,
and so does export().

Importing this package is cheap: torch (and flatbuffers) are imported only when
`export` is called, or when a name that needs torch (trace, run_passes, lower,
PassContext, TracedProgram, PassedProgram) is first used.
"""

from .lowering.ir import ProgramIR
from .lowering.serialize import serialize, write_program
from .report import ExportReport, MethodReport

__all__ = ["export", "compare", "trace", "run_passes", "lower", "serialize", "write_program",
           "TracedProgram", "TracedMethod", "PassedProgram", "PassContext", "ProgramIR",
           "ExportReport", "MethodReport"]

# Names whose modules import torch: {name: (module, attribute)}, imported when first asked for.
_NEEDS_TORCH = {
    "trace": (".frontend.trace", "trace"),
    "TracedProgram": (".frontend.trace", "TracedProgram"),
    "TracedMethod": (".frontend.trace", "TracedMethod"),
    "run_passes": (".passes.pipeline", "run_passes"),
    "PassedProgram": (".passes.pipeline", "PassedProgram"),
    "PassContext": (".passes.manager", "PassContext"),
    "lower": (".lowering.lower", "lower"),
}


def __getattr__(name):
    if name in _NEEDS_TORCH:
        import importlib

        module, attribute = _NEEDS_TORCH[name]
        return getattr(importlib.import_module(module, __name__), attribute)
    raise AttributeError(f"module 'kiln.export' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))


def export(model, example_inputs, path, *, methods=None, dynamic_shapes=None,
           optimize=True, quantize=None, metadata=None, passes=()) -> ExportReport:
    """Exports `model` to the .kiln file `path` and returns an ExportReport.

    The stages chained: trace, run_passes, lower, then write_program (or
    serialize, without a path); each stage's docstring says more.

    model:          a torch.nn.Module (put in eval mode for the export; its
                    training flags are restored afterwards), or an
                    ExportedProgram of the user's own torch.export.export
                    (exported as the method "forward"; example_inputs must
                    then be None, and methods, dynamic_shapes and quantize
                    left out).
    example_inputs: a flat tuple of tensors for `model.forward`.
    path:           where the file is written, or None: nothing is written and
                    the report's `data` holds the file's bytes (kiln.load(data)
                    runs them).
    methods:        optional {method_name: example_inputs} to export several
                    methods of `model` into one file (e.g. {"forward": (x,),
                    "encode": (y,)}). When given, `example_inputs` may be None;
                    if it is not None and "forward" is not in `methods`,
                    forward is exported too. Constants shared between methods
                    are stored once.
    dynamic_shapes: passed to torch.export (docs/format.md, Dynamic shapes).
    optimize:       fuse at export (True, the default): batch norms are folded
                    into the conv2d or linear before them, residual adds and
                    activations into the linear or conv2d they follow
                    (kiln::fused_linear, kiln::fused_conv2d), attention over
                    rows gathered from a KV cache reads them in place
                    (kiln::sdpa_rows). False keeps the
                    model's operators as they are, for debugging. The report
                    says what was fused.
    quantize:       None (the default), or quantize the linear and embedding
                    weights of a copy of the model before exporting: a scheme
                    name ("int8", "int4", "int4_sym", "q8_0", "q4_0", "q4_1";
                    "int8_dynamic": int8 per output channel, and each input
                    row of the linears quantized to bytes at run time) or a dict
                    of kiln.export.quantize.quantize() options, e.g.
                    {"scheme": "int4", "group_size": 64}. Norms and everything
                    else stay float32; the report says what was quantized and
                    the bytes saved. See docs/quantization.md.
    metadata:       optional {key: bytes or str} stored in the file as named
                    metadata (docs/format.md, Metadata), read back with
                    kiln.load(path).metadata(key); kiln.llm keeps an LLM's
                    tokenizer, chat template and config there.
    passes:         optional graph passes of the user's, each a callable
                    fn(ctx: kiln.export.PassContext) that rewrites ctx.graph (an
                    FX graph of core ATen operators) in place, e.g. to fuse a
                    pattern into a custom operator (docs/extending.md). They run
                    after kiln's canonicalization and before its fusions, dtype
                    casts, constant folding and dead-code elimination.

    Raises kiln.errors.ExportError (UnsupportedOperatorError lists every
    operator kiln cannot run). Nothing is written unless the export succeeds:
    the file appears whole under `path` (written under a temporary name and
    renamed), and a failed export leaves whatever was at `path` untouched.
    """
    from .exporter import export_program

    return export_program(model, example_inputs, path, methods=methods,
                          dynamic_shapes=dynamic_shapes, optimize=optimize, quantize=quantize,
                          metadata=metadata, passes=passes)


def compare(model, example_inputs, *, method="forward", dynamic_shapes=None, optimize=True, kernels="", isa="",
            tolerance=1e-4, passes=()):
    """Runs `model.<method>(*example_inputs)` in eager PyTorch and in kiln and
    compares every intermediate value; returns a Comparison whose printout (and
    .culprit) names the first operator whose result differs while its inputs
    agree, with its module. See kiln/export/comparison.py."""
    from .comparison import compare as _compare

    return _compare(model, example_inputs, method=method, dynamic_shapes=dynamic_shapes, optimize=optimize,
                    kernels=kernels, isa=isa, tolerance=tolerance, passes=passes)
