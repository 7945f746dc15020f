"""The checker proper: one test cell's code run here against the student's kernel.

When a test cell is graded, the kernel runs only its visible part (what the student sees
anyway). Then this process runs the whole cell, visible and hidden tests, in a namespace of
its own: the course's check functions and libraries are imported *here*, and every other name
the tests use is looked up in the kernel through :mod:`course_utils.protocol.agent`. Student objects
(functions, classes, models) stay in the kernel and appear here as :class:`RemoteObject`
proxies; calling one sends the arguments over, and the result comes back as plain data
(:mod:`course_utils.protocol.wire`). Every comparison, tolerance and verdict happens in this process, so
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
import contextlib
import base64
import builtins
import importlib
import io
import itertools
import re
import time
import types
from typing import Any, Callable, Iterator, Sequence

import torch

from course_grader.grading.checker.link import CheckerError, CheckerTimeout, KernelLink
from course_grader.grading.checker.prelude import BASE_PRELUDE
from course_grader.grading.checker.result import CheckResult
from course_grader.grading.checker.remote import _LIBRARIES, RemoteError, RemoteObject, _mirror
from course_utils import checks
from course_utils.checks.in_place import in_place_message, model_changed_message
from course_utils.protocol import wire
from course_utils.protocol.messages import REMOTE_MODES, WRITABLE, Callback, Mode, Op, bridged, set_default_device, tensors_in


__all__ = ["Checker", "check_cell", "run_prelude"]

# Packages whose classes a proxy may claim to be an instance of (isinstance checks).
MAX_EVIDENCE = 50  # evidence items kept per test cell (the kernel's to send: bounded)


# What the student reads when their code raised during a test: the kernel's own message (its
# text is the kernel's to choose) never reaches a verdict, only the builtin type of the error.
KERNEL_RAISED = "your code raised {kind} while the tests ran it (the tests' inputs are not shown)"


def _kernel_kind(error: BaseException) -> str:
    """The builtin exception type an error from the kernel is shown as."""
    for cls in type(error).__mro__:
        if cls.__module__ == "builtins" and issubclass(cls, Exception):
            return cls.__name__
    return "Exception"


# --------------------------------------------------------------------------- the checker


class Checker:
    """Questions to one kernel, for one test cell."""

    def __init__(self, link: KernelLink, withheld: Sequence[str] = ()) -> None:
        self.link = link
        self.proxies: dict[int, RemoteObject] = {}
        self.callbacks: dict[int, Any] = {}  # the tests' objects lent to the kernel
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
        self.lent_state: dict[int, tuple[Any, tuple]] = {}  # id -> (a lent model, how it was when a call began)
        self.calls_open = 0  # kernel calls in progress (a hook of the kernel's, run here, calls it again)
        self.evidence: list[str] = []
        self._seen_evidence: set[str] = set()
        self.withheld: tuple[str, ...] = tuple(withheld)
        self.kernel_rng: str | None = None  # the kernel's stream (see _rng_for_kernel)
        self.seeded = self.seeded_at_last_request = 0  # how often the tests have seeded torch
        first = self.link.exchange({"op": Op.LOOKUP, "names": []})
        self._note_kernel_rng(first)
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
            buffer: io.BytesIO | None = io.BytesIO()
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
        if isinstance(obj, torch.nn.Module) and not self.calls_open:  # lent with a question: it must leave it so
            self.lent_state.setdefault(id(obj), (obj, _lent_fingerprint(obj)))  # (one lent during a question may
            # already carry its changes; as a submodule, its parent's fingerprint covers it)
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
        paths = (path.removesuffix(".*") for path in self.withheld)  # "course_utils.flash.*": the whole module
        return any(dotted == path or dotted.startswith(path + ".") or path.startswith(dotted + ".") for path in paths)

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
            for tensor in tensors_in(value):
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
    # Random state: two streams. The checker's own draws (the tests' inputs) never take a state the
    # kernel reports: a crafted Mersenne state (all zeros) would make every later torch.randn of the
    # tests zero (second blind red team). The kernel's calls continue the kernel's stream (two calls of
    # a dropout differ, as in one process), except after the tests seed (torch.manual_seed,
    # set_rng_state): the next call then starts from the tests' state (seeded runs repeat). A call that
    # drew from the kernel's global generator advances the tests' stream by one draw of its own, so that
    # check_generator still sees the global state move.
    def _note_kernel_rng(self, reply: dict, sent: str | None = None) -> None:
        state = reply.get("rng")
        if isinstance(state, str) and len(state) < 20_000:
            if sent is not None and state != sent:
                with torch._C.DisableTorchFunction():
                    torch.randint(2, (1,), device="cpu")
            self.kernel_rng = state

    def _rng_for_kernel(self) -> str:
        if self.kernel_rng is None or self.seeded != self.seeded_at_last_request:
            self.seeded_at_last_request = self.seeded
            return base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode("ascii")
        return self.kernel_rng

    def raw_request(self, op: Op, **fields: Any) -> dict:
        sent = self._rng_for_kernel()
        context = {
            "rng": sent,
            "dtype": str(torch.get_default_dtype()).removeprefix("torch."),
            "grad": torch.is_grad_enabled(),
            "device": str(torch.get_default_device()),
        }
        outermost = not self.calls_open  # the tests' own question, not one asked inside a callback
        if outermost:  # the tests may have changed their models since the last question
            self.lent_state = {id(obj): (obj, _lent_fingerprint(obj)) for obj in self.callbacks.values()
                               if isinstance(obj, torch.nn.Module)}
        self.calls_open += 1
        try:
            reply = self.link.exchange({"op": op, "context": context, "writes": self._local_writes(), **fields})
            while "callback" in reply or "callback_backward" in reply:  # the kernel calls one of our functions
                reply = self.link.exchange(self._run_callback(reply))
        finally:
            self.calls_open -= 1
        if outermost:  # a lent model runs here: whatever question the kernel answered, it must be as it was
            for obj, before in list(self.lent_state.values()):
                if _lent_fingerprint(obj) != before and WRITABLE.allows(obj) != "anything":
                    raise checks.CheckFailed(model_changed_message("a model the tests lent it"))
        self._note_kernel_rng(reply, sent)
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

    def request(self, op: Op, **fields: Any) -> Any:
        reply = self.raw_request(op, **fields)
        if "sent_grads" in reply and op is Op.BACKWARD:  # only a backward pass gives our models gradients
            self._receive_grads(self.dec(reply["sent_grads"]))
        if op is Op.BACKWARD:  # the answer's backward pass
            self._absorb_allocations(reply)
        return self.dec(reply["value"])

    @staticmethod
    def _absorb_allocations(reply: dict) -> None:
        """checks.AllocationLog: the kernel's record of a call or a backward pass, to the logs open here."""
        if "allocations" in reply:
            for owner in REMOTE_MODES.owners(Mode.ALLOCATIONS):
                owner.absorb(reply["allocations"])

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
            try:
                how = Callback(message.get("how", Callback.CALL))
            except ValueError:
                raise CheckerError(f"the kernel asked the checker for {str(message.get('how'))[:40]!r}") from None
            args, kwargs = self.dec(message.get("args", {"$list": []}), fresh=True), self.dec(message.get("kwargs", {"$dict": []}), fresh=True)
            inputs = [t for t in tensors_in((list(args), kwargs)) if t.requires_grad]
            with torch.set_grad_enabled(bool(message.get("grad", True))):  # the kernel's mode at the call
                if how is Callback.CALL:
                    result = function(*args, **kwargs)
                elif how is Callback.GETATTR:
                    name = str(message.get("name"))
                    if _UNLENT_ATTRIBUTE.match(name):  # private, frame, code and generator internals
                        raise AttributeError(name)
                    result = getattr(function, name)
                elif how is Callback.GETITEM:
                    result = function[self.dec(message.get("key"), fresh=True)]
                elif how is Callback.LEN:
                    result = len(function)
                elif how is Callback.LIST:
                    result = list(function)
                elif how is Callback.NEXT:
                    result = next(function)
                else:
                    raise CheckerError(f"the kernel asked the checker for {how!r}")
            if isinstance(result, types.GeneratorType):  # (module.parameters()): its items, never its frame
                result = iter(list(itertools.islice(result, 100_000)))
            reply: dict[str, Any] = {"return": self.enc(result)}
            outputs = [t for t in tensors_in(result) if t.requires_grad]
            if outputs:
                self.callback_graphs[len(self.callback_graphs) + 1] = (inputs, outputs)
                reply["graph"] = len(self.callback_graphs)
            return reply
        except CheckerError:
            raise
        except Exception as error:  # noqa: BLE001 - the error goes back to the kernel's caller
            # its type only: a message of the tests' code can name hidden values or classes, and the
            # kernel could carry it out (second blind red team: a hidden class's name in the feedback)
            return {"raise": {"type": type(error).__name__,
                              "message": f"{type(error).__name__} in the tests' code (its message stays with the grader)"}}

    def call(self, target: RemoteObject, args: tuple, kwargs: dict) -> Any:
        watched = [*args, *kwargs.values()]
        local_inputs = [t for t in tensors_in((list(args), kwargs)) if t.requires_grad]
        reply = self.raw_request(Op.CALL, target=target._ref(), args=self.enc(list(args)), kwargs=self.enc(kwargs),
                                 modes=REMOTE_MODES.modes())
        for index, data in (reply.get("after") or {}).items():
            position = int(index)
            if not 0 <= position < len(watched):
                raise CheckerError("the kernel reported a change of an argument the call did not have")
            local = watched[position]
            if isinstance(local, RemoteObject):  # the kernel's own object: the change is already there
                continue
            # a generator is there to be drawn from; checks.by_value marks a copy handed over to be filled
            declared = "anything" if getattr(local, "__course_by_value__", False) is True else WRITABLE.allows(local)
            new = self.dec(data)
            if not (isinstance(local, torch.Generator) or declared == "anything" or (
                    declared == "requires_grad" and _only_flags_changed(local, new))):
                raise checks.CheckFailed(in_place_message(position, len(args), local))
            _write_back(local, new)
        for key, kind in (("mixing", Mode.DEVICE_MIXING), ("tracked", Mode.NEW_TRACKED)):
            found = reply.get(key)
            if isinstance(found, list) and found:
                for owner in REMOTE_MODES.owners(kind):
                    if not owner.found:
                        owner.found.extend(str(f) for f in found)
        self._absorb_allocations(reply)
        result = self.dec(reply["value"])
        if "graph" in reply and torch.is_grad_enabled():
            graph = int(reply["graph"])
            result = bridged(result, lambda grads: self._backward_in_kernel(graph, len(local_inputs), grads), local_inputs)
        return result

    def _backward_in_kernel(self, graph: int, n_inputs: int, grads: list) -> list:
        """Run backward through the kernel's graph of one call: the gradients of its inputs."""
        answer = self.request(Op.BACKWARD, graph=graph, grads=self.enc(grads), modes=REMOTE_MODES.modes())
        if not isinstance(answer, list) or len(answer) != n_inputs:
            raise CheckerError("the kernel's backward pass returned the wrong number of gradients")
        return answer

    def substitute(self, replacements: dict[str, Any]) -> Callable[[], None]:
        token = self.request(Op.SUBSTITUTE, names=self.enc(replacements))
        return lambda: self.request(Op.RESTORE, token=token)


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


def _lent_fingerprint(module: torch.nn.Module) -> tuple:
    """What a call through a lent model's methods could change (``load_state_dict``, ``apply``, ``train``,
    ``requires_grad_``, ``half``, ``register_buffer``, a hook): parameter and buffer versions (in-place writes),
    identities, dtypes, flags, modes, hook counts."""
    hooks = ("_forward_hooks", "_forward_pre_hooks", "_backward_hooks", "_backward_pre_hooks",
             "_state_dict_hooks", "_load_state_dict_pre_hooks")
    tensors = itertools.chain(module.parameters(), module.buffers())  # (the course's models keep no running statistics)
    return ([m.training for m in module.modules()],
            [(id(t), t._version, t.dtype, t.device, t.requires_grad, tuple(t.shape)) for t in tensors],
            [id(m) for m in module.modules()],
            [len(getattr(m, name, ()) or ()) for m in module.modules() for name in hooks])


def _only_flags_changed(local: Any, new: Any) -> bool:
    """Whether the kernel's copy of the model ``local`` differs from it in ``requires_grad`` only."""
    if not (isinstance(local, torch.nn.Module) and isinstance(new, dict) and isinstance(new.get("module_state"), dict)):
        return False
    ours, theirs = local.state_dict(), new["module_state"]
    if new.get("replaced") or list(ours) != list(theirs) or new.get("training") != [m.training for m in local.modules()]:
        return False
    return all(isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and (
        "meta" in (a.device.type, b.device.type) or torch.equal(a, b.to(a.device)))  # a meta tensor has no values
        for a, b in zip(ours.values(), theirs.values()))


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
        elif isinstance(node, ast.comprehension):  # [f(seed) for seed in ...]: bound before the read
            for target in ast.walk(node.target):
                if isinstance(target, ast.Name):
                    defined[target.id] = min(defined.get(target.id, target.lineno), target.lineno)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            defined[node.name] = min(defined.get(node.name, line), line)
    names = {name for name, line in loaded.items()
             if not (line > assigned.get(name, line) or line >= defined.get(name, line + 1))}
    return sorted(names - set(dir(builtins)))


@contextlib.contextmanager
def _seeding_counted(checker: Checker) -> Iterator[None]:
    """While a test cell runs: each torch.manual_seed / set_rng_state of the tests counted on ``checker``."""
    originals = {name: getattr(torch, name) for name in ("manual_seed", "set_rng_state", "seed")}

    def counted(original: Callable[..., Any]) -> Callable[..., Any]:
        def seeding(*args: Any, **kwargs: Any) -> Any:
            checker.seeded += 1
            return original(*args, **kwargs)
        return seeding

    for name, original in originals.items():
        setattr(torch, name, counted(original))
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(torch, name, original)


def run_prelude(prelude: str) -> dict[str, Any]:
    """A fresh namespace holding the tests' vocabulary and ``prelude``'s imports (each statement on its
    own: one of a package missing here leaves the rest). Run once before any test cell, it also makes a
    new checker pay the notebook's imports while the kernel starts, not in the first test cell."""
    namespace: dict[str, Any] = {"__name__": "__checker__", "__builtins__": builtins}
    for statement in ast.parse(BASE_PRELUDE + "\n" + prelude).body:
        try:
            exec(compile(ast.Module([statement], []), "<prelude>", "exec"), namespace)  # noqa: S102 - our code
        except Exception:  # noqa: BLE001 - an optional package missing here
            pass
    return namespace


def check_cell(connection_info: dict, source: str, prelude: str = "", timeout: float = 120.0,
               withheld: Sequence[str] = ()) -> CheckResult:
    """Run a test cell's whole code (visible and hidden tests) here, against the kernel.
    ``withheld``: the references the kernel's sandbox withholds (lent to it by callback)."""
    deadline = time.monotonic() + timeout
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return CheckResult(False, "SyntaxError", f"the test cell does not parse: {error}")
    namespace = run_prelude(prelude)
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
            found = checker.request(Op.LOOKUP, names=wanted)
            if isinstance(found, dict):
                namespace.update({k: v for k, v in found.items() if isinstance(k, str) and k in wanted})
        namespace["__course_remote_substitute__"] = checker.substitute
        with _seeding_counted(checker):
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
        REMOTE_MODES.clear()
        WRITABLE.clear()
        torch.set_default_dtype(saved_dtype)
        torch.set_grad_enabled(saved_grad)
        set_default_device(str(saved_device))
        if link is not None:
            try:
                link.close()
            except Exception:  # noqa: BLE001
                pass

