"""W1 audited to each stock sink: the files the durable sinks write, one per repetition."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

from ledger import JsonlSink, Sink, SqliteSink

from ._timing import Body
from ._workloads import w1_pool

#: The sinks W1 is audited to, by the name the report gives them.
SINKS = ("memory, entries read", "jsonl", "jsonl fsync", "sqlite")


def files(directory: str, suffix: str) -> Callable[[], str]:
    """A function returning a new file name in ``directory`` each call."""
    numbers: Iterator[int] = itertools.count()
    return lambda: os.path.join(directory, f"w1-{next(numbers)}.{suffix}")


def w1_bodies(runs: int, directory: str) -> dict[str, Body]:
    """W1 of ``runs`` runs audited to each sink of :data:`SINKS` (a new file in
    ``directory`` for each repetition of a file sink), and with no audit (``"none"``)."""
    jsonl, synced, sqlite = (files(directory, s) for s in ("jsonl", "fsync.jsonl", "db"))
    makers: dict[str, Callable[[], Sink]] = {
        "jsonl": lambda: JsonlSink(jsonl()),
        "jsonl fsync": lambda: JsonlSink(synced(), fsync=True),
        "sqlite": lambda: SqliteSink(sqlite()),
    }
    bodies = {"none": w1_pool(runs, audit=False)}
    bodies["memory, entries read"] = w1_pool(runs, read=True)
    for name, make in makers.items():
        bodies[name] = w1_pool(runs, sink=make)
    return bodies

