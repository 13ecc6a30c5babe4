"""Typed exceptions. Every failure kiln reports to Python is a KilnError."""


class KilnError(Exception):
    """Base class of every error kiln raises."""


class InvalidArgument(KilnError, ValueError):
    """An API function got an argument it cannot use."""


class InvalidProgram(KilnError):
    """A program file is malformed, truncated, inconsistent or exceeds a limit."""


class InvalidInput(KilnError, ValueError):
    """An input given to a method has the wrong count, dtype or shape."""


class MissingKernel(KilnError):
    """No kernel is registered for an operator with the dtypes a program needs."""


class MissingBackend(KilnError):
    """No backend is registered under the name a delegate asks for."""


class RegistrationError(KilnError):
    """A kernel or backend registration collided with another or was refused."""


class AbiMismatch(RegistrationError):
    """A library was built against another kiln ABI version."""


class NotFound(KilnError, LookupError):
    """A named thing (a method, a file) does not exist."""


class OutOfMemory(KilnError, MemoryError):
    """Memory could not be allocated, or a limit set by the caller would be exceeded."""


class IoError(KilnError, OSError):
    """The operating system refused a file operation."""


class NotSupported(KilnError):
    """The program uses a feature this runtime does not support."""


class ExecutionError(KilnError):
    """A kernel or backend failed while running."""


class DuplicateRuntime(KilnError, ImportError):
    """Two copies of the kiln runtime are loaded in one process; the message names both files."""


class Busy(KilnError, RuntimeError):
    """A C++ Method was called while another thread was inside a call of it (the
    Python layer serializes calls instead, so Python code does not see this)."""


class Superseded(Busy):
    """A kiln.llm stream was suspended while another generation started on its
    Runner (another thread, or another stream of this one): the KV cache and the
    sampler now serve that one, so the stream ends instead of yielding its text."""


class ExportError(KilnError):
    """kiln.export could not turn a model into a program."""


class UnsupportedOperatorError(ExportError):
    """The model uses operators kiln cannot run; the message lists all of them."""


# error_name() of the C++ Error enum -> exception class (kept in sync with
# runtime/include/kiln/error.h; tests/test_errors.py checks every kind maps).
BY_ERROR_NAME = {
    "invalid_argument": InvalidArgument,
    "invalid_program": InvalidProgram,
    "invalid_input": InvalidInput,
    "missing_kernel": MissingKernel,
    "missing_backend": MissingBackend,
    "registration_conflict": RegistrationError,
    "abi_mismatch": AbiMismatch,
    "not_found": NotFound,
    "not_supported": NotSupported,
    "out_of_memory": OutOfMemory,
    "io_error": IoError,
    "kernel_failure": ExecutionError,
    "internal": KilnError,
    "duplicate_runtime": DuplicateRuntime,
    "busy": Busy,
}
