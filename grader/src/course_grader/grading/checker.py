"""The trusted checker: a test cell's code runs here, never in the student's kernel.

When a test cell is graded, the kernel runs only its visible part (what the student sees
anyway). Then this process runs the whole cell, visible and hidden tests, in a namespace of
its own: the course's check functions and libraries are imported *here*, and every other name
the tests use is looked up in the kernel through :mod:`course_utils.agent`. Student objects
(functions, classes, models) stay in the kernel and appear here as :class:`RemoteObject`
proxies; calling one sends the arguments over, and the result comes back as plain data
(:mod:`course_utils.wire`). Every comparison, tolerance and verdict happens in this process, so
nothing the student's code does in its kernel can switch a check off or read a hidden test.

To keep a test cell's meaning the same as in one process:
- PyTorch's global random state and default dtype travel with every request (a test that
  seeds, then builds the student's model, gets the weights it would have got in-kernel);
- an argument the student's code changes in place (a tensor, a module, a generator, a list or
  dict of plain values) is changed here too (so ``leaves_unchanged`` sees it);
- gradients flow across: a result that requires grad is tied to the kernel's graph, and
  ``backward()`` here runs backward there;
- a function of the checker passed to the kernel (a reference, a lambda) is called back;
- ``substitute(globals(), ...)`` rebinds the names in the kernel;
- ``own_work`` / ``banned_calls`` watch the call inside the kernel (evidence, which the
  student can switch off; switching it off is reported).
"""

from __future__ import annotations

import ast
import base64
import builtins
import importlib
import io
import itertools
import json
import os
import queue
import re
import sys
import time
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np
import torch

from course_utils import checks, wire
from course_utils.cells import split_hidden  # the one grammar of hidden blocks
from course_utils.agent import _replace_grad_tensors, set_default_device

__all__ = ["checker_enabled", "CheckerError", "CheckResult", "RemoteObject", "Checker", "check_cell", "prelude_from_source", "split_hidden"]

# Imported in the checker, whatever the notebook does: the tests' own vocabulary.
BASE_PRELUDE = (
    "import math\nimport numpy as np\nimport torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
    "from course_utils.checks import *\n"
)
# Packages whose classes a proxy may claim to be an instance of (isinstance checks).
_LIBRARIES = ("torch", "numpy", "course_utils", "collections", "datasets", "builtins")
_AGENT_CODE = "__import__('course_utils.agent', fromlist=['serve']).serve()"
_MAX_MESSAGE = 400 * 2**20
# all messages of one test cell together: what the checker may have to hold (the red team kept
# 15 tensors of 250 MiB alive through one answer's `.shape`); the course's largest cell uses ~40 MiB
_MAX_RECEIVED = int(os.environ.get("COURSE_CHECKER_MAX_BYTES", str(768 << 20)))


CHECKER_GRACE = 30.0  # seconds the checker process may run past a cell's limit before it is restarted
MAX_EVIDENCE = 50  # evidence items kept per test cell (the kernel's to send: bounded)


class CheckerError(RuntimeError):
    """The kernel did not answer the checker as the protocol says (a crash, a time-out, garbage)."""


class CheckerTimeout(CheckerError):
    """The test cell's deadline passed while the kernel was computing (the kernel is then stopped)."""


class RemoteError(Exception):
    """An exception raised in the kernel whose type has no counterpart here."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}" if message else kind)
        self.kind = kind


# What the student reads when their code raised during a test: the kernel's own message (its
# text is the kernel's to choose) never reaches a verdict, only the builtin type of the error.
KERNEL_RAISED = "your code raised {kind} while the tests ran it (the tests' inputs are not shown)"


def _kernel_kind(error: BaseException) -> str:
    """The builtin exception type an error from the kernel is shown as."""
    for cls in type(error).__mro__:
        if cls.__module__ == "builtins" and issubclass(cls, Exception):
            return cls.__name__
    return "Exception"


@dataclass
class CheckResult:
    """One test cell, checked: ``ok``, or the error the student sees; plus evidence for a flag."""

    ok: bool
    ename: str = ""
    evalue: str = ""
    evidence: list[str] = field(default_factory=list)
    timed_out: bool = False  # the deadline passed: the kernel is stopped (it may never answer again)


def checker_enabled(assignment: str | None = None) -> bool:
    """Whether the trusted checker decides the test cells of ``assignment``: always, for every
    assignment (each one's solution and curated mistakes are proven through it by `course
    mistakes`), unless ``COURSE_CHECKER=off`` runs whole test cells in the kernel (authors only)."""
    return os.environ.get("COURSE_CHECKER", "").lower() not in {"off", "0", "no"}


def _bound_names(source: str) -> set[str]:
    """Names a cell binds at its top level (def, class, assignment, import)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return names


def prelude_from_source(cells: Sequence[str], answers: Sequence[str] = ()) -> str:
    """The import statements of the instructor's own code cells (from the *source* notebook),
    less the names an answer cell defines (the student's class shadows a library class of the
    same name, as it does in the notebook)."""
    theirs = set().union(*(_bound_names(a) for a in answers)) if answers else set()
    lines = []
    for source in cells:
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                node.names = [a for a in node.names if (a.asname or a.name).split(".")[0] not in theirs]
                if node.names:
                    lines.append(ast.unparse(node))
    return "\n".join(lines)


# --------------------------------------------------------------------------- the link


class KernelLink:
    """The checker's own client on the kernel: one execute request that runs the agent,
    then one ``input()`` round trip per question."""

    def __init__(self, connection_info: dict, deadline: float) -> None:
        from jupyter_client.blocking import BlockingKernelClient

        self.deadline = deadline
        self.client = BlockingKernelClient()
        self.client.load_connection_info(connection_info)
        self.client.start_channels()
        self.msg_id = self.client.execute(_AGENT_CODE, silent=False, store_history=False, allow_stdin=True)
        self.closed = False
        self.pending: dict | None = None
        self.received = 0  # characters the kernel has sent this test cell

    def _next_or_none(self, wait: float) -> dict | None:
        """The kernel's next message within ``wait`` seconds, or None."""
        return self._next(until=min(self.deadline, time.monotonic() + wait))

    def _drain_iopub(self) -> None:
        while True:  # what the student's code prints while checked is nobody's business
            try:
                self.client.get_iopub_msg(timeout=0)
            except queue.Empty:
                return
            except ValueError:  # a garbled or replayed message of the kernel's: nobody's business either
                continue

    def _next(self, until: float | None = None) -> Any:
        while True:
            remaining = (until or self.deadline) - time.monotonic()
            if remaining <= 0 and until is not None and until < self.deadline:
                return None
            if remaining <= 0:
                self._interrupt()
                raise CheckerTimeout("the tests timed out waiting for the notebook's code")
            try:
                msg = self.client.get_stdin_msg(timeout=min(remaining, 0.5))
            except queue.Empty:
                self._drain_iopub()
                self._check_alive()
                continue
            if msg.get("msg_type") != "input_request" or msg.get("parent_header", {}).get("msg_id") != self.msg_id:
                continue
            prompt = msg["content"].get("prompt", "")
            if len(prompt) > _MAX_MESSAGE:
                raise CheckerError("the notebook's answer is too large")
            self.received += len(prompt)
            if self.received > _MAX_RECEIVED:  # kept alive by the tests: bounded per test cell
                self._interrupt()
                raise CheckerError(f"the notebook's code sent the tests more than {_MAX_RECEIVED >> 20} MiB "
                                   "in one test cell")
            try:
                message = json.loads(prompt)
            except ValueError:
                raise CheckerError("the notebook's code wrote to the grader's channel (input() while tested?)") from None
            if not isinstance(message, dict):
                raise CheckerError("the kernel sent something that is not a message")
            return message

    def _check_alive(self) -> None:
        try:
            reply = self.client.get_shell_msg(timeout=0)
        except queue.Empty:
            return
        if reply.get("parent_header", {}).get("msg_id") == self.msg_id:
            self.closed = True
            content = reply.get("content", {})
            raise CheckerError(f"the kernel stopped answering the tests ({content.get('ename', 'no error')}: "
                               f"{content.get('evalue', '')})")

    def _interrupt(self) -> None:
        try:
            msg = self.client.session.msg("interrupt_request", {})
            self.client.control_channel.send(msg)
        except Exception:  # noqa: BLE001 - best effort; the notebook's own time limit follows
            pass

    def exchange(self, message: dict) -> dict:
        if self.closed:
            raise CheckerError("the kernel stopped answering the tests")
        if not self.started:
            return self._first(message)
        self.client.input(json.dumps(message))
        return self._next()

    started = False

    def _first(self, message: dict) -> dict:
        """The first question. The kernel's hello may be lost (a stdin message the kernel sends
        before our socket has connected is dropped), so after a moment we ask anyway; a hello
        that then arrives means the kernel had not asked yet and our question was flushed: ask again."""
        hello = self._next_or_none(2.0)
        self.client.input(json.dumps(message))
        while True:
            reply = self._next()
            if "hello" in reply and len(reply) == 1:
                if hello is not None:
                    raise CheckerError("the kernel greeted the checker twice")
                hello = reply
                self.client.input(json.dumps(message))
                continue
            self.started = True
            return reply

    def close(self) -> None:
        if os.environ.get("COURSE_CHECKER_DEBUG"):
            print(f"checker: received {self.received / 2**20:.1f} MiB in this test cell", file=sys.stderr, flush=True)
        try:
            if not self.closed:
                self.client.input(json.dumps({"op": "end"}))
                end = time.monotonic() + 10
                while time.monotonic() < end:
                    try:
                        reply = self.client.get_shell_msg(timeout=0.5)
                    except queue.Empty:
                        continue
                    if reply.get("parent_header", {}).get("msg_id") == self.msg_id:
                        break
            self._drain_iopub()
        finally:
            self.client.stop_channels()


# --------------------------------------------------------------------------- proxies


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


class RemoteObject:
    """An object that lives in the student's kernel. Every use is a question to the kernel."""

    __slots__ = ("_remote", "_tag")

    def __init__(self, remote: "Checker", tag: dict) -> None:
        object.__setattr__(self, "_remote", remote)
        object.__setattr__(self, "_tag", tag)

    def __getattribute__(self, name: str) -> Any:
        if name in _LOCAL:
            return object.__getattribute__(self, name)
        remote, tag = object.__getattribute__(self, "_remote"), object.__getattribute__(self, "_tag")
        return remote.request("getattr", target={"$handle": tag["$handle"]}, name=name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:  # noqa: D105 - isinstance(proxy, nn.Linear) for library classes
        tag = object.__getattribute__(self, "_tag")
        return _local_class(tag.get("mro", [])) or RemoteObject

    def __setattr__(self, name: str, value: Any) -> None:
        self._remote.request("setattr", target=self._ref(), name=name, value=self._remote.enc(value))

    def _ref(self) -> dict:
        return {"$handle": object.__getattribute__(self, "_tag")["$handle"]}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._remote.call(self, args, kwargs)

    def __getitem__(self, key: Any) -> Any:
        return self._remote.request("getitem", target=self._ref(), key=self._remote.enc(key))

    def __setitem__(self, key: Any, value: Any) -> None:
        self._remote.request("setitem", target=self._ref(), key=self._remote.enc(key), value=self._remote.enc(value))

    def _unary(self, how: str) -> Any:
        return self._remote.request("unary", target=self._ref(), how=how)

    def __len__(self) -> int:
        n = self._unary("len")
        if type(n) is not int:
            raise TypeError("len() of the notebook's object is not an int")
        return n

    def __iter__(self) -> Any:
        it = self._unary("iter")
        if isinstance(it, (torch.Tensor, np.ndarray)):  # a handle never stands for a tensor: garbage
            raise CheckerError("the kernel answered an iteration with a tensor")
        return it if isinstance(it, RemoteObject) else iter(it)

    def __next__(self) -> Any:
        return self._unary("next")

    def __bool__(self) -> bool:
        return bool(self._unary("bool") is True)

    def __contains__(self, item: Any) -> bool:
        return self._remote.request("contains", target=self._ref(), item=self._remote.enc(item)) is True

    def __repr__(self) -> str:
        try:
            text = self._unary("repr")
        except Exception:  # noqa: BLE001
            text = None
        return str(text)[:300] if isinstance(text, str) else "<an object of the notebook>"

    __str__ = __repr__

    def __deepcopy__(self, memo: dict) -> Any:
        return self._unary("deepcopy")

    def __copy__(self) -> Any:
        return self._unary("copy")

    def __reduce_ex__(self, protocol: int) -> Any:
        raise TypeError("an object of the notebook cannot be pickled by the checker")

    def __eq__(self, other: Any) -> bool:
        if isinstance(other, RemoteObject):
            return self._ref() == other._ref()
        return NotImplemented

    def __hash__(self) -> int:
        return hash(("remote", object.__getattribute__(self, "_tag")["$handle"]))


class _Bridge(torch.autograd.Function):
    """Ties outputs computed in the kernel to this process's autograd graph."""

    @staticmethod
    def forward(ctx: Any, remote: "Checker", graph: int, n_inputs: int, outputs: list, *inputs: torch.Tensor) -> Any:
        ctx.remote, ctx.graph, ctx.n_inputs = remote, graph, n_inputs
        ctx.shapes = [(t.shape, t.dtype) for t in inputs[:n_inputs]]
        return tuple(o.detach().clone() for o in outputs)

    @staticmethod
    def backward(ctx: Any, *grad_outputs: torch.Tensor) -> Any:
        grads = ctx.remote.request("backward", graph=ctx.graph, grads=ctx.remote.enc(list(grad_outputs)))
        if not isinstance(grads, list) or len(grads) != ctx.n_inputs:
            raise CheckerError("the kernel's backward pass returned the wrong number of gradients")
        out = []
        for g, (shape, dtype) in zip(grads, ctx.shapes):
            ok = isinstance(g, torch.Tensor) and g.shape == shape
            out.append(g.to(dtype) if ok else None)
        return (None, None, None, None, *out, None)


# --------------------------------------------------------------------------- the checker


class Checker:
    """Questions to one kernel, for one test cell."""

    def __init__(self, link: KernelLink, withheld: Sequence[str] = ()) -> None:
        self.link = link
        self.proxies: dict[int, RemoteObject] = {}
        self.callbacks: dict[int, Callable[..., Any]] = {}
        self.callback_graphs: dict[int, tuple[list[torch.Tensor], list[torch.Tensor]]] = {}
        self.sent: dict[int, Any] = {}
        self.sent_tensors: dict[int, torch.Tensor] = {}
        self.tree: ast.AST | None = None
        self.fresh = False
        self.tables: dict[tuple[int, int], tuple[int, Any]] = {}
        self.source = ""
        self.kernel_tensors: dict[int, torch.Tensor] = {}
        self.versions: dict[int, int] = {}
        self.sent_ids: dict[int, int] = {}
        self.evidence: list[str] = []
        self._seen_evidence: set[str] = set()
        self.withheld: tuple[str, ...] = tuple(withheld)
        first = self.link.exchange({"op": "lookup", "names": []})
        self._sync_rng(first)
        self.kernel_dtype = None

    # values
    def handle_of(self, obj: Any) -> dict:
        if isinstance(obj, RemoteObject):
            return {"$handle": object.__getattribute__(obj, "_tag")["$handle"]}
        ref = _library_ref(obj)
        if ref and not self._withheld(ref):
            return {"$ref": ref}
        type_ref = _library_ref(type(obj))
        if type_ref and not (ref and self._withheld(ref)) and (
                getattr(obj, "__course_by_value__", False) or not self._runs_withheld(obj)):  # the tests' own model or vocabulary, of a library class: sent by value
            # (pickled one way only: the kernel never sends a pickle back)
            buffer = io.BytesIO()
            try:
                torch.save(obj, buffer)
            except Exception:  # noqa: BLE001 - it holds something of the tests' own: lent by reference below
                buffer = None
            if buffer is not None:
                number = self.sent_ids.setdefault(id(obj), len(self.sent_ids) + 1)
                self.sent[number] = obj  # the kernel's copy comes back as this very object
                return {"$object": base64.b64encode(buffer.getvalue()).decode("ascii"), "n": number}
        # anything else of the tests (a reference function, a helper class of a test cell, a lambda,
        # a reference the graded notebook's sandbox withholds): the kernel gets a stand-in that asks
        # us (call, attributes, items, length, iteration); its code never leaves this process. Only
        # the tests' own objects and library objects are lent: never a module, frame, code object,
        # generator or builtin function (through which the kernel would run code here)
        if not _lendable(obj):
            raise CheckerError(f"the notebook's code asked the tests for an object they do not lend "
                               f"({type(obj).__name__})")
        number = len(self.callbacks) + 1
        self.callbacks[number] = obj
        return {"$callback": number}

    def _runs_withheld(self, obj: Any) -> bool:
        """Whether ``obj``'s own code (its class's methods, and each submodule's) is or calls a withheld
        reference: the kernel's copy could not run it, so it is lent by callback and runs here."""
        if not self.withheld:
            return False
        parts = [obj, *obj.modules()] if isinstance(obj, torch.nn.Module) else [obj]
        for part in parts:
            cls = type(part)
            module = getattr(cls, "__module__", "") or ""
            if not module.startswith("course_utils"):
                continue
            if self._withheld(f"{module}:{cls.__qualname__}"):
                return True
            local = {path.rpartition(".")[2] for path in self.withheld if path.startswith(module + ".")}
            for klass in cls.__mro__:
                for name, member in vars(klass).items():
                    code = getattr(member, "__code__", None) if name != "__init__" else None  # a copy is never built
                    if code is not None and local & set(code.co_names):
                        return True
        return False

    def _withheld(self, ref: str) -> bool:
        """Whether ``module:qualname`` is (inside) a reference the kernel's sandbox withholds."""
        dotted = ref.replace(":", ".").rstrip(".")
        return any(dotted == path or dotted.startswith(path + ".") or path.startswith(dotted + ".")
                   for path in self.withheld)

    def resolve(self, tag: dict) -> Any:
        if "$sent_tensor" in tag:
            tensor = self.sent_tensors.get(tag["$sent_tensor"]) if isinstance(tag["$sent_tensor"], int) else None
            if tensor is None:
                raise wire.WireError("the kernel named a tensor the checker never sent")
            if self.fresh:  # a callback's argument: a leaf of its own, not our tensor (its graph is not ours)
                return tensor.detach().clone().requires_grad_(tensor.requires_grad)
            return tensor
        if "$sent" in tag and int(tag["$sent"]) in self.sent:
            return self.sent[int(tag["$sent"])]
        if "$handle" not in tag:
            raise wire.WireError(f"the kernel sent an unknown tag {sorted(tag)[:3]}")
        number = int(tag["$handle"])
        if number not in self.proxies:
            clean = {"$handle": number, "mro": [str(m) for m in tag.get("mro", [])][:50]}
            self.proxies[number] = RemoteObject(self, clean)
        return self.proxies[number]

    def enc(self, value: Any) -> Any:
        with torch._C.DisableTorchFunction():  # a test's torch mode (meta as default device) must not touch the wire
            for tensor in checks._tensors_in(value):
                self.sent_tensors[id(tensor)] = tensor  # handed back, it comes back as itself
            return wire.encode(value, self.handle_of, known=self._known_table)

    def _known_table(self, value: Any) -> dict | None:
        """A large table of the tests (a BPE rank dict) goes once per cell; later it is named."""
        if isinstance(value, torch.Tensor):
            return None
        key = (id(value), len(value))
        if key in self.tables:
            return {"$table": self.tables[key][0]}
        number = len(self.tables) + 1
        self.tables[key] = (number, value)  # kept alive: its id stays its own
        return {"$table": number, "value": wire.encode(value, self.handle_of)}

    def dec(self, data: Any, fresh: bool = False) -> Any:
        """``fresh``: new tensors (a callback's arguments: each call its own autograd leaves)."""
        previous, self.fresh = self.fresh, fresh
        try:
            with torch._C.DisableTorchFunction():
                return wire.decode(data, self.resolve, same=None if fresh else self._same_tensor)
        finally:
            self.fresh = previous

    def _same_tensor(self, payload: dict, tensor: torch.Tensor) -> torch.Tensor:
        """One kernel tensor, one tensor here (``a.weight is b.weight`` for tied weights), kept up to date."""
        key = payload.get("id")
        if not isinstance(key, int) or tensor.device.type == "meta":
            return tensor
        known = self.kernel_tensors.get(key)
        if known is None or type(known) is not type(tensor):
            self.kernel_tensors[key] = tensor
            self.versions[key] = tensor._version
            return tensor
        _set_values(known, tensor)
        known.grad = tensor.grad
        if known.is_leaf and known.requires_grad != tensor.requires_grad:
            known.requires_grad_(tensor.requires_grad)
        self.versions[key] = known._version
        return known

    def _local_writes(self) -> list:
        """Kernel tensors the tests changed in place here (``weight.copy_(...)`` under no_grad):
        the kernel's tensor gets the same values before the next question."""
        writes = []
        for key, tensor in self.kernel_tensors.items():
            if tensor._version != self.versions.get(key):
                with torch._C.DisableTorchFunction():
                    writes.append([key, wire.encode(tensor.detach(), self.handle_of)])
                self.versions[key] = tensor._version
        return writes

    # requests
    def _sync_rng(self, reply: dict) -> None:
        state = reply.get("rng")
        if isinstance(state, str):
            raw = base64.b64decode(state)
            if len(raw) == torch.get_rng_state().numel():
                torch.set_rng_state(torch.frombuffer(bytearray(raw), dtype=torch.uint8).clone())

    def raw_request(self, op: str, **fields: Any) -> dict:
        context = {
            "rng": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode("ascii"),
            "dtype": str(torch.get_default_dtype()).removeprefix("torch."),
            "grad": torch.is_grad_enabled(),
            "device": str(torch.get_default_device()),
        }
        reply = self.link.exchange({"op": op, "context": context, "writes": self._local_writes(), **fields})
        while "callback" in reply or "callback_backward" in reply:  # the kernel calls one of our functions
            reply = self.link.exchange(self._run_callback(reply))
        self._sync_rng(reply)
        for item in (reply.get("evidence") or [])[:MAX_EVIDENCE] if isinstance(reply.get("evidence"), list) else []:
            text = str(item)[:300]
            if len(self.evidence) < MAX_EVIDENCE and text not in self._seen_evidence:
                self._seen_evidence.add(text)
                self.evidence.append(text)
        if "error" in reply:
            raise _mirror(reply["error"])
        if "value" not in reply:
            raise CheckerError("the kernel's reply holds no value")
        return reply

    def request(self, op: str, **fields: Any) -> Any:
        reply = self.raw_request(op, **fields)
        if "sent_grads" in reply:
            self._receive_grads(self.dec(reply["sent_grads"]))
        return self.dec(reply["value"])

    def _receive_grads(self, sent: Any) -> None:
        """Gradients the kernel's backward left on the copies of our models: add them to ours."""
        if not isinstance(sent, dict):
            return
        for number, grads in sent.items():
            module = self.sent.get(number)
            if not isinstance(module, torch.nn.Module) or not isinstance(grads, list):
                continue
            for parameter, grad in zip(module.parameters(), grads):
                if isinstance(grad, torch.Tensor) and grad.shape == parameter.shape:
                    grad = grad.to(parameter.device, parameter.dtype)
                    parameter.grad = grad if parameter.grad is None else parameter.grad + grad

    def _run_callback(self, message: dict) -> dict:
        try:
            if "callback_backward" in message:
                inputs, outputs = self.callback_graphs[int(message["callback_backward"])]
                grads = self.dec(message.get("grads"))
                pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(g, torch.Tensor)]
                for t in inputs:
                    t.grad = None
                if pairs:
                    torch.autograd.backward([o for o, _ in pairs], [g.to(o.dtype) for o, g in pairs], retain_graph=True)
                return {"return": self.enc([t.grad for t in inputs])}
            function = self.callbacks.get(int(message.get("callback", -1)))
            if function is None:
                raise CheckerError("the kernel called back a function the checker never sent")
            how = message.get("how", "call")
            args, kwargs = self.dec(message.get("args", {"$list": []}), fresh=True), self.dec(message.get("kwargs", {"$dict": []}), fresh=True)
            inputs = [t for t in checks._tensors_in((list(args), kwargs)) if t.requires_grad]
            with torch.set_grad_enabled(bool(message.get("grad", True))):  # the kernel's mode at the call
                if how == "call":
                    result = function(*args, **kwargs)
                elif how == "getattr":
                    name = str(message.get("name"))
                    if _UNLENT_ATTRIBUTE.match(name):  # private, frame, code and generator internals
                        raise AttributeError(name)
                    result = getattr(function, name)
                elif how == "getitem":
                    result = function[self.dec(message.get("key"), fresh=True)]
                elif how == "len":
                    result = len(function)
                elif how == "list":
                    result = list(function)
                elif how == "next":
                    result = next(function)
                else:
                    raise CheckerError(f"the kernel asked the checker for {how!r}")
            if isinstance(result, types.GeneratorType):  # (module.parameters()): its items, never its frame
                result = iter(list(itertools.islice(result, 100_000)))
            reply: dict[str, Any] = {"return": self.enc(result)}
            outputs = [t for t in checks._tensors_in(result) if t.requires_grad]
            if outputs:
                self.callback_graphs[len(self.callback_graphs) + 1] = (inputs, outputs)
                reply["graph"] = len(self.callback_graphs)
            return reply
        except CheckerError:
            raise
        except Exception as error:  # noqa: BLE001 - the error goes back to the kernel's caller
            return {"raise": {"type": type(error).__name__, "message": str(error)[:2000]}}

    def call(self, target: RemoteObject, args: tuple, kwargs: dict) -> Any:
        modes = [mode for mode, _ in checks._REMOTE_MODES]
        watched = [*args, *kwargs.values()]
        local_inputs = [t for t in checks._tensors_in((list(args), kwargs)) if t.requires_grad]
        reply = self.raw_request("call", target=target._ref(), args=self.enc(list(args)), kwargs=self.enc(kwargs),
                                 modes=modes)
        for index, data in (reply.get("after") or {}).items():
            _write_back(watched[int(index)], self.dec(data))
        found = reply.get("mixing")
        if found:
            for mode, owner in checks._REMOTE_MODES:
                if mode[0] == "device_mixing" and not owner.found:
                    owner.found.extend(str(f) for f in found)
        if "allocations" in reply:  # checks.AllocationLog: the kernel's record of the call
            for mode, owner in checks._REMOTE_MODES:
                if mode[0] == "allocations":
                    owner.absorb(reply["allocations"])
        result = self.dec(reply["value"])
        if "graph" in reply and torch.is_grad_enabled():
            outputs = [t for t in checks._tensors_in(result) if t.requires_grad]
            if outputs:
                anchor = torch.zeros((), device="cpu", requires_grad=True)  # so the outputs require grad even with no input that does
                bridged = iter(_Bridge.apply(self, int(reply["graph"]), len(local_inputs), outputs, *local_inputs, anchor))
                result = _replace_grad_tensors(result, bridged)
        return result

    def substitute(self, replacements: dict[str, Any]) -> Callable[[], None]:
        token = self.request("substitute", names=self.enc(replacements))
        return lambda: self.request("restore", token=token)


def _holder(root: torch.nn.Module, name: str) -> tuple[torch.nn.Module, str]:
    """``"a.b.weight"`` -> (the submodule ``a.b``, ``"weight"``)."""
    owner, _, attribute = name.rpartition(".")
    return (root.get_submodule(owner) if owner else root), attribute


def _alias(root: torch.nn.Module, names: Sequence[Any], get: Callable[[str], Any]) -> None:
    """Make every name in ``names`` refer to the object ``get(names[0])`` (as the kernel's copy does)."""
    try:
        first = get(str(names[0]))
        for name in names[1:]:
            holder, attribute = _holder(root, str(name))
            setattr(holder, attribute, first)
    except (AttributeError, TypeError, KeyError):
        pass


def _mirror_state(module: torch.nn.Module, state: Any) -> None:
    """The kernel's parameter and buffer values, dtypes and shapes, in ``module`` (a ``.data =`` or a
    ``.double()`` in the kernel changes a dtype that ``load_state_dict`` would convert back)."""
    if not isinstance(state, dict):
        return
    for name, value in state.items():
        if not isinstance(value, torch.Tensor):
            continue
        try:
            holder, attribute = _holder(module, str(name))
            tensor = getattr(holder, attribute)
        except (AttributeError, TypeError, KeyError):
            continue
        if isinstance(tensor, torch.Tensor) and tensor.device.type != "meta":
            _set_values(tensor, value)


def _set_values(local: torch.Tensor, new: torch.Tensor) -> None:
    """``local`` takes ``new``'s values in place, and its dtype and shape where they differ."""
    with torch.no_grad():
        if local.device.type == "meta":
            local.data = new.detach()
        elif local.shape == new.shape and local.dtype == new.dtype:
            local.copy_(new.to(local.device))
        else:
            local.data = new.detach().to(local.device)


def _write_back(local: Any, new: Any) -> None:
    """An argument the kernel's code changed in place: change ours the same way."""
    if isinstance(local, torch.Tensor) and isinstance(new, torch.Tensor):
        _set_values(local, new)
        if local.is_leaf and local.requires_grad != new.requires_grad and (new.is_floating_point() or not new.requires_grad):
            local.requires_grad_(new.requires_grad)
    elif isinstance(local, torch.Generator) and isinstance(new, torch.Generator):
        local.set_state(new.get_state())
    elif type(local) is list and isinstance(new, list):
        local[:] = new
    elif type(local) is dict and isinstance(new, dict):
        local.clear()
        local.update(new)
    elif isinstance(local, torch.nn.Module) and isinstance(new, dict) and "module_state" in new:
        state, modes, trainable = new["module_state"], new.get("training", []), new.get("requires_grad", [])
        for names in new.get("shared_modules", []) or []:  # one submodule under two names (lm_head = wte)
            _alias(local, names, local.get_submodule)
        _mirror_state(local, state)
        followers = {str(n) for names in new.get("shared", []) or [] for n in names[1:]}
        for name in new.get("replaced", []) or []:  # a new Parameter object there: a new one here too
            if str(name) in followers:
                continue
            value = state.get(str(name)) if isinstance(state, dict) else None
            try:
                holder, attribute = _holder(local, str(name))
                old = getattr(holder, attribute)
                if isinstance(value, torch.Tensor):
                    setattr(holder, attribute, torch.nn.Parameter(value.detach().clone(), requires_grad=bool(
                        getattr(old, "requires_grad", True))))
            except (AttributeError, TypeError, KeyError, RuntimeError):
                pass
        for names in new.get("shared", []) or []:  # parameters the kernel's code tied together are tied here
            _alias(local, names, local.get_parameter)
        for module, mode in zip(local.modules(), modes):
            module.training = bool(mode)
        for parameter, flag in zip(local.parameters(), trainable):
            parameter.requires_grad_(bool(flag))


def _library_ref(obj: Any) -> str | None:
    """``"module:qualname"`` when ``obj`` is a library object the kernel can import itself."""
    import types

    if isinstance(obj, types.ModuleType):
        return obj.__name__ + ":" if obj.__name__.split(".")[0] in _LIBRARIES else None
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str) or "<" in qualname:
        return None
    if module.split(".")[0] not in _LIBRARIES or module.startswith("course_grader"):
        return None
    try:
        found: Any = importlib.import_module(module)
        for part in qualname.split("."):
            found = getattr(found, part)
    except Exception:  # noqa: BLE001
        return None
    return f"{module}:{qualname}" if found is obj else None


_UNLENT_ATTRIBUTE = re.compile(r"^(_|gi_|f_|tb_|cr_|ag_|co_|func_|im_)")
_NEVER_LENT = (types.ModuleType, types.FrameType, types.CodeType, types.TracebackType, types.GeneratorType,
               types.CoroutineType, types.AsyncGeneratorType, types.CellType)


def _from_tests_or_library(module: Any) -> bool:
    name = module if isinstance(module, str) else ""
    return name == "__checker__" or (name.split(".")[0] in _LIBRARIES and name.split(".")[0] != "builtins")


def _lendable(obj: Any) -> bool:
    """Whether the checker may lend ``obj`` to the kernel by callback: the test cell's own functions,
    classes and objects, and library ones; nothing through which the kernel could reach this process's
    modules, frames or builtins."""
    if isinstance(obj, _NEVER_LENT):
        return False
    if isinstance(obj, types.FunctionType):
        return obj.__code__.co_filename == "<test cell>" or _from_tests_or_library(obj.__module__)
    if isinstance(obj, types.MethodType):
        return _lendable(obj.__self__) and _lendable(obj.__func__)
    if isinstance(obj, (types.BuiltinFunctionType, types.BuiltinMethodType)):
        owner = getattr(obj, "__self__", None)
        if owner is not None and not isinstance(owner, types.ModuleType):
            return _lendable(owner) or type(owner).__module__ == "builtins"
        return _from_tests_or_library(getattr(obj, "__module__", None))
    if isinstance(obj, type):
        return _from_tests_or_library(obj.__module__)
    return _from_tests_or_library(type(obj).__module__) or type(obj).__module__ in ("builtins", "functools")


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


# --------------------------------------------------------------------------- one cell


def _names_used(tree: ast.AST) -> list[str]:
    """The names the test cell reads before (or without) binding them: those come from the
    notebook. A name the cell binds first (its own inputs, often hidden ones) is never asked
    for: the kernel would learn the hidden tests' identifiers from the question. Lines decide:
    ``model = model.eval()`` reads ``model`` on the line that binds it, so it is asked for."""
    loaded: dict[str, int] = {}
    assigned: dict[str, int] = {}  # bound by an assignment: reads on its own line come first
    defined: dict[str, int] = {}  # def, class, import, argument: bound before any read on its line
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            table = loaded if isinstance(node.ctx, ast.Load) else assigned
            table[node.id] = min(table.get(node.id, line), line)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined[node.name] = min(defined.get(node.name, line), line)
        elif isinstance(node, ast.arg):
            defined[node.arg] = min(defined.get(node.arg, line), line)
        elif isinstance(node, ast.alias):
            name = (node.asname or node.name).split(".")[0]
            defined[name] = min(defined.get(name, line), line)
    names = {name for name, line in loaded.items()
             if not (line > assigned.get(name, line) or line >= defined.get(name, line + 1))}
    return sorted(names - set(dir(builtins)))


def check_cell(connection_info: dict, source: str, prelude: str = "", timeout: float = 120.0,
               withheld: Sequence[str] = ()) -> CheckResult:
    """Run a test cell's whole code (visible and hidden tests) here, against the kernel.
    ``withheld``: the references the kernel's sandbox withholds (lent to it by callback)."""
    deadline = time.monotonic() + timeout
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return CheckResult(False, "SyntaxError", f"the test cell does not parse: {error}")
    namespace: dict[str, Any] = {"__name__": "__checker__", "__builtins__": builtins}
    for statement in ast.parse(BASE_PRELUDE + "\n" + prelude).body:
        try:
            exec(compile(ast.Module([statement], []), "<prelude>", "exec"), namespace)  # noqa: S102 - our code
        except Exception:  # noqa: BLE001 - an optional package missing here
            pass
    trusted = set(namespace)
    saved_dtype, saved_grad, saved_device = torch.get_default_dtype(), torch.is_grad_enabled(), torch.get_default_device()
    link: KernelLink | None = None
    checker: Checker | None = None
    try:
        link = KernelLink(connection_info, deadline)
        checker = Checker(link, withheld)
        checker.tree, checker.source = tree, source
        wanted = [name for name in _names_used(tree) if name not in trusted]
        if wanted:
            found = checker.request("lookup", names=wanted)
            if isinstance(found, dict):
                namespace.update({k: v for k, v in found.items() if isinstance(k, str) and k in wanted})
        namespace["__course_remote_substitute__"] = checker.substitute
        exec(compile(tree, "<test cell>", "exec"), namespace)  # noqa: S102 - the course's own tests
        return CheckResult(True, evidence=list(checker.evidence))
    except CheckerError as error:
        return CheckResult(False, "GradingError", str(error), list(checker.evidence) if checker else [],
                           timed_out=isinstance(error, CheckerTimeout))
    except Exception as error:  # noqa: BLE001 - a failed test, whatever raised it
        evidence = list(checker.evidence) if checker else []
        if getattr(error, "__course_from_kernel__", False) or isinstance(error, RemoteError):
            kind = _kernel_kind(error)
            return CheckResult(False, kind, KERNEL_RAISED.format(kind=kind), evidence)
        if isinstance(error, checks.CheckFailed):
            return CheckResult(False, "CheckFailed", str(error), evidence)
        # an error of the tests' own code (a comparison with a value of the wrong kind, ...): its type only
        return CheckResult(False, type(error).__name__,
                           f"the tests could not use what your code returned ({type(error).__name__})", evidence)
    finally:
        checks._REMOTE_MODES.clear()
        torch.set_default_dtype(saved_dtype)
        torch.set_grad_enabled(saved_grad)
        set_default_device(str(saved_device))
        if link is not None:
            try:
                link.close()
            except Exception:  # noqa: BLE001
                pass


# --------------------------------------------------------------------------- a checker process


class CheckerProcess:
    """The checker in a process of its own (``python -m course_grader.grading.checker``), one per
    graded notebook: nbgrader's process runs an event loop a blocking kernel client cannot share,
    and what a test computes stays out of the process that holds the gradebook."""

    def __init__(self) -> None:
        import subprocess
        import sys

        self.process = subprocess.Popen([sys.executable, "-m", "course_grader.grading.checker"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, bufsize=1)

    def check(self, connection_info: dict, source: str, prelude: str = "", timeout: float = 120.0,
              withheld: Sequence[str] = ()) -> CheckResult:
        info = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in connection_info.items()}
        request = {"info": info, "source": source, "prelude": prelude, "timeout": timeout, "withheld": list(withheld)}
        try:
            assert self.process.stdin is not None and self.process.stdout is not None
            self.process.stdin.write(json.dumps(request) + "\n")
            self.process.stdin.flush()
            import select

            # the cell's deadline bounds the time spent waiting for the kernel; this bounds the checker's
            # own work too (a question it cannot answer in time is the kernel's garbage: it is restarted)
            ready, _, _ = select.select([self.process.stdout], [], [], timeout + CHECKER_GRACE)
            if not ready:
                self.process.kill()
                self.process.wait()
                self.__init__()  # type: ignore[misc] # a fresh checker for the notebook's next cells
                return CheckResult(False, "GradingError", "the tests ran past the cell's time limit", timed_out=True)
            line = self.process.stdout.readline()
            reply = json.loads(line)
            return CheckResult(bool(reply["ok"]), str(reply.get("ename", "")), str(reply.get("evalue", "")),
                               [str(e) for e in reply.get("evidence", [])], bool(reply.get("timed_out")))
        except (OSError, ValueError, KeyError, AssertionError) as error:
            return CheckResult(False, "GradingError", f"the checker process failed ({type(error).__name__}); "
                               "the instructor should re-grade this notebook")

    def close(self) -> None:
        try:
            if self.process.stdin is not None:
                self.process.stdin.close()
            self.process.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.process.kill()


def _serve_requests() -> None:
    """One JSON request per line on stdin, one result per line on stdout."""
    import contextlib
    import sys

    protocol = sys.stdout
    for line in sys.stdin:
        request = json.loads(line)
        with contextlib.redirect_stdout(io.StringIO()):  # what the tests print is not the protocol
            result = check_cell(request["info"], request["source"], request.get("prelude", ""),
                                float(request.get("timeout", 120)), request.get("withheld", []))
        protocol.write(json.dumps({"ok": result.ok, "ename": result.ename, "evalue": result.evalue,
                                   "evidence": result.evidence, "timed_out": result.timed_out}) + "\n")
        protocol.flush()


if __name__ == "__main__":
    _serve_requests()
