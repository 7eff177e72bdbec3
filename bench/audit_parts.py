"""Where the audit's wall time goes in W1: ``python -m bench.audit_parts [--repeat N]``.

W1 (2,000 runs) with sinks that do less and less of what ``MemorySink`` does, each
taking a run's entries through ``record_fields_nowait``, interleaved, medians:

- ``memory``: ``ledger.MemorySink`` itself;
- ``data check``: its check of ``data`` (the same loop), then its store;
- ``store``: its store (the fields, a copy of the data and the time appended to its
  list) alone;
- ``append``: the fields appended to a plain list;
- ``nothing``: a sink that takes the fields and keeps nothing;
- ``off``: no sink.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from math import isfinite
from types import MappingProxyType
from typing import Any

from ledger import MemorySink
from ledger._memory import _INT_MAX, _INT_MIN

from .audit_cost import _w1


def _store(sink: MemorySink, *fields: Any) -> None:
    # MemorySink's store, without its checks (its private list: the fields, the
    # data copied, the time).
    data = fields[12]
    sink._pending += (*fields[:12], data.copy() if data else None, time.time_ns())


class _Store(MemorySink):
    def record_fields_nowait(self, *fields: Any) -> None:
        _store(self, *fields)


class _DataCheck(MemorySink):
    def record_fields_nowait(self, *fields: Any) -> None:
        data = fields[12]
        if type(data) is dict or type(data) is MappingProxyType:
            size = 0
            for key, value in data.items():
                kind = type(value)
                if type(key) is not str:
                    raise TypeError(key)
                if kind is str:
                    size += len(value)
                elif kind is int:
                    if not _INT_MIN < value < _INT_MAX:
                        raise ValueError(value)
                elif kind is float:
                    if not isfinite(value):
                        raise ValueError(value)
                elif kind is not bool and value is not None:
                    raise TypeError(value)
        _store(self, *fields)


class _Nothing:
    def record_fields_nowait(self, *fields: Any) -> None:
        pass

    async def record(self, record: Any) -> None:
        pass

    async def aclose(self) -> None:
        pass


class _Append(_Nothing):
    def __init__(self) -> None:
        self.items: list[Any] = []

    def record_fields_nowait(self, *fields: Any) -> None:
        self.items += fields
        self.items.append(time.time_ns())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.audit_parts")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (median kept)")
    parser.add_argument("--runs", type=int, default=2000, help="W1 runs per case")
    args = parser.parse_args()
    cases: dict[str, Any] = {
        "memory": MemorySink, "data check": _DataCheck, "store": _Store,
        "append": _Append, "nothing": _Nothing, "off": lambda: None,
    }
    walls: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, make in cases.items():
            walls[name].append(_w1(args.runs, make)[0])
    print(f"W1, {args.runs} runs, medians of {args.repeat} interleaved rounds; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    off = statistics.median(walls["off"])
    for name, values in walls.items():
        wall = statistics.median(values)
        print(f"  {name:<12} {wall:8.1f} us/run  (+{wall - off:5.1f} over off)")


if __name__ == "__main__":
    main()
