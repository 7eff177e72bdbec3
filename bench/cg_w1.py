"""One W1 run of N tasks for callgrind: ``python -m bench.cg_w1 N on|off``.

Instructions per W1 run = (I(600) - I(200)) / 400, each total from the ``summary:``
line of callgrind's output file::

    PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.600.on \\
        python -m bench.cg_w1 600 on

and the same with 200 and ``off``. Repeat it: trio shuffles its run queue, so two
runs of the same code differ by up to ~25,000 instructions per run.
"""

from __future__ import annotations

import sys

from ledger import MemorySink

from .audit_cost import _w1


def _none() -> None:
    return None


def main(argv: list[str]) -> None:
    runs, mode = int(argv[0]), argv[1]
    if mode not in ("on", "off"):
        raise SystemExit("usage: python -m bench.cg_w1 N on|off")
    _w1(runs, MemorySink if mode == "on" else _none)


if __name__ == "__main__":
    main(sys.argv[1:])
