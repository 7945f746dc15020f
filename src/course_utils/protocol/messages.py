"""What both sides of the checker protocol name the same way.

A request from the checker is ``{"op": Op, "context": {...}, "writes": [...], ...fields}``; the
kernel replies ``{"value": ...}`` or ``{"error": ...}`` (plus ``"rng"``, ``"evidence"``, and for a
call ``"after"``, ``"graph"``, ``"mixing"``, ``"allocations"``). While the checker computes an
answer the kernel may ask it back: ``{"callback": n, "how": Callback, ...}`` or
``{"callback_backward": graph, "grads": ...}``, answered ``{"return": ...}`` or ``{"raise": ...}``.
"""

from __future__ import annotations

from contextlib import contextmanager
from enum import Enum
from typing import Any, Callable, Iterator, Sequence

import torch

__all__ = ["Op", "Callback", "Unary", "Mode", "RemoteModes", "REMOTE_MODES", "WritableArguments", "WRITABLE",
           "Bridge", "bridged", "tensors_in", "replace_grad_tensors", "set_default_device"]


class Op(str, Enum):
    """What the checker asks the kernel (``request["op"]``)."""

    LOOKUP = "lookup"  # names of the notebook -> their values (handles for what is not data)
    GETATTR = "getattr"
    SETATTR = "setattr"
    GETITEM = "getitem"
    SETITEM = "setitem"
    UNARY = "unary"  # len, iter, next, bool, repr, str, copy, deepcopy of a handle
    CONTAINS = "contains"
    CALL = "call"  # call a handle under the request's modes
    BACKWARD = "backward"  # run backward through a call's graph
    SUBSTITUTE = "substitute"  # rebind names of the notebook (checks.substitute)
    RESTORE = "restore"
    RELEASE = "release"
    END = "end"  # the test cell is over: the agent returns


class Callback(str, Enum):
    """What the kernel asks of an object the checker lent it (``message["how"]``)."""

    CALL = "call"
    GETATTR = "getattr"
    GETITEM = "getitem"
    LEN = "len"
    LIST = "list"
    NEXT = "next"


class Unary(str, Enum):
    """The one-argument builtins :attr:`Op.UNARY` applies to a handle."""

    LEN = "len"
    ITER = "iter"
    NEXT = "next"
    BOOL = "bool"
    REPR = "repr"
    STR = "str"
    DEEPCOPY = "deepcopy"
    COPY = "copy"


class Mode(str, Enum):
    """The torch modes and watches a call in the kernel runs under (``request["modes"]``: each
    ``[Mode, *arguments]``)."""

    DEVICE_MIXING = "device_mixing"  # checks.probes: a meta tensor meeting a CPU one
    NEW_ON_META = "new_on_meta"  # checks.probes: new tensors land on meta
    NEW_TRACKED = "new_tracked"  # checks.probes: new tensors tracked as if on another device
    OWN_WORK = "own_work"  # checks.own_work: [references, name]
    BANNED = "banned"  # checks.banned_calls: [function names, name]
    ALLOCATIONS = "allocations"  # checks.AllocationLog: what the call allocates


class RemoteModes:
    """The modes active in the checker now, each with the object that opened it: a call into the
    kernel runs under the same modes there, and the kernel's findings go back to their owners."""

    def __init__(self) -> None:
        self._entries: list[tuple[tuple, Any]] = []

    def enter(self, mode: tuple, owner: Any) -> None:
        self._entries.append((mode, owner))

    def leave(self, owner: Any) -> None:
        self._entries[:] = [entry for entry in self._entries if entry[1] is not owner]

    def modes(self) -> list[tuple]:
        """The active modes, oldest first, as they go on the wire."""
        return [mode for mode, _ in self._entries]

    def owners(self, kind: Mode) -> list[Any]:
        """The objects that opened a mode of ``kind``."""
        return [owner for mode, owner in self._entries if mode[0] == kind]

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[tuple[tuple, Any]]:
        return iter(list(self._entries))


REMOTE_MODES = RemoteModes()


class WritableArguments:
    """The arguments a test declared that the student's code may change in place (``checks.may_change``,
    and ``checks.leaves_unchanged``, which watches them itself). The checker copies an in-place change
    made in the kernel back into its own object only for these; any other change of an argument is
    the In-place rule broken, and fails the call (a change copied back would rewrite the tests' own
    inputs, on which their expected values are then computed)."""

    def __init__(self) -> None:
        self._declared: list[tuple[str, list[Any]]] = []

    @contextmanager
    def declared(self, arguments: Sequence[Any], what: str = "anything") -> Iterator[None]:
        """While the block runs, ``arguments`` (and every tensor inside lists, tuples and dicts among
        them) are declared: their values may change (``what="anything"``), or only the
        ``requires_grad`` flags of a model (``what="requires_grad"``: a layer that wraps another freezes it)."""
        entry = [*arguments, *tensors_in(list(arguments))]
        self._declared.append((what, entry))
        try:
            yield
        finally:
            self._declared[:] = [e for e in self._declared if e[1] is not entry]

    def allows(self, value: Any) -> str | None:
        """What may change in ``value`` ("anything", "requires_grad"), or None."""
        kinds = {what for what, entry in self._declared if any(value is declared for declared in entry)}
        return "anything" if "anything" in kinds else next(iter(kinds), None)

    def clear(self) -> None:
        self._declared.clear()


WRITABLE = WritableArguments()


_PLAIN = frozenset({int, float, complex, bool, str, bytes, type(None)})


def tensors_in(value: Any) -> list[torch.Tensor]:
    """Every tensor in a (nested) tuple / list / dict / namedtuple, in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, (tuple, list)):
        items = value
    else:
        return []
    # a container of plain values (a BPE rank table, a list of symbols) is looked at in C, not one
    # call per item: tests call answers with 50,000-entry tables, under own_work's profile hook
    if _PLAIN.issuperset(map(type, items)):
        return []
    return [t for v in items for t in tensors_in(v)]


class Bridge(torch.autograd.Function):
    """Ties tensors the other process computed to this process's autograd graph.

    ``Bridge.apply(backward, n_inputs, outputs, *inputs, anchor)`` returns detached copies of
    ``outputs`` that depend on ``inputs`` (and on ``anchor``, a scalar that requires grad, so the
    copies do even when no input does). Their backward sends the output gradients to the other
    side through ``backward(grads) -> list`` and hands its answer, one gradient per input, to
    ``inputs``; an answer of the wrong shape counts as no gradient.
    """

    @staticmethod
    def forward(ctx: Any, backward: Callable[[list], Any], n_inputs: int, outputs: list,  # type: ignore[override]
                *inputs: torch.Tensor) -> Any:
        ctx.send, ctx.n_inputs = backward, n_inputs
        ctx.shapes = [(t.shape, t.dtype) for t in inputs[:n_inputs]]
        return tuple(o.detach().clone() for o in outputs)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> Any:  # type: ignore[override]
        grads = ctx.send(list(grad_outputs))
        if not isinstance(grads, list):
            grads = []
        out = [g.to(dtype) if isinstance(g, torch.Tensor) and g.shape == shape else None
               for g, (shape, dtype) in zip(grads, ctx.shapes)]
        out += [None] * (ctx.n_inputs - len(out))
        return (None, None, None, *out, None)


def bridged(result: Any, backward: Callable[[list], Any], inputs: list[torch.Tensor]) -> Any:
    """``result`` with each tensor that requires grad replaced by its :class:`Bridge` copy."""
    outputs = [t for t in tensors_in(result) if t.requires_grad]
    if not outputs:
        return result
    anchor = torch.zeros((), device="cpu", requires_grad=True)
    copies = iter(Bridge.apply(backward, len(inputs), outputs, *inputs, anchor))
    return replace_grad_tensors(result, copies)


def replace_grad_tensors(value: Any, replacements: Iterator[torch.Tensor]) -> Any:
    """``value`` with each tensor that requires grad replaced by the next of ``replacements``."""
    if isinstance(value, torch.Tensor):
        return next(replacements) if value.requires_grad else value
    if isinstance(value, dict):
        return {k: replace_grad_tensors(v, replacements) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(replace_grad_tensors(v, replacements) for v in value)
    if isinstance(value, list):
        return [replace_grad_tensors(v, replacements) for v in value]
    return value


def set_default_device(name: str) -> None:
    """PyTorch's default device, changed only when it differs (a default of "cpu" set explicitly
    would move every tensor given to torch.as_tensor, meta ones included)."""
    if str(torch.get_default_device()) != name:
        torch.set_default_device(None if name == "cpu" else name)
