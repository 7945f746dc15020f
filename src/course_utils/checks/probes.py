"""Probes of behaviour students get wrong without noticing: devices, dtypes, gradients and
generators. Each runs the student's function again under changed conditions (inputs on
PyTorch's ``meta`` device, another dtype, leaves that require grad, other seeds) and fails
with a message like :mod:`course_utils.checks.assertions`' ones.
"""

from __future__ import annotations

import copy
import importlib
import sys
import warnings
from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import torch

from course_utils.checks.assertions import CheckFailed, _fail, check_close
from course_utils.protocol.messages import REMOTE_MODES, Mode, tensors_in

__all__ = ["check_device_dtype", "check_backward", "check_generator"]


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


class _RemoteTorchMode(torch.overrides.TorchFunctionMode):
    """A torch function mode that a call into the kernel's process (the grader's checker) must run
    under too: entering it registers ``(remote, self)`` in ``REMOTE_MODES``, leaving it removes it."""

    remote: tuple[Mode, ...] = ()

    def __enter__(self):  # type: ignore[no-untyped-def]
        REMOTE_MODES.enter(self.remote, self)
        return super().__enter__()

    def __exit__(self, *exc):  # type: ignore[no-untyped-def]
        REMOTE_MODES.leave(self)
        return super().__exit__(*exc)


class DeviceMixing(_RemoteTorchMode):
    """Records torch calls that mix a meta tensor with a CPU tensor that is not a scalar.

    Meta kernels are lenient where CUDA is not (an embedding looked up with CPU indices);
    indexing (``x[idx]``) stays allowed, as CUDA accepts CPU index tensors there.
    """

    remote = (Mode.DEVICE_MIXING,)
    _ALLOWED = frozenset({"__getitem__", "__setitem__", "__get__", "__set__", "size", "dim", "to", "__format__", "__repr__"})

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        name = getattr(func, "__name__", str(func))
        if not self.found and name not in self._ALLOWED:
            tensors = tensors_in((list(args), kwargs))
            if any(t.device.type == "meta" for t in tensors) and any(t.device.type == "cpu" and t.dim() > 0 for t in tensors):
                self.found.append(name)
        return func(*args, **kwargs)


def _module_like(module: torch.nn.Module, args: Any, kwargs: Any) -> torch.nn.Module:
    """A copy of ``module`` on the device, and in the float dtype, of the first tensor input."""
    first = (tensors_in((args, kwargs)) or [None])[0]
    copy_ = copy.deepcopy(module)
    if first is None:
        return copy_
    copy_ = copy_.to(first.device)
    floats = [t for t in tensors_in((args, kwargs)) if t.is_floating_point()]
    return copy_.to(floats[0].dtype) if floats else copy_


class NewTensorsOnMeta(_RemoteTorchMode):
    """Like ``with torch.device("meta")``: a tensor made without ``device=`` lands on meta.

    Except 0-dim tensors (``torch.tensor(float("-inf"))``): a CPU scalar may meet tensors on
    any device, on a GPU too, so they stay on the CPU; and ``torch.as_tensor(t)`` of a tensor,
    which makes nothing new and keeps ``t``'s device (moving it would hide a later ``t.cpu()``).
    """

    remote = (Mode.NEW_ON_META,)

    def __torch_function__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if _made_without_device(func, args, kwargs) and isinstance(out, torch.Tensor) and out.dim() > 0:
            return out.to("meta")
        return out


def _made_without_device(func: Any, args: Sequence[Any], kwargs: dict) -> bool:
    """Whether ``func(*args, **kwargs)`` makes a new tensor without being told its device:
    a factory (``zeros``, ``arange``, ``tensor``...) without ``device=``, except ``as_tensor(t)``
    of a tensor, which makes nothing new and keeps ``t``'s device."""
    from torch.utils._device import _device_constructors

    keeps_device = func in (torch.as_tensor, torch.asarray) and bool(args) and isinstance(args[0], torch.Tensor)
    return func in _device_constructors() and kwargs.get("device") is None and not keeps_device


def _names_a_device(args: Sequence[Any], kwargs: dict) -> bool:
    """Whether a ``Tensor.to`` call's arguments (after ``self``) say where to go."""
    for value in [*args, kwargs.get("device"), kwargs.get("other")]:
        if isinstance(value, (torch.device, torch.Tensor)):
            return True
        if isinstance(value, str):
            try:
                torch.device(value)
            except RuntimeError:
                continue
            return True
    return False


class NewTensorsTracked(_RemoteTorchMode):
    """Like :class:`NewTensorsOnMeta`, for functions that read what they create (a counter
    compared in an ``if``), which meta cannot run: new tensors keep their data on the CPU, but
    are *tracked* as if they were on another device than the inputs.

    What is computed from tracked tensors alone is tracked too; moving one (``.to(device)``,
    ``.to(other)``, ``.type_as``, ``.cuda()``) ends it. A tracked tensor meeting an untracked
    one that is not a scalar (except as an index, as CUDA allows) is recorded in ``found``, as
    :class:`DeviceMixing` does; :meth:`returned` records an output that is still tracked.
    0-dim tensors are never tracked (a CPU scalar may meet tensors on any device).
    """

    remote = (Mode.NEW_TRACKED,)
    _MOVES = frozenset({"cuda", "type_as"})

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._tracked: dict[int, torch.Tensor] = {}  # id -> the tensor (kept alive, so ids stay unique)

    def _is_tracked(self, t: torch.Tensor) -> bool:
        return self._tracked.get(id(t)) is t

    def _track(self, out: Any) -> None:
        for t in tensors_in(out):
            if t.dim() > 0:
                self._tracked[id(t)] = t

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001 - torch's protocol
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        if _made_without_device(func, args, kwargs):
            self._track(out)
            return out
        tensors = [t for t in tensors_in((list(args), kwargs)) if t.dim() > 0]
        tracked = [t for t in tensors if self._is_tracked(t)]
        if not tracked:
            return out
        if name in self._MOVES or (name == "to" and _names_a_device(args[1:], kwargs)):
            for t in tensors_in(out):  # moved (``.to`` of a tensor already there returns itself)
                self._tracked.pop(id(t), None)
            return out
        if name in DeviceMixing._ALLOWED:
            if args and isinstance(args[0], torch.Tensor) and self._is_tracked(args[0]):
                self._track(out)
            return out
        if len(tracked) < len(tensors):
            if not self.found:
                self.found.append(name)
            return out
        self._track(out)
        return out

    def returned(self, out: Any) -> None:
        """Record ``out`` if a tensor in it is still tracked (created without ``device=``)."""
        if any(self._is_tracked(t) for t in tensors_in(out)) and "returned" not in self.found:
            self.found.append("returned")


_NOT_FOLLOWING = ("returned a tensor created without device=: it does not follow its inputs' device. "
                  "On a GPU it would come back on the CPU.")


def _tracked_run(fn: Callable[..., Any], args: Any, kwargs: Any, name: str, hint: str) -> None:
    """Run ``fn`` under :class:`NewTensorsTracked`; fail on what it found (its own errors are the
    other tests' business)."""
    tracked = NewTensorsTracked()
    try:
        with warnings.catch_warnings(), tracked:
            warnings.simplefilter("ignore")
            out = fn(*_map_tensors(args, lambda t: t.clone()), **_map_tensors(kwargs, lambda t: t.clone()))
    except CheckFailed:
        raise
    except Exception:  # noqa: BLE001 - the student's code may raise anything
        out = None
    tracked.returned(out)
    found = [f for f in tracked.found if f != "returned"]
    if found:
        _fail(f"{name} mixes devices: {found[0]} received a tensor on the inputs' device and one created "
              "inside the function without device=; on a GPU this call would crash.", hint)
    if tracked.found:
        _fail(f"{name} {_NOT_FOLLOWING}", hint)


def import_dynamo_unwatched() -> None:
    """Import ``torch._dynamo`` now, with any profile hook set aside. torch's Python decompositions
    of meta operations import it on their first call (about 2 s); inside ``own_work`` or
    ``banned_calls``, whose profile hook sees every call of that import, it took 7 s (11's RMSNorm,
    12's patch embedding). Library code, not the answer's: nothing is unwatched while the answer runs."""
    if "torch._dynamo" in sys.modules:
        return
    hook = sys.getprofile()
    sys.setprofile(None)
    try:
        importlib.import_module("torch._dynamo")
    finally:
        sys.setprofile(hook)


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
    import_dynamo_unwatched()
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
    mixing = DeviceMixing()
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
        stray = [t for t in tensors_in(out) if t.device.type != "meta"]
        if stray:
            _fail(f"{name} returned a tensor on {stray[0].device} although every input was on another "
                  "device: it was created without device=. On a GPU it would come back on the CPU.", device_hint)
    else:
        # meta inputs cannot run it: keep the real inputs and make meta the *default* device,
        # so that a tensor created without device= lands on meta and meets the real ones.
        inputs = tensors_in((args, kwargs))
        try:
            with warnings.catch_warnings(), NewTensorsOnMeta():
                warnings.simplefilter("ignore")
                out = fn(*_map_tensors(args, lambda t: t.clone()), **_map_tensors(kwargs, lambda t: t.clone()))
        except CheckFailed:
            raise
        except Exception as error:  # noqa: BLE001
            if _mixes_meta_and_another_device(error):
                _fail(f"{name} mixes devices: {_short(error)}. The inputs were on one device and a tensor "
                      "created inside the function without device= on another; on a GPU this call would crash.",
                      device_hint)
            # it reads the data of a tensor it made (a counter in an `if`): meta cannot hold that either
            _tracked_run(fn, args, kwargs, name, device_hint)
        else:
            if inputs and any(t.device.type == "meta" for t in tensors_in(out)):
                _fail(f"{name} {_NOT_FOLLOWING}", device_hint)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out = fn(*args, **kwargs)
        if inputs:
            device = inputs[0].device
            wrong = [t for t in tensors_in(out) if t.device != device]
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
        wrong = [t.dtype for t in tensors_in(out) if t.is_floating_point() and t.dtype != input_dtype]
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
        outputs = [t for t in tensors_in(out) if t.is_floating_point()]
        if not any(t.requires_grad for t in outputs):
            _fail(f"{who}: no gradient can flow back through the output (it is cut from the graph).",
                  hint or "do not use .detach(), .data, .item() or torch.no_grad() on the path from the inputs to the output.")
        g = torch.Generator().manual_seed(1234)
        loss: Any = 0.0  # a tensor after the first output
        for t in outputs:
            if t.requires_grad:
                weights = torch.randn(t.shape, generator=g, dtype=t.dtype).to(t.device)
                loss = loss + torch.where(torch.isfinite(t), t * weights, torch.zeros_like(t)).sum()
        try:
            loss.backward()
        except NotImplementedError:
            raise  # an unwritten backward: `course check` reports the exercise as not attempted (TODO), not a wrong formula
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
    ta, tb = tensors_in(a), tensors_in(b)
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
