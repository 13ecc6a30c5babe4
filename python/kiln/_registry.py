"""The process-wide kernel and backend registries, seen from Python."""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import _kiln


@dataclass(frozen=True)
class KernelRegistration:
    op_name: str
    dtypes: str
    library: str


@dataclass(frozen=True)
class BackendRegistration:
    name: str
    library: str


@dataclass(frozen=True)
class RegistrationFailure:
    what: str
    library: str
    error: str
    message: str


@dataclass(frozen=True)
class LoadedLibrary:
    path: str
    kernels: list
    backends: list


def registered_kernels() -> list[KernelRegistration]:
    """Every kernel in the registry: operator, dtype signature and the library that registered it."""
    return [KernelRegistration(*k) for k in _kiln.registered_kernels()]


def registered_backends() -> list[BackendRegistration]:
    """Every backend in the registry, with the library that registered it."""
    return [BackendRegistration(*b) for b in _kiln.registered_backends()]


def registration_failures() -> list[RegistrationFailure]:
    """Registrations that were refused (collisions, ABI mismatches), in order."""
    return [RegistrationFailure(*f) for f in _kiln.registration_failures()]


def load_library(path: str | os.PathLike) -> LoadedLibrary:
    """Load a shared library whose static initializers register kernels or backends.

    Raises RegistrationError (naming both libraries) if one of its registrations
    collides with an earlier one; the earlier registration stays in effect.
    """
    lib_path, kernels, backends = _kiln.load_library(os.fspath(path))
    return LoadedLibrary(
        lib_path,
        [KernelRegistration(*k) for k in kernels],
        [BackendRegistration(*b) for b in backends],
    )


def runtime_library_path() -> str:
    """The file that holds the registries: libkiln.so.0 (or this module in a static build)."""
    return _kiln.runtime_library_path()


def num_threads() -> int:
    """Threads used by the runtime's thread pool."""
    return _kiln.num_threads()


def set_num_threads(n: int) -> None:
    """Resize the runtime's thread pool; n < 1 means one thread per available core."""
    _kiln.set_num_threads(int(n))
