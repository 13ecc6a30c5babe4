"""The static build (KILN_BUILD_SHARED=OFF, docs/architecture.md): the runtime is embedded in the
extension and nothing else is shipped."""

import subprocess
from pathlib import Path

import pytest

import kiln

pytestmark = pytest.mark.static_runtime
ROOT = Path(kiln.__file__).resolve().parent


def test_no_shared_runtime_is_shipped():
    assert not list(ROOT.rglob("libkiln*"))
    assert not (ROOT / "lib").exists()


def test_extension_embeds_the_runtime():
    ext = next(ROOT.glob("_kiln*.so"))
    dynamic = subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True, check=True).stdout
    assert "libkiln" not in dynamic
    # The runtime's API is inside but not exported: the module exports only its init function, and no
    # symbol of another type either (weak W, vague-linkage V and unique u template instances included).
    exported = subprocess.run(["nm", "-D", "--defined-only", str(ext)], capture_output=True, text=True,
                              check=True).stdout
    assert [line.split()[1:] for line in exported.splitlines()] == [["T", "PyInit__kiln"]]
    assert kiln.runtime_library_path() == str(ext)
    assert len(kiln.registered_kernels()) > 40
