"""Custom operators end to end: torch.library declaration -> export -> plugin kernel -> run.

The worked example of docs/extending.md, examples/custom_op/, is used as is:
its Python module declares kiln_demo::scaled_tanh with torch.library, its
CMakeLists.txt builds the kernel plugin (kiln_add_plugin) and a C++ app that
links it, with nothing but find_package(kiln), out of tree.

Everything that registers kernels runs in a fresh subprocess: a loaded
library cannot be unloaded, and other test modules check the registry of the
pytest process.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path
from typing import Optional, Sequence

import numpy as np
import pytest
import torch

import kiln

from conftest import REPO, assert_close, build_cmake_project, clean_env

pytestmark = pytest.mark.shared_runtime

EXAMPLE = REPO / "examples" / "custom_op"
sys.path.insert(0, str(EXAMPLE))
from kiln_demo.ops import DemoModel, scaled_tanh  # noqa: E402  (registers kiln_demo::scaled_tanh)

PLUGIN = "libkiln_demo_ops.so"
TOLERANCE = 1e-4  # against eager PyTorch: max abs error relative to the output's scale


# -- test-only custom operators (export side only: they have no kernel) -------------

@torch.library.custom_op("kiln_test_custom::mixed", mutates_args=())
def mixed(x: torch.Tensor, dims: Sequence[int], weights: Sequence[float], flag: bool, mode: str,
          other: Optional[torch.Tensor] = None, *, k: int = 3, alpha: float = 2.0,
          dtype: torch.dtype = torch.float64) -> torch.Tensor:
    return x * alpha


@mixed.register_fake
def _(x, dims, weights, flag, mode, other=None, *, k=3, alpha=2.0, dtype=torch.float64):
    return torch.empty_like(x)


@torch.library.custom_op("kiln_test_custom::halves", mutates_args=())
def halves(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = x.chunk(2, dim=-1)
    return a.clone(), b.clone()


@halves.register_fake
def _(x):
    shape = list(x.shape[:-1]) + [x.shape[-1] // 2]
    return x.new_empty(shape), x.new_empty(shape)


@torch.library.custom_op("kiln_test_custom::bump_", mutates_args=("x",))
def bump_(x: torch.Tensor) -> None:
    x.add_(1)


@bump_.register_fake
def _(x):
    return None


# -- helpers ---------------------------------------------------------------------

def read_method(path: Path):
    """(forward method, generated schema module) of a .kiln file, via the object API."""
    from kiln.export import _schema as S
    from kiln.export.lowering.serialize import parse_header

    data = Path(path).read_bytes()
    h = parse_header(data)
    fb = data[h.flatbuffer_offset:h.flatbuffer_offset + h.flatbuffer_size]
    program = S.ProgramT.InitFromObj(S.Program.GetRootAs(fb, 0))
    (method,) = program.methods
    return method, S


def _s(x):
    return x.decode() if isinstance(x, bytes) else x


def operator_keys(method):
    return [f"{_s(o.name)}.{_s(o.overload)}" for o in method.operators]


def calls_of(method, key):
    keys = operator_keys(method)
    return [ins.instruction for ins in method.instructions if keys[ins.instruction.op] == key]


def decode(method, S, index):
    """(kind name, python value) of value `index`."""
    v = method.values[int(index)]
    names = {getattr(S.ValueKind, n): n for n in dir(S.ValueKind) if not n.startswith("_")}
    kind = names[v.valueType]
    if kind == "Tensor":
        return kind, ("f32", "f64", "i64", "i32", "bool", "f16", "bf16", "u8", "i8")[v.value.dtype]
    if kind == "None_":
        return "None", None
    if kind in ("IntList", "DoubleList", "BoolList"):
        items = v.value.items if v.value.items is not None else []
        return kind, [x.item() if hasattr(x, "item") else x for x in items]
    if kind == "TensorList":
        return kind, [decode(method, S, i) for i in v.value.items]
    return kind, _s(v.value.value)


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh interpreter with a consumer's environment."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=clean_env(**env), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


# -- fixtures --------------------------------------------------------------------

# name -> (model kwargs, input shape)
CASES = {
    "demo": (dict(scale=0.5), (4, 16)),                         # offset: the schema default
    "offset_3d": (dict(scale=1.5, offset=0.25), (2, 3, 16)),   # a non-default keyword-only argument, 3-D input
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    """name -> (program path, input, eager output); inputs also saved as .npy and raw .bin."""
    import kiln.export

    out = tmp_path_factory.mktemp("custom_ops")
    result = {}
    for name, (kwargs, shape) in CASES.items():
        torch.manual_seed(7)
        model = DemoModel(features=shape[-1], **kwargs).eval()
        x = torch.randn(*shape)
        path = out / f"{name}.kiln"
        kiln.export.export(model, (x,), path)
        with torch.no_grad():
            expected = model(x).numpy()
        np.save(out / f"{name}.x.npy", x.numpy())
        x.numpy().tofile(out / f"{name}.bin")
        result[name] = (path, x.numpy(), expected)
    return result


@pytest.fixture(scope="module")
def example_build(tmp_path_factory) -> Path:
    """examples/custom_op built out of tree against the installed kiln only."""
    build = tmp_path_factory.mktemp("custom_op_build")
    build_cmake_project(EXAMPLE, build, defines={"CMAKE_PREFIX_PATH": kiln.cmake_dir()})
    assert (build / PLUGIN).is_file() and (build / "run_model").is_file()
    return build


# -- export ----------------------------------------------------------------------

def test_custom_op_is_one_kernel_call_with_schema_arguments(programs):
    for name, (path, _, _) in programs.items():
        method, S = read_method(path)
        assert operator_keys(method) == ["aten::linear.default", "kiln_demo::scaled_tanh.default"]
        (call,) = calls_of(method, "kiln_demo::scaled_tanh.default")
        args = [decode(method, S, i) for i in call.inputs]
        kwargs, _ = CASES[name]
        # (x, scale, offset): keyword-only `offset` included, the default filled in.
        assert args == [("Tensor", "f32"), ("Double", kwargs["scale"]), ("Double", kwargs.get("offset", 0.0))]
        assert len(call.outputs) == 1


def test_custom_op_arguments_follow_the_schema_and_get_no_casts(tmp_path):
    import kiln.export

    class Model(torch.nn.Module):
        def forward(self, x, idx):
            a, b = halves(x)
            return mixed(a, [1, -1], [0.5, 2.0], True, "fast", idx, k=5), b

    path = tmp_path / "mixed.kiln"
    kiln.export.export(Model(), (torch.randn(2, 8), torch.arange(4)), path)
    method, S = read_method(path)
    assert operator_keys(method) == ["kiln_test_custom::halves.default", "kiln_test_custom::mixed.default"]
    (split,) = calls_of(method, "kiln_test_custom::halves.default")
    assert len(split.outputs) == 2  # one output value per Tensor return
    (call,) = calls_of(method, "kiln_test_custom::mixed.default")
    args = [decode(method, S, i) for i in call.inputs]
    assert args == [
        ("Tensor", "f32"),
        ("IntList", [1, -1]),          # custom ops keep their values: no dim normalization
        ("DoubleList", [0.5, 2.0]),
        ("Bool", True),
        ("String", "fast"),
        ("Tensor", "i64"),             # no cast to the output dtype: the schema declares none
        ("Int", 5),
        ("Double", 2.0),               # default filled in
        ("Int", 1),                    # dtype default (c10 code 7) as kiln's ScalarType Float64
    ]

    # No kernel for it: the runtime says so at method load, naming operator and dtypes.
    proc = run_python(f"""
        import kiln
        program = kiln.load({str(path)!r})
        try:
            program.method("forward")
        except kiln.MissingKernel as e:
            print("ERROR:", e)
    """)
    assert "no kernel for kiln_test_custom::halves.default with dtypes (f32)" in proc.stdout


def test_unsupported_aten_ops_are_still_refused(tmp_path):
    import kiln.export

    class Model(torch.nn.Module):
        def forward(self, x):
            return torch.logcumsumexp(scaled_tanh(x, 0.5), dim=1)

    with pytest.raises(kiln.UnsupportedOperatorError) as info:
        kiln.export.export(Model(), (torch.randn(2, 8),), tmp_path / "bad.kiln")
    assert info.value.operators == ["aten::logcumsumexp.default"]  # the custom op is fine
    assert not (tmp_path / "bad.kiln").exists()


def test_mutating_custom_op_is_refused_with_the_reason(tmp_path):
    import kiln.export

    class Model(torch.nn.Module):
        def forward(self, x):
            y = x * 2
            bump_(y)
            return y

    with pytest.raises(kiln.UnsupportedOperatorError) as info:
        kiln.export.export(Model(), (torch.randn(2, 8),), tmp_path / "bad.kiln")
    message = str(info.value)
    assert info.value.operators == ["kiln_test_custom::bump_.default"]
    assert "mutates 'x'" in message and "mutates_args=()" in message


def test_custom_op_on_constants_is_not_folded(tmp_path):
    import kiln.export

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("table", torch.linspace(-2, 2, 8))

        def forward(self, x):
            return x + scaled_tanh(self.table, 2.0)

    path = tmp_path / "const.kiln"
    kiln.export.export(Model(), (torch.randn(3, 8),), path)
    method, _ = read_method(path)
    assert "kiln_demo::scaled_tanh.default" in operator_keys(method)  # the kernel runs, not the Python reference


# -- running it --------------------------------------------------------------------

def test_without_the_plugin_method_load_fails_with_missing_kernel(programs):
    path, _, _ = programs["demo"]
    proc = run_python(f"""
        import kiln
        program = kiln.load({str(path)!r})   # the file itself is fine
        try:
            program.method("forward")
        except kiln.MissingKernel as e:
            print("ERROR:", e)
        else:
            raise SystemExit("method load succeeded without the plugin")
    """)
    error = next(line for line in proc.stdout.splitlines() if line.startswith("ERROR:"))
    assert "no kernel for kiln_demo::scaled_tanh.default with dtypes (f32)" in error
    assert "no kernel is registered for this operator" in error


def test_python_load_library_matches_eager(programs, example_build, tmp_path):
    plugin = example_build / PLUGIN
    proc = run_python(f"""
        import numpy as np, kiln
        lib = kiln.load_library({str(plugin)!r})
        print("KERNELS:", sorted((k.op_name, k.dtypes) for k in lib.kernels))
        for name, path in {[(n, str(p)) for n, (p, _, _) in programs.items()]!r}:
            x = np.load(path[:-len(".kiln")] + ".x.npy")
            (y,) = kiln.load(path).forward(x)
            np.save({str(tmp_path)!r} + "/" + name + ".out.npy", y)
    """)
    assert ("KERNELS: [('kiln_demo::scaled_tanh.default', 'f32'), "
            "('kiln_demo::scaled_tanh.default', 'f64')]") in proc.stdout
    for name, (_, _, expected) in programs.items():
        got = np.load(tmp_path / f"{name}.out.npy")
        assert got.shape == expected.shape, name
        assert_close(got, expected, TOLERANCE, name)


def test_kiln_plugin_path(programs, example_build):
    path, x, expected = programs["demo"]
    proc = run_python(f"""
        import json, numpy as np, kiln
        (y,) = kiln.load({str(path)!r}).forward(np.load({str(path)[:-5] + '.x.npy'!r}))
        print("OUT:", json.dumps(y.astype(np.float64).ravel().tolist()))
    """, KILN_PLUGIN_PATH=str(example_build / PLUGIN))
    got = np.array(json.loads(proc.stdout.split("OUT:")[1])).reshape(expected.shape)
    assert_close(got, expected, TOLERANCE)


def test_cpp_app_linking_the_plugin_target(programs, example_build):
    app = example_build / "run_model"
    assert "load_library" not in (EXAMPLE / "run_model.cpp").read_text()  # linked, never loaded by hand
    dynamic = subprocess.run(["readelf", "-d", str(app)], capture_output=True, text=True, check=True).stdout
    assert f"Shared library: [{PLUGIN}]" in dynamic
    assert "Shared library: [libkiln.so.0]" in dynamic
    for name, (path, _, expected) in programs.items():
        proc = subprocess.run([str(app), str(path), str(path.with_suffix(".bin"))], capture_output=True,
                              text=True, env=clean_env(), timeout=60)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        lines = proc.stdout.splitlines()
        assert f"kernel kiln_demo::scaled_tanh.default [f32] from {example_build / PLUGIN}" in lines
        header = next(i for i, line in enumerate(lines) if line.startswith("output 0 "))
        assert lines[header] == f"output 0 f32{list(expected.shape)}"
        got = np.array([float(v) for v in lines[header + 1:]], dtype=np.float32).reshape(expected.shape)
        assert_close(got, expected, TOLERANCE, name)


def test_plugin_wheel_is_loaded_through_its_entry_point(programs, tmp_path):
    # The example is also a plugin wheel (pyproject.toml). Build it against the
    # installed kiln and unpack it onto PYTHONPATH: an installed distribution as
    # far as importlib.metadata is concerned, without touching this Python.
    # The `test` extra installs its build backend: a set-up without it fails here, never skips.
    if importlib.util.find_spec("scikit_build_core") is None:
        pytest.fail("scikit-build-core is not installed (pip install '.[test]' installs it)")
    wheels = tmp_path / "wheels"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q",
                           "-w", str(wheels), str(EXAMPLE)], capture_output=True, text=True,
                          env=clean_env(), timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (wheel,) = wheels.glob("kiln_demo_ops-*.whl")
    site = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(site)
    assert (site / "kiln_demo" / PLUGIN).is_file()
    assert "kiln.plugins" in next(site.glob("*.dist-info")).joinpath("entry_points.txt").read_text()

    path, _, expected = programs["demo"]
    proc = run_python(f"""
        import json, numpy as np, kiln
        (y,) = kiln.load({str(path)!r}).forward(np.load({str(path)[:-5] + '.x.npy'!r}))  # loads plugins lazily
        print("FROM:", sorted({{k.library for k in kiln.registered_kernels() if k.op_name.startswith("kiln_demo::")}}))
        print("OUT:", json.dumps(y.astype(np.float64).ravel().tolist()))
    """, PYTHONPATH=str(site))
    assert f"FROM: [{str(site / 'kiln_demo' / PLUGIN)!r}]" in proc.stdout
    got = np.array(json.loads(proc.stdout.split("OUT:")[1])).reshape(expected.shape)
    assert_close(got, expected, TOLERANCE)
