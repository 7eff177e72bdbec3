"""``python -m bench [--quick]``: every workload for subagent and for bare trio, with ratios."""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
from pathlib import Path

from . import _memory, _parked, _peers, _sinks, _w7, _workloads
from ._timing import compare, compare_latency

FULL = {"w1": 2000, "w1t": 2000, "w2": 200_000, "w3": 1000, "w4": 1000, "w5": 500, "w6": 10_000,
        "w7": 500}
QUICK = {"w1": 100, "w1t": 100, "w2": 5_000, "w3": 50, "w4": 20, "w5": 20, "w6": 100, "w7": 20}
# 18,000: the most HTTP/1.1 connections that fit an open-file limit of 20,000 (this
# machine's hard limit); over HTTP/2, 100,000 runs take 1,000 connections.
PARKED_HTTP = {"full": (10_000, 18_000, 100_000), "quick": (100,)}


def _load() -> str:
    try:
        return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:  # pragma: no cover - platforms without getloadavg
        return "load average unknown"


def _parked_http_report(sizes: tuple[int, ...]) -> None:
    protocols = (("HTTP/1.1", _parked.HTTP_CASES), ("HTTP/2", _parked.HTTP2_CASES))
    for runs in sizes:
        for protocol, cases in protocols:
            bare, pool = (_parked.run_case(case, runs) for case in cases)
            head = f"W7 parked over {protocol}, {runs:,} runs"
            if "skipped" in pool:
                print(f"{head}: not measured: {pool['skipped']}")
                continue
            total = {case: int(r["rss_bytes_total"]) for case, r in  # type: ignore[call-overload]
                     (("bare", bare), ("pool", pool))}
            above = (total["pool"] - total["bare"]) / runs
            print(f"{head} in a streamed model call (RSS growth; {pool['connections']:,} "
                  f"connections, open-file limit {pool['fd_limit']}, {pool['server_ports']} "
                  f"server ports): connections alone {total['bare'] / runs / 1024:.1f} KiB/run "
                  f"({total['bare'] / 2**20:,.0f} MiB), pool runs "
                  f"{total['pool'] / runs / 1024:.1f} KiB/run ({total['pool'] / 2**20:,.0f} "
                  f"MiB): {above / 1024:.1f} KiB/run above the connections (target <= 8 KiB)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes, one repeat (for CI)")
    parser.add_argument("--only", default="w1,w1s,w1t,w2,w3,w4,w5,w6",
                        help="comma-separated workloads (w1s: W1 by audit sink; "
                        "w1t: W1-typed; w6: parked-run memory; w7: real HTTP, 8 and 64 "
                        "at once, not run by default; w7parked: runs parked over HTTP/1.1 "
                        "and HTTP/2, 10k, 18k and 100k, not by default; w1otel: W1 traced by "
                        "subagent.otel, needs opentelemetry-sdk)")
    parser.add_argument("--repeat", type=int, help="runs of each case, best kept (default 5)")
    parser.add_argument("--peers", action="store_true",
                        help="W1 and W3 on the peer libraries too (medians, ratios)")
    parser.add_argument("--peers-python", metavar="PATH",
                        help="the python of the peers' venv (default $BENCH_PEERS_PYTHON)")
    parser.add_argument("--peers-dir", metavar="DIR", type=Path, default=_peers.DEFAULT_DIR,
                        help="the peers' scripts (default ../shared/peers from the repository)")
    args = parser.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    repeat = args.repeat or (1 if args.quick else 5)
    if args.peers:
        print(f"python {platform.python_version()} on {platform.machine()}, "
              f"{os.cpu_count()} cores, {_load()}")
        return _peers.main(
            args.peers_python, args.peers_dir, repeat=args.repeat or 3, quick=args.quick,
            print_=print,
        )
    only = set(args.only.split(","))
    print(f"python {platform.python_version()} on {platform.machine()}, "
          f"{os.cpu_count()} cores, {_load()}; best of {repeat}, interleaved")

    if "w1" in only:
        n = sizes["w1"]
        pool, read, off, bare = compare(
            _workloads.w1_pool(n), _workloads.w1_pool(n, read=True),
            _workloads.w1_pool(n, audit=False), _workloads.w1_bare(n), repeat=repeat,
        )
        print(f"W1 fan-out, {n} runs: subagent {pool.per_op_us:.0f} us/run "
              f"(entries read at the end {read.per_op_us:.0f}, "
              f"audit off {off.per_op_us:.0f}: audit on/off {pool.seconds / off.seconds:.2f}x, "
              "target <= 1.15x), "
              f"bare trio {bare.per_op_us:.0f} us/run, ratio {pool.seconds / bare.seconds:.2f}x")
    if "w1s" in only:
        n = sizes["w1"]
        with tempfile.TemporaryDirectory() as directory:
            bodies = _sinks.w1_bodies(n, directory)
            measures = dict(zip(bodies, compare(*bodies.values(), repeat=repeat), strict=True))
        off = measures.pop("none")
        print(f"W1 by audit sink, {n} runs: no audit {off.per_op_us:.0f} us/run; "
              + ", ".join(f"{name} {m.per_op_us:.0f} ({m.seconds / off.seconds:.2f}x)"
                          for name, m in measures.items())
              + " (targets: jsonl <= 1.3x, sqlite <= 1.6x)")
    if "w1otel" in only:
        n = sizes["w1"]
        plain, traced = compare(
            _workloads.w1_pool(n), _workloads.w1_pool(n, otel=True), repeat=repeat
        )
        print(f"W1 traced, {n} runs: subagent {plain.per_op_us:.0f} us/run, "
              f"traced (subagent.otel, SDK, batch processor) {traced.per_op_us:.0f} us/run, "
              f"traced/plain {traced.seconds / plain.seconds:.2f}x")
    if "w1t" in only:
        n = sizes["w1t"]
        untyped, typed = compare(
            _workloads.w1_pool(n), _workloads.w1_typed_pool(n), repeat=repeat
        )
        print(f"W1-typed fan-out, {n} runs (@tool echo, typed output through final_result): "
              f"{typed.per_op_us:.0f} us/run, W1 untyped {untyped.per_op_us:.0f} us/run, "
              f"typed/untyped {typed.seconds / untyped.seconds:.2f}x")
    if "w2" in only:
        n = sizes["w2"]
        stream, chan, fast = compare(
            _workloads.w2_stream(n), _workloads.w2_channel(n), _workloads.w2_channel_nowait(n),
            repeat=repeat,
        )
        print(f"W2 stream, {n} events: Stream {stream.per_second:,.0f}/s, "
              f"trio channel {chan.per_second:,.0f}/s "
              f"({stream.per_second / chan.per_second:.1f}x), "
              f"channel nowait fast path {fast.per_second:,.0f}/s "
              f"({stream.per_second / fast.per_second:.2f}x) (target >= 300,000/s, 5x channel)")
    if "w3" in only:
        n = sizes["w3"]
        pool, bare = compare_latency(_workloads.w3_pool(n), _workloads.w3_bare(n), repeat=repeat)
        print(f"W3 cancel latency, {n} blocked runs: subagent {pool.seconds * 1e3:.1f} ms, "
              f"bare trio {bare.seconds * 1e3:.1f} ms, ratio {pool.seconds / bare.seconds:.2f}x"
              " (target <= 2x)")
    if "w4" in only:
        n = sizes["w4"]
        rows = []
        for kind in ("pool", "bare"):
            small = _memory.peak_rss_kib(kind, n, 200)
            large = _memory.peak_rss_kib(kind, n, 2000)
            rows.append(f"{kind} {small / 1024:.1f} -> {large / 1024:.1f} MiB "
                        f"({(large - small) / small * 100:+.1f}%)")
        print(f"W4 memory, {n} runs x 200 -> 2000 events, slow consumer: "
              + "; ".join(rows) + " (target within 10%)")
    if "w5" in only:
        n = sizes["w5"]
        pool, bare = compare(_workloads.w5_pool(n), _workloads.w5_bare(n), repeat=repeat)
        print(f"W5 nesting, {n} top-level runs x 2 children: "
              f"subagent {pool.per_op_us:.0f} us/top run, "
              f"bare trio {bare.per_op_us:.0f} us/top run, "
              f"ratio {pool.seconds / bare.seconds:.2f}x")
    if "w7" in only:
        _w7.report(sizes["w7"], (8, 64), repeat=repeat, python=None, peers=[], print_=print)
    if "w7parked" in only:
        _parked_http_report(PARKED_HTTP["quick" if args.quick else "full"])
    if "w6" in only:
        n = sizes["w6"]
        sizes_kib = {
            case: int(_parked.run_case(case, n)["rss_bytes_per_run"])  # type: ignore[call-overload]
            for case in _parked.CASES
        }
        print(f"W6 parked runs, {n} blocked in their model call: "
              + ", ".join(f"{case} {size / 1024:.1f} KiB/run" for case, size in sizes_kib.items())
              + " (RSS growth; target <= 5 KiB/run)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
