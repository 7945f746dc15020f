"""A variant per student: an exercise's shapes, constants and seeds, drawn from a secret seed.

Each (student, assignment) has a seed, ``HMAC-SHA256(course secret, [student, assignment, reroll])``
(:func:`student_seed`; the grader stores it in the gradebook). An exercise's parameters are drawn
from that seed by name and by *domain*: ``"visible"`` (the release shows them; the visible tests use
them) or ``"hidden"`` (only the trusted checker ever computes them). Each domain is its own HMAC of
the seed, so a visible value says nothing about a hidden one, and the student's notebook never
holds the seed itself, only its visible parameters.

Where each side gets its parameters (:func:`draw`):

- the checker: from the seed the grader puts in its environment (``COURSE_VARIANT_SEED``), never
  from the notebook or the kernel;
- the student's kernel: the visible parameters its release carries (a generated cell calls
  :func:`use`); the hidden ones are never there;
- with no variant (no seed, no release parameters): every exercise's defaults, the values the
  course was written with, so a release without ``--variants`` is exactly the course as it was.

Draws use ``hmac``/``hashlib`` only (never ``hash()`` or :mod:`random`): the same seed gives the
same parameters in every process and every Python version.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import os
from types import SimpleNamespace
from typing import Any, Mapping, Sequence

__all__ = ["DOMAINS", "ENV_SEED", "SPECS", "TABLE_FILE", "Variant", "describe", "draw", "parameters", "student_seed",
           "use", "use_own", "visible_parameters"]

TABLE_FILE = "variants.json"  # an exchange's variant release: every student's visible parameters (use_own)
ENV_SEED = "COURSE_VARIANT_SEED"  # the checker's environment: the graded (student, assignment)'s seed, hex
DOMAINS = ("visible", "hidden")
_SEEDS = range(1, 2**31 - 1)  # a torch.manual_seed for the tests' inputs

# SPECS[assignment][exercise][domain][parameter] = (default, choices). The default is what the course
# was written with; the choices are what a variant draws from (uniformly).
SPECS: dict[str, dict[str, dict[str, dict[str, tuple[Any, Sequence[Any]]]]]] = {
    "03_self_attention": {
        "scaled_scores": {
            "visible": {"seed": (1, _SEEDS), "T_q": (4, range(2, 10)), "T_k": (6, range(2, 10)),
                        "d": (8, (4, 6, 8, 12, 16))},
            "hidden": {"seed": (2, _SEEDS), "B": (2, (1, 2, 3)), "heads": (3, (1, 2, 3, 4)),
                       "T_q": (5, range(2, 10)), "T_k": (7, range(2, 10)), "d": (16, (4, 9, 16, 25, 32, 36))},
        },
        "attention": {
            "visible": {},
            "hidden": {"B": (2, (1, 2, 3)), "heads": (4, (1, 2, 3, 4, 5)), "T_q": (6, range(2, 10)),
                       "T_k": (6, range(2, 10)), "d": (16, (4, 9, 16, 25, 32)), "d_v": (16, (3, 5, 8, 16))},
        },
        "self_attention_module": {
            "visible": {},
            "hidden": {"d_model": (8, (4, 6, 8, 10, 12, 16)), "d_head": (8, (3, 4, 5, 6, 8)),
                       "d_small": (4, (2, 3, 4, 5)), "B": (3, (2, 3, 4)), "T": (7, range(3, 10))},
        },
    },
    "10_gpt": {
        "top_k_filter": {
            "visible": {},
            "hidden": {"seed": (3, _SEEDS), "B": (3, (2, 3, 4)), "T": (5, range(3, 9)), "V": (20, range(12, 41)),
                       "k": (7, range(2, 12))},
        },
        "top_p_filter": {
            "visible": {},
            "hidden": {"seed": (4, _SEEDS), "B": (3, (2, 3, 4)), "T": (6, range(3, 9)), "V": (30, range(16, 41)),
                       "p_low": (0.5, (0.3, 0.4, 0.5, 0.6)), "p_high": (0.9, (0.75, 0.8, 0.85, 0.9, 0.95))},
        },
    },
    "05_masking": {
        # lengths longer than T are cut to T by the tests
        "padding_mask": {
            "visible": {},
            "hidden": {"T": (4, range(3, 9)), "lengths": ((0, 4, 2), tuple(itertools.product(range(9), repeat=3)))},
        },
        "combined_mask": {
            "visible": {},
            "hidden": {"T": (6, range(4, 9)), "lengths": ((2, 6, 4, 6), tuple(itertools.product(range(1, 9), repeat=4)))},
        },
        "safe_masked_softmax": {
            "visible": {},
            "hidden": {"B": (2, (2, 3)), "heads": (4, (2, 3, 4, 5)), "T_q": (5, range(3, 8)), "T_k": (6, range(2, 9)),
                       "scale": (30.0, (10.0, 20.0, 30.0, 40.0))},
        },
    },
}

_RELEASED: dict[str, dict[str, dict[str, Any]]] = {}  # the kernel's visible parameters, set by use()


class Variant(SimpleNamespace):
    """One exercise's parameters, by attribute (``v.T_q``) or as a dict (``v.as_dict()``)."""

    def as_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def student_seed(secret: bytes, student: str, assignment: str, reroll: int = 0) -> str:
    """The seed of ``student``'s variant of ``assignment`` (hex): HMAC-SHA256 of the course secret
    over the JSON list ``[student, assignment, reroll]`` (unambiguous whatever the names hold)."""
    message = json.dumps([student, assignment, int(reroll)]).encode()
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def _spec(assignment: str, exercise: str, domain: str) -> dict[str, tuple[Any, Sequence[Any]]]:
    if domain not in DOMAINS:
        raise ValueError(f"domain must be one of {DOMAINS}, not {domain!r}")
    try:
        return SPECS[assignment][exercise][domain]
    except KeyError:
        raise KeyError(f"no variant parameters for {assignment}/{exercise}") from None


def parameters(seed: str | None, assignment: str, exercise: str, domain: str) -> dict[str, Any]:
    """``exercise``'s parameters in ``domain`` for ``seed`` (hex); the defaults when ``seed`` is None.

    Each parameter is its own HMAC of the domain's key, so adding a parameter changes no other."""
    spec = _spec(assignment, exercise, domain)
    if seed is None:
        return {name: default for name, (default, _) in spec.items()}
    key = hmac.new(bytes.fromhex(seed), json.dumps([domain, assignment, exercise]).encode(), hashlib.sha256).digest()
    drawn = {}
    for name, (_, choices) in spec.items():
        index = int.from_bytes(hmac.new(key, name.encode(), hashlib.sha256).digest()[:8], "big") % len(choices)
        drawn[name] = choices[index]
    return drawn


def visible_parameters(seed: str | None, assignment: str) -> dict[str, dict[str, Any]]:
    """Every exercise's visible parameters of ``assignment``: what a student's release carries."""
    return {exercise: parameters(seed, assignment, exercise, "visible") for exercise in SPECS.get(assignment, {})}


def use(assignment: str, visible: Mapping[str, Mapping[str, Any]]) -> None:
    """The release's visible parameters, for this kernel's :func:`draw` (the generated cell calls it)."""
    _RELEASED[assignment] = {str(k): dict(v) for k, v in visible.items()}


def describe(visible: Mapping[str, Mapping[str, Any]]) -> str:
    """One line for a student's visible parameters (``exercise: name=value, ...; ...``)."""
    lines = [f"{exercise}: " + ", ".join(f"{k}={v}" for k, v in sorted(values.items()))
             for exercise, values in sorted(visible.items()) if values]
    return "; ".join(lines) or "the course's own visible tests"


def use_own(assignment: str, folder: str | os.PathLike[str] = ".", student: str | None = None) -> str:
    """The release for an exchange (one folder for the whole class, as nbgrader and ngshare release):
    the visible parameters of ``student`` (default: the hub's ``JUPYTERHUB_USER``, else ``USER``) from
    the class's table (``folder/variants.json``, ``{"students": {student: visible}}``), for :func:`use`.
    Visible parameters only (never a seed, never a hidden one): another student's say nothing of
    theirs. Returns a line saying which parameters this kernel uses; the course's own when the table
    or the student is not there (a graded copy, a student added after the release)."""
    student = student or os.environ.get("JUPYTERHUB_USER") or os.environ.get("USER") or ""
    path = os.path.join(folder, TABLE_FILE)
    try:
        with open(path, encoding="utf-8") as handle:
            table = json.load(handle)["students"]
    except (OSError, ValueError, KeyError, TypeError):
        return f"no {TABLE_FILE} beside this notebook: the course's own visible parameters"
    if student not in table:
        return f"{student or 'this user'} has no variant in {TABLE_FILE}: the course's own visible parameters"
    use(assignment, table[student])
    return f"your variant ({student}): {describe(table[student])}"


def draw(assignment: str, exercise: str, domain: str = "visible") -> Variant:
    """``exercise``'s parameters in ``domain``, where they may be known here (see the module docstring).

    With ``COURSE_VARIANT_SEED`` set (the checker), computed from it; otherwise the visible ones the
    release carries (:func:`use`), and the defaults for the rest."""
    seed = os.environ.get(ENV_SEED) or None
    if seed is not None:
        return Variant(**parameters(seed, assignment, exercise, domain))
    chosen = parameters(None, assignment, exercise, domain)
    if domain == "visible":
        released = _RELEASED.get(assignment, {}).get(exercise, {})
        chosen.update({k: v for k, v in released.items() if k in chosen})
    return Variant(**chosen)
