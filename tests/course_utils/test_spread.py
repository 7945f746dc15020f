import pytest
import torch

from course_utils.spread import beside_range, inside


@pytest.fixture(autouse=True)
def one_thread():
    """The verdicts as at one thread, where the ranges "at one thread" were measured (the last test varies it)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_inside_counts_the_ends_and_the_slack():
    assert inside(1.0, 1.0, 2.0) and inside(2.0, 1.0, 2.0)
    assert not inside(2.5, 1.0, 2.0)
    assert inside(2.5, 1.0, 2.0, slack=0.5)
    assert not inside(0.4, 1.0, 2.0, slack=0.5)


def test_an_empty_range_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        inside(1.0, 2.0, 1.0)


def test_the_line_names_the_number_the_range_and_the_verdict():
    line = beside_range("test accuracy", 98.44, 96.9, 100.0, seeds="0-4", unit="%")
    assert line == "test accuracy 98.4%: the course's seeds 0-4 gave 96.9%-100.0%, yours is inside"
    assert beside_range("loss", 3.3, 2.9, 3.1, digits=2).endswith("yours is OUTSIDE: look again at your run")
    assert "OUTSIDE: more steps help" in beside_range("loss", 3.3, 2.9, 3.1, outside="more steps help")


def test_a_number_only_the_slack_takes_in_is_near_not_inside():
    line = beside_range("test accuracy", 95.2, 96.9, 100.0, seeds="0-4", unit="%", slack=2, measured="at one thread")
    assert line == ("test accuracy 95.2%: the course's seeds 0-4 at one thread gave 96.9%-100.0%, "
                    "yours is near it (within the slack of 2.0% allowed for other seeds and machines)")
    assert beside_range("x", 98.0, 96.9, 100.0, slack=2).endswith("yours is inside")
    assert "OUTSIDE" in beside_range("x", 94.8, 96.9, 100.0, slack=2)


def test_yours_is_compared_as_printed():
    """A range written to one decimal holds the number that prints as its edge (96.94 prints 96.9)."""
    assert beside_range("x", 96.94, 96.9, 100.0).endswith("yours is inside")
    assert beside_range("x", 100.04, 96.9, 100.0).endswith("yours is inside")
    assert "near it" in beside_range("x", 100.06, 96.9, 100.0, slack=1)


def test_a_verdict_outside_a_one_thread_range_names_the_run_s_thread_count():
    torch.set_num_threads(2)
    line = beside_range("loss", 3.0, 1.0, 2.0, measured="at one thread")
    assert "OUTSIDE" in line and "your run used 2 threads, the range one" in line
    assert "threads" not in beside_range("loss", 1.5, 1.0, 2.0, measured="at one thread")   # inside: nothing to explain
    assert "your run used" not in beside_range("loss", 3.0, 1.0, 2.0)                      # no thread count stated
    torch.set_num_threads(1)
    assert "your run used" not in beside_range("loss", 3.0, 1.0, 2.0, measured="at one thread")
