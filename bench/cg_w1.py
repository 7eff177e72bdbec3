"""W1 of N runs, run the same way every time, for callgrind:
``python -m bench.cg_w1 N on|off|nothing|memread|jsonl|sqlite``.

Instructions per W1 run = (I(600) - I(200)) / 400, each total from the ``summary:``
line of callgrind's output file::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.600.on \\
        python -m bench.cg_w1 600 on

and the same with 200, and with ``off`` (no sink) or ``nothing`` (a sink that takes
each entry's fields and keeps nothing: what the recorders cost, without the sink).

The run is the same every time (:func:`run_fixed`): trio's scheduler shuffles its
run queue with its own random generator, which is seeded here, and the run's clock
is a :class:`trio.testing.MockClock` that never moves, so that no path depends on
time (under valgrind, a 10 ms wait passes every few hundred tasks' steps). Two runs
of the same code then count the same instructions, to the instruction; without
this they differed by up to ~25,000 per W1 run, more on a loaded machine.
"""

from __future__ import annotations

import gc
import os
import sys
import tempfile
from collections.abc import Awaitable, Callable
from typing import Any

import trio
import trio.testing

from ledger import JsonlSink, MemorySink, SqliteSink

from .audit_cost import w1_body
from .audit_parts import _Nothing


def _none() -> None:
    return None


def _file(suffix: str) -> str:
    # A new ledger file in a new directory (removed with the process's temp files).
    return os.path.join(tempfile.mkdtemp(prefix="cg_w1-"), f"w1.{suffix}")


#: The sinks of the modes, by name (``jsonl`` and ``sqlite``: a new file each).
SINKS: dict[str, Callable[[], Any]] = {
    "on": MemorySink, "off": _none, "nothing": _Nothing,
    "jsonl": lambda: JsonlSink(_file("jsonl")),
    "sqlite": lambda: SqliteSink(_file("db")),
}


def run_fixed(body: Callable[[], Awaitable[int]]) -> int:
    """``trio.run(body)`` with trio's scheduler seeded and a clock that never moves.

    The seed is set on trio's private random generator (``trio._core._run._r``);
    on a trio without it the run is only as repeatable as trio makes it.
    """
    shuffler = getattr(getattr(trio, "_core", None), "_run", None)
    generator = getattr(shuffler, "_r", None)
    if generator is not None:
        generator.seed(0)
    gc.collect()  # as bench.audit_cost times W1: the imports' objects collected first
    return trio.run(body, clock=trio.testing.MockClock())


def main(argv: list[str]) -> None:
    modes = (*SINKS, "memread")
    if len(argv) != 2 or argv[1] not in modes:
        raise SystemExit(f"usage: python -m bench.cg_w1 N {'|'.join(modes)}")
    if argv[1] != "memread":
        run_fixed(w1_body(int(argv[0]), SINKS[argv[1]]))
        return
    sink = MemorySink()  # memread: a MemorySink whose entries are read after the run
    run_fixed(w1_body(int(argv[0]), lambda: sink))
    assert len(sink.entries) == 10 * int(argv[0])


if __name__ == "__main__":
    main(sys.argv[1:])
