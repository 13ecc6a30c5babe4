"""kiln.export.quantize: weight-only quantization of a model's linear and
embedding weights, and GGUF's quantized blocks kept in their own bits
(docs/quantization.md).

    from kiln.export.quantize import quantize, from_gguf_blocks
    qmodel = quantize(model, "int4")

The API and the operators' formats are described in `modules.py`; `ops.py`
declares the kiln_quantized operators for torch; `summary.py` says what a
program's quantized instructions are (torch-free, for reports and
`kiln inspect`). Importing this package does not import torch: its names are
loaded from `modules.py` when first used.
"""

__all__ = ["quantize", "quantize_weight", "from_gguf_blocks", "QuantizedWeight", "QuantizedLinear",
           "QuantizedEmbedding", "QuantizationSummary", "SCHEMES", "GGUF_TYPES"]


def __getattr__(name):
    # Only the API: the submodules (ops, summary, modules) are found by the import system.
    if name in __all__:
        from . import modules

        return getattr(modules, name)
    raise AttributeError(f"module 'kiln.export.quantize' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))
