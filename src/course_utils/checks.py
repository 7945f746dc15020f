"""Assertions for exercise tests, written for students to read.

Every failure raises :class:`CheckFailed` (an ``AssertionError``) whose message says what
was expected, what came back and, for tensors, the largest error and where it is. Nothing
here writes to stderr: in nbgrader a test cell that writes to stderr scores zero even
when the answer is right.
"""

from __future__ import annotations

import copy
import importlib
import math
import os
import sys
import types
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

__all__ = [
    "CheckFailed",
    "check",
    "check_type",
    "check_shape",
    "check_close",
    "check_scalar",
    "check_raises",
    "leaves_unchanged",
    "substitute",
    "check_device_dtype",
    "check_backward",
    "check_generator",
    "own_work",
    "check_defined_here",
    "banned_calls",
]


# Set by the grader's checker (course_utils.tooling.checker), where the student's objects live in
# another process: the modes a call into that process must also run under, as (mode, owner).
_REMOTE_MODES: list[tuple[tuple, Any]] = []


@contextmanager
def _remote_mode(mode: tuple, owner: Any = None) -> Iterator[None]:
    entry = (mode, owner)
    _REMOTE_MODES.append(entry)
    try:
        yield
    finally:
        if entry in _REMOTE_MODES:
            _REMOTE_MODES.remove(entry)


class CheckFailed(AssertionError):
    """A test found a wrong answer. The message is meant for the student."""


def _fail(message: str, hint: str | None) -> None:
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
    tensors = [t for a in arguments if not isinstance(a, torch.nn.Module) for t in _tensors_in(a)]
    before = [(t.detach().clone(), t.shape, t.dtype, t.requires_grad) for t in tensors]
    modes = [[m.training for m in module.modules()] for module in modules]
    trainable = [[p.requires_grad for p in module.parameters()] for module in modules]
    yield
    for i, (t, (values, shape, dtype, grad)) in enumerate(zip(tensors, before)):
        what = f"tensor argument {i + 1}" if len(tensors) > 1 else "its tensor argument"
        if t.shape != shape or t.dtype != dtype:
            _fail(f"{name} changed {what} in place: shape {tuple(shape)} {dtype} became {tuple(t.shape)} "
                  f"{t.dtype}. Work on a new tensor (x.unsqueeze(1), not x.unsqueeze_(1)).", hint)
        if t.requires_grad != grad:
            _fail(f"{name} changed requires_grad of {what} ({grad} -> {t.requires_grad}). Use a copy "
                  "(x.detach().requires_grad_()) if you need gradients with respect to it.", hint)
        same = torch.equal(t.detach(), values) or (   # NaN where NaN was counts as unchanged
            values.is_floating_point() and torch.allclose(t.detach(), values, rtol=0, atol=0, equal_nan=True))
        if not same:
            _fail(f"{name} changed the values of {what} in place. The caller still needs them: do not write "
                  "into an argument (no `x[...] = `, `x.masked_fill_`, `x.data`, `x.copy_`); build a new tensor.", hint)
    for module, mode, grads in zip(modules, modes, trainable):
        if [m.training for m in module.modules()] != mode:
            _fail(f"{name} left the model in {'training' if module.training else 'eval'} mode. If you switch "
                  "modes (model.eval()), switch back to the mode you found before returning.", hint)
        if [p.requires_grad for p in module.parameters()] != grads:
            _fail(f"{name} changed requires_grad of the model's parameters. Leave them as you found them "
                  "(use torch.no_grad() for a computation that needs no gradients).", hint)


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



# --------------------------------------------------------------------------------------
# Checks of behaviour students get wrong without noticing: devices, dtypes, gradients,
# generators, and using the course's own implementation instead of writing one.
# --------------------------------------------------------------------------------------

def _tensors_in(value: Any) -> list[torch.Tensor]:
    """Every tensor in a (nested) tuple / list / dict / namedtuple, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _tensors_in(v)]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors_in(v)]
    return []


def _map_tensors(value: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    """``value`` with ``fn`` applied to every tensor in it; a module becomes a copy whose
    parameters and buffers went through ``fn`` (an embedding table moves with its indices)."""
    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, torch.nn.Module):
        return copy.deepcopy(value)._apply(fn)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_fields"):  # namedtuple
        return type(value)(*(_map_tensors(v, fn) for v in value))
    if isinstance(value, (tuple, list)):
        return type(value)(_map_tensors(v, fn) for v in value)
    return value


def _short(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


_DEVICE_WORDS = ("expected device", "not on the expected device", "same device", "devices")


def _mixes_meta_and_another_device(error: BaseException) -> bool:
    """Whether ``error`` is PyTorch refusing to combine a meta tensor with one on another device."""
    message = str(error).lower()
    return "meta" in message and any(word in message for word in _DEVICE_WORDS)


@contextmanager
def _default_dtype(dtype: torch.dtype) -> Iterator[None]:
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


class _DeviceMixing(torch.overrides.TorchFunctionMode):
    """Records torch calls that mix a meta tensor with a CPU tensor that is not a scalar.

    Meta kernels are lenient where CUDA is not (an embedding looked up with CPU indices);
    indexing (``x[idx]``) stays allowed, as CUDA accepts CPU index tensors there.
    """

    _ALLOWED = frozenset({"__getitem__", "__setitem__", "__get__", "__set__", "size", "dim", "to", "__format__", "__repr__"})

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def __enter__(self):  # type: ignore[no-untyped-def]
        _REMOTE_MODES.append((("device_mixing",), self))
        return super().__enter__()

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        _REMOTE_MODES[:] = [entry for entry in _REMOTE_MODES if entry[1] is not self]
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if not self.found and name not in self._ALLOWED:
            tensors = _tensors_in((list(args), kwargs))
            if any(t.device.type == "meta" for t in tensors) and any(t.device.type == "cpu" and t.dim() > 0 for t in tensors):
                self.found.append(name)
        return func(*args, **kwargs)


def _module_like(module: torch.nn.Module, args: Any, kwargs: Any) -> torch.nn.Module:
    """A copy of ``module`` on the device, and in the float dtype, of the first tensor input."""
    first = (_tensors_in((args, kwargs)) or [None])[0]
    copy_ = copy.deepcopy(module)
    if first is None:
        return copy_
    copy_ = copy_.to(first.device)
    floats = [t for t in _tensors_in((args, kwargs)) if t.is_floating_point()]
    return copy_.to(floats[0].dtype) if floats else copy_


class _NewTensorsOnMeta(torch.overrides.TorchFunctionMode):
    """Like ``with torch.device("meta")``: a tensor made without ``device=`` lands on meta.

    Except 0-dim tensors (``torch.tensor(float("-inf"))``): a CPU scalar may meet tensors on
    any device, on a GPU too, so they stay on the CPU.
    """

    def __enter__(self):  # type: ignore[no-untyped-def]
        _REMOTE_MODES.append((("new_on_meta",), self))
        return super().__enter__()

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        _REMOTE_MODES[:] = [entry for entry in _REMOTE_MODES if entry[1] is not self]
        return super().__exit__(*exc)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        from torch.utils._device import _device_constructors

        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _device_constructors() and kwargs.get("device") is None and isinstance(out, torch.Tensor) and out.dim() > 0:
            return out.to("meta")
        return out


def check_device_dtype(
    fn: Callable[..., Any],
    *args: Any,
    name: str,
    check_dtype: bool = True,
    hint: str | None = None,
    **kwargs: Any,
) -> None:
    """Fail unless ``fn(*args, **kwargs)`` keeps to the device and dtype of its inputs.

    Device: the call runs again with every tensor argument moved to PyTorch's ``meta``
    device (shapes, no data). A tensor the function creates without ``device=`` lands on
    the CPU and meets a meta tensor, which fails exactly as it would on a GPU kernel.
    Functions that need data (``.item()``, data-dependent shapes) cannot run on meta;
    then they run on their real inputs with ``meta`` as the *default* device, so a tensor
    created without ``device=`` still meets the inputs on another device, and the output's
    device is compared with the input's.

    Dtype (``check_dtype``): float inputs in float64, then float32 with float64 as
    PyTorch's default dtype; float outputs must have the inputs' float dtype both times
    (a tensor made without ``dtype=`` would change it, as it would for half precision).
    """
    __tracebackhide__ = True
    device_hint = hint or (
        "create every new tensor on the input's device (device=x.device, or the *_like "
        "functions), and move masks and index tensors there too."
    )
    def prepared(args: Any, kwargs: Any) -> Callable[..., Any]:
        """A module moves with its inputs: its own copy per run, made outside the checks."""
        return _module_like(fn, args, kwargs) if isinstance(fn, torch.nn.Module) else fn

    # 1. device, on meta
    meta_args = _map_tensors(args, lambda t: t.detach().to("meta"))
    meta_kwargs = _map_tensors(kwargs, lambda t: t.detach().to("meta"))
    mixing = _DeviceMixing()
    target = prepared(meta_args, meta_kwargs)
    try:
        with warnings.catch_warnings(), mixing:
            warnings.simplefilter("ignore")
            out = target(*meta_args, **meta_kwargs)
    except CheckFailed:
        raise
    except Exception as error:  # noqa: BLE001 - the student's code may raise anything
        if _mixes_meta_and_another_device(error):
            _fail(f"{name} mixes devices: {_short(error)}. The inputs were on one device and a tensor "
                  "created inside the function on another; on a GPU this call would crash.", device_hint)
        out = None  # meta cannot run this function (it needs data): compare devices below
    if mixing.found:
        _fail(f"{name} mixes devices: {mixing.found[0]} received a tensor on the inputs' device and one created "
              "inside the function on the CPU; on a GPU this call would crash.", device_hint)
    if out is not None:
        stray = [t for t in _tensors_in(out) if t.device.type != "meta"]
        if stray:
            _fail(f"{name} returned a tensor on {stray[0].device} although every input was on another "
                  "device: it was created without device=. On a GPU it would come back on the CPU.", device_hint)
    else:
        # meta inputs cannot run it: keep the real inputs and make meta the *default* device,
        # so that a tensor created without device= lands on meta and meets the real ones.
        inputs = _tensors_in((args, kwargs))
        try:
            with warnings.catch_warnings(), _NewTensorsOnMeta():
                warnings.simplefilter("ignore")
                out = fn(*_map_tensors(args, lambda t: t.clone()), **_map_tensors(kwargs, lambda t: t.clone()))
        except CheckFailed:
            raise
        except Exception as error:  # noqa: BLE001
            if _mixes_meta_and_another_device(error):
                _fail(f"{name} mixes devices: {_short(error)}. The inputs were on one device and a tensor "
                      "created inside the function without device= on another; on a GPU this call would crash.",
                      device_hint)
        else:
            if inputs and any(t.device.type == "meta" for t in _tensors_in(out)):
                _fail(f"{name} returned a tensor created without device=: it does not follow its inputs' "
                      "device. On a GPU it would come back on the CPU.", device_hint)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args, **kwargs)
        if inputs:
            device = inputs[0].device
            wrong = [t for t in _tensors_in(out) if t.device != device]
            if wrong:
                _fail(f"{name} returned a tensor on {wrong[0].device}, but its inputs are on {device}.", device_hint)
    if not check_dtype:
        return
    # 2. dtype, twice: float64 inputs; float32 inputs with float64 as the default dtype
    for input_dtype, default in ((torch.float64, torch.float32), (torch.float32, torch.float64)):
        def cast(t: torch.Tensor, dtype: torch.dtype = input_dtype) -> torch.Tensor:
            return t.detach().to(dtype) if t.is_floating_point() else t

        cast_args, cast_kwargs = _map_tensors(args, cast), _map_tensors(kwargs, cast)
        target = prepared(cast_args, cast_kwargs)
        with _default_dtype(default), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                out = target(*cast_args, **cast_kwargs)
            except CheckFailed:
                raise
            except Exception as error:  # noqa: BLE001
                _fail(f"{name} fails on {str(input_dtype).replace('torch.', '')} inputs: {_short(error)}. "
                      "It should work for any float dtype.",
                      hint or "do not hard-code float32: take dtypes from the inputs (dtype=x.dtype, *_like).")
        wrong = [t.dtype for t in _tensors_in(out) if t.is_floating_point() and t.dtype != input_dtype]
        if wrong:
            _fail(f"{name} returned {str(wrong[0]).replace('torch.', '')} for "
                  f"{str(input_dtype).replace('torch.', '')} inputs: the output should keep the input's dtype.",
                  hint or "a tensor created without dtype= (zeros, full, tensor, arange...) or a .float() call "
                          "changes the dtype: take it from the inputs (dtype=x.dtype, or the *_like functions).")


def check_backward(
    fn: Callable[..., Any],
    *args: Any,
    name: str,
    reference: Callable[..., Any] | None = None,
    wrt: Sequence[int] | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    hint: str | None = None,
    **kwargs: Any,
) -> None:
    """Fail unless gradients flow through ``fn(*args, **kwargs)`` back to its inputs.

    The float tensor arguments (or those at positions ``wrt``) become leaves that require
    grad; a fixed random weighting of every finite float output is summed and
    back-propagated. Fails on an error in backward (typically an in-place operation on a
    tensor autograd needed), on an output cut from the graph (``.detach()``, ``.data``,
    ``torch.no_grad()``), and on NaN gradients. With ``reference``, the gradients of the
    same loss through ``reference(*args)`` must match.
    """
    __tracebackhide__ = True

    def leaves() -> list[Any]:
        out = []
        for i, a in enumerate(args):
            wanted = (wrt is None and isinstance(a, torch.Tensor) and a.is_floating_point()) or (wrt is not None and i in wrt)
            out.append(a.detach().clone().requires_grad_(True) if wanted else a)
        return out

    def loss_and_grads(function: Callable[..., Any], who: str) -> list[torch.Tensor | None]:
        inputs = leaves()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = function(*inputs, **kwargs)
        outputs = [t for t in _tensors_in(out) if t.is_floating_point()]
        if not any(t.requires_grad for t in outputs):
            _fail(f"{who}: no gradient can flow back through the output (it is cut from the graph).",
                  hint or "do not use .detach(), .data, .item() or torch.no_grad() on the path from the inputs to the output.")
        g = torch.Generator().manual_seed(1234)
        loss = 0.0
        for t in outputs:
            if t.requires_grad:
                weights = torch.randn(t.shape, generator=g, dtype=t.dtype).to(t.device)
                loss = loss + torch.where(torch.isfinite(t), t * weights, torch.zeros_like(t)).sum()
        try:
            loss.backward()
        except RuntimeError as error:
            if "inplace" in str(error) or "in-place" in str(error):
                _fail(f"{who}: the backward pass fails because a tensor autograd needed was changed in place "
                      f"({_short(error)}).",
                      hint or "use the out-of-place version (masked_fill instead of masked_fill_, x = x + y "
                              "instead of x += y, no item assignment into a tensor that is used later).")
            _fail(f"{who}: the backward pass fails: {_short(error)}.", hint)
        return [a.grad if isinstance(a, torch.Tensor) and a.requires_grad else None for a in inputs]

    grads = loss_and_grads(fn, name)
    for i, grad in enumerate(grads):
        if grad is not None and not bool(torch.isfinite(grad).all()):
            _fail(f"{name}: the gradient of argument {i} contains NaN or inf.",
                  hint or "a NaN gradient often comes from exp() overflowing, 0/0, or a softmax over a row "
                          "of -inf that is patched afterwards.")
    if reference is None:
        return
    expected = loss_and_grads(reference, f"reference for {name}")
    for i, (grad, exp) in enumerate(zip(grads, expected)):
        if exp is None:
            continue
        if grad is None:
            _fail(f"{name}: no gradient reaches argument {i}, but the output depends on it.", hint)
        check_close(grad, exp, f"gradient of {name} with respect to argument {i}", atol=atol, rtol=rtol, hint=hint)


def _same(a: Any, b: Any) -> bool:
    ta, tb = _tensors_in(a), _tensors_in(b)
    if not ta and not tb:
        return a == b
    return len(ta) == len(tb) and all(x.shape == y.shape and torch.equal(x, y) for x, y in zip(ta, tb))


def check_generator(
    fn: Callable[..., Any],
    *args: Any,
    name: str,
    generator_kw: str = "generator",
    hint: str | None = None,
    **kwargs: Any,
) -> None:
    """Fail unless ``fn`` draws its randomness from the generator it is given.

    With the same seed the result must be the same whatever the global seed is, the
    global random state must be left untouched, and another seed must change the result.
    """
    __tracebackhide__ = True
    hint = hint or f"draw every random number with {generator_kw}= (torch.rand(..., generator=g)), never from the global generator."

    def run(seed: int, global_seed: int) -> Any:
        torch.manual_seed(global_seed)
        before = torch.get_rng_state()
        generator = torch.Generator().manual_seed(seed)
        inputs = _map_tensors(args, lambda t: t.clone())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*inputs, **{**kwargs, generator_kw: generator})
        if not torch.equal(before, torch.get_rng_state()):
            _fail(f"{name} used PyTorch's global random generator although a {generator_kw} was given.", hint)
        return out

    first = run(0, 1)
    if not _same(first, run(0, 2)):
        _fail(f"{name} gave different results for the same {generator_kw} seed: it ignores the {generator_kw}.", hint)
    if _same(first, run(1, 1)):
        _fail(f"{name} gave the same result for two different {generator_kw} seeds: it ignores the {generator_kw}.", hint)


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
            previous(frame, event, arg)

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
    with _profiled(on_call), _remote_mode(("own_work", list(references), name)):
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
    package_dir = os.path.dirname(os.path.abspath(__file__))
    in_package = code is not None and os.path.abspath(code.co_filename).startswith(package_dir)
    if module != "__main__" or in_package:
        _fail(f"{name} comes from {module}, not from this notebook: the exercise asks you to write it yourself.",
              "define it in the answer cell (def/class), without importing the course's version.")


@contextmanager
def banned_calls(*function_names: str, name: str = "your answer", hint: str | None = None) -> Iterator[None]:
    """Fail when code run inside the block calls a torch function with one of these names.

    ``banned_calls("softmax")`` catches ``torch.softmax``, ``F.softmax``, ``Tensor.softmax``,
    ``nn.Softmax``, ``torch.special.softmax`` and ``torch._softmax``; list ``"log_softmax"``
    too to stop ``log_softmax().exp()``.
    """
    __tracebackhide__ = True
    names = set(function_names)
    names |= {f"special_{n}" for n in function_names} | {f"_{n}" for n in function_names}
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
    with _profiled(on_call), _remote_mode(("banned", list(function_names), name)):
        try:
            yield
        except BaseException as error:  # noqa: BLE001
            failure = error
    if used:
        _fail(f"{name} uses {used[0]}, which this exercise asks you not to use: write it from its formula.", hint)
    if failure is not None:
        raise failure
