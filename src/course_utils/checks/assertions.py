"""Assertions for exercise tests, written for students to read.

Every failure raises :class:`CheckFailed` (an ``AssertionError``) whose message says what
was expected, what came back and, for tensors, the largest error and where it is. Nothing
here writes to stderr: in nbgrader a test cell that writes to stderr scores zero even
when the answer is right.
"""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, NoReturn, Sequence

import numpy as np
import torch

from course_utils.protocol.messages import WRITABLE, tensors_in

__all__ = [
    "CheckFailed",
    "check",
    "check_type",
    "check_shape",
    "check_close",
    "check_scalar",
    "check_raises",
    "leaves_unchanged",
    "may_change",
    "may_freeze",
    "substitute",
]


class CheckFailed(AssertionError):
    """A test found a wrong answer. The message is meant for the student."""


def _fail(message: str, hint: str | None) -> NoReturn:
    __tracebackhide__ = True
    if hint:
        message = f"{message}\nHint: {hint}"
    raise CheckFailed(message)


def check(condition: Any, message: str, hint: str | None = None) -> None:
    """Fail with ``message`` unless ``condition`` is true."""
    __tracebackhide__ = True
    if not bool(condition):
        _fail(message, hint)


def check_type(got: Any, expected_type: type | tuple[type, ...], name: str, hint: str | None = None) -> None:
    """Fail unless ``got`` is an instance of ``expected_type``; ``None`` gets its own advice."""
    __tracebackhide__ = True
    if isinstance(got, expected_type):
        return
    names = (
        " or ".join(t.__name__ for t in expected_type)
        if isinstance(expected_type, tuple)
        else expected_type.__name__
    )
    if got is None:
        _fail(f"{name} is None, but should be {_a(names)}. Did you forget a `return`?", hint)
    _fail(f"{name} should be {_a(names)}, but is {_a(type(got).__name__)}.", hint)


def _a(noun: str) -> str:
    """``int`` -> ``an int``, ``Tensor`` -> ``a Tensor``."""
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _as_tensor(value: Any) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    return torch.as_tensor(np.asarray(value))


def check_shape(got: Any, expected_shape: Sequence[int], name: str, hint: str | None = None) -> None:
    """Fail unless ``got`` is a tensor of exactly ``expected_shape``."""
    __tracebackhide__ = True
    check_type(got, torch.Tensor, name, hint)
    expected = tuple(int(s) for s in expected_shape)
    if tuple(got.shape) != expected:
        _fail(f"{name} has shape {tuple(got.shape)}, but should have shape {expected}.", hint)


def _index_of(flat_index: int, shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(int(i) for i in np.unravel_index(flat_index, tuple(shape))) if len(shape) else ()


def check_close(
    got: Any,
    expected: Any,
    name: str,
    *,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    hint: str | None = None,
) -> None:
    """Fail unless tensor ``got`` matches ``expected`` in type, shape and values.

    Values pass where ``|got - expected| <= atol + rtol * |expected|`` (``torch.allclose``'s
    rule). NaN in ``got`` fails unless ``expected`` has NaN at the same place.
    """
    __tracebackhide__ = True
    check_type(got, torch.Tensor, name, hint)
    expected_t = _as_tensor(expected)
    check_shape(got, expected_t.shape, name, hint)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got_t = got.detach().cpu().to(torch.float64)
        expected_t = expected_t.to(torch.float64)
    got_nan, expected_nan = torch.isnan(got_t), torch.isnan(expected_t)
    if bool((got_nan & ~expected_nan).any()):
        where = _index_of(int(torch.nonzero((got_nan & ~expected_nan).flatten())[0]), got_t.shape)
        _fail(
            f"{name} contains NaN (first at index {where}) where {float(expected_t[where]):.6g} "
            "was expected. NaN usually comes from inf - inf or 0/0, e.g. exp() overflowing.",
            hint,
        )
    finite = ~(expected_nan | torch.isinf(expected_t))
    # where the expected value is +-inf or NaN, the answer must be exactly that
    wrong_special = ~finite & ~((got_t == expected_t) | (got_nan & expected_nan))
    if bool(wrong_special.any()):
        where = _index_of(int(torch.nonzero(wrong_special.flatten())[0]), got_t.shape)
        _fail(f"{name} has {float(got_t[where]):.6g} at index {where}, but should have {float(expected_t[where]):.6g}.", hint)
    if bool(torch.isinf(got_t).any()) and not torch.equal(torch.isinf(got_t), torch.isinf(expected_t)):
        where = _index_of(int(torch.nonzero(torch.isinf(got_t) & finite).flatten()[0]), got_t.shape) if bool((torch.isinf(got_t) & finite).any()) else ()
        _fail(f"{name} contains inf (first at index {where}) where a finite value was expected.", hint)
    error = torch.where(finite, (got_t - expected_t).abs(), torch.zeros_like(got_t))
    allowed = atol + rtol * expected_t.abs()
    too_far = finite & (error > torch.where(finite, allowed, torch.zeros_like(allowed)))
    if bool(too_far.any()):
        flat = int(torch.argmax(torch.where(too_far, error, torch.full_like(error, -1.0)).flatten()))
        where = _index_of(flat, got_t.shape)
        n_bad, n_all = int(too_far.sum()), too_far.numel()
        _fail(
            f"{name} has wrong values: {n_bad} of {n_all} entries are off. Largest absolute error "
            f"{float(error.flatten()[flat]):.4g} at index {where}: expected "
            f"{float(expected_t.flatten()[flat]):.6g}, got {float(got_t.flatten()[flat]):.6g} "
            f"(tolerance atol={atol:g}, rtol={rtol:g}).",
            hint,
        )


def check_scalar(
    got: Any,
    expected: float,
    name: str,
    *,
    atol: float = 1e-6,
    rtol: float = 1e-6,
    hint: str | None = None,
) -> None:
    """Fail unless ``got`` is a real number (or one-element tensor) close to ``expected``."""
    __tracebackhide__ = True
    if isinstance(got, torch.Tensor):
        if got.numel() != 1:
            _fail(f"{name} should be a single number, but is a tensor of shape {tuple(got.shape)}.", hint)
        got = got.item()
    check_type(got, (int, float, np.integer, np.floating), name, hint)
    got = float(got)
    if math.isnan(got) or abs(got - expected) > atol + rtol * abs(expected):
        _fail(f"{name} is {got:.6g}, but should be {expected:.6g} (tolerance atol={atol:g}, rtol={rtol:g}).", hint)


def check_raises(
    function: Callable[[], Any],
    exception: type[BaseException],
    name: str,
    hint: str | None = None,
) -> BaseException:
    """Fail unless calling ``function()`` raises ``exception``; return the exception raised
    (so a test can check its message)."""
    __tracebackhide__ = True
    try:
        function()
    except exception as raised:
        return raised
    except Exception as error:  # noqa: BLE001 - the student's code may raise anything
        _fail(f"{name} raised {type(error).__name__}, but should raise {exception.__name__}.", hint)
    _fail(f"{name} should raise {exception.__name__}, but raised nothing.", hint)


@contextmanager
def leaves_unchanged(
    name: str,
    *arguments: Any,
    hint: str | None = None,
) -> Iterator[None]:
    """Fail if the block changes an argument it was only meant to read.

    Tensors (in ``arguments``, or inside lists, tuples and dicts there) must keep their values,
    shape, dtype and ``requires_grad``; modules must keep their train/eval mode (every
    submodule's) and every parameter's ``requires_grad``. For in-place slips such as
    ``lengths.unsqueeze_(1)``, ``target.masked_fill_(...)`` or a ``model.eval()`` left behind::

        with leaves_unchanged("decoder_self_mask", tgt_in):
            decoder_self_mask(tgt_in, 0)
    """
    __tracebackhide__ = True
    modules = [a for a in arguments if isinstance(a, torch.nn.Module)]
    tensors = [t for a in arguments if not isinstance(a, torch.nn.Module) for t in tensors_in(a)]
    before = [(t.detach().clone(), t.shape, t.dtype, t.requires_grad) for t in tensors]
    modes = [[m.training for m in module.modules()] for module in modules]
    trainable = [[p.requires_grad for p in module.parameters()] for module in modules]
    with WRITABLE.declared(arguments):  # graded: a change comes back here, and is reported below
        yield
    for i, (t, (values, shape, dtype, grad)) in enumerate(zip(tensors, before)):
        what = f"tensor argument {i + 1}" if len(tensors) > 1 else "its tensor argument"
        if t.shape != shape or t.dtype != dtype:
            _fail(f"{name} changed {what} in place: shape {tuple(shape)} {dtype} became {tuple(t.shape)} "
                  f"{t.dtype}. Work on a new tensor (x.unsqueeze(1), not x.unsqueeze_(1)).", hint)
        if t.requires_grad != grad:
            _fail(f"{name} changed requires_grad of {what} ({grad} -> {t.requires_grad}). Use a copy "
                  "(x.detach().requires_grad_()) if you need gradients with respect to it.", hint)
        if not same_values(t.detach(), values):
            _fail(f"{name} changed the values of {what} in place. The caller still needs them: do not write "
                  "into an argument (no `x[...] = `, `x.masked_fill_`, `x.data`, `x.copy_`); build a new tensor.", hint)
    for module, mode, grads in zip(modules, modes, trainable):
        if [m.training for m in module.modules()] != mode:
            _fail(f"{name} left the model in {'training' if module.training else 'eval'} mode. If you switch "
                  "modes (model.eval()), switch back to the mode you found before returning.", hint)
        if [p.requires_grad for p in module.parameters()] != grads:
            _fail(f"{name} changed requires_grad of the model's parameters. Leave them as you found them "
                  "(use torch.no_grad() for a computation that needs no gradients).", hint)


def same_values(now: torch.Tensor, before: torch.Tensor) -> bool:
    """Whether a tensor still holds the values copied into ``before`` (NaN where NaN was counts as unchanged)."""
    return torch.equal(now, before) or (
        before.is_floating_point() and torch.allclose(now, before, rtol=0, atol=0, equal_nan=True))


@contextmanager
def may_change(*arguments: Any) -> Iterator[None]:
    """Declare that the block's calls change these arguments in place, as the exercise asks (an
    optimizer step, a cache that is filled, a model that is trained)::

        with may_change(model):
            train_steps(model, batches, steps=3)

    Outside such a block the grader holds every argument to the In-place rule (00_welcome): a call
    of the student's code that changes an argument it was given fails, whether or not the
    exercise's own tests compare it. In the student's kernel the block changes nothing.
    """
    with WRITABLE.declared(arguments):
        yield


@contextmanager
def may_freeze(*models: Any) -> Iterator[None]:
    """Declare that the block's calls switch ``requires_grad`` of these models' parameters, and change
    nothing else of them (a LoRA layer freezes the layer it wraps)::

        with may_freeze(base):
            lora = LoRALinear(base, rank=2, alpha=4.0)
    """
    with WRITABLE.declared(models, what="requires_grad"):
        yield


@contextmanager
def substitute(namespace: dict[str, Any], **replacements: Any) -> Iterator[None]:
    """Rebind names in ``namespace`` (a notebook's ``globals()``) for the duration of a block.

    Tests use it to grade one exercise with reference versions of the earlier ones, so a
    mistake in exercise 1 does not cost points again in exercise 3::

        with substitute(globals(), stable_softmax=torch.softmax):
            check_close(attention(q, k, v)[0], expected, "attention output")
    """
    missing = object()
    saved = {name: namespace.get(name, missing) for name in replacements}
    remote = namespace.get("__course_remote_substitute__")  # the grader's checker: rebind in the kernel too
    restore = remote(replacements) if callable(remote) else None
    namespace.update(replacements)
    try:
        yield
    finally:
        if restore is not None:
            restore()
        for name, value in saved.items():
            if value is missing:
                namespace.pop(name, None)
            else:
                namespace[name] = value
