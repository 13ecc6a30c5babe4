"""kiln: run exported PyTorch programs on the CPU, from Python and C++.

`import kiln` needs numpy only; `kiln.export` (which needs torch) is imported
on first use.
"""

from . import _kiln
from ._kiln import __version__
from ._paths import cmake_dir, include_dir, lib_dir, library_path, pkgconfig_dir
from ._profile import Profile, ProfiledChunk, ProfiledInstruction
from ._program import InstructionInfo, Method, MethodSpec, Program, TensorSpec, load
from ._registry import (
    cpu_feature_names,
    cpu_features,
    detected_isa,
    isa_features,
    isa_levels,
    kernel_tier_name,
    kernel_tiers,
    load_library,
    load_plugins,
    num_threads,
    registered_backends,
    registered_kernels,
    registration_failures,
    runtime_copies,
    runtime_library_path,
    set_num_threads,
    supported_isas,
)
from .errors import (
    AbiMismatch,
    Busy,
    DuplicateRuntime,
    ExecutionError,
    ExportError,
    InvalidArgument,
    InvalidInput,
    InvalidProgram,
    IoError,
    KilnError,
    MissingBackend,
    MissingKernel,
    NotFound,
    NotSupported,
    OutOfMemory,
    RegistrationError,
    Superseded,
    UnsupportedOperatorError,
)

__all__ = [
    "__version__",
    "load",
    "Program",
    "Method",
    "MethodSpec",
    "TensorSpec",
    "InstructionInfo",
    "Profile",
    "ProfiledInstruction",
    "ProfiledChunk",
    "detected_isa",
    "isa_levels",
    "supported_isas",
    "isa_features",
    "cpu_features",
    "cpu_feature_names",
    "kernel_tiers",
    "kernel_tier_name",
    "registered_kernels",
    "registered_backends",
    "registration_failures",
    "load_library",
    "load_plugins",
    "runtime_copies",
    "runtime_library_path",
    "num_threads",
    "set_num_threads",
    "cmake_dir",
    "pkgconfig_dir",
    "include_dir",
    "lib_dir",
    "library_path",
    "KilnError",
    "InvalidArgument",
    "InvalidProgram",
    "InvalidInput",
    "MissingKernel",
    "MissingBackend",
    "RegistrationError",
    "AbiMismatch",
    "DuplicateRuntime",
    "NotSupported",
    "NotFound",
    "OutOfMemory",
    "IoError",
    "Busy",
    "Superseded",
    "ExecutionError",
    "ExportError",
    "UnsupportedOperatorError",
]


# One runtime per process: refuse to start next to another copy (e.g. a library
# loaded earlier that embeds the runtime statically). Raises DuplicateRuntime.
_kiln.check_single_runtime()


def __getattr__(name):
    # kiln.export is a subpackage that imports torch lazily; expose it on demand.
    if name == "export":
        import importlib

        return importlib.import_module(".export", __name__)
    raise AttributeError(f"module 'kiln' has no attribute {name!r}")
