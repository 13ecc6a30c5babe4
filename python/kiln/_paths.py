"""Where the installed package keeps its C++ SDK (headers, library, CMake and pkg-config files)."""

from pathlib import Path

from . import _kiln
from .errors import NotSupported

_ROOT = Path(__file__).resolve().parent


def _sdk_root() -> Path:
    if _kiln.STATIC_RUNTIME:
        raise NotSupported("this kiln was built with KILN_BUILD_SHARED=OFF: the runtime is embedded in the "
                           "Python extension and there is no C++ SDK (no libkiln.so.0, CMake or pkg-config files)")
    return _ROOT


def include_dir() -> str:
    """Directory to put on the include path: it holds kiln/kiln.h."""
    return str(_sdk_root() / "include")


def lib_dir() -> str:
    """Directory that holds libkiln.so.0."""
    return str(_sdk_root() / "lib")


def library_path() -> str:
    """Path of the shared runtime, libkiln.so.0."""
    return str(_sdk_root() / "lib" / "libkiln.so.0")


def cmake_dir() -> str:
    """Directory of kilnConfig.cmake: pass it as kiln_DIR or in CMAKE_PREFIX_PATH."""
    return str(_sdk_root() / "lib" / "cmake" / "kiln")


def pkgconfig_dir() -> str:
    """Directory of kiln.pc: add it to PKG_CONFIG_PATH."""
    return str(_sdk_root() / "lib" / "pkgconfig")
