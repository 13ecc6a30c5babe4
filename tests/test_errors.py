"""Every C++ error kind maps to a typed Python exception under kiln.KilnError."""

import pytest

import kiln
from kiln import _kiln
from kiln.errors import BY_ERROR_NAME


def test_every_error_kind_has_an_exception():
    names = _kiln.error_names()
    assert len(names) >= 14 and "duplicate_runtime" in names
    assert set(names) == set(BY_ERROR_NAME)
    for name in names:
        assert issubclass(BY_ERROR_NAME[name], kiln.KilnError), name


def test_value_errors_are_also_value_errors():
    assert issubclass(kiln.InvalidInput, ValueError)
    assert issubclass(kiln.DuplicateRuntime, ImportError)


def test_every_exception_is_exported_from_kiln():
    """Defect 8: NotFound, OutOfMemory and IoError were raised but only reachable as kiln.errors.*."""
    for cls in set(BY_ERROR_NAME.values()):
        assert getattr(kiln, cls.__name__, None) is cls, cls.__name__
        assert cls.__name__ in kiln.__all__


@pytest.mark.parametrize("call, error, message", [
    (lambda p: kiln.load(p, max_memory_bytes=-1), kiln.InvalidArgument,
     "max_memory_bytes must be an int from 1 to 2\\*\\*64 - 1, got -1"),
    (lambda p: kiln.load(p, max_memory_bytes=2**70), kiln.InvalidArgument,
     "max_memory_bytes must be an int from 1 to 2\\*\\*64 - 1, got 1180591620717411303424"),
    (lambda p: kiln.load(p, max_memory_bytes="1G"), kiln.InvalidArgument, "max_memory_bytes must be an int"),
    (lambda p: kiln.load(p, kernels=5), kiln.InvalidArgument, "kernels must be a str"),
    (lambda p: kiln.load(p, isa=None), kiln.InvalidArgument, "isa must be a str"),
    (lambda p: kiln.load(p).load_method(5), kiln.InvalidArgument, "method name must be a str, not int"),
    (lambda p: kiln.load(p).method(None), kiln.InvalidArgument, "method name must be a str, not NoneType"),
    (lambda p: kiln.load_library(None), kiln.InvalidArgument, "load_library takes a path, not NoneType"),
    (lambda p: kiln.set_num_threads(0), kiln.InvalidArgument, "set_num_threads needs an int from 1 to 1024, got 0"),
    (lambda p: kiln.set_num_threads(-1), kiln.InvalidArgument, "set_num_threads needs an int from 1 to 1024, got -1"),
    (lambda p: kiln.set_num_threads(2.5), kiln.InvalidArgument, "set_num_threads needs an int from 1 to 1024, got 2.5"),
    (lambda p: kiln.set_num_threads(10**6), kiln.InvalidArgument,
     "set_num_threads needs an int from 1 to 1024, got 1000000"),
], ids=["memory-negative", "memory-huge", "memory-str", "kernels-int", "isa-none", "load_method-int",
        "method-none", "load_library-none", "threads-0", "threads-negative", "threads-float", "threads-huge"])
def test_bad_arguments_raise_typed_errors(exported, call, error, message):
    """Defect 8: these raised plain or nanobind TypeErrors, or were accepted."""
    path, *_ = exported("mlp")
    threads = kiln.num_threads()
    with pytest.raises(error, match=message):
        call(path)
    assert kiln.num_threads() == threads
