"""kiln_demo: the example plugin package for the custom operator kiln_demo::scaled_tanh.

Importing this package is cheap and needs neither torch nor kiln: kiln imports
it through the "kiln.plugins" entry point (see pyproject.toml) to find the
kernel library. The torch.library declaration used for export lives in
kiln_demo.ops (which imports torch).
"""

from pathlib import Path

__all__ = ["library_paths"]

LIBRARY_NAME = "libkiln_demo_ops.so"


def library_paths():
    """The plugin libraries this package ships, for kiln.load_plugins()."""
    return [str(Path(__file__).resolve().parent / LIBRARY_NAME)]
