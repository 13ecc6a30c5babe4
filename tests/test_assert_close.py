"""The comparison every test against eager PyTorch goes through (conftest.assert_close) fails where it must."""

import re

import numpy as np
import pytest

from conftest import assert_close

pytestmark = pytest.mark.build_independent
NAN, INF = float("nan"), float("inf")
WANT = [1.0, 2.0, 3.0, 4.0]


@pytest.mark.parametrize("got, want, at", [
    ([NAN, 2, 3, 4], WANT, "(0,)"),           # a NaN result
    ([100, NAN, 3, 4], WANT, "(1,)"),         # a NaN after a larger finite error
    (WANT, [NAN, 2, 3, 4], "(0,)"),           # a number where the reference is NaN
    ([1, 2, INF, 4], WANT, "(2,)"),           # an infinite result
    ([1, -INF, 3], [1, INF, 3], "(1,)"),      # the other infinity
    ([1, 2, 3, 4.01], WANT, "(3,)"),          # a finite error above the tolerance
])
def test_mismatch_fails_naming_the_element(got, want, at):
    with pytest.raises(AssertionError, match=rf"at {re.escape(at)} "):
        assert_close(np.array(got, np.float32), np.array(want, np.float32), 1e-4)


def test_shape_mismatch_fails():
    with pytest.raises(AssertionError, match=r"shape \(4, 1\), want \(4,\)"):
        assert_close(np.ones((4, 1)), np.ones(4), 1e-4)


def test_matching_values_pass():
    special = np.array([[NAN, INF, -INF], [1.0, -2.0, 1e-7]])
    assert_close(special, special.copy(), 0.0)
    assert_close(np.array(WANT) * (1 + 9e-5), np.array(WANT), 1e-4)  # within 1e-4 of each element
    assert_close(np.array([1e-9, 4.0]), np.array([0.0, 4.0]), 1e-4)  # below atol: 1/16 of 1e-4 of the scale


def test_small_elements_are_held_to_their_own_size():
    # 3e-4 is within 1e-4 of the scale 4, but 3e-4 of the element 1.0: the per-element bound fails it.
    with pytest.raises(AssertionError, match=r"at \(0,\) .* exceeds atol 2.5e-05 \+ rtol 0.0001"):
        assert_close(np.array(WANT) + [3e-4, 0, 0, 0], np.array(WANT), 1e-4)
    with pytest.raises(AssertionError, match=r"at \(1,\) "):  # 10% off, half the scale's tolerance
        assert_close(np.array([1000.0, 0.45]), np.array([1000.0, 0.5]), 1e-4)
    assert_close(np.array([1000.0, 0.45]), np.array([1000.0, 0.5]), 1e-4, rtol=0.2)  # a looser rtol admits it
