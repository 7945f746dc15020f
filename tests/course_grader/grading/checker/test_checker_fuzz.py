"""The trusted checker's protocol, fuzzed from the kernel side (issue 33, item 8).

A student controls everything their kernel sends the checker. Here the kernel is replaced by a
script of messages: first the real replies of the course's agent (``course_utils.protocol.agent``, run in
a thread of this process against a small notebook of answers), recorded once per test cell;
then those replies mutated (types flipped, keys dropped, tensor payloads with other dtypes,
shapes, strides and byte lengths, handles negative or huge, ``$sent_tensor`` ids never sent,
``$object`` pickles, callbacks nobody lent) and messages of random JSON (NaN, infinities, huge
numbers, deep nesting, every key the checker reads with a value of the wrong kind), text that
is not JSON, envelopes that are not input requests, a kernel that dies mid-cell.

Only the transport is fake: ``jupyter_client``'s ``BlockingKernelClient`` is replaced by
:class:`ScriptClient`, so the real :func:`check_cell`, ``KernelLink`` (parsing, size bounds,
the hello, the deadline), ``Checker`` and ``wire`` handle every message. Waiting is simulated
(the checker's clock jumps by what it would have waited), so a run is fast and a hang shows as
time past the deadline. For every cell: a ``CheckResult`` comes back (nothing escapes), a
script of garbage never passes, the checker's clock stays within the deadline plus slack,
nothing is unpickled in the checker process, and the next honest cell of the same "notebook"
still passes (a bad message fails only its own cell).

``COURSE_FUZZ_MESSAGES`` sets how many fuzzed messages the checker must read: 10,000 in the suite
(about a minute on two cores: each read message is most often the last of its cell, and a cell
costs the checker a few milliseconds); ``COURSE_FUZZ_MESSAGES=100000`` is the issue's full run
(about ten minutes).
"""

from __future__ import annotations

import base64
import copy
import io
import json
import math
import os
import pickle
import queue
import random
import sys
import threading
import time
import types
from collections import deque
from typing import Any

import numpy as np
import pytest
import torch

from course_utils.protocol import agent
from course_utils.protocol.messages import REMOTE_MODES
from course_grader.grading.checker import checker as checker_module
from course_grader.grading.checker import link as link_module
from course_grader.grading.checker import CheckResult, check_cell

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

pytestmark = pytest.mark.slow

TARGET = int(os.environ.get("COURSE_FUZZ_MESSAGES", "10000"))
PER_EXAMPLE = 20  # fuzzed messages read per example (one "notebook": as many cells as that takes)
TIMEOUT = 30.0  # the cell limit (simulated: waiting costs no real time)
SLACK = 5.0

# ------------------------------------------------------------------ the student's notebook

KERNEL = '''
import numpy as np
import torch
import torch.nn as nn

def double(x):
    return x * 2

def square(x):
    return x ** 2

def apply_twice(f, x):
    return f(f(x))

def fill_zero(t):
    t.zero_()

def shrink(module):
    with torch.no_grad():
        for p in module.parameters():
            p.mul_(0.5)

def run_model(m, x):
    return m(x)

def same(obj):
    return obj

class Bag:
    def __init__(self, items):
        self.items = list(items)
    def __iter__(self):
        return iter(self.items)
    def __len__(self):
        return len(self.items)
    def __getitem__(self, i):
        return self.items[i]

bag = Bag(["a", "b", "c"])

class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    def forward(self, x):
        return x @ self.weight.T

model = Scale()

def helper(x):
    return x

def uses_helper(x):
    return helper(x) * 2

vocab = {f"w{i}": i for i in range(1200)}

def values():
    return {"array": np.arange(3, dtype=np.int16), "scalar": np.float32(2.5), "complex": 1 + 2j, "bytes": b"ab",
            "slice": slice(1, None, 2), "dtype": torch.float16, "device": torch.device("cpu"),
            "size": torch.Size([2, 3]), "generator": torch.Generator().manual_seed(3), "ellipsis": ...,
            "tuple": (1, "x", None), "nan": float("nan"), "big": 2**70, "meta": torch.zeros(2, device="meta"),
            "param": nn.Parameter(torch.ones(2)), "strided": torch.arange(6.0).reshape(2, 3).T,
            "expanded": torch.ones(1, 3).expand(2, 3), "half": torch.tensor([1.5], dtype=torch.float16)}
'''

# Test cells: each ends with checks of values that only the honest replies carry.
CELLS = {
    "call": "check_close(double(torch.tensor([0.75, -1.125])), torch.tensor([1.5, -2.25]), 'double')",
    "backward": ("x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)\nsquare(x).sum().backward()\n"
                 "check_close(x.grad, torch.tensor([2.0, 4.0, 6.0]), 'grad')"),
    "callback": "check_close(apply_twice(lambda t: t * 3, torch.tensor([1.0, 2.0])), torch.tensor([9.0, 18.0]), 'twice')",
    "callback_backward": ("x = torch.tensor([1.0, 2.0], requires_grad=True)\n"
                          "apply_twice(lambda t: t * 3, x).sum().backward()\n"
                          "check_close(x.grad, torch.tensor([9.0, 9.0]), 'grad')"),
    "module": ("y = model(torch.ones(1, 2))\ncheck_close(y, torch.tensor([[3.0, 7.0]]), 'y')\n"
               "check(isinstance(model, nn.Module), 'a module')\n"
               "check_close(model.weight, torch.tensor([[1.0, 2.0], [3.0, 4.0]]), 'weight')"),
    "in_place": ("t = torch.ones(3)\nwith may_change(t):\n    fill_zero(t)\ncheck_close(t, torch.zeros(3), 't')\n"
                 "torch.manual_seed(2)\nlin = nn.Linear(2, 1)\nw = lin.weight.detach().clone()\nwith may_change(lin):\n    shrink(lin)\n"
                 "check_close(lin.weight, w * 0.5, 'weight')"),
    "object": ("torch.manual_seed(1)\nref = nn.Linear(2, 2)\nx = torch.ones(1, 2)\n"
               "check_close(run_model(ref, x), ref(x), 'run_model')\ncheck(same(ref) is ref, 'same')"),
    "iterate": ("check(list(bag) == ['a', 'b', 'c'], 'bag')\ncheck(len(bag) == 3 and bag[1] == 'b', 'bag')\n"
                "check(len(vocab) == 1200 and vocab['w7'] == 7 and 'w3' in vocab, 'vocab')"),
    "substitute": ("with substitute(globals(), helper=lambda x: x + 1):\n    got = uses_helper(torch.tensor([1.0]))\n"
                   "check_close(got, torch.tensor([4.0]), 'uses_helper')"),
    "own_work": ("with own_work('course_utils.attention.softmax', name='double'):\n"
                 "    got = double(torch.tensor([1.0]))\ncheck_close(got, torch.tensor([2.0]), 'double')"),
    "values": ("v = values()\n"
               "check(v['array'].dtype == np.int16 and v['array'].tolist() == [0, 1, 2], 'array')\n"
               "check(float(v['scalar']) == 2.5 and v['complex'] == 1 + 2j and v['bytes'] == b'ab', 'scalars')\n"
               "check(v['slice'] == slice(1, None, 2) and v['dtype'] is torch.float16, 'slice, dtype')\n"
               "check(v['device'] == torch.device('cpu') and v['size'] == torch.Size([2, 3]), 'device, size')\n"
               "check(torch.equal(torch.rand(2, generator=v['generator']),\n"
               "                  torch.rand(2, generator=torch.Generator().manual_seed(3))), 'generator')\n"
               "check(v['ellipsis'] is ... and v['tuple'] == (1, 'x', None) and math.isnan(v['nan']), 'rest')\n"
               "check(v['big'] == 2**70 and v['meta'].device.type == 'meta' and v['meta'].shape == (2,), 'meta')\n"
               "check(v['param'].requires_grad and v['half'].dtype == torch.float16, 'param')\n"
               "check_close(v['strided'], torch.arange(6.0).reshape(2, 3).T, 'strided')\n"
               "check(v['strided'].stride() == (1, 3) and v['expanded'].stride() == (0, 1), 'strides')"),
}
NAMES = sorted(CELLS)
HONEST: dict[str, tuple[list[str], list[int]]] = {}  # each cell's recorded replies, and the ids of the tensors it sent


# ------------------------------------------------------------------ the fake transport


class Clock:
    """The checker's ``time``: real time plus the waits the fake client skipped."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def monotonic(self) -> float:
        return time.monotonic() + self.skipped

    def skip(self, seconds: float | None) -> None:
        self.skipped += max(0.0, float(seconds or 0.0))

    def sleep(self, seconds: float) -> None:
        self.skip(seconds)

    def __getattr__(self, name: str) -> Any:  # time.time() and the rest: real
        return getattr(time, name)


CLOCK = Clock()


class Run:
    """One test cell's kernel: a script of ``(kind, text, fuzzed)`` entries. ``kind``: "input" (an
    input request with ``text`` as its prompt), "other_type" / "other_parent" (a stdin message
    that is not an answer to the checker), "die" (the kernel's execute reply: it stopped)."""

    def __init__(self, script: list[tuple[str, str, bool]], sent: list[int] | None = None) -> None:
        self.script = deque(script)
        self.recorded_sent = sent or []  # the ids of the tensors the checker sent when the script was recorded
        self.sent: list[int] = []  # ... and in this run: a ``$sent_tensor`` of the script names the same one
        self.read = 0
        self.fuzzed_read = 0
        self.interrupts = 0
        self.questions: list[str] = []


def _tensor_ids(value: Any, out: list[int]) -> list[int]:
    """The ``id`` of every tensor payload in a message, in order."""
    if isinstance(value, dict):
        payload = value.get("$tensor")
        if isinstance(payload, dict) and isinstance(payload.get("id"), int):
            out.append(payload["id"])
        for item in value.values():
            _tensor_ids(item, out)
    elif isinstance(value, list):
        for item in value:
            _tensor_ids(item, out)
    return out


def _renamed(value: Any, names: dict[int, int]) -> Any:
    if isinstance(value, dict):
        if isinstance(value.get("$sent_tensor"), int) and value["$sent_tensor"] in names and len(value) == 1:
            return {"$sent_tensor": names[value["$sent_tensor"]]}
        return {key: _renamed(item, names) for key, item in value.items()}
    if isinstance(value, list):
        return [_renamed(item, names) for item in value]
    return value


class ScriptClient:
    """Stands in for ``jupyter_client``'s BlockingKernelClient: the kernel's messages come from a
    :class:`Run` (given as the connection info), one input request per question."""

    def __init__(self) -> None:
        self.pending: deque[tuple[dict, bool]] = deque()
        self.dead = False
        self.replied = False
        self.msg_id = "agent-execute"
        self.session = types.SimpleNamespace(msg=lambda kind, content: {"msg_type": kind, "content": content})
        self.control_channel = types.SimpleNamespace(send=self._control)

    def load_connection_info(self, info: dict) -> None:
        self.run: Run = info["run"]

    def start_channels(self) -> None:
        pass

    def stop_channels(self) -> None:
        pass

    def _control(self, msg: dict) -> None:
        if msg.get("msg_type") == "interrupt_request":
            self.run.interrupts += 1

    def execute(self, code: str, **_: Any) -> str:
        self._deliver()  # the agent's hello
        return self.msg_id

    def _deliver(self) -> None:
        """The kernel's next messages, up to its next input request."""
        while not self.dead:
            if not self.run.script:
                self.dead = True
                return
            kind, text, fuzzed = self.run.script.popleft()
            if kind == "die":
                self.dead = True
                return
            if '"$sent_tensor"' in text:  # the tensor the checker sent in this run, as the recorded one
                try:
                    text = json.dumps(_renamed(json.loads(text), dict(zip(self.run.recorded_sent, self.run.sent))))
                except (ValueError, RecursionError):
                    pass
            header = {"msg_id": self.msg_id if kind != "other_parent" else "someone-else"}
            msg_type = "input_request" if kind != "other_type" else "stream"
            self.pending.append(({"msg_type": msg_type, "parent_header": header,
                                  "content": {"prompt": text, "password": False}}, fuzzed))
            if kind == "input":
                return

    def input(self, text: str) -> None:
        self.run.questions.append(text)
        question = json.loads(text)
        if '"$tensor"' in text:
            _tensor_ids(question, self.run.sent)
        if question.get("op") == "end":
            self.dead = True
        else:
            self._deliver()

    def get_stdin_msg(self, timeout: float | None = None) -> dict:
        if self.pending:
            msg, fuzzed = self.pending.popleft()
            self.run.read += 1
            self.run.fuzzed_read += fuzzed
            return msg
        CLOCK.skip(timeout)
        raise queue.Empty

    def get_shell_msg(self, timeout: float | None = None) -> dict:
        if self.dead and not self.replied:
            self.replied = True
            return {"msg_type": "execute_reply", "parent_header": {"msg_id": self.msg_id},
                    "content": {"status": "ok"}}
        CLOCK.skip(timeout)
        raise queue.Empty

    def get_iopub_msg(self, timeout: float | None = None) -> dict:
        raise queue.Empty


class AgentClient(ScriptClient):
    """The same client with the course's real agent behind it (a ``_Session`` in a thread, its
    ``input()`` a pair of queues): records what an honest kernel answers."""

    def load_connection_info(self, info: dict) -> None:
        self.run = info["run"]
        self.namespace = info["namespace"]
        self.to_agent: queue.Queue = queue.Queue()
        self.from_agent: queue.Queue = queue.Queue()
        self.recorded: list[str] = info["recorded"]

    def _ask(self, text: str) -> str:
        self.from_agent.put(text)
        answer = self.to_agent.get()
        if answer is None:
            raise KeyboardInterrupt  # the checker went away
        return answer

    def _serve(self) -> None:  # agent.serve's loop, without its process-wide hooks
        session = agent._Session(self._ask, self.namespace)
        message = json.dumps({"hello": 1})
        try:
            while True:
                request = json.loads(self._ask(message))
                if request.get("op") == "end":
                    break
                message = json.dumps(session.answer(request))
        except KeyboardInterrupt:
            pass

    def execute(self, code: str, **_: Any) -> str:
        self.thread = threading.Thread(target=self._serve, name=KERNEL_THREAD, daemon=True)
        self.thread.start()
        return self.msg_id

    def input(self, text: str) -> None:
        if '"$tensor"' in text:
            _tensor_ids(json.loads(text), self.run.sent)
        self.to_agent.put(text)

    def get_stdin_msg(self, timeout: float | None = None) -> dict:
        text = self.from_agent.get(timeout=10)
        self.recorded.append(text)
        return {"msg_type": "input_request", "parent_header": {"msg_id": self.msg_id}, "content": {"prompt": text}}

    def get_shell_msg(self, timeout: float | None = None) -> dict:
        self.thread.join(timeout=timeout or 0)
        if not self.thread.is_alive() and not self.replied:
            self.replied = True
            return {"msg_type": "execute_reply", "parent_header": {"msg_id": self.msg_id}, "content": {"status": "ok"}}
        raise queue.Empty

    def stop_channels(self) -> None:
        if self.thread.is_alive():
            self.to_agent.put(None)
        self.thread.join(timeout=10)


# ------------------------------------------------------------------ nothing is unpickled

UNPICKLED: list[str] = []


KERNEL_THREAD = "fuzz-kernel"  # the recording agent's thread: the kernel's side loads what the tests send


def _refuse(name: str, original: Any) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread().name == KERNEL_THREAD:
            return original(*args, **kwargs)
        UNPICKLED.append(name)
        raise RuntimeError(f"the checker unpickled something ({name})")
    return refuse


class _RefusingUnpickler(pickle.Unpickler):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if threading.current_thread().name == KERNEL_THREAD:
            super().__init__(*args, **kwargs)
            return
        UNPICKLED.append("pickle.Unpickler")
        raise RuntimeError("the checker unpickled something (pickle.Unpickler)")


class _Canary:
    def __reduce__(self) -> Any:
        return (os.getpid, ())


def _torch_saved() -> str:
    buffer = io.BytesIO()
    torch.save(torch.nn.Linear(1, 1), buffer)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


PICKLES = [base64.b64encode(pickle.dumps(_Canary())).decode("ascii"), _torch_saved()]


@pytest.fixture
def guarded(monkeypatch):
    """The checker process with pickle's and torch's loaders refusing, the fake transport in place."""
    import jupyter_client.blocking

    for module, name in ((pickle, "loads"), (pickle, "load"), (torch, "load"), (torch.serialization, "load"),
                         (np, "load"), (np.lib.format, "read_array")):
        monkeypatch.setattr(module, name, _refuse(f"{module.__name__}.{name}", getattr(module, name)))
    monkeypatch.setattr(pickle, "Unpickler", _RefusingUnpickler)
    monkeypatch.setattr(checker_module, "time", CLOCK)
    monkeypatch.setattr(link_module, "time", CLOCK)
    monkeypatch.setattr(link_module, "_MAX_RECEIVED", 4 << 20)
    monkeypatch.setattr(jupyter_client.blocking, "BlockingKernelClient", ScriptClient)
    UNPICKLED.clear()
    yield monkeypatch
    assert not UNPICKLED, f"the checker unpickled: {UNPICKLED}"


def _record(monkeypatch) -> dict[str, tuple[list[str], list[int]]]:
    """Each cell's honest script: the agent's real replies (its hello first)."""
    import jupyter_client.blocking

    namespace: dict[str, Any] = {"__name__": "__main__"}
    exec(compile(KERNEL, "<notebook>", "exec"), namespace)  # noqa: S102 - the test's own notebook
    monkeypatch.setattr(jupyter_client.blocking, "BlockingKernelClient", AgentClient)
    scripts = {}
    for name in NAMES:
        recorded: list[str] = []
        run = Run([])
        result = check_cell({"run": run, "namespace": namespace, "recorded": recorded}, CELLS[name], "", TIMEOUT)
        assert result.ok, (name, result)
        scripts[name] = (recorded, run.sent)
    monkeypatch.setattr(jupyter_client.blocking, "BlockingKernelClient", ScriptClient)
    return scripts


def _honest(monkeypatch) -> None:
    if not HONEST:
        HONEST.update(_record(monkeypatch))


def _state() -> tuple:
    """What one cell must leave as it found it for the next."""
    return (torch.get_default_dtype(), torch.is_grad_enabled(), str(torch.get_default_device()),
            len(REMOTE_MODES), sys.getprofile(), torch._C._len_torch_function_stack())


def _check(script: list[tuple[str, str, bool]], name: str) -> tuple[CheckResult, Run, float]:
    run = Run(script, HONEST[name][1])
    before = CLOCK.monotonic()
    result = check_cell({"run": run}, CELLS[name], "", TIMEOUT)
    return result, run, CLOCK.monotonic() - before


def test_honest_replies_pass_through_the_fake_transport(guarded):
    """The harness itself: every cell's recorded replies, replayed, pass (so the mutations below start
    from messages that reach deep into the checker), and a wrong value fails."""
    _honest(guarded)
    for name in NAMES:
        result, run, _ = _check([("input", text, False) for text in HONEST[name][0]], name)
        assert result.ok, (name, result)
        assert run.read == len(HONEST[name][0])
    assert len(HONEST["callback_backward"][0]) >= 6  # lookups, call + callbacks, backward + callback_backward
    right, other = (base64.b64encode(torch.tensor(v).numpy().tobytes()).decode() for v in ([1.5, -2.25], [1.5, -2.5]))
    wrong = [("input", text.replace(right, other), False) for text in HONEST["call"][0]]
    assert wrong != [("input", text, False) for text in HONEST["call"][0]]
    result, _, _ = _check(wrong, "call")
    assert not result.ok and result.ename == "CheckFailed"


# ------------------------------------------------------------------ random and mutated messages

KEYS = ["value", "error", "callback", "callback_backward", "graph", "after", "mixing", "evidence", "rng",
        "sent_grads", "hello", "how", "args", "kwargs", "grads", "name", "return", "raise", "type", "message", "mro"]
TAGS = ["$tensor", "$array", "$npscalar", "$float", "$complex", "$bytes", "$generator", "$dtype", "$device", "$size",
        "$slice", "$ellipsis", "$list", "$tuple", "$dict", "$handle", "$sent", "$sent_tensor", "$object", "$ref",
        "$callback", "$table"]
DTYPES = ["float32", "float64", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool", "complex64",
          "complex32", "qint8", "quint4x2", "float8_e4m3fn", "bits8", "uint16", "uint64", "Tensor", "float", "str",
          "os.system", "__class__", "<i2", "|O", "V8", "S4", "M8", "(3,)f8", "i8,i8", "", "f8"]
NASTY: list[Any] = [
    None, True, False, 0, -1, 1, 2, 7, 2**31, 2**63, 2**64, -(2**63), 10**300, -(10**4000), 10**4000,
    float("nan"), float("inf"), float("-inf"), 1e308, -0.0, 5e-324, "", "x", "AAAA", "!!!!", "value", "$handle",
    [], {}, [[]], [None], {"": None}, "\u0000", "\ud7ff\ue000", "a" * 1000,
    {"$handle": -1}, {"$handle": 10**30}, {"$handle": "1"}, {"$handle": float("nan")}, {"$handle": None},
    {"$handle": 1, "mro": ["torch.nn.modules.linear:Linear", "torch:Tensor", "builtins:int", "os:system"]},
    {"$handle": 2, "mro": "not a list"}, {"$handle": 3, "mro": [["nested"]] * 60},
    {"$sent": 1}, {"$sent": -5}, {"$sent": "x"}, {"$sent_tensor": 123456789}, {"$sent_tensor": "1"},
    {"$sent_tensor": None}, {"$ref": "os:system"}, {"$callback": 1}, {"$table": 1, "value": 1},
    {"$object": PICKLES[0], "n": 1}, {"$object": PICKLES[1], "n": 1}, {"$object": PICKLES[0]},
    {"$tensor": {}}, {"$tensor": None}, {"$tensor": {"dtype": "float32", "shape": [4096], "device": "meta"}},
    {"$tensor": {"dtype": "float32", "shape": [2, -1], "data": ""}},
    {"$tensor": {"dtype": "float32", "shape": [2**62, 2**62], "data": ""}},
    {"$tensor": {"dtype": "float32", "shape": [1], "data": "AACAPw==", "stride": [2**40]}},
    {"$tensor": {"dtype": "float32", "shape": [2, 2], "data": "A" * 22 + "==", "stride": [0, 0]}},
    {"$tensor": {"dtype": "float32", "shape": [], "data": "AACAPw==", "rg": True, "param": True,
                 "grad": {"dtype": "float64", "shape": [3], "data": ""}}},
    {"$tensor": {"dtype": "int64", "shape": [1], "data": "AAAAAAAAAAA=", "rg": True, "param": True}},
    {"$tensor": {"dtype": "float32", "shape": [1], "data": "AACAPw==", "device": "cuda:7", "id": "x"}},
    {"$array": {"dtype": "|O", "shape": [1], "data": ""}}, {"$array": {"dtype": "<f4", "shape": [3], "data": "AAAA"}},
    {"$array": {"dtype": "<f4", "shape": [-1], "data": "AACAPw=="}}, {"$array": {"dtype": "(2,)f8", "shape": [], "data": ""}},
    {"$npscalar": {"$array": {"dtype": "<f4", "shape": [2], "data": "AACAPwAAgD8="}}},
    {"$float": "1e999999"}, {"$float": "nan"}, {"$float": "0x10"}, {"$float": ["1"]}, {"$complex": [1]},
    {"$complex": ["nan", "inf"]}, {"$bytes": "!"}, {"$bytes": 5}, {"$generator": "AAAA"},
    {"$generator": base64.b64encode(bytes(5056)).decode()}, {"$dtype": "os.system"}, {"$dtype": "float32"},
    {"$device": "cuda:99"}, {"$device": "banana"}, {"$device": ["cpu"]}, {"$size": [10**30]}, {"$size": [-3]},
    {"$size": "12"}, {"$slice": [1]}, {"$slice": [None, None, 0]}, {"$slice": "abc"}, {"$ellipsis": False},
    {"$list": None}, {"$list": {"a": 1}}, {"$tuple": 5}, {"$dict": [[1]]}, {"$dict": [[{"$list": []}, 1]]},
    {"$dict": [["value", 1], ["value", 2]]}, {"$dict": {"a": 1}},
]


def _deep(depth: int, wrap: str) -> str:
    """Text of a value nested ``depth`` deep (built as text: too deep for json.dumps)."""
    if wrap == "list":
        return '{"value": ' + "[" * depth + "]" * depth + "}"
    return '{"value": ' + '{"$list": [' * depth + "1" + "]}" * depth + "}"


def _paths(value: Any, path: tuple = ()) -> list[tuple]:
    out = [path]
    if isinstance(value, dict):
        for key, item in value.items():
            out += _paths(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _paths(item, path + (index,))
    return out


def _get(value: Any, path: tuple) -> Any:
    for step in path:
        value = value[step]
    return value


def _flip(value: Any, rng: random.Random) -> Any:
    """The same content, another JSON type."""
    if isinstance(value, bool):
        return rng.choice([int(value), str(value).lower(), [value], None])
    if isinstance(value, int):
        return rng.choice([str(value), float(value) if abs(value) < 2**1000 else 1e308, [value], {"n": value},
                           -value, value * 2**64, None, True])
    if isinstance(value, float):
        return rng.choice([repr(value), int(value) if math.isfinite(value) else 0, [value], None])
    if isinstance(value, str):
        return rng.choice([[value], {value: value}, len(value), value[: len(value) // 2], value + "=", value * 2, None])
    if isinstance(value, list):
        return rng.choice([{str(i): v for i, v in enumerate(value)}, value[:-1], value + value, value[::-1], None,
                           json.dumps(value)])
    if isinstance(value, dict):
        return rng.choice([list(value.values()), list(value.items()), list(value), {}, None, json.dumps(value)])
    return rng.choice(NASTY)


def _mutate_tensor(payload: dict, rng: random.Random) -> None:
    field = rng.choice(["dtype", "shape", "data", "stride", "device", "rg", "param", "grad", "id", "drop"])
    if field == "dtype":
        payload["dtype"] = rng.choice(DTYPES)
    elif field == "shape":
        shape = list(payload.get("shape", [])) if isinstance(payload.get("shape"), list) else []
        choice = rng.randrange(6)
        if choice == 0 and shape:
            shape.pop(rng.randrange(len(shape)))
        elif choice == 1:
            shape.insert(rng.randrange(len(shape) + 1), rng.choice([0, 1, 2, -1, 10**12, 2**63, "2", None, 1.5]))
        elif choice == 2 and shape:
            shape[rng.randrange(len(shape))] = rng.choice([0, -1, 3, 10**9, 2**64, "x"])
        elif choice == 3:
            shape = shape[::-1]
        elif choice == 4:
            shape = [1] * rng.choice([30, 64, 65, 200])
        else:
            shape = rng.choice([None, "shape", 5, {"0": 1}])
        payload["shape"] = shape
    elif field == "data":
        data = payload.get("data", "")
        data = data if isinstance(data, str) else ""
        payload["data"] = rng.choice([data[:-4], data + "AAAA", data[4:], "", "=" * 8, "!!" + data, data.upper(),
                                      base64.b64encode(rng.randbytes(rng.randrange(64))).decode(), None, 7])
    elif field == "stride":
        n = len(payload.get("shape", [])) if isinstance(payload.get("shape"), list) else 1
        payload["stride"] = rng.choice([[rng.choice([0, 1, 2, 3, -1, 2**40, 2**40 + 1, 2**62, "1", None]) for _ in range(n)],
                                        [0] * n, [1] * (n + 1), [], None, "1", [2**40] * n])
    elif field == "device":
        payload["device"] = rng.choice(["meta", "cuda", "cuda:7", "xpu", "", "mps", None, 1, "cpu"])
    elif field in ("rg", "param"):
        payload[field] = rng.choice([True, False, 1, "yes", None, [True]])
    elif field == "grad":
        payload["grad"] = rng.choice([copy.deepcopy({k: v for k, v in payload.items() if k != "grad"}),
                                      {"dtype": "float64", "shape": [99], "data": ""}, None, {}, 1])
    elif field == "id":
        payload["id"] = rng.choice([0, -1, 2**70, "x", None, 1.5, 140000000000000])
    else:
        payload.pop(rng.choice(sorted(payload)), None) if payload else None


def _mutate(message: Any, rng: random.Random, random_value: Any) -> Any:
    """One mutation of a parsed reply (returned; the original is untouched)."""
    message = copy.deepcopy(message)
    if not isinstance(message, dict):
        return random_value
    paths = _paths(message)
    tensors = [p for p in paths if p and p[-1] == "$tensor" and isinstance(_get(message, p), dict)]
    handles = [p for p in paths if p and p[-1] in ("$handle", "$sent", "$sent_tensor")]
    how = rng.randrange(10)
    if how == 0 and tensors:
        _mutate_tensor(_get(message, rng.choice(tensors)), rng)
    elif how == 1 and handles:
        path = rng.choice(handles)
        _get(message, path[:-1])[path[-1]] = rng.choice([-1, 0, 10**30, 2**63, "1", 1.5, None, float("nan"), [1]])
    elif how == 2:  # a key the checker reads, with a value of any kind
        message[rng.choice(KEYS)] = random_value
    elif how == 3:  # a callback nobody lent, or a real one at the wrong time
        key = rng.choice(["callback", "callback_backward"])
        message[key] = rng.choice([1, 2, 0, -1, 10**20, "1", None, float("inf"), [1]])
        if rng.random() < 0.5:
            message.update({"how": rng.choice(["call", "getattr", "getitem", "len", "list", "next", "delete", 5]),
                            "args": rng.choice([{"$list": []}, {"$list": [random_value]}, random_value]),
                            "kwargs": rng.choice([{"$dict": []}, random_value]),
                            "name": rng.choice(["__class__", "__globals__", "real", "shape", 3]),
                            "grads": random_value, "key": random_value})
    elif how == 4:
        message["rng"] = rng.choice([base64.b64encode(rng.randbytes(5056)).decode(), "AAAA", "!", 5, None,
                                     base64.b64encode(bytes(5056)).decode(), base64.b64encode(b"\xff" * 5056).decode()])
    else:
        path = rng.choice(paths[1:] or [()])
        if not path:
            return random_value
        parent, key = _get(message, path[:-1]), path[-1]
        what = rng.randrange(4)
        if what == 0:
            del parent[key]
        elif what == 1:
            parent[key] = _flip(parent[key], rng)
        elif what == 2:
            parent[key] = random_value
        else:
            parent[key] = rng.choice(NASTY)
    return message


def _text(message: Any) -> str:
    return json.dumps(message)  # NaN, Infinity and huge integers as Python's json writes them


scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(min_value=-(10**400), max_value=10**400),
                    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=12), st.sampled_from(DTYPES),
                    st.sampled_from(NASTY))
json_values = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4),
                            st.dictionaries(st.one_of(st.sampled_from(KEYS + TAGS), st.text(max_size=4)), inner, max_size=4)),
    max_leaves=12)


class Values:
    """Random JSON for one example: values hypothesis drew (a few: drawing is slow), and more made by
    the example's seeded ``random.Random`` in the same spirit."""

    def __init__(self, data: Any, rng: random.Random) -> None:
        self.pool = data.draw(st.lists(json_values, min_size=3, max_size=3), label="values")
        self.rng = rng

    def value(self, depth: int = 0) -> Any:
        rng = self.rng
        r = rng.random()
        if depth == 0 and r < 0.3:
            return rng.choice(self.pool)
        if depth > 3 or r < 0.6:
            return rng.choice([rng.choice(NASTY), rng.randint(-(2**70), 2**70), rng.choice(DTYPES),
                               rng.random() * 10.0 ** rng.randint(-300, 300), "".join(rng.choices("$a0 =\\\"", k=4))])
        if r < 0.8:
            return [self.value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(KEYS + TAGS + ["", "x"]): self.value(depth + 1) for _ in range(rng.randrange(4))}

    def reply(self) -> dict:
        return {key: self.value(1) for key in self.rng.sample(KEYS, self.rng.randrange(5))}


def _garbage(values: Values, rng: random.Random) -> tuple[str, str]:
    """A message from nowhere: random JSON, a random reply, non-JSON text, an envelope not for us."""
    kind = rng.randrange(12)
    if kind < 5:
        return "input", _text(values.reply())
    if kind < 7:
        return "input", _text({"value": values.value(), "rng": rng.choice(["", "AAAA", None])})
    if kind == 7:
        return "input", _text(values.value())
    if kind == 8:
        return "input", rng.choice(["", "not json", "{", "[1, 2", "NaN", "null", '"hello"', "{\"value\": 1}" * 2,
                                    "\x00", "1" * 5000, '{"value": ' + "9" * 5000 + "}", _deep(rng.choice(
                                        [49, 50, 51, 60, 3000, 200_000]), rng.choice(["list", "tag"]))])
    if kind == 9:
        return "input", _text({"value": "x" * rng.choice([10_000, 300_000, 1_500_000])})  # toward the size bound
    if kind == 10:
        return rng.choice(["other_type", "other_parent"]), _text({"value": None})
    return "die", ""


def _fuzzed_script(values: Values, honest: list[str], rng: random.Random) -> tuple[list[tuple[str, str, bool]], bool]:
    """A script for one cell; also whether it is garbage only (no honest reply but the hello)."""
    if rng.random() < 0.25:  # garbage from the first reply on
        script = [("input", honest[0], False)] if rng.random() < 0.8 else []
        script += [(*_garbage(values, rng), True) for _ in range(rng.randrange(1, 8))]
        return script, True
    script = [("input", text, False) for text in honest]
    for _ in range(1 + int(rng.random() < 0.3)):
        position = rng.randrange(len(script))
        kind = rng.randrange(10)
        if kind < 6:
            try:
                parsed = json.loads(script[position][1])
            except ValueError:
                parsed = None
            mutated = _mutate(parsed, rng, values.value())
            script[position] = ("input", _text(mutated), True)
        elif kind == 6:
            script[position] = (*_garbage(values, rng), True)
        elif kind == 7:
            script.insert(position, (*_garbage(values, rng), True))
        elif kind == 8:  # a reply out of order: another cell's, or this cell's own, again
            other = rng.choice(list(HONEST.values()))[0]
            script.insert(position, ("input", rng.choice(other), True))
        else:
            del script[position]
    return script, False




def test_fuzzed_messages_fail_only_their_own_cell(guarded):
    _honest(guarded)
    baseline = _state()
    stats = {"fuzzed": 0, "messages": 0, "cells": 0, "garbage": 0, "passed_mutated": 0, "slowest": 0.0}
    examples = math.ceil(TARGET / PER_EXAMPLE)
    started = time.monotonic()

    @settings(max_examples=examples, derandomize=True, database=None, deadline=None, phases=[Phase.generate, Phase.shrink],
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def notebook(data):
        rng = random.Random(data.draw(st.integers(0, 2**32 - 1), label="seed"))
        values = Values(data, rng)
        fuzzed = 0
        for _ in range(4 * PER_EXAMPLE):
            if fuzzed >= PER_EXAMPLE:
                break
            name = rng.choice(NAMES)
            if rng.random() < 0.1:  # an honest cell between fuzzed ones: it must still pass
                result, run, took = _check([("input", text, False) for text in HONEST[name][0]], name)
                assert result.ok, (name, result)
            else:
                script, garbage = _fuzzed_script(values, HONEST[name][0], rng)
                result, run, took = _check(script, name)
                assert isinstance(result, CheckResult)
                assert isinstance(result.ok, bool) and isinstance(result.ename, str) and isinstance(result.evalue, str)
                if garbage:
                    assert not result.ok, (name, script)
                    stats["garbage"] += 1
                stats["passed_mutated"] += result.ok and not garbage
            fuzzed += run.fuzzed_read
            stats["fuzzed"] += run.fuzzed_read
            stats["messages"] += run.read
            stats["cells"] += 1
            stats["slowest"] = max(stats["slowest"], took)
            assert took <= TIMEOUT + SLACK, (name, took)
            assert _state() == baseline, (name, _state(), baseline)
            assert not UNPICKLED, UNPICKLED

    notebook()
    elapsed = time.monotonic() - started
    print(f"\nfuzz: {stats['fuzzed']} fuzzed messages read ({stats['messages']} in all) in {stats['cells']} cells, "
          f"{stats['garbage']} all garbage; {stats['passed_mutated']} mutated cells still passed; "
          f"slowest cell {stats['slowest']:.2f} s (simulated); {elapsed:.1f} s")
    assert stats["fuzzed"] >= TARGET


# ------------------------------------------------------------------ what the fuzz found
# (the fuzz above keeps clear of these: its meta tensors are small; its evidence lists short)


def _reply_with(name: str, question: str, change: Any) -> list[tuple[str, str, bool]]:
    """``name``'s honest script with the reply to the first question containing ``question`` changed."""
    script, texts = [], HONEST[name][0]
    run = Run([("input", text, False) for text in texts], HONEST[name][1])
    check_cell({"run": run}, CELLS[name], "", TIMEOUT)
    asked = [i + 1 for i, q in enumerate(run.questions) if question in q][0]  # reply i+1 answers question i
    for index, text in enumerate(texts):
        script.append(("input", json.dumps(change(json.loads(text))) if index == asked else text, index == asked))
    return script


# Found by this fuzz (fixed): Checker.raw_request kept every evidence item the kernel sends, checking each
# against a list (`str(item) not in self.evidence`): unbounded and quadratic, 20,000 items (160 KB) cost 8 s
# of the checker's own time, a million (8 MB) hours, and no deadline covers it
def test_the_kernels_evidence_is_bounded(guarded):
    _honest(guarded)
    items = [f"note {i}" for i in range(5000)]
    script = _reply_with("call", '"op": "call"', lambda reply: {**reply, "evidence": items})
    started = time.monotonic()
    result = check_cell({"run": Run(script, HONEST["call"][1])}, CELLS["call"], "", TIMEOUT)
    assert isinstance(result, CheckResult) and result.ok  # evidence is not a verdict
    assert len(result.evidence) <= 100, f"{len(result.evidence)} evidence items kept ({time.monotonic() - started:.1f} s)"


# Found by this fuzz (fixed): RemoteObject.__iter__ called iter() on whatever the kernel answers, and
# wire.decode accepts a meta tensor of any shape: an `iter` answered with a meta tensor of shape [10**12]
# unbinds it in the checker (hours and all memory; 600,000 rows take ~5 s) while the deadline counts only time
# spent waiting for the kernel
def test_an_iterator_answered_with_a_huge_meta_tensor_fails_in_time(guarded):
    _honest(guarded)
    huge = {"$tensor": {"dtype": "float32", "shape": [600_000], "device": "meta", "stride": [1]}}
    script = _reply_with("iterate", '"how": "iter"', lambda reply: {**reply, "value": huge})
    started = time.monotonic()
    result = check_cell({"run": Run(script, HONEST["iterate"][1])}, CELLS["iterate"], "", 0.1)
    took = time.monotonic() - started
    assert isinstance(result, CheckResult) and not result.ok
    assert took <= 0.1 + 1.0, f"the checker ran {took:.1f} s past a 0.1 s deadline"
