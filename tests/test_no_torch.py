"""`import kiln` and running a program need numpy only; torch is imported by kiln.export alone."""

import subprocess
import sys
import textwrap

import numpy as np
import torch

from conftest import clean_env

BLOCK_TORCH = textwrap.dedent("""
    import importlib.abc, sys

    class BlockTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ImportError("importing torch is blocked in this test")

    sys.meta_path.insert(0, BlockTorch())
""")


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BLOCK_TORCH + textwrap.dedent(code)],
                          capture_output=True, text=True, env=clean_env(), timeout=300)


def test_blocker_really_blocks():
    proc = run_python("import torch")
    assert proc.returncode != 0 and "blocked" in proc.stderr


def test_import_and_run_without_torch(exported, tmp_path):
    path, model, (x,), _ = exported("cnn")
    np.save(tmp_path / "x.npy", x.numpy())
    proc = run_python(f"""
        import sys
        import numpy as np
        import kiln
        import kiln.export  # the exporter package itself must stay cheap
        program = kiln.load({str(path)!r})
        (out,) = program.forward(np.load({str(tmp_path / 'x.npy')!r}))
        assert "torch" not in sys.modules, "kiln imported torch"
        np.save({str(tmp_path / 'out.npy')!r}, out)
    """)
    assert proc.returncode == 0, proc.stderr
    with torch.no_grad():
        expected = model(x).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "out.npy"), expected, rtol=1e-4, atol=1e-5)


def test_cli_without_torch(exported):
    path, *_ = exported("mlp")
    proc = run_python(f"""
        import sys
        from kiln._cli import main
        sys.exit(main(["inspect", {str(path)!r}]))
    """)
    assert proc.returncode == 0, proc.stderr
    assert "method forward" in proc.stdout
