"""The checks students read: right answers pass silently, wrong ones fail with a useful message."""

from __future__ import annotations

import pytest
import torch

from course_utils.checks import (
    CheckFailed,
    check,
    check_close,
    check_raises,
    check_scalar,
    check_shape,
    check_type,
    substitute,
)


def test_passing_checks_write_nothing(capsys):
    check(True, "never shown")
    check_type(3, int, "n")
    check_shape(torch.zeros(2, 3), (2, 3), "x")
    check_close(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0 + 1e-7]), "x")
    check_scalar(0.5, 0.5, "p")
    check_raises(lambda: 1 / 0, ZeroDivisionError, "division")
    out = capsys.readouterr()
    assert out.out == "" and out.err == ""


def test_check_failed_is_an_assertion_error():
    assert issubclass(CheckFailed, AssertionError)


def test_shape_message_says_expected_and_got():
    with pytest.raises(CheckFailed, match=r"x has shape \(3, 2\), but should have shape \(2, 3\)"):
        check_close(torch.zeros(3, 2), torch.zeros(2, 3), "x")


def test_value_message_gives_largest_error_and_where():
    expected = torch.tensor([[0.2, 0.8], [0.5, 0.5]])
    got = torch.tensor([[0.2, 0.8], [0.9, 0.5]])
    with pytest.raises(CheckFailed) as failure:
        check_close(got, expected, "weights", hint="rows sum to one")
    message = str(failure.value)
    assert "1 of 4 entries" in message
    assert "Largest absolute error 0.4 at index (1, 0)" in message
    assert "expected 0.5, got 0.9" in message
    assert message.endswith("Hint: rows sum to one")


def test_nan_and_none_get_their_own_messages():
    with pytest.raises(CheckFailed, match="contains NaN"):
        check_close(torch.tensor([float("nan"), 1.0]), torch.tensor([0.5, 1.0]), "p")
    with pytest.raises(CheckFailed, match="forget a `return`"):
        check_close(None, torch.zeros(1), "result")
    with pytest.raises(CheckFailed, match="should be a Tensor, but is a list"):
        check_close([1.0], torch.ones(1), "result")


def test_tolerances_are_respected():
    check_close(torch.tensor([1.0]), torch.tensor([1.05]), "x", atol=0.1)
    with pytest.raises(CheckFailed):
        check_close(torch.tensor([1.0]), torch.tensor([1.05]), "x", atol=1e-3, rtol=0)


def test_expected_may_be_a_list_or_numpy():
    import numpy as np

    check_close(torch.tensor([1.0, 2.0]), [1.0, 2.0], "x")
    check_close(torch.tensor([1.0, 2.0]), np.array([1.0, 2.0]), "x")


def test_check_scalar():
    check_scalar(torch.tensor(2.0), 2.0, "s")
    with pytest.raises(CheckFailed, match="s is 3, but should be 2"):
        check_scalar(3.0, 2.0, "s")
    with pytest.raises(CheckFailed, match="single number"):
        check_scalar(torch.zeros(2), 0.0, "s")


def test_check_raises_reports_wrong_or_missing_exception():
    with pytest.raises(CheckFailed, match="raised nothing"):
        check_raises(lambda: None, ValueError, "f")
    with pytest.raises(CheckFailed, match="raised KeyError"):
        check_raises(lambda: {}["x"], ValueError, "f")


def test_substitute_restores_names_even_after_failure():
    namespace = {"f": "mine"}
    with pytest.raises(RuntimeError):
        with substitute(namespace, f="reference", g="new"):
            assert namespace == {"f": "reference", "g": "new"}
            raise RuntimeError
    assert namespace == {"f": "mine"}


def test_infinities_must_match_exactly():
    expected = torch.tensor([[0.0, float("-inf")], [0.0, 0.0]])
    check_close(torch.tensor([[0.0, float("-inf")], [0.0, 0.0]]), expected, "mask")
    for wrong in (torch.zeros(2, 2), torch.tensor([[0.0, float("inf")], [0.0, 0.0]]), torch.tensor([[0.0, -1e9], [0.0, 0.0]])):
        with pytest.raises(CheckFailed, match=r"at index \(0, 1\), but should have -inf"):
            check_close(wrong, expected, "mask")
    with pytest.raises(CheckFailed, match="contains inf"):
        check_close(torch.tensor([float("inf"), 1.0]), torch.tensor([2.0, 1.0]), "x")
