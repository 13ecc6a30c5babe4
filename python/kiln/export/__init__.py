"""kiln.export: turn a PyTorch nn.Module into a .kiln program file.

    import kiln.export
    report = kiln.export.export(model, (x,), "model.kiln")
    print(report)
    print(kiln.export.compare(model, (x,)))   # where kiln and eager start to differ, if they do

Importing this package is cheap: torch (and flatbuffers) are imported only when
`export` is called.
"""

from .report import ExportReport, MethodReport

__all__ = ["export", "compare", "ExportReport", "MethodReport", "PassContext"]


def __getattr__(name):
    # PassContext (what a user pass receives) imports torch: only when asked for.
    if name == "PassContext":
        from .passes.manager import PassContext

        return PassContext
    raise AttributeError(f"module 'kiln.export' has no attribute {name!r}")


def export(model, example_inputs, path, *, methods=None, dynamic_shapes=None,
           optimize=True, quantize=None, metadata=None, passes=()) -> ExportReport:
    """Exports `model` to the .kiln file `path` and returns an ExportReport.

    model:          a torch.nn.Module (put in eval mode for the export; its
                    training flags are restored afterwards).
    example_inputs: a flat tuple of tensors for `model.forward`.
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
                    (kiln::fused_linear, kiln::fused_conv2d). False keeps the
                    model's operators as they are, for debugging. The report
                    says what was fused.
    quantize:       None (the default), or quantize the linear and embedding
                    weights of a copy of the model before exporting: a scheme
                    name ("int8", "int4", "int4_sym", "q8_0", "q4_0", "q4_1") or
                    a dict of kiln.export.quantize.quantize() options, e.g.
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
    operator kiln cannot run). Nothing is written unless the export succeeds.
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
