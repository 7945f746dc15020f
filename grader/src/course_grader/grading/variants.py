"""Per-student variant seeds, kept in the gradebook, and the checker's environment that carries one.

A seed (:func:`course_utils.variants.student_seed`) is derived from the course secret and stored in
a side table of nbgrader's gradebook database, ``course_variant`` (nbgrader's schema has no place for
it; the table lives in the same database, sqlite or PostgreSQL, and is copied with an assignment's
definition). One row per (student, assignment, reroll), with who made it and when; the row with the
highest reroll is the student's current variant. Grading reads it here and hands it to the checker
process only (:func:`checker_environment`); the student's kernel never sees it.

The course secret: ``COURSE_VARIANT_SECRET`` when set, else the file ``variants.secret`` beside
the course's gradebook, created (mode 0600) the first time a variant is released.
"""

from __future__ import annotations

import datetime
import getpass
import os
import secrets
from pathlib import Path
from typing import Any, Sequence

from course_utils.variants import ENV_SEED, student_seed

__all__ = [
    "SECRET_ENV",
    "assign_variants",
    "checker_environment",
    "copy_variants",
    "course_secret",
    "current_seeds",
    "reroll_variant",
    "variant_history",
    "variant_seed",
]

SECRET_ENV = "COURSE_VARIANT_SECRET"
SECRET_FILE = "variants.secret"
TABLE = "course_variant"


def course_secret(course_dir: Path, *, create: bool = False) -> bytes | None:
    """The course secret (``COURSE_VARIANT_SECRET``, else ``course_dir/variants.secret``); created
    with 32 random bytes when ``create`` and there is none; None when there is none."""
    if os.environ.get(SECRET_ENV):
        return os.environ[SECRET_ENV].encode()
    path = Path(course_dir) / SECRET_FILE
    if not path.is_file():
        if not create:
            return None
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(32) + "\n")
    return path.read_text().strip().encode()


def _table(metadata: Any) -> Any:
    from sqlalchemy import Column, Integer, String, Table

    return Table(TABLE, metadata, Column("id", Integer, primary_key=True, autoincrement=True),
                 Column("student", String(256), nullable=False, index=True),
                 Column("assignment", String(256), nullable=False, index=True),
                 Column("reroll", Integer, nullable=False), Column("seed", String(64), nullable=False),
                 Column("made_by", String(256), nullable=False), Column("made_at", String(40), nullable=False))


def _open(db_url: str, *, create: bool = True) -> tuple[Any, Any]:
    """The engine and the table; ``create``: make the table where there is none (writers only: readers
    that find none have no variant). Parallel graders may create it at the same moment (PostgreSQL
    then refuses the second CREATE): the table that is there is the one."""
    from sqlalchemy import MetaData, create_engine, inspect
    from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError

    engine = create_engine(db_url)
    table = _table(MetaData())
    if create:
        try:
            table.create(engine, checkfirst=True)
        except (IntegrityError, OperationalError, ProgrammingError):
            if not inspect(engine).has_table(TABLE):
                raise
    return engine, table


def _has_table(engine: Any) -> bool:
    from sqlalchemy import inspect

    return bool(inspect(engine).has_table(TABLE))


def variant_history(db_url: str, student: str, assignment: str) -> list[dict[str, Any]]:
    """Every seed ``student`` has had for ``assignment``, first to current (reroll, seed, made_by, made_at)."""
    from sqlalchemy import select

    engine, table = _open(db_url, create=False)
    try:
        if not _has_table(engine):  # no variant was ever made in this gradebook
            return []
        with engine.connect() as connection:
            rows = connection.execute(select(table).where(table.c.student == student, table.c.assignment == assignment)
                                      .order_by(table.c.reroll)).mappings().all()
        return [dict(row) for row in rows]
    finally:
        engine.dispose()


def variant_seed(db_url: str, student: str, assignment: str) -> str | None:
    """``student``'s current seed for ``assignment``; None when they have no variant (the default release)."""
    history = variant_history(db_url, student, assignment)
    return history[-1]["seed"] if history else None


def current_seeds(db_url: str, assignment: str) -> dict[str, str]:
    """Every student's current seed for ``assignment`` (their highest reroll); empty without variants."""
    from sqlalchemy import select

    engine, table = _open(db_url, create=False)
    try:
        if not _has_table(engine):
            return {}
        with engine.connect() as connection:
            rows = connection.execute(select(table.c.student, table.c.seed).where(table.c.assignment == assignment)
                                      .order_by(table.c.reroll)).all()
        return {student: seed for student, seed in rows}  # later rerolls overwrite earlier ones
    finally:
        engine.dispose()


def _insert(db_url: str, rows: list[dict[str, Any]]) -> None:
    engine, table = _open(db_url)
    try:
        with engine.begin() as connection:
            connection.execute(table.insert(), rows)
    finally:
        engine.dispose()


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def assign_variants(db_url: str, secret: bytes, assignment: str, students: Sequence[str],
                    by: str | None = None) -> dict[str, str]:
    """Each student's current seed for ``assignment``, making (reroll 0) and storing those not yet made."""
    seeds, new = {}, []
    for student in students:
        seed = variant_seed(db_url, student, assignment)
        if seed is None:
            seed = student_seed(secret, student, assignment, 0)
            new.append(dict(student=student, assignment=assignment, reroll=0, seed=seed,
                            made_by=by or getpass.getuser(), made_at=_now()))
        seeds[student] = seed
    if new:
        _insert(db_url, new)
    return seeds


def reroll_variant(db_url: str, secret: bytes, assignment: str, student: str, by: str | None = None) -> str:
    """A new variant for ``student`` (the next reroll), recorded with who asked and when; its seed."""
    history = variant_history(db_url, student, assignment)
    reroll = history[-1]["reroll"] + 1 if history else 0
    seed = student_seed(secret, student, assignment, reroll)
    _insert(db_url, [dict(student=student, assignment=assignment, reroll=reroll, seed=seed,
                          made_by=by or getpass.getuser(), made_at=_now())])
    return seed


def copy_variants(source_url: str, target_url: str, assignment: str) -> None:
    """Copy ``assignment``'s variant rows into another gradebook (a parallel or Dask worker's copy)."""
    from sqlalchemy import select

    engine, table = _open(source_url, create=False)
    try:
        if not _has_table(engine):
            return
        with engine.connect() as connection:
            rows = [dict(r) for r in connection.execute(select(table).where(table.c.assignment == assignment)).mappings()]
    finally:
        engine.dispose()
    for row in rows:
        row.pop("id", None)
    if rows:
        _insert(target_url, rows)


def checker_environment(db_url: str | None, student: str | None, assignment: str | None) -> dict[str, str]:
    """What the checker of ``student``'s ``assignment`` gets in its environment: the variant seed, or an
    empty one (the defaults) when there is none. Only ever given to the checker, never to a kernel."""
    seed = None
    if db_url and student and assignment:
        seed = variant_seed(db_url, student, assignment)
    return {ENV_SEED: seed or ""}
