"""Bytecodes a W1 run dispatches, audit on, off and with a sink that keeps nothing:
``python -m bench.opcodes [--runs N] [--top N]``.

Each case runs W1 (N runs, then 2N runs) the same way every time
(:func:`bench.cg_w1.run_fixed`) under a ``sys.settrace`` function that counts every
opcode event, per function; per run is the difference over N. It prints the opcodes
per run of each case, the ratios, and the functions whose counts differ most between
the cases.

Why count bytecodes as well as instructions: CPython's interpreter pays for each
bytecode it dispatches (an indirect branch, hard to predict), whatever that bytecode
does. The audit's code is mostly cheap bytecodes (type checks, loads of fields), so
its share of the bytecodes is larger than its share of the instructions: on
2026-11-27, audit on / off was 1.143x in instructions (``bench.cg_w1``) and 1.208x in
bytecodes, and the wall ratio (1.18-1.20x) lay between the two. Tracing slows the run
down about a hundredfold, but the counts do not depend on speed or load.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from types import FrameType
from typing import Any

from .audit_cost import w1_body
from .cg_w1 import SINKS, run_fixed


def count(runs: int, case: str) -> Counter[str]:
    """Opcodes dispatched by a fixed W1 run of ``runs`` runs, by function
    (``package/module.py:name``)."""
    counts: Counter[str] = Counter()

    def trace(frame: FrameType, event: str, arg: Any) -> Any:
        frame.f_trace_opcodes = True
        frame.f_trace_lines = False
        code = frame.f_code
        key = "/".join(code.co_filename.split("/")[-2:]) + ":" + code.co_name

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "opcode":
                counts[key] += 1
            return local

        return local

    body = w1_body(runs, SINKS[case])
    sys.settrace(trace)
    try:
        run_fixed(body)
    finally:
        sys.settrace(None)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.opcodes")
    parser.add_argument("--runs", type=int, default=50, help="N: each case runs N and 2N runs")
    parser.add_argument("--top", type=int, default=12, help="functions listed")
    args = parser.parse_args()
    runs = args.runs
    # Per run: what 2N runs dispatch over N runs (the pool's setup and exit cancel out).
    cases = {
        case: count(2 * runs, case) - count(runs, case) for case in ("off", "nothing", "on")
    }
    per_run = {case: sum(counts.values()) / runs for case, counts in cases.items()}
    print(f"W1, bytecodes dispatched per run ({2 * runs} runs less {runs} runs):")
    for case, value in per_run.items():
        print(f"  {case:<8} {value:9,.0f}  ({value / per_run['off']:.3f}x off)")
    off, nothing, on = cases["off"], cases["nothing"], cases["on"]
    print("most different functions (per run): recorders (nothing - off), sink (on - nothing)")
    names = sorted(
        set(off) | set(nothing) | set(on),
        key=lambda name: -(abs(nothing[name] - off[name]) + abs(on[name] - nothing[name])),
    )
    for name in names[: args.top]:
        recorders = (nothing[name] - off[name]) / runs
        print(f"  {recorders:+8.1f} {(on[name] - nothing[name]) / runs:+8.1f}  {name}")


if __name__ == "__main__":
    main()
