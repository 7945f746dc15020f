"""The trusted checker (issue 25): test cells decided outside the student's kernel.

Wire round trips are unit tests; the rest runs a real kernel (unsandboxed: the sandbox has
its own tests) holding a student's answer, then checks a test cell against it, the way
grading does. Each attack below once forged full marks or leaked hidden tests when the
tests ran inside the kernel.
"""

from __future__ import annotations

import math
import os
import sys
import time

import nbformat
import numpy as np
import pytest
import torch

from course_utils.cells import split_hidden
from course_utils.protocol import wire
from course_utils.protocol.messages import tensors_in
from course_grader.grading.checker import check_cell
from course_utils.layout import KERNEL_NAME

SENTINEL = "hidden-sentinel-9c2e"
TEST = f'''
check(count_parameters(torch.nn.Linear(3, 2)) == 8, "count_parameters(Linear(3, 2)) should be 8.")
print("Visible tests passed.")
### BEGIN HIDDEN TESTS
check(count_parameters(torch.nn.Linear(5, 7, bias=False)) == 35, "{SENTINEL}: Linear(5, 7, bias=False) has 35.")
### END HIDDEN TESTS
'''
RIGHT = "def count_parameters(module):\n    return sum(p.numel() for p in module.parameters())\n"
WRONG = "def count_parameters(module):\n    return 8\n"


# ------------------------------------------------------------------------------ wire


def _roundtrip(value):
    return wire.decode(wire.encode(value, lambda o: pytest.fail(f"no handle expected for {o!r}")),
                       lambda tag: pytest.fail("no tag expected"))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
                                   torch.int32, torch.bool, torch.uint8, torch.complex64])
def test_tensors_cross_exactly(dtype):
    t = (torch.randn(3, 4) * 10).to(dtype)
    back = _roundtrip(t)
    assert back.dtype == dtype and back.shape == t.shape and torch.equal(back, t)


def test_values_keep_their_kind():
    p = torch.nn.Parameter(torch.randn(2))
    p.grad = torch.ones(2)
    value = {"a": [1, 2.5, float("nan"), float("-inf"), None, True], "b": (torch.empty(0, 3), torch.zeros(2, device="meta")),
             3: np.arange(4, dtype=np.float32), "s": torch.Size([2, 3]), "d": torch.float16, "p": p,
             "x": torch.ones(2, requires_grad=True), "sl": slice(1, None, 2), "n": np.float64(2.5)}
    back = _roundtrip(value)
    assert back["a"][:2] == [1, 2.5] and math.isnan(back["a"][2]) and back["a"][3] == -math.inf
    assert back["b"][0].shape == (0, 3) and back["b"][1].device.type == "meta"
    assert np.array_equal(back[3], value[3]) and back["s"] == torch.Size([2, 3]) and back["d"] is torch.float16
    assert isinstance(back["p"], torch.nn.Parameter) and torch.equal(back["p"].grad, torch.ones(2))
    assert back["x"].requires_grad and back["sl"] == slice(1, None, 2) and back["n"] == 2.5


def test_generators_cross_with_their_state():
    g = torch.Generator().manual_seed(7)
    torch.rand(3, generator=g)
    back = _roundtrip(g)
    assert torch.equal(torch.rand(5, generator=back), torch.rand(5, generator=g))


@pytest.mark.parametrize("data", [
    {"$tensor": {"dtype": "float32", "shape": [4], "data": "AAAA"}},      # 3 bytes for 16
    {"$tensor": {"dtype": "os.system", "shape": [1], "data": ""}},         # not a dtype
    {"$array": {"dtype": "|O", "shape": [1], "data": ""}},                 # object arrays are not data
    [1, 2],                                                               # an untagged list
])
def test_malformed_data_is_refused(data):
    with pytest.raises(wire.WireError):
        wire.decode(data, lambda tag: (_ for _ in ()).throw(wire.WireError("tag")))


def test_split_hidden_keeps_only_the_visible_tests():
    visible = split_hidden(TEST)
    assert "Visible tests passed" in visible and SENTINEL not in visible and "HIDDEN" not in visible


# ------------------------------------------------------------------------------ against a kernel


@pytest.fixture(scope="module")
def kernel():
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("")]
    client = NotebookClient(nb, timeout=60, kernel_name=KERNEL_NAME, allow_errors=True)
    with client.setup_kernel():
        def run(source: str):
            nb.cells[0].source = source
            client.execute_cell(nb.cells[0], 0)
            errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
            assert not errors, f"{errors[0].ename}: {errors[0].evalue}"
            return "".join(o.get("text", "") for o in nb.cells[0].outputs if o.output_type == "stream")

        yield run, client.km.get_connection_info()


def _check(kernel, answer: str, test: str = TEST, timeout: float = 60):
    run, info = kernel
    run("import torch\nfrom course_utils.checks import *\n" + answer)
    run(split_hidden(test))
    return check_cell(info, test, timeout=timeout)


pytestmark = pytest.mark.slow


def test_right_answer_passes_and_wrong_one_fails_the_hidden_test(kernel):
    assert _check(kernel, RIGHT).ok
    result = _check(kernel, WRONG)
    assert not result.ok and result.ename == "CheckFailed" and "35" in result.evalue


@pytest.mark.parametrize("patch", [
    "import course_utils.checks as c\nc.check = lambda *a, **k: None\nc._fail = lambda *a, **k: None\n",
    "import sys\n[sys.modules['course_utils.checks']][0].__dict__['_fail'] = lambda *a, **k: None\n",
    "import course_utils\nsetattr(getattr(course_utils, 'checks'), 'check', print)\ncheck = print\n",
    "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n",
    # a fake agent that answers every question with "None"
    "import sys, types, json, builtins\nfake = types.ModuleType('course_utils.protocol.agent')\n"
    "def serve():\n    msg = json.dumps({'hello': 1})\n    while True:\n        req = json.loads(builtins.input(msg))\n"
    "        if req.get('op') == 'end': return\n        msg = json.dumps({'value': None})\n"
    "fake.serve = serve\nsys.modules['course_utils.protocol.agent'] = fake\n",
])
def test_checks_switched_off_in_the_kernel_do_not_pass_a_wrong_answer(kernel, patch):
    run, _ = kernel
    try:
        result = _check(kernel, patch + WRONG)
        assert not result.ok
    finally:
        run("import importlib, sys, builtins\nimport course_utils.checks, course_utils.protocol.agent\n"
            "builtins.AssertionError = AssertionError.__mro__[0] if AssertionError.__name__ == 'AssertionError' else __import__('builtins').__dict__['BaseException'].__subclasses__()[0]\n"
            "sys.modules.pop('course_utils.protocol.agent', None); importlib.reload(course_utils.checks)\n"
            "import course_utils.protocol.agent\n")


LEAKER = RIGHT + '''
import gc, sys
LEAK = []
_real = count_parameters
def count_parameters(module):
    frame = sys._getframe()
    while frame is not None:   # every frame, its code, its locals
        LEAK.append(repr(frame.f_code) + repr(frame.f_locals)[:100000] + repr(frame.f_globals.get("In", "")))
        frame = frame.f_back
    LEAK.append(repr([o for o in gc.get_objects() if isinstance(o, str) and "sentinel" in o]))
    return _real(module)
'''


def test_hidden_tests_never_reach_the_kernel(kernel):
    run, _ = kernel
    assert _check(kernel, LEAKER).ok
    seen = run("print(len(LEAK), any('" + SENTINEL[:6] + "' + '" + SENTINEL[6:] + "' in x for x in LEAK))")
    assert seen.split() == ["2", "False"] or (seen.split()[1] == "False" and int(seen.split()[0]) > 0)


def test_an_endless_answer_fails_in_time_and_the_kernel_goes_on(kernel):
    run, _ = kernel
    result = _check(kernel, "def count_parameters(module):\n    if module.in_features == 5:\n        while True: pass\n"
                            "    return 8\n", timeout=8)
    assert not result.ok and "timed out" in result.evalue
    # the kernel goes on. (Once, in a clean-clone CI under load, the first cell after the interrupt printed
    # nothing and raised nothing; the next one printed. Its first answer is not the claim: that it answers is.)
    said = [run("print(1 + 1)") for _ in range(2)]
    assert any(out.strip().endswith("2") for out in said), said


def test_in_place_changes_gradients_and_seeds_cross(kernel):
    answer = (
        "def scale_(x):\n    x.mul_(2)\n    return x.sum()\n"
        "def grow(x, w):\n    return (x * w).sum(-1)\n"
        "def merge_(symbols, ranks):\n    symbols[:2] = [symbols[0] + symbols[1]]\n    ranks.pop('x')\n    return symbols\n"
        "class Lin(torch.nn.Module):\n    def __init__(self):\n        super().__init__(); self.f = torch.nn.Linear(3, 2)\n"
        "    def forward(self, x):\n        return self.f(x)\n"
    )
    test = (
        "x = torch.ones(3)\nwith may_change(x):\n    scale_(x)\ncheck(torch.equal(x, 2 * torch.ones(3)), 'in-place change seen')\n"
        "s, r = ['a', 'b', 'c'], {'x': 1, 'y': 2}\nwith may_change(s, r):\n    merge_(s, r)\ncheck(s == ['ab', 'c'] and r == {'y': 2}, 'a list or dict changed in place')\n"
        "a = torch.randn(4, 3, requires_grad=True)\nw = torch.randn(3)\ngrow(a, w).sum().backward()\n"
        "check_close(a.grad, w.expand(4, 3), 'gradient across')\n"
        "torch.manual_seed(3)\nm = Lin()\ntorch.manual_seed(3)\nref = torch.nn.Linear(3, 2)\n"
        "check(isinstance(m.f, torch.nn.Linear), 'a library class is seen as such')\n"
        "check_close(m.f.weight, ref.weight, 'same seed, same weights')\n"
        "check_backward(m, torch.randn(2, 3), name='Lin', reference=lambda t: ref(t))\n"
        "check_device_dtype(m, torch.randn(2, 3), name='Lin')\n"
        "with leaves_unchanged('scale_', x):\n    pass\n"
        "check(m.f.weight is m.f.weight, 'one kernel tensor is one tensor here')\n"
        "with torch.no_grad():\n    m.f.weight.copy_(torch.ones(2, 3))\n"
        "check_close(m(torch.ones(1, 3)), 3 + m.f.bias[None], 'a weight set here is set in the kernel')\n"
    )
    result = _check(kernel, answer, test)
    assert result.ok, result.evalue


def test_new_tensors_are_tracked_in_the_kernel_and_found_in_the_checker(kernel):
    # the tracking mode runs where the answer runs; the checker hears what it found, the returned value included
    answer = (
        "def keep_wrong(experts, capacity):\n    keep = torch.zeros(experts.shape, dtype=torch.bool)\n"
        "    counts = torch.zeros(8)\n    for n in range(experts.size(0)):\n        e = int(experts[n, 0])\n"
        "        if counts[e] < capacity:\n            keep[n, 0] = True\n            counts[e] += 1\n    return keep\n"
        "def keep_right(experts, capacity):\n    return keep_wrong(experts, capacity).to(experts.device)\n"
    )
    test = (
        "e = torch.randint(0, 8, (6, 2))\n"
        "check_device_dtype(keep_right, e, 2, name='keep_right', check_dtype=False)\n"
        "### BEGIN HIDDEN TESTS\n"
        "check_device_dtype(keep_wrong, e, 2, name='keep_wrong', check_dtype=False)\n"
        "### END HIDDEN TESTS\n"
    )
    result = _check(kernel, answer, test)
    assert not result.ok and "keep_wrong returned a tensor created without device=" in result.evalue, result.evalue


def test_an_undeclared_in_place_change_fails_and_never_rewrites_the_tests_inputs(kernel):
    # second blind red team: `check_close(f(Q), ref(Q))` evaluates f first; an answer that zeroed its
    # arguments had the zeros copied into the test's Q, and the reference then agreed with it
    answer = (
        "def attention(Q, K, V):\n    with torch.no_grad():\n        Q.zero_(); K.zero_(); V.zero_()\n"
        "    return torch.zeros_like(V)\n"
        "def tidy(tokens):\n    tokens.append('<eos>')\n    return len(tokens)\n"
        "def evaluate(model):\n    model.eval()\n    return 0\n"
        "def masked_and_restored(x):\n    neg = torch.isneginf(x)\n    x.masked_fill_(neg, -1e30)\n"
        "    out = x.softmax(-1)\n    x.masked_fill_(neg, float('-inf'))\n    return out\n"
    )
    for test, what in [
        # blind red team of 13: the same bytes after the call, not the same version
        ("x = torch.tensor([[0.0, float('-inf')]])\ncheck_close(masked_and_restored(x), torch.tensor([[1.0, 0.0]]), 'softmax')\n",
         "argument 1 (a tensor)"),
        ("torch.manual_seed(0)\nQ = torch.randn(2, 3)\ncheck_close(attention(Q, Q, Q), Q @ Q.T @ Q, 'attention')\n",
         "argument 1 (a tensor)"),
        ("tokens = ['a']\ncheck(tidy(tokens) == 2, 'length')\n", "argument 1 (a list)"),
        ("m = torch.nn.Linear(2, 2).train()\ncheck(evaluate(m) == 0, 'value')\n", "the model passed as argument 1"),
    ]:
        result = _check(kernel, answer, test)
        assert not result.ok and result.ename == "CheckFailed", (test, result)
        assert what in result.evalue and "In-place" in result.evalue, result.evalue
    # declared, the change is the exercise: it crosses, and leaves_unchanged still names it itself
    result = _check(kernel, answer, "Q = torch.ones(2)\nwith may_change(Q):\n    attention(Q, Q, Q)\n"
                                    "check(torch.equal(Q, torch.zeros(2)), 'declared change seen')\n")
    assert result.ok, result.evalue
    result = check_cell(kernel[1], "Q = torch.ones(2)\nwith leaves_unchanged('attention', Q):\n    attention(Q, Q, Q)\n")
    assert not result.ok and "changed the values of its tensor argument" in result.evalue, result.evalue


def test_a_model_the_tests_lend_cannot_be_changed_through_its_methods(kernel):
    # a model of the tests' own class is lent (it runs here): load_state_dict, requires_grad_ or train()
    # called from the kernel would change the checker's model, and the tests' expected values with it
    answer = (
        "def zero_then_run(m, x):\n    m.load_state_dict({k: v * 0 for k, v in m.state_dict().items()})\n    return m(x)\n"
        "def freeze_then_run(m, x):\n    m.requires_grad_(False)\n    return m(x)\n"
        "def run_in_eval(m, x):\n    mode = m.training\n    m.eval()\n    y = m(x)\n    m.train(mode)\n    return y\n"
    )
    lent = ("class Ref(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.f = torch.nn.Linear(2, 2)\n    def forward(self, x):\n        return self.f(x)\n"
            "torch.manual_seed(0)\nref = Ref().train()\nx = torch.randn(1, 2)\n")
    for name in ("zero_then_run", "freeze_then_run"):
        result = _check(kernel, answer, lent + f"check_close({name}(ref, x), ref(x), 'output')\n")
        assert not result.ok and "changed a model the tests lent it" in result.evalue, (name, result)
    result = _check(kernel, answer, lent + "check_close(run_in_eval(ref, x), ref(x), 'output')\ncheck(ref.training, 'mode')\n")
    assert result.ok, result.evalue
    # third blind red team: a model kept from one call and changed while the kernel answers another question
    # (here an attribute read), and a buffer replaced
    answer = (
        "kept = []\ndef keep(m):\n    kept.append(m)\n    return 0\n"
        "class Box:\n    @property\n    def value(self):\n"
        "        kept[-1].load_state_dict({k: v * 0 for k, v in kept[-1].state_dict().items()})\n        return 1\n"
        "box = Box()\n"
        "def unmask(m, x):\n    m.register_buffer('mask', torch.ones(2, dtype=torch.bool))\n    return m(x)\n"
    )
    result = _check(kernel, answer, lent + "keep(ref)\ncheck(box.value == 1, 'value')\n")
    assert not result.ok and "changed a model the tests lent it" in result.evalue, result
    masked = lent.replace("self.f = torch.nn.Linear(2, 2)", "self.f = torch.nn.Linear(2, 2)\n        self.register_buffer('mask', torch.zeros(2, dtype=torch.bool))")
    result = _check(kernel, answer, masked + "unmask(ref, x)\n")
    assert not result.ok and "changed a model the tests lent it" in result.evalue, result


def test_an_allocation_log_around_backward_sees_the_answers_backward_pass(kernel):
    # 13's TiledAttention: a backward that rebuilds the whole T x T matrix escaped, because the kernel's
    # backward pass (run for the checker's .backward()) was not recorded
    answer = (
        "class Outer(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.save_for_backward(x)\n        return x * 2\n"
        "    @staticmethod\n    def backward(ctx, g):\n        (x,) = ctx.saved_tensors\n"
        "        big = x[:, None] * x[None, :]\n        return g * 2 + 0 * big.sum(-1)\n"
    )
    test = ("### BEGIN HIDDEN TESTS\nx = torch.randn(300, requires_grad=True)\ny = Outer.apply(x)\n"
            "with AllocationLog() as log:\n    y.sum().backward()\n"
            "check_close(x.grad, torch.full((300,), 2.0), 'gradient')\n"
            "check(log.largest < 1000, f'backward built {log.largest_shape}')\n### END HIDDEN TESTS\n")
    result = _check(kernel, answer, test)
    assert not result.ok and "(300, 300)" in result.evalue, result


def test_an_allocation_log_sees_what_the_answers_forward_saves_and_keeps(kernel):
    # 13's second blind red team: a forward that keeps its tensors as ctx attributes, or keeps a T x T matrix for the
    # backward, and a backward with bfloat16 products escaped; the kernel's log reports them to the checker's
    answer = (
        "class Keeps(torch.autograd.Function):\n"
        "    @staticmethod\n    def forward(ctx, x):\n        ctx.x = x\n        ctx.big = x[:, None] * x[None, :]\n        return x * 2\n"
        "    @staticmethod\n    def backward(ctx, g):\n        h = g.bfloat16()[None, :]\n        return g * 2 + 0 * (h @ h.T).float().sum()\n"
    )
    test = ("### BEGIN HIDDEN TESTS\nx = torch.randn(300, requires_grad=True)\n"
            "with AllocationLog() as log:\n    y = Keeps.apply(x)\n"
            "with AllocationLog() as back:\n    y.sum().backward()\n"
            "check(log.saved == [], f'saved {log.saved}')\n"
            "check(log.live_bytes < 300 * 300 * 4, f'kept {log.live_bytes} bytes')\n"
            "check(not back.product_dtypes.get('torch.bfloat16'), f'products {back.product_dtypes}')\n### END HIDDEN TESTS\n")
    result = _check(kernel, answer, test)
    assert not result.ok and "kept " in result.evalue, result
    saves = answer.replace("ctx.big = x[:, None] * x[None, :]", "ctx.save_for_backward(x)")
    test_saves = test.replace("log.saved == []", "log.saved == [((300,), 'torch.float32')]")
    result = _check(kernel, saves, test)
    assert not result.ok and "saved [((300,), 'torch.float32')]" in result.evalue, result
    result = _check(kernel, saves, test_saves)
    assert not result.ok and "products {'torch.bfloat16': 2}" in result.evalue, result
    result = _check(kernel, saves.replace("g.bfloat16()", "g.float()"), test_saves)
    assert result.ok, result


def test_a_switched_off_watch_is_reported(kernel):
    answer = ("import sys\nfrom course_utils.attention import scaled_dot_product_attention as _ref\n"
              "def attention(q, k, v):\n    sys.setprofile(None)\n    return _ref(q, k, v)\n")
    test = ("q = torch.randn(2, 3, 4)\nwith own_work('course_utils.attention.scaled_dot_product_attention', name='attention'):\n"
            "    attention(q, q, q)\n")
    result = _check(kernel, answer, test)
    assert any("profiler" in item for item in result.evidence), result
    # switched off and put back before returning: the audit hook still saw it
    answer = answer.replace("    sys.setprofile(None)\n    return _ref(q, k, v)\n",
                            "    saved = sys.getprofile()\n    sys.setprofile(None)\n    out = _ref(q, k, v)\n"
                            "    sys.setprofile(saved)\n    return out\n")
    result = _check(kernel, answer, test)
    assert any("sys.setprofile" in item for item in result.evidence), result


def test_a_lambda_of_the_tests_is_called_back_never_sent(kernel):
    """Issue 33: no test code enters the kernel. A lambda the tests pass runs in the checker (the
    kernel holds a stand-in that calls back); the kernel cannot read its source or its values."""
    answer = ("import inspect\n"
              "def apply(f, x):\n    return f(x)\n"
              "def spy(f):\n"
              "    try:\n        return inspect.getsource(f)\n    except Exception as error:\n        return repr(error)\n"
              "def globals_of(f):\n"
              "    try:\n        return repr(f.__globals__)\n    except Exception as error:\n        return repr(error)\n")
    test = ("### BEGIN HIDDEN TESTS\nsecret_scale = 7.25\n"
            "f = lambda t: t * secret_scale  # the hidden line\n"
            "check_close(apply(f, torch.ones(2)), torch.full((2,), 7.25), 'called back')\n"
            "check('secret_scale' not in str(spy(f)) and '7.25' not in str(spy(f)), 'the source reached the kernel')\n"
            "check('secret_scale' not in str(globals_of(f)), 'the globals reached the kernel')\n### END HIDDEN TESTS\n")
    result = _check(kernel, answer, test)
    assert result.ok, result.evalue


def test_gradients_through_a_substituted_reference_are_counted_once(kernel):
    answer = ("import math\ndef scores(q, k):\n    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
              "def attention(q, k, v):\n    w = torch.softmax(scores(q, k), -1)\n    return w @ v, w\n")
    test = ("import math\ndef ref_scores(q, k):\n    return q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
            "def ref(q, k, v):\n    w = torch.softmax(ref_scores(q, k), -1)\n    return w @ v, w\n"
            "q = torch.randn(2, 3, 4)\n"
            "with substitute(globals(), scores=ref_scores):\n"
            "    check_backward(attention, q, q.clone(), q.clone(), name='attention', reference=ref)\n"
            "from course_utils.checks.functions import RollThen\n"
            "f = RollThen(torch.eye(3) * q[0, 0, 0])\n"
            "check_close(jac(f, torch.eye(3)), torch.einsum('ij,kl->ikjl', torch.eye(3), torch.eye(3)).roll(1, 0) * q[0, 0, 0], "
            "'a module of course_utils.checks.functions can be transformed')\n")
    result = _check(kernel, answer + "def jac(f, x):\n    return torch.func.jacrev(f)(x)\n", test)
    assert result.ok, result.evalue


# ----------------------------------------------------------------------------- the third red team (blind)


def test_the_reference_called_from_another_thread_or_process_is_reported(kernel):
    """E1: sys.setprofile watches one thread; an answer that runs the reference in a thread it
    starts (through threading, or _thread) or in a forked process is reported as evidence."""
    head = ("import threading, _thread, os, time\n"
            "from course_utils.attention import scaled_dot_product_attention as _ref\n")
    spellings = {
        "threading": "    box = []\n    t = threading.Thread(target=lambda: box.append(_ref(q, k, v)))\n"
                     "    t.start(); t.join()\n    return box[0]\n",
        "_thread": "    box = []\n    _thread.start_new_thread(lambda: box.append(_ref(q, k, v)), ())\n"
                   "    while not box: time.sleep(0.001)\n    return box[0]\n",
        "fork": "    pid = os.fork()\n    if pid == 0:\n        os._exit(0)\n    os.waitpid(pid, 0)\n    return _ref(q, k, v)\n",
    }
    test = ("### BEGIN HIDDEN TESTS\nq = torch.randn(2, 3, 4)\n"
            "with own_work('course_utils.attention.scaled_dot_product_attention', name='attention'):\n"
            "    attention(q, q, q)\n### END HIDDEN TESTS\n")
    for name, body in spellings.items():
        result = _check(kernel, head + "def attention(q, k, v):\n" + body, test)
        assert any("thread or a process" in item for item in result.evidence), (name, result)


def test_a_handle_never_claims_to_be_a_tensor_nor_makes_the_checker_import(kernel):
    """E4 and C1: a kernel object whose class says torch._tensor:Tensor is a handle, not a tensor,
    and a class naming a module the checker has not imported imports nothing."""
    answer = ("class Fake:\n    pass\nFake.__module__ = 'torch._tensor'\nFake.__qualname__ = 'Tensor'\n"
              "class Runner:\n    pass\nRunner.__module__ = 'torch.utils.model_dump.__main__'\nRunner.__qualname__ = 'X'\n"
              "def make(kind):\n    return Fake() if kind == 0 else Runner()\n")
    test = ("import sys\nfake, runner = make(0), make(1)\n"
            "check(not isinstance(fake, torch.Tensor), 'a handle posing as a tensor')\n"
            "check('torch.utils.model_dump.__main__' not in sys.modules, 'imported a module the kernel named')\n"
            "type(runner)\n")
    result = _check(kernel, answer, test)
    assert result.ok, result


def test_what_the_kernel_sends_in_one_cell_is_bounded(kernel, monkeypatch):
    """E4: an answer whose `.shape` yields views of one big tensor, each sent as a new tensor."""
    from course_grader.grading.checker import link

    monkeypatch.setattr(link, "_MAX_RECEIVED", 8 << 20)
    answer = "BIG = torch.zeros(1 << 19)\ndef shape_of(n):\n    return (BIG[:] for _ in range(n))\n"
    result = _check(kernel, answer, "kept = [t for t in shape_of(40)]\n")
    assert not result.ok and "MiB in one test cell" in result.evalue, result
    assert _check(kernel, answer, "kept = [t for t in shape_of(2)]\n").ok


def test_names_the_test_cell_binds_itself_are_never_asked_for():
    """E2: the kernel learnt every hidden identifier from the checker's lookup request."""
    import ast

    from course_grader.grading.checker.checker import _names_used

    source = ("from course_utils.checks import check\ns_copy = torch.randn(3)\ncheck(f(s_copy) is not None, 'm')\n"
              "model = model.eval()\nys = [t * 2 for t in X_train]\ndef helper(arg):\n    return arg + W\n"
              "few = {seed: g(seed) for seed, _ in pairs}\ntry:\n    g(0)\nexcept ValueError as error:\n    print(error)\n")
    # (third blind red team: comprehension and except-as variables of hidden tests were asked for by name)
    assert _names_used(ast.parse(source)) == ["W", "X_train", "f", "g", "model", "pairs", "torch"]


def test_a_lent_object_leads_to_no_frame_module_or_builtin_of_the_checker(kernel, tmp_path):
    """Blind red team, issue 33: a module the tests lend by callback reached the checker's frames through
    ``module.parameters().gi_frame.f_globals`` and ran ``os.system`` as the grader. Nothing the checker
    lends leads to a frame, code object, module or builtin function: generators come back as lists and
    private/frame attributes are refused."""
    marker = tmp_path / "PWNED"
    answer = ("def spy(module):\n"
              "    found = []\n"
              "    for attempt in (\n"
              "        lambda: getattr(getattr(module.parameters(), 'gi_' + 'frame'), 'f_' + 'globals')['inspect'].os,\n"
              "        lambda: getattr(module, '_' + 'parameters'),\n"
              "        lambda: getattr(module.forward, 'func_' + 'globals'),\n"
              "    ):\n"
              "        try:\n"
              "            got = attempt()\n"
              f"            got.system('touch {marker}')\n"
              "            found.append('reached')\n"
              "        except Exception as error:\n"
              "            found.append(type(error).__name__)\n"
              "    return len(list(module.parameters())), found\n")
    test = ("### BEGIN HIDDEN TESTS\n"
            "class Lent(torch.nn.Module):\n"
            "    def __init__(self):\n        super().__init__()\n        self.w = torch.nn.Parameter(torch.ones(2))\n"
            "    def forward(self, x):\n        return x * self.w\n"
            "n, found = spy(Lent())\n"
            "check(n == 1, 'parameters() still works through the stand-in')\n"
            "check('reached' not in found, f'reached: {found}')\n"
            "### END HIDDEN TESTS\n")
    result = _check(kernel, answer, test)
    assert not marker.exists(), "the kernel ran a command in the checker"
    assert result.ok, result.evalue


# ------------------------------------------------------------------------------ checker processes


def test_forked_checkers_share_no_state(kernel):
    """Issue 39: checkers are forked from one warm fork server per grading process. What one checker's
    tests leave behind (a module attribute, torch's default dtype, the random state, a builtin) is not
    in the next checker, as with a fresh `python -m` per notebook; a checker that runs past its limit is
    replaced by a fresh fork."""
    from course_grader.grading.checker import CheckerProcess
    from course_grader.grading.checker.process import _fork_server

    run, info = kernel
    run("import torch\n" + RIGHT)
    plant = ("import builtins, course_utils.checks as c\nc.PLANTED = 1\nbuiltins.PLANTED = 1\n"
             "torch.set_default_dtype(torch.float64)\ntorch.manual_seed(1234)\ncheck(count_parameters(torch.nn.Linear(3, 2)) == 8, 'x')\n")
    clean = ("import builtins, course_utils.checks as c\n"
             "check(not hasattr(c, 'PLANTED') and not hasattr(builtins, 'PLANTED'), 'a module attribute carried over')\n"
             "check(torch.get_default_dtype() == torch.float32, 'the default dtype carried over')\n")
    first, second = CheckerProcess(), CheckerProcess()
    try:
        first.wait_started()
        second.wait_started()
        assert first.pid is not None and second.pid is not None and first.pid != second.pid, "not forked"
        server = _fork_server()
        assert server is not None
        assert first.check(info, plant, timeout=30).ok
        assert first.check(info, clean, timeout=30).ok is False, "the planted state is visible in its own checker"
        result = second.check(info, clean, timeout=30)
        assert result.ok, result
    finally:
        first.close()
        second.close()
    deadline = time.monotonic() + 10
    while _running(first.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _running(first.pid), "a closed checker is still running"


def test_a_checker_imports_its_notebooks_prelude_before_the_first_test_cell(kernel):
    """Issue 39: a checker started with the notebook's imports runs them while the kernel starts (11's
    first test cell paid 2 s of imports: datasets, matplotlib). Without the prelude the module is not there."""
    from course_grader.grading.checker import CheckerProcess

    _, info = kernel
    probe = "import sys\ncheck('wave' in sys.modules, 'the prelude was not imported before the first test cell')\n"
    warmed, cold = CheckerProcess(prelude="import wave"), CheckerProcess()
    try:
        assert warmed.check(info, probe, timeout=30).ok
        assert cold.check(info, probe, timeout=30).ok is False
    finally:
        warmed.close()
        cold.close()


def test_tensors_in_keeps_order_and_reads_a_table_of_plain_values_without_a_call_per_item():
    """Issue 39: 11's hidden test calls merge_word with SmolLM2's 49,152 ranks; walking the table one
    Python call per item (three times a call, under own_work's profile hook) cost 12 s of a 18 s cell."""
    a, b, c = torch.zeros(1), torch.ones(2), torch.ones(3)
    found = tensors_in([a, {"x": (1, b), "y": "s"}, [[c]], 5, None])
    assert [id(t) for t in found] == [id(a), id(b), id(c)]
    table = {(str(i), str(i + 1)): i for i in range(50_000)}
    calls: list[str] = []
    sys.setprofile(lambda frame, event, arg: calls.append(event) if event == "call" else None)
    try:
        found = tensors_in(([table, ["a"] * 1_000], {"ranks": table}))
    finally:
        sys.setprofile(None)
    assert found == [] and len(calls) < 20, f"{len(calls)} Python calls to look through two plain tables"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_strides_cannot_amplify_what_the_kernel_sends():
    """Red team (second pass): a small tensor sent with huge strides made the checker allocate a
    storage that spans them (1 MiB of data, 1 GiB here). Such a layout arrives contiguous; transposed,
    sliced and expanded ones keep their strides."""
    t = torch.arange(12.0).reshape(3, 4)
    payload = wire.encode(t, lambda o: pytest.fail("no handle"))
    payload["$tensor"]["stride"] = [1 << 30, 1 << 20]
    back = wire.decode(payload, lambda tag: pytest.fail("no tag"))
    assert torch.equal(back, t) and back.is_contiguous()
    assert back.untyped_storage().nbytes() == t.numel() * t.element_size()
    for view in (t.t(), t[:, ::2], t[:1].expand(5, 4)):
        same = _roundtrip(view)
        assert torch.equal(same, view) and same.stride() == view.stride()


RNG_ANSWER = '''
def poison(x):
    import struct
    raw = bytearray(torch.get_rng_state().numpy().tobytes())
    struct.pack_into("<QiiQ", raw, 0, 0, 1, 1, 0)  # seeded, one left, then an all-zero Mersenne state:
    raw[24:] = bytes(len(raw) - 24)                # every draw after it is zero
    torch.set_rng_state(torch.frombuffer(raw, dtype=torch.uint8).clone())
    return x

def draw(n):
    return torch.rand(n)

def noisy_with(x, generator=None):
    return x + torch.rand(x.shape)  # ignores the generator: draws from the global one
'''


def test_the_kernel_cannot_set_the_tests_random_state(kernel):
    """Second blind red team: the checker adopted the random state every reply carried, so a crafted
    state made the tests' own torch.randn return zeros. Now the tests' draws never take the kernel's
    state, while the kernel's calls still behave as in one process: two calls draw differently, a
    seeded call repeats, and a call that draws from the global generator is still seen doing so."""
    test = ("a, b = draw(4), draw(4)\ncheck(not torch.equal(a, b), 'two calls drew the same numbers')\n"
            "torch.manual_seed(3)\na = draw(4)\ntorch.manual_seed(3)\nb = draw(4)\n"
            "check(torch.equal(a, b), 'a seeded call did not repeat')\n"
            "poison(torch.ones(2))\nz = torch.randn(1000)\ncheck(z.abs().sum() > 100, 'the tests drew zeros')\n")
    run, info = kernel
    run("import torch\nfrom course_utils.checks import *\n" + RNG_ANSWER)
    try:
        result = check_cell(info, test, timeout=60)  # (the kernel itself would draw zeros after poison)
        assert result.ok, result
        result = check_cell(info, "check_generator(noisy_with, torch.zeros(3), name='noisy_with')\n", timeout=60)
        assert not result.ok and "global random generator" in result.evalue, result
    finally:
        run("torch.manual_seed(0)")


def test_the_grading_process_starts_checkers_without_importing_torch():
    """nbgrader's process (SandboxedExecute, the runner) starts checkers and reads their verdicts but never runs
    one: it must not pay for torch (about a second of every `course grade`); the fork server imports the checker
    with torch once, before its first fork."""
    import subprocess

    code = ("import sys; import course_grader.grading.runner, course_grader.sandbox.execute, course_grader.grading.checker;"
            "from course_grader.grading.checker import CheckerProcess, CheckResult, grade_test_cell, prelude_from_source;"
            "print('torch' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stdout + done.stderr
    preloaded = subprocess.run([sys.executable, "-c", "import sys; from course_grader.grading.checker import process; "
                                "process._preload(); print('course_grader.grading.checker.checker' in sys.modules)"],
                               capture_output=True, text=True, timeout=120)
    assert preloaded.stdout.strip() == "True", preloaded.stdout + preloaded.stderr
