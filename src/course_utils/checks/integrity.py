"""Integrity: tests that the answer is the student's own work (no call into the course's
reference implementation, no banned torch function, defined in the notebook), and the hooks
the grader's checker (:mod:`course_grader.grading.checker`) uses to run these checks in the
student's kernel, where the student's objects live.
"""

from __future__ import annotations

import importlib
import os
import sys
import types
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from course_utils.checks.assertions import _fail
from course_utils.protocol.messages import REMOTE_MODES, Mode

__all__ = ["own_work", "check_defined_here", "banned_calls", "by_value"]


@contextmanager
def _remote_mode(mode: tuple) -> Iterator[None]:
    """A call into the student's kernel (the grader's checker) runs under ``mode`` there too."""
    owner = object()
    REMOTE_MODES.enter(mode, owner)
    try:
        yield
    finally:
        REMOTE_MODES.leave(owner)


def _resolve(path: str) -> Any:
    """``"course_utils.gpt.top_p_filter"`` -> the object (module, class, function, method)."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            obj = getattr(obj, attribute)
        return obj
    raise ImportError(f"cannot resolve {path!r}")


def _code_objects(obj: Any, seen: set[int] | None = None) -> set[types.CodeType]:
    """Every code object that running ``obj`` (function, class, module) could enter."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return set()
    seen.add(id(obj))
    codes: set[types.CodeType] = set()
    if isinstance(obj, (staticmethod, classmethod)):
        return _code_objects(obj.__func__, seen)
    if isinstance(obj, property):
        return set().union(*(_code_objects(f, seen) for f in (obj.fget, obj.fset) if f))
    if isinstance(obj, types.CodeType):
        codes.add(obj)
        for const in obj.co_consts:
            if isinstance(const, types.CodeType):
                codes |= _code_objects(const, seen)
        return codes
    if isinstance(obj, (types.FunctionType, types.MethodType)):
        return _code_objects(getattr(obj, "__func__", obj).__code__, seen)
    if isinstance(obj, type):
        for value in vars(obj).values():
            codes |= _code_objects(value, seen)
        return codes
    if isinstance(obj, types.ModuleType):
        for value in vars(obj).values():
            if getattr(value, "__module__", None) == obj.__name__:
                codes |= _code_objects(value, seen)
        return codes
    wrapped = getattr(obj, "__wrapped__", None)
    return _code_objects(wrapped, seen) if wrapped is not None else codes


@contextmanager
def _profiled(on_call: Callable[[types.FrameType, str, Any], None]) -> Iterator[None]:
    previous = sys.getprofile()

    def hook(frame: types.FrameType, event: str, arg: Any) -> None:
        on_call(frame, event, arg)
        if previous is not None:
            previous(frame, event, arg)  # type: ignore[arg-type]  # typeshed: the event is a Literal

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(previous)


@contextmanager
def own_work(*references: str, name: str = "your answer", hint: str | None = None) -> Iterator[None]:
    """Fail when code run inside the block calls one of the course's reference implementations.

    ``references`` are dotted paths (``"course_utils.gpt.top_p_filter"``, a class, or a
    whole module). Tests wrap the student's call in it; expected values computed with the
    reference outside the block are fine::

        with own_work("course_utils.gpt.top_p_filter", name="top_p_filter"):
            got = top_p_filter(logits, 0.9)
    """
    __tracebackhide__ = True
    forbidden: dict[types.CodeType, str] = {}
    for path in references:
        for code in _code_objects(_resolve(path)):
            forbidden[code] = path
    used: list[str] = []

    def on_call(frame: types.FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code in forbidden and len(used) < 1:
            used.append(forbidden[frame.f_code])

    failure: BaseException | None = None
    with _profiled(on_call), _remote_mode((Mode.OWN_WORK, list(references), name)):
        try:
            yield
        except BaseException as error:  # noqa: BLE001 - re-raised below unless the reference explains it
            failure = error
    if used:
        _fail(f"{name} calls the course's reference implementation {used[0]}: this exercise must be "
              "your own code (imports of the reference are also flagged to the instructor).",
              hint or "write the function yourself; later notebooks import the course's version for you.")
    if failure is not None:
        raise failure


def check_defined_here(obj: Any, name: str) -> None:
    """Fail unless ``obj`` (a function or class) was defined in the notebook, not imported."""
    __tracebackhide__ = True
    module = getattr(obj, "__module__", None)
    code = getattr(getattr(obj, "__func__", obj), "__code__", None)
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # course_utils/
    in_package = code is not None and os.path.abspath(code.co_filename).startswith(package_dir)
    if module != "__main__" or in_package:
        _fail(f"{name} comes from {module}, not from this notebook: the exercise asks you to write it yourself.",
              "define it in the answer cell (def/class), without importing the course's version.")


# torch functions that compute a banned one inside them: banning the one bans these too (third blind
# red team: a softmax as F.scaled_dot_product_attention(x, I, I, scale=1) passed 03's softmax ban)
_COMPUTED_INSIDE = {"softmax": ("scaled_dot_product_attention",)}


@contextmanager
def banned_calls(*function_names: str, name: str = "your answer", hint: str | None = None) -> Iterator[None]:
    """Fail when code run inside the block calls a torch function with one of these names.

    ``banned_calls("softmax")`` catches ``torch.softmax``, ``F.softmax``, ``Tensor.softmax``,
    ``nn.Softmax``, ``torch.special.softmax`` and ``torch._softmax``, and ``F.scaled_dot_product_attention``
    (a softmax inside); list ``"log_softmax"`` too to stop ``log_softmax().exp()``.
    """
    __tracebackhide__ = True
    names = set(function_names)
    names |= {inner for n in function_names for inner in _COMPUTED_INSIDE.get(n, ())}
    names |= {f"special_{n}" for n in names} | {f"_{n}" for n in names}
    torch_dir = os.path.dirname(torch.__file__)
    used: list[str] = []

    def on_call(frame: types.FrameType, event: str, arg: Any) -> None:
        if used:
            return
        if event == "c_call":
            fname = getattr(arg, "__name__", "")
            owner = getattr(arg, "__self__", None)
            module = getattr(arg, "__module__", "") or ""
            from_torch = module.startswith("torch") or isinstance(owner, (torch.Tensor, types.ModuleType)) or owner is None
            if fname in names and from_torch:
                used.append(fname)
        elif event == "call" and frame.f_code.co_name in names and frame.f_code.co_filename.startswith(torch_dir):
            used.append(frame.f_code.co_name)

    failure: BaseException | None = None
    with _profiled(on_call), _remote_mode((Mode.BANNED, list(function_names), name)):
        try:
            yield
        except BaseException as error:  # noqa: BLE001
            failure = error
    if used:
        _fail(f"{name} uses {used[0]}, which this exercise asks you not to use: write it from its formula.", hint)
    if failure is not None:
        raise failure


def by_value(obj: Any) -> Any:
    """``obj``, marked to reach the student's code as a copy even where the graded notebook withholds
    the code it runs (the test only reads or loads its state, never runs it there); a no-op in a
    notebook. Elsewhere such an object is lent to the student's code and runs in the checker. The
    student's code may change it in place (load weights into it, initialise it): it is declared
    writable, as :func:`course_utils.checks.may_change` declares an argument."""
    try:
        object.__setattr__(obj, "__course_by_value__", True)
    except (AttributeError, TypeError):
        pass
    return obj
