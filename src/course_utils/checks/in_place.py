"""The In-place rule (00_welcome): a call of the student's code must leave the arguments the tests gave it
as it found them, unless the tests declared them writable (``may_change``, ``may_freeze``,
``leaves_unchanged``, ``by_value``).

At grading the grader's checker compares every argument of every call the tests make. ``course check``
runs the same rule in the student's own kernel: :func:`watch_calls` wraps the functions the answer cells
define, and while a test cell runs, the outermost call of each is compared before and after (tensors by
value, shape, dtype and ``requires_grad``; models by weights, mode and ``requires_grad``; lists and dicts by
their items). Outside the test cells nothing is compared, as at grading. Both report with the messages below.
"""

from __future__ import annotations

import functools
import hashlib
import types
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import torch

from course_utils.checks.assertions import CheckFailed, same_values
from course_utils.protocol.messages import WRITABLE, tensors_in

__all__ = ["in_place_message", "model_changed_message", "watch_calls", "cell_digest"]

# tensors of a call's arguments up to this many elements in all are compared by value; beyond it, by
# PyTorch's version counter (every in-place operation bumps it; only a write through .data escapes it)
_COMPARE_VALUES_UP_TO = 4_000_000


def model_changed_message(which: str) -> str:
    """What the In-place and Mode rules say of a model the student's code was given and changed."""
    return (f"Your code changed {which} (its weights, buffers, train/eval mode, requires_grad, dtype or hooks). "
            "A model you are given is for reading: compute with it, and put back any mode you switch "
            "(00_welcome, In-place and Mode rules).")


def in_place_message(position: int, n_positional: int, value: Any) -> str:
    """What a call broke when it changed its argument at ``position`` (positional ones first)."""
    which = f"argument {position + 1}" if position < n_positional else "a keyword argument"
    if isinstance(value, torch.nn.Module):
        return model_changed_message(f"the model passed as {which}")
    kind = "tensor" if isinstance(value, torch.Tensor) else type(value).__name__
    return (f"Your code changed {which} (a {kind}) in place. Arguments are for reading: build a new "
            f"{kind} instead (x = x + y, not x += y; no x[...] =, x.masked_fill_, x.copy_, x.data, "
            "x.requires_grad_(), .append or .pop on a list you were given) (00_welcome, In-place rule).")


def cell_digest(source: str) -> str:
    """The name :func:`watch_calls` knows a test cell by: a digest of its source."""
    return hashlib.sha1(source.encode()).hexdigest()


@contextmanager
def _outside_the_tests_modes() -> Iterator[None]:
    """The comparison's own copies are not the call's: no torch function or dispatch mode a test
    entered (an allocation log, a device probe) sees them."""
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes(), torch._C.DisableTorchFunction():
        yield


def _tensor_state(t: torch.Tensor, by_value: bool) -> tuple:
    values = t.detach().clone() if by_value and t.device.type != "meta" else None
    return t._version, t.shape, t.dtype, t.requires_grad, values


def _tensor_changed(t: torch.Tensor, state: tuple) -> bool:
    version, shape, dtype, requires_grad, values = state
    if t.shape != shape or t.dtype != dtype or t.requires_grad != requires_grad:
        return True
    if values is None:
        return t._version != version
    return not same_values(t.detach(), values)


def _snapshot(value: Any, by_value: bool) -> Any:
    """What of ``value`` a call must not change, or None when it is not watched."""
    if getattr(value, "__course_by_value__", False) is True or isinstance(value, (torch.Generator, torch.nn.Module)):
        return None   # a model: at grading, one the notebook built stays in the kernel, where it may change
    allowed = WRITABLE.allows(value)
    if allowed == "anything":
        return None
    if isinstance(value, torch.Tensor):
        return ("tensor", _tensor_state(value, by_value))
    if isinstance(value, (list, dict)):   # the items themselves; the tensors inside are watched too
        items = list(value.items()) if isinstance(value, dict) else list(value)
        inner = [(t, _tensor_state(t, by_value)) for t in tensors_in(value) if WRITABLE.allows(t) is None]
        return ("container", items, inner)
    return None


def _changed(value: Any, snapshot: Any) -> bool:
    kind = snapshot[0]
    if kind == "tensor":
        return _tensor_changed(value, snapshot[1])
    _, items, inner = snapshot
    now = list(value.items()) if isinstance(value, dict) else list(value)
    same_items = len(now) == len(items) and all(
        (a[0] == b[0] and a[1] is b[1]) if isinstance(value, dict) else a is b for a, b in zip(now, items))
    return not same_items or any(_tensor_changed(t, state) for t, state in inner)


class _Watch:
    """Wraps the answer cells' functions in the kernel; compares arguments while a test cell runs."""

    def __init__(self, shell: Any, functions: Iterable[str], test_cells: Iterable[str]) -> None:
        self.shell = shell
        self.functions = set(functions)
        self.test_cells = set(test_cells)
        self.in_test = False
        self.depth = 0

    def pre_run_cell(self, info: Any) -> None:
        self.in_test = cell_digest(info.raw_cell) in self.test_cells

    def post_run_cell(self, result: Any) -> None:
        self.in_test = False
        namespace = self.shell.user_ns
        for name in self.functions:
            fn = namespace.get(name)
            if isinstance(fn, types.FunctionType) and not hasattr(fn, "__course_watched__"):
                namespace[name] = self.wrap(fn)

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def watched(*args: Any, **kwargs: Any) -> Any:
            if not self.in_test or self.depth:   # outside the tests, or a call inside the student's code
                return fn(*args, **kwargs)
            arguments = [*args, *kwargs.values()]
            with _outside_the_tests_modes():
                size = sum(t.numel() for t in tensors_in((list(args), kwargs)))
                before = [_snapshot(a, size <= _COMPARE_VALUES_UP_TO) for a in arguments]
            self.depth += 1
            try:
                out = fn(*args, **kwargs)
            finally:
                self.depth -= 1
            with _outside_the_tests_modes():
                changed = [position for position, (value, snapshot) in enumerate(zip(arguments, before))
                           if snapshot is not None and _changed(value, snapshot)]
            if changed:
                raise CheckFailed(in_place_message(changed[0], len(args), arguments[changed[0]]))
            return out

        watched.__course_watched__ = True  # type: ignore[attr-defined]
        # the wrapper is not the course's code: check_defined_here reads where a function's code lives
        watched.__code__ = watched.__code__.replace(co_filename=fn.__code__.co_filename)  # type: ignore[attr-defined]
        return watched


def watch_calls(shell: Any, functions: Iterable[str], test_cells: Iterable[str]) -> None:
    """In the IPython ``shell``: wrap each function named in ``functions`` once a cell defines it, and hold
    its outermost calls to the In-place rule while a cell whose :func:`cell_digest` is in ``test_cells`` runs."""
    watch = _Watch(shell, functions, test_cells)
    shell.events.register("pre_run_cell", watch.pre_run_cell)
    shell.events.register("post_run_cell", watch.post_run_cell)
