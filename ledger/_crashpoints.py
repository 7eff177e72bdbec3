"""Crash points: the durable writes of ``ledger`` and ``subagent`` numbered through one
counter, and a test-only switch that ends the process with ``os._exit`` (as SIGKILL
would: no cleanup, no flush of anything but what the kernel already holds) right
before or right after write *k*.

The durable writes: a ``JsonlSink`` group write, a ``SqliteSink`` transaction, a
``SqliteCheckpoints`` transaction (checkpoints, resume claims and their undoing), the
schema each SQLite file is created with, and a paused-run file's temporary copy and
renames (``subagent._cli._statefile``). Each calls :func:`before` and :func:`after` around
its write, only when :data:`ON` is true: off (the default), a durable write costs one
module attribute test. Not checkpoints; safe from any thread.

The switch: :func:`arm` in the process (a forked child before it runs anything), or
``SUBAGENT_CRASHPOINTS`` in its environment, read once when this module is imported:
``before:K`` or ``after:K`` (K counted from 1), optionally followed by ``:TRACE``, a
file to which each write appends ``K LABEL``; ``count:TRACE`` only numbers and traces.

Armed, a ``SqliteCheckpoints`` commits each write in a transaction of its own, so that
a tree's points do not depend on its tasks' timing; armed with ``grouped=True``
(:data:`GROUPED`), it takes the path production takes, group commit, made
deterministic instead: a transaction holds every write handed over until the
process's trio tasks are all blocked (each write the tasks runnable then make joins
it), so writes of concurrent tasks share one point.
"""

from __future__ import annotations

import os
import threading

#: The exit status of a process ended at its crash point.
CRASH_EXIT = 86
#: The environment variable read at import (see the module's docstring).
ENV = "SUBAGENT_CRASHPOINTS"

#: Whether durable writes are numbered at all (tested at each write).
ON = False
#: Whether a ``SqliteCheckpoints`` groups writes (see the module's docstring).
GROUPED = False

_lock = threading.Lock()
_count = 0
_at = 0
_when = ""
_trace: int | None = None


def arm(at: int = 0, when: str = "before", trace: str | None = None, *,
        grouped: bool = False) -> None:
    """Number this process's durable writes from 1 again and, ``at`` > 0, end the
    process (``os._exit(CRASH_EXIT)``) right ``when`` (``"before"`` or ``"after"``)
    write number ``at``; append ``K LABEL`` lines to ``trace`` if given. ``grouped``:
    checkpoint writes of concurrent tasks share transactions (:data:`GROUPED`)."""
    global ON, GROUPED, _count, _at, _when, _trace
    if when not in ("before", "after"):
        raise ValueError(f"when must be 'before' or 'after', not {when!r}")
    with _lock:
        if _trace is not None:
            os.close(_trace)
        _trace = None if trace is None else os.open(
            trace, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        _count, _at, _when = 0, at, when
        ON, GROUPED = True, grouped


def disarm() -> None:
    """Stop numbering (the default state)."""
    global ON, GROUPED, _trace
    with _lock:
        ON = GROUPED = False
        if _trace is not None:
            os.close(_trace)
            _trace = None


def count() -> int:
    """How many durable writes began since :func:`arm`."""
    return _count


def before(label: str) -> int:
    """Number a durable write about to be made (``label`` says what it is) and return
    its number; the switch may end the process here, the write not made."""
    global _count
    with _lock:
        _count += 1
        k = _count
        if _trace is not None:
            os.write(_trace, f"{k} {label}\n".encode("utf-8", "replace"))
        if k == _at and _when == "before":
            os._exit(CRASH_EXIT)
    return k


def after(k: int) -> None:
    """Write ``k`` (from :func:`before`) is made; the switch may end the process here."""
    if k == _at and _when == "after":
        with _lock:
            os._exit(CRASH_EXIT)


def _from_environment() -> None:
    spec = os.environ.get(ENV)
    if not spec:
        return
    mode, _, rest = spec.partition(":")
    if mode == "count":
        arm(0, "before", rest or None)
        return
    number, _, trace = rest.partition(":")
    arm(int(number), mode, trace or None)


_from_environment()
