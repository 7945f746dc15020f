"""What the checker holds of the student's kernel: proxies of its objects and mirrors of its errors.

A :class:`RemoteObject` stands for an object that lives in the kernel; every use of it is a
question to the kernel, asked through the :class:`~course_grader.grading.checker.checker.Checker`
that made it. An exception the kernel raised comes back as the builtin exception of the same kind
(never its traceback, never a class of the kernel's).
"""

from __future__ import annotations

import builtins
import sys
from typing import Any, Protocol, Sequence, SupportsIndex

import numpy as np
import torch

from course_grader.grading.checker.link import CheckerError
from course_utils.protocol.messages import Op, Unary


# Packages whose classes a proxy may claim to be an instance of (isinstance checks).
_LIBRARIES = ("torch", "numpy", "course_utils", "collections", "datasets", "builtins")


class RemoteError(Exception):
    """An exception raised in the kernel whose type has no counterpart here."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind




_LOCAL = frozenset({"_remote", "_tag", "_ref", "_unary", "__class__", "__deepcopy__", "__copy__", "__reduce_ex__", "__reduce__",
                    "__getstate__", "__setstate__", "__dict__", "__weakref__", "__slots__", "__init__",
                    "__torch_function__", "__array_interface__", "__array_struct__", "__len__", "__iter__"})


_NEVER_PROXIED = (torch.Tensor, np.ndarray, np.generic, torch.Generator)  # these cross as data, never as handles


def _local_class(mro: Sequence[str]) -> type | None:
    """The first library class in the kernel object's MRO, looked up among modules this process
    has already imported (a class name from the kernel never makes us import anything: a module's
    top-level code would run here). A handle never claims a class whose objects cross as data."""
    for entry in mro:
        module, _, qualname = entry.partition(":")
        if module.split(".")[0] not in _LIBRARIES or "<locals>" in qualname or module == "builtins":
            continue
        obj: Any = sys.modules.get(module)
        try:
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except Exception:  # noqa: BLE001 - a name the kernel made up
            continue
        if isinstance(obj, type) and not issubclass(obj, _NEVER_PROXIED):
            return obj
    return None


class Asker(Protocol):
    """What a proxy needs of the checker (:class:`~course_grader.grading.checker.checker.Checker`):
    a question to the kernel, a value put on the wire, a call."""

    def request(self, op: Op, **fields: Any) -> Any: ...  # noqa: D102

    def enc(self, value: Any) -> Any: ...  # noqa: D102

    def call(self, target: "RemoteObject", args: tuple, kwargs: dict) -> Any: ...  # noqa: D102


class RemoteObject:
    """An object that lives in the student's kernel. Every use is a question to the kernel."""

    __slots__ = ("_remote", "_tag")

    def __init__(self, remote: Asker, tag: dict) -> None:
        object.__setattr__(self, "_remote", remote)
        object.__setattr__(self, "_tag", tag)

    def __getattribute__(self, name: str) -> Any:
        if name in _LOCAL:
            return object.__getattribute__(self, name)
        remote, tag = object.__getattribute__(self, "_remote"), object.__getattribute__(self, "_tag")
        return remote.request(Op.GETATTR, target={"$handle": tag["$handle"]}, name=name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105 - isinstance(proxy, nn.Linear) for library classes
        tag = object.__getattribute__(self, "_tag")
        return _local_class(tag.get("mro", [])) or RemoteObject

    def __setattr__(self, name: str, value: Any) -> None:
        self._remote.request(Op.SETATTR, target=self._ref(), name=name, value=self._remote.enc(value))

    def _ref(self) -> dict:
        return {"$handle": object.__getattribute__(self, "_tag")["$handle"]}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._remote.call(self, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._remote.request(Op.GETITEM, target=self._ref(), key=self._remote.enc(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._remote.request(Op.SETITEM, target=self._ref(), key=self._remote.enc(key), value=self._remote.enc(value))

    def _unary(self, how: Unary) -> Any:
        return self._remote.request(Op.UNARY, target=self._ref(), how=how)

    def __len__(self) -> int:
        n = self._unary(Unary.LEN)
        if type(n) is not int:
            raise TypeError("len() of the notebook's object is not an int")
        return n

    def __iter__(self) -> Any:
        it = self._unary(Unary.ITER)
        if isinstance(it, (torch.Tensor, np.ndarray)):  # a handle never stands for a tensor: garbage
            raise CheckerError("the kernel answered an iteration with a tensor")
        return it if isinstance(it, RemoteObject) else iter(it)

    def __next__(self) -> Any:
        return self._unary(Unary.NEXT)

    def __bool__(self) -> bool:
        return bool(self._unary(Unary.BOOL) is True)

    def __contains__(self, item: Any) -> bool:
        return self._remote.request(Op.CONTAINS, target=self._ref(), item=self._remote.enc(item)) is True

    def __repr__(self) -> str:
        try:
            text = self._unary(Unary.REPR)
        except Exception:  # noqa: BLE001
            text = None
        return str(text)[:300] if isinstance(text, str) else "<an object of the notebook>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict) -> Any:
        return self._unary(Unary.DEEPCOPY)

    def __copy__(self) -> Any:
        return self._unary(Unary.COPY)

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        raise TypeError("an object of the notebook cannot be pickled by the checker")

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, RemoteObject):
            return self._ref() == other._ref()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("remote", object.__getattribute__(self, "_tag")["$handle"]))



_MIRRORED = {name: getattr(builtins, name) for name in dir(builtins)
             if isinstance(getattr(builtins, name), type) and issubclass(getattr(builtins, name), Exception)}


def _mirror(info: Any) -> BaseException:
    """The kernel's exception, as an exception of the same kind here (never its traceback)."""
    if not isinstance(info, dict):
        return CheckerError("the kernel sent a malformed error")
    kind, message = str(info.get("type", "Exception"))[:100], str(info.get("message", ""))[:2000]
    # (a CheckFailed of the kernel is not one of ours: only the checker's own checks fail a test
    # with a check message; the kernel's is an error of the student's code like any other)
    error: BaseException = RemoteError(kind, message)
    if kind in _MIRRORED:
        try:
            error = _MIRRORED[kind](message)
        except Exception:  # noqa: BLE001 - exceptions with unusual constructors
            pass
    else:
        mro = [str(m) for m in info.get("mro", [])] if isinstance(info.get("mro"), list) else []
        for base in mro[1:]:  # a student's subclass of ValueError is still a ValueError here
            if base in _MIRRORED and base not in ("Exception", "BaseException"):
                error = _MIRRORED[base](f"{kind}: {message}")
                break
    error.__course_from_kernel__ = True  # type: ignore[attr-defined]
    return error

