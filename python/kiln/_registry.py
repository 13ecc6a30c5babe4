"""The process-wide kernel and backend registries, seen from Python."""

from __future__ import annotations

import os
from dataclasses import dataclass

from . import _kiln
from .errors import InvalidArgument, RegistrationError


@dataclass(frozen=True)
class KernelRegistration:
    op_name: str
    dtypes: str
    library: str
    # Higher tiers are tried first at method load: 0 is the portable reference
    # kernels, 100 the optimized ones; plugins may use any tier.
    tier: int = 0


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
    if not isinstance(path, (str, bytes, os.PathLike)):
        raise InvalidArgument(f"load_library takes a path, not {type(path).__name__}")
    lib_path, kernels, backends = _kiln.load_library(os.fsdecode(path))
    return LoadedLibrary(
        lib_path,
        [KernelRegistration(*k) for k in kernels],
        [BackendRegistration(*b) for b in backends],
    )


PLUGIN_ENTRY_POINT_GROUP = "kiln.plugins"
_plugins_loaded = False


def load_plugins() -> list[LoadedLibrary]:
    """Load the plugin libraries that installed distributions declare.

    A distribution declares plugins in the "kiln.plugins" entry-point group;
    each entry point resolves to a path, or to a callable returning a path or a
    list of paths, of a library to pass to load_library. Each library is loaded
    once per process; loading again returns what it registered the first time.
    Errors of one plugin are raised after all others were tried.
    """
    global _plugins_loaded
    from importlib.metadata import entry_points

    loaded, errors = [], []
    for ep in entry_points(group=PLUGIN_ENTRY_POINT_GROUP):
        try:
            target = ep.load()
            paths = target() if callable(target) else target
            if isinstance(paths, (str, os.PathLike)):
                paths = [paths]
            for path in paths:
                loaded.append(load_library(path))
        except Exception as e:  # one broken plugin must not hide the others
            errors.append(f"plugin {ep.name!r} ({ep.value}): {type(e).__name__}: {e}")
    _plugins_loaded = True
    if errors:
        raise RegistrationError("; ".join(errors))
    return loaded


def _load_plugins_once() -> bool:
    """Loads plugins if that was never tried; True if it did something now."""
    if _plugins_loaded:
        return False
    try:
        load_plugins()
    except RegistrationError:
        pass  # the caller reports its own, more specific error
    return True


def runtime_copies() -> list[str]:
    """Every loaded file that carries a copy of the kiln runtime (normally exactly one)."""
    return list(_kiln.runtime_copies())


def runtime_library_path() -> str:
    """The file that holds the registries: libkiln.so.0 (or this module in a static build)."""
    return _kiln.runtime_library_path()


def detected_isa() -> str:
    """The highest instruction-set level this CPU supports (one of isa_levels())."""
    return _kiln.detected_isa()


def isa_levels() -> list[str]:
    """The instruction-set levels kiln's microkernels are built for on this architecture, lowest
    first (e.g. ["baseline", "avx2", "avx512", "avx512_vnni"]): the spellings of kiln.load(isa=...) and KILN_ISA."""
    return list(_kiln.isa_levels())


def supported_isas() -> list[str]:
    """The levels of isa_levels() this CPU runs (it has all their features), lowest first."""
    return list(_kiln.supported_isas())


def isa_features(level: str) -> list[str]:
    """The CPU features a level's microkernels are compiled for (names as cpu_features() gives them)."""
    if not isinstance(level, str):
        raise InvalidArgument(f"isa_features takes a level name, not {type(level).__name__}")
    return list(_kiln.isa_features(level))


def cpu_features() -> list[str]:
    """The features of this CPU (and operating system) that kiln knows, read once at startup:
    CPUID and XGETBV on x86-64 ("avx512f", "avx512_vnni", ...), HWCAP on aarch64 ("dotprod", ...)."""
    return list(_kiln.cpu_features())


def cpu_feature_names() -> list[str]:
    """Every feature kiln can detect on this architecture, whether this CPU has it or not."""
    return list(_kiln.cpu_feature_names())


def kernel_tiers() -> dict[str, int]:
    """The named kernel tiers, lowest first: {"portable": 0, "optimized": 100}. The names are what
    kiln.load(kernels=...) and KILN_KERNELS accept; a plugin's kernels may use other tiers."""
    return dict(_kiln.kernel_tiers())


def kernel_tier_name(tier: int) -> str:
    """"portable", "optimized", or "tier <n>" for a tier without a name."""
    return next((name for name, value in kernel_tiers().items() if value == tier), f"tier {tier}")


def num_threads() -> int:
    """Threads used by the runtime's thread pool."""
    return _kiln.num_threads()


def set_num_threads(n: int) -> None:
    """Resize the runtime's thread pool to n threads (the calling thread included).

    The default, before any call, is KILN_NUM_THREADS or one thread per
    available core. Waits for methods that are executing.
    """
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= _kiln.MAX_THREADS:
        raise InvalidArgument(f"set_num_threads needs an int from 1 to {_kiln.MAX_THREADS}, got {n!r}")
    _kiln.set_num_threads(n)
