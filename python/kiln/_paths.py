"""Where the installed package keeps its C++ SDK (headers, library, CMake and pkg-config files)."""

from pathlib import Path

_ROOT = Path(__file__).resolve().parent


def include_dir() -> str:
    """Directory to put on the include path: it holds kiln/kiln.h."""
    return str(_ROOT / "include")


def lib_dir() -> str:
    """Directory that holds libkiln.so.0."""
    return str(_ROOT / "lib")


def library_path() -> str:
    """Path of the shared runtime, libkiln.so.0."""
    return str(_ROOT / "lib" / "libkiln.so.0")


def cmake_dir() -> str:
    """Directory of kilnConfig.cmake: pass it as kiln_DIR or in CMAKE_PREFIX_PATH."""
    return str(_ROOT / "lib" / "cmake" / "kiln")


def pkgconfig_dir() -> str:
    """Directory of kiln.pc: add it to PKG_CONFIG_PATH."""
    return str(_ROOT / "lib" / "pkgconfig")
