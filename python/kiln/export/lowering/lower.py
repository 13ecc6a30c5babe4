"""The lowering stage: PassedProgram -> ProgramIR, the kiln IR with its memory plan.

    program = kiln.export.lower(passed)
    program.methods[0].instructions, program.methods[0].arena_sizes, program.segments

Every method is lowered with one ConstantPool, so constants the methods share
(and identical bytes within one) are stored once. Unsupported operators of all
methods are found first and reported together.
"""

from __future__ import annotations

import sys
from typing import Dict

from ...errors import ExportError, UnsupportedOperatorError
from .ir import ProgramIR

# The runtime's limits on named metadata (runtime/loader/program_data.h).
MAX_METADATA_ENTRIES = 1024
MAX_METADATA_KEY_BYTES = 256


def check_metadata(metadata) -> Dict[str, bytes]:
    """{key: bytes} from a {str: bytes | str} mapping (str values are stored as UTF-8),
    refusing what the runtime would refuse to load."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise ExportError(f"metadata must be a dict {{str: bytes or str}}, got {type(metadata).__name__}")
    if len(metadata) > MAX_METADATA_ENTRIES:
        raise ExportError(f"{len(metadata)} metadata entries; at most {MAX_METADATA_ENTRIES} are allowed")
    out: Dict[str, bytes] = {}
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or len(key.encode("utf-8")) > MAX_METADATA_KEY_BYTES:
            raise ExportError(f"metadata key {key!r} must be a non-empty string of at most "
                              f"{MAX_METADATA_KEY_BYTES} UTF-8 bytes")
        if isinstance(value, str):
            value = value.encode("utf-8")
        try:
            out[key] = bytes(memoryview(value))
        except TypeError:
            raise ExportError(f"metadata '{key}' must be bytes or str, not {type(value).__name__}") from None
    return out


def _producer() -> str:
    import torch

    kiln = sys.modules.get("kiln")
    version = getattr(kiln, "__version__", None)
    if version is None:
        try:
            from importlib.metadata import version as dist_version

            version = dist_version("kiln")
        except Exception:
            version = "dev"
    return f"kiln {version} / torch {torch.__version__}"


def lower(passed, *, metadata=None) -> ProgramIR:
    """Lowers every method of `passed` (a PassedProgram, from run_passes()) to
    the kiln IR: the third stage of kiln.export.export.

    metadata is as for export(). The ProgramIR holds each method's values,
    instructions and memory plan (every planned tensor's arena offset,
    `arena_sizes`, and `naive_bytes` for comparison) and the constant
    segments; serialize() or write_program() turn it into a file.

    Raises kiln.errors.UnsupportedOperatorError listing every operator kiln
    cannot run, in every method, with where each call comes from.
    """
    from ..diagnostics import find_unsupported, format_unsupported
    from ..passes.pipeline import PassedProgram
    from .constants import ConstantPool
    from .method import lower_method

    if not isinstance(passed, PassedProgram):
        raise ExportError(f"lower takes the PassedProgram of kiln.export.run_passes(), got {type(passed).__name__}")
    named_metadata = check_metadata(metadata)
    unsupported = [(ctx.method, key, node, ctx.module_prefix)
                   for ctx in passed.methods.values() for key, node in find_unsupported(ctx)]
    if unsupported:
        error = UnsupportedOperatorError(format_unsupported(unsupported))
        error.operators = sorted({key for _, key, _, _ in unsupported})
        raise error
    pool = ConstantPool()
    methods = [lower_method(ctx, pool) for ctx in passed.methods.values()]
    return ProgramIR(methods=methods, segments=pool.segments, producer=_producer(), metadata=named_metadata)
