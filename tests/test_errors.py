"""Every C++ error kind maps to a typed Python exception under kiln.KilnError."""

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
