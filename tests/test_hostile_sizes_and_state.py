"""Hand-built programs that misuse run-time sizes (IntOp, IntValueList) and
state: each ends in a typed error at load or at run, never a crash."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
from kiln.export.lowering.ir import FLOAT32, STATE, ScalarValue, TensorValue

from conftest import clean_env
from program_builder import sized_view_program

X = np.arange(6, dtype=np.float32)


def run(tmp_path, ops, **kwargs):
    path = tmp_path / "p.kiln"
    sized_view_program(path, ops, **kwargs)
    return kiln.load(path).forward(X)


def test_well_formed_size_arithmetic_runs(tmp_path):
    # k = ((size(x, 0) * 3) // 3 + 4) - 4 = 6, then Min/Max/Mod/Neg round trips.
    ops = [("SizeOf", ["x", "dim"]), ("Mul", ["r0", "c3"]), ("FloorDiv", ["r1", "c3"]),
           ("Add", ["r2", "c4"]), ("Sub", ["r3", "c4"]), ("Max", ["r4", "c1"]), ("Min", ["r5", "c100"]),
           ("Neg", ["r6"]), ("Neg", ["r7"])]
    (y,) = run(tmp_path, ops)
    np.testing.assert_array_equal(y, X)


@pytest.mark.parametrize("a, b, floordiv, mod", [(7, 2, 3, 1), (-7, 2, -4, 1), (7, -2, -4, -1), (-7, -2, 3, -1)])
def test_floor_division_and_modulo_follow_python(tmp_path, a, b, floordiv, mod):
    """The view size is 6 exactly when the op gives Python's answer."""
    def six_if(kind, want):
        const = f"c{6 - want}" if 6 - want >= 0 else None
        ops = [("Sub", [f"c{abs(a)}", "c0"] if a >= 0 else ["c0", f"c{abs(a)}"]),
               ("Sub", [f"c{abs(b)}", "c0"] if b >= 0 else ["c0", f"c{abs(b)}"]),
               (kind, ["r0", "r1"])]
        ops.append(("Add", ["r2", const]) if const else ("Sub", ["r2", f"c{want - 6}"]))
        return ops
    for kind, want in (("FloorDiv", floordiv), ("Mod", mod)):
        (y,) = run(tmp_path, six_if(kind, want))
        assert y.shape == (6,), (kind, a, b)


@pytest.mark.parametrize("ops, message", [
    ([("SizeOf", ["x", "dim"]), ("FloorDiv", ["r0", "c0"])], "division by zero"),
    ([("SizeOf", ["x", "dim"]), ("Mod", ["r0", "c0"])], "division by zero"),
    ([("Sub", ["c0", "c9223372036854775807"]), ("Sub", ["r0", "c2"])], "overflow"),
    ([("Add", ["c9223372036854775807", "c1"])], "overflow"),
    ([("Mul", ["c4611686018427387904", "c4"])], "overflow"),
])
def test_bad_arithmetic_is_an_error_at_run_time(tmp_path, ops, message):
    with pytest.raises(kiln.KilnError, match=message):
        run(tmp_path, ops)


def test_size_of_a_dimension_the_tensor_lacks(tmp_path):
    with pytest.raises(kiln.InvalidProgram, match="dimension 3 of a 1-D tensor"):
        run(tmp_path, [("SizeOf", ["x", "dim"])], dim_value=3)


def test_a_computed_size_the_output_cannot_hold(tmp_path):
    with pytest.raises(kiln.KilnError, match="view"):
        run(tmp_path, [("Add", ["c6", "c1"])])  # 7 elements from a 6-element input


@pytest.mark.parametrize("ops, message", [
    ([("SizeOf", ["c1", "dim"])], "wrong kind"),         # SizeOf of an int
    ([("Add", ["x", "c1"])], "wrong kind"),              # arithmetic on a tensor
    ([("Neg", ["c1", "c2"])], "needs 1 inputs"),
    ([("Add", ["c1"])], "needs 2 inputs"),
])
def test_malformed_int_ops_are_refused_at_load(tmp_path, ops, message):
    path = tmp_path / "p.kiln"
    sized_view_program(path, ops)
    with pytest.raises(kiln.InvalidProgram, match=message):
        kiln.load(path)


def test_int_list_items_must_be_ints(tmp_path, monkeypatch):
    import program_builder

    original = program_builder.ScalarValue

    def corrupt(kind, value=None):
        if kind == "IntValueList":
            value = (0,)  # value 0 is the input tensor
        return original(kind, value)

    monkeypatch.setattr(program_builder, "ScalarValue", corrupt)
    path = tmp_path / "p.kiln"
    sized_view_program(path, [("SizeOf", ["x", "dim"])])
    with pytest.raises(kiln.InvalidProgram, match="not an int"):
        kiln.load(path)


@pytest.mark.parametrize("state, message", [
    (TensorValue(FLOAT32, [4], STATE, segment=5, arena=1), "segment 5"),
    (TensorValue(FLOAT32, [32], STATE, segment=0, arena=1), "needs 128 bytes"),
    (TensorValue(FLOAT32, [4], STATE, segment=0, arena=2), "arena 2"),
    (TensorValue(FLOAT32, [4], STATE, segment=0, arena=1, arena_offset=62), "offset 62"),
])
def test_state_outside_its_segment_or_arena_is_refused(tmp_path, state, message):
    path = tmp_path / "p.kiln"
    sized_view_program(path, [("SizeOf", ["x", "dim"])], state=state)
    with pytest.raises(kiln.InvalidProgram, match=message):
        kiln.load(path)


def test_state_missing_from_the_state_list_is_refused(tmp_path, monkeypatch):
    from kiln.export.lowering import serialize

    path = tmp_path / "p.kiln"
    original = serialize._method_t

    def drop_state_list(m, S):
        mt = original(m, S)
        mt.state, mt.stateNames = [], []
        return mt

    monkeypatch.setattr(serialize, "_method_t", drop_state_list)
    sized_view_program(path, [("SizeOf", ["x", "dim"])],
                       state=TensorValue(FLOAT32, [4], STATE, segment=0, arena=1))
    with pytest.raises(kiln.InvalidProgram, match="missing from the method's state list"):
        kiln.load(path)


def test_valid_hand_built_state_loads_and_is_reported(tmp_path):
    path = tmp_path / "p.kiln"
    sized_view_program(path, [("SizeOf", ["x", "dim"])],
                       state=TensorValue(FLOAT32, [4], STATE, segment=0, arena=1))
    prog = kiln.load(path)
    assert [(s.name, s.shape) for s in prog.method_spec().state_specs] == [("buf", (4,))]
    np.testing.assert_array_equal(prog.forward(X)[0], X)


def test_an_int_list_used_many_times_costs_no_memory_per_use(tmp_path):
    """One instruction reading a 512-item IntValueList 200,000 times (an 800 KB
    file) loads without memory proportional to uses times items."""
    from kiln.export.lowering.ir import BOUND, PLANNED, Instruction, MethodIR, ProgramIR
    from kiln.export.lowering.serialize import write_program

    m = MethodIR(name="forward")
    m.values = [TensorValue(FLOAT32, [4], BOUND), TensorValue(FLOAT32, [4], PLANNED),
                ScalarValue("Int", 1), ScalarValue("IntValueList", tuple([2] * 512))]
    m.operators = [("aten::relu", "default")]
    m.instructions = [Instruction(0, [0] + [3] * 200_000, [1])]
    m.inputs, m.outputs, m.input_names, m.output_names = [0], [1], ["x"], ["y"]
    m.arena_sizes = [16]
    path = tmp_path / "uses.kiln"
    write_program(ProgramIR([m], [], producer="tests"), path)
    # In a fresh process, from its resident size before the load to its peak after it.
    # Not ru_maxrss: that is a process's peak so far, which an earlier, higher peak of
    # this pytest process would hide, and a child's includes its parent's size at fork.
    code = textwrap.dedent(f"""
        import re, kiln

        def status(field):
            with open("/proc/self/status") as f:
                return int(re.search(field + r":\\s+(\\d+) kB", f.read()).group(1))

        before = status("VmRSS")
        method = kiln.load({str(path)!r}).load_method("forward")
        print((status("VmHWM") - before) / 1024)
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=clean_env(), timeout=120)
    assert proc.returncode == 0, proc.stderr
    grown_mb = float(proc.stdout)
    assert grown_mb < 64, grown_mb
    method = kiln.load(path).load_method("forward")
    with pytest.raises(kiln.KilnError, match="relu"):  # the extra arguments are refused by the kernel
        method(np.ones(4, np.float32))


def test_a_move_may_not_change_a_state_tensors_shape(tmp_path):
    from kiln.export.lowering.ir import BOUND, MethodIR, Move, ProgramIR
    from kiln.export.lowering.serialize import write_program

    m = MethodIR(name="forward")
    m.values = [TensorValue(FLOAT32, [4], BOUND), TensorValue(FLOAT32, [2, 2], STATE, segment=0, arena=1)]
    m.instructions = [Move(0, 1)]
    m.inputs, m.outputs, m.input_names, m.output_names = [0], [1], ["x"], ["y"]
    m.state, m.state_names = [1], ["buf"]
    m.arena_sizes = [0, 64]
    path = tmp_path / "reshape_state.kiln"
    write_program(ProgramIR([m], [b"\0" * 64], producer="tests"), path)
    with pytest.raises(kiln.InvalidProgram, match="another shape into a state tensor"):
        kiln.load(path)
