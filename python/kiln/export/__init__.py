"""kiln.export: turn a PyTorch nn.Module into a .kiln program file.

    import kiln.export
    report = kiln.export.export(model, (x,), "model.kiln")
    print(report)

Importing this package is cheap: torch (and flatbuffers) are imported only when
`export` is called.
"""

from .report import ExportReport, MethodReport

__all__ = ["export", "ExportReport", "MethodReport"]


def export(model, example_inputs, path, *, methods=None, dynamic_shapes=None,
           optimize=True, metadata=None) -> ExportReport:
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
    metadata:       optional {key: bytes or str} stored in the file as named
                    metadata (docs/format.md, Metadata), read back with
                    kiln.load(path).metadata(key); kiln.llm keeps an LLM's
                    tokenizer, chat template and config there.

    Raises kiln.errors.ExportError (UnsupportedOperatorError lists every
    operator kiln cannot run). Nothing is written unless the export succeeds.
    """
    from .exporter import export_program

    return export_program(model, example_inputs, path, methods=methods,
                          dynamic_shapes=dynamic_shapes, optimize=optimize, metadata=metadata)
