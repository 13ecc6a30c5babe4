"""torch dtypes and kiln's ScalarType codes (ir.py), both ways the exporter needs them."""

from __future__ import annotations

import torch

from ...errors import ExportError
from . import ir

DTYPES = {
    torch.float32: ir.FLOAT32, torch.float64: ir.FLOAT64, torch.int64: ir.INT64,
    torch.int32: ir.INT32, torch.bool: ir.BOOL, torch.float16: ir.FLOAT16,
    torch.bfloat16: ir.BFLOAT16, torch.uint8: ir.UINT8, torch.int8: ir.INT8,
}

# Constants of these dtypes are stored as float32 (docs/format.md).
WIDENED_CONSTANTS = {torch.float16: torch.float32, torch.bfloat16: torch.float32}

# c10::ScalarType codes (c10/core/ScalarType.h) of the dtypes kiln has: a schema
# default such as `ScalarType dt=6` reaches the exporter as this int.
C10_DTYPES = {
    0: torch.uint8, 1: torch.int8, 3: torch.int32, 4: torch.int64, 5: torch.float16,
    6: torch.float32, 7: torch.float64, 11: torch.bool, 15: torch.bfloat16,
}


def kiln_dtype(dtype: torch.dtype, what: str = "") -> int:
    """kiln's ScalarType code of `dtype`; ExportError (naming `what`) if kiln has none."""
    try:
        return DTYPES[dtype]
    except KeyError:
        raise ExportError(f"dtype {dtype} is not supported by kiln{' (' + what + ')' if what else ''}; "
                          f"supported: {', '.join(str(d) for d in DTYPES)}") from None
