"""``course check``'s In-place watch (course_utils.checks.in_place): what the grader's checker compares for
every call the tests make, compared in the student's own kernel while a test cell runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from course_utils.checks import CheckFailed, check_defined_here, leaves_unchanged, may_change
from course_utils.checks.in_place import cell_digest, watch_calls

TEST_CELL = "y = f(x)  # a test cell"


class Shell:
    """The two things of IPython's shell the watch uses: the user's namespace and cell events."""

    def __init__(self) -> None:
        self.user_ns: dict = {}
        self.handlers: dict[str, list] = {"pre_run_cell": [], "post_run_cell": []}
        self.events = SimpleNamespace(register=lambda event, fn: self.handlers[event].append(fn))

    def run(self, source: str, define: dict | None = None) -> None:
        """A cell ran: ``define`` is what it defined."""
        for handler in self.handlers["pre_run_cell"]:
            handler(SimpleNamespace(raw_cell=source))
        self.user_ns.update(define or {})
        for handler in self.handlers["post_run_cell"]:
            handler(None)


def unsqueeze_in_place(lengths, T):
    return lengths.unsqueeze_(1) < T


def top_k_in_place(logits, k):
    v = logits.topk(k).values[..., -1:]
    logits[logits < v] = -float("inf")
    return logits


def right(lengths, T):
    return lengths.unsqueeze(1) < T


def leaves_eval(model, x):
    model.eval()
    return model(x)


def appends(items):
    items.append(0)
    return len(items)


def outer(x):
    y = x.clone()
    return unsqueeze_in_place(y, 3)   # changes its own copy: a call inside the student's code, not the tests'


@pytest.fixture
def shell():
    shell = Shell()
    functions = ["mine", "unsqueeze_in_place", "top_k_in_place", "right", "leaves_eval", "appends", "outer"]
    watch_calls(shell, functions, [cell_digest(TEST_CELL)])
    shell.run("answers", {name: globals()[name] for name in functions if name in globals()})
    return shell


def in_test(shell, name, *args):
    """Call the watched function ``name`` as a test cell would."""
    for handler in shell.handlers["pre_run_cell"]:
        handler(SimpleNamespace(raw_cell=TEST_CELL))
    try:
        return shell.user_ns[name](*args)
    finally:
        for handler in shell.handlers["post_run_cell"]:
            handler(None)


@pytest.mark.parametrize("name, args, message", [
    ("unsqueeze_in_place", (torch.tensor([2, 3]), 3), "changed argument 1 (a tensor) in place"),
    ("top_k_in_place", (torch.randn(2, 5), 2), "changed argument 1 (a tensor) in place"),
    ("unsqueeze_in_place", (torch.tensor([2, 3]).to("meta"), 3), "changed argument 1 (a tensor) in place"),
    ("appends", ([1, 2],), "changed argument 1 (a list) in place"),
])
def test_a_call_that_changes_an_argument_fails_in_a_test_cell(shell, name, args, message):
    with pytest.raises(CheckFailed, match=message.replace("(", r"\(").replace(")", r"\)")):
        in_test(shell, name, *args)


def test_right_answers_and_calls_outside_the_tests_pass(shell):
    lengths = torch.tensor([2, 3])
    assert in_test(shell, "right", lengths, 3).shape == (2, 1)
    assert in_test(shell, "outer", lengths).shape == (2, 1)      # only the tests' own call is compared
    model = torch.nn.Linear(2, 2)
    in_test(shell, "leaves_eval", model, torch.randn(1, 2))   # a model: the kernel's own at grading
    assert not model.training
    shell.run("a plot cell")
    assert shell.user_ns["unsqueeze_in_place"](lengths, 3).shape == (2, 1)   # not a test cell: as at grading


def test_arguments_the_tests_declare_writable_may_change(shell):
    logits = torch.randn(2, 5)
    with may_change(logits):
        in_test(shell, "top_k_in_place", logits, 2)
    logits = torch.randn(2, 5)
    with pytest.raises(CheckFailed, match="changed the values of its tensor argument"):
        with leaves_unchanged("top_k", logits):       # the test's own comparison speaks
            in_test(shell, "top_k_in_place", logits, 2)


def test_the_watched_function_is_still_defined_here(shell):
    namespace = {"__name__": "__main__"}
    exec("def mine(x):\n    return x + 1", namespace)   # as an answer cell defines it
    shell.run("another answer", {"mine": namespace["mine"]})
    watched = shell.user_ns["mine"]
    assert watched is not namespace["mine"] and watched.__wrapped__ is namespace["mine"]
    check_defined_here(watched, "mine")   # the wrapper is not the course's code
