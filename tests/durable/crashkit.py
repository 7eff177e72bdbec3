"""The crash-point harness: every durable write of a tree's run as a crash point.

For a shape: one run, uncrashed, numbers its durable writes (``N`` points) and gives
the reference (outputs, side effects, tasks). Then for every ``k`` in ``1..N`` and
``before``/``after``: a child process runs the tree and ends itself
(``os._exit``, as SIGKILL would) at write ``k``; a fresh child recovers it (and
resumes what is paused) to the end; the invariants are checked (:func:`check`). With
``pairs``, for every ``k`` (crashed before it) and every write ``j`` of its recovery,
the recovery is crashed at ``j`` too, then recovered again.

Children are forked from this process, which never runs trio itself (it stays one
thread, so forking is safe): run it as its own process, ``python -m
tests.durable.crashkit SHAPE... [--pairs]`` (or :func:`explore` from such a process),
never inside a test process with threads.
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

import attrs
import trio.testing  # noqa: F401  (see below)

import ledger
from ledger import _crashpoints

from .shapes import SHAPES, Shape
from .treekit import Files, drive, note

# trio.testing (and pytest, which it imports) is imported here, once, not by each
# child: the grouped mode's SqliteCheckpoints imports it at its first write
# (``_release_when_blocked``), which cost a child 0.15 s CPU of its 0.19.

#: Seconds a child may run before SIGALRM ends it (a hang is a violation).
CHILD_LIMIT = 30
_MUTATING = ("write", "ask")


def _fork(body: Callable[[], None]) -> int:
    # Run ``body`` in a forked child; its exit code (or -signal).
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: never returns
        code = 1
        try:
            signal.alarm(CHILD_LIMIT)
            body()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@attrs.frozen
class Mode:
    """How the children run a shape."""

    #: Checkpoint writes grouped as production groups them
    #: (``ledger._crashpoints.GROUPED``), rather than one a transaction.
    grouped: bool = False
    #: The driver never knows that the root's submit returned (its ``submitted`` note
    #: ignored): as when the crash, in the writer thread, comes before the driver's
    #: task notes it.
    unacknowledged: bool = False


def phase(shape: Shape, files: Files, name: str, at: int = 0, when: str = "before",
          mode: Mode = Mode()) -> int:
    """Run ``name`` ("run" or "recover") of ``shape`` on ``files`` in a child, crashed
    at write ``at`` (``when``) if > 0, as ``mode`` says; its exit code
    (``CRASH_EXIT`` if it crashed)."""
    submitted = not mode.unacknowledged and files.timeline.exists() and (
        "submitted\n" in files.timeline.read_text())

    def body() -> None:
        import trio

        note(files, f"phase {name} {at} {when}")
        _crashpoints.arm(at, when, str(files.timeline), grouped=mode.grouped)
        trio.run(drive, shape, files, name, submitted)

    return _fork(body)


@attrs.frozen
class Timeline:
    """What a cell's timeline holds."""

    points: list[str]  # trace labels of the last phase read (K LABEL), in order
    effects: collections.Counter[tuple[str, str]]
    outputs: list[str]
    problems: list[str]  # failed / error notes
    again: list[str]
    told: set[str]
    runs: dict[str, str]  # effect key -> run id
    lines: list[str]


def read_timeline(path: Path, phase_index: int | None = None) -> Timeline:
    """The timeline at ``path``; ``points`` of its phase number ``phase_index`` (or
    of all phases)."""
    lines = path.read_text().splitlines()
    points: list[str] = []
    effects: collections.Counter[tuple[str, str]] = collections.Counter()
    outputs: list[str] = []
    problems: list[str] = []
    again: list[str] = []
    told: set[str] = set()
    runs: dict[str, str] = {}
    phases = -1
    for line in lines:
        head, _, rest = line.partition(" ")
        if head == "phase":
            phases += 1
        elif head.isdigit():
            if phase_index is None or phases == phase_index:
                points.append(rest)
        elif head == "effect":
            tool, key, run_id = rest.split(" ")[:3]
            effects[tool, key] += 1
            runs[key] = run_id
        elif head == "output":
            outputs.append(rest)
        elif head in ("failed", "error"):
            problems.append(line)
        elif head == "again":
            again.append(rest)
        elif head == "told":
            told.add(rest)
    return Timeline(points, effects, outputs, problems, again, told, runs, lines)


@attrs.frozen
class Audit:
    """What the ledger says: the tasks (prompt text -> run ids), each run's last end,
    the keys of calls recovered as interrupted, and whether it verifies."""

    tasks: dict[str, set[str]]
    ends: dict[str, str]
    interrupted: set[str]
    verified: str | None
    root_text: str | None


def read_audit(path: Path, root_id: str, told: set[str]) -> Audit:
    """What the ledger at ``path`` says (no ledger: the calls models were ``told``
    are interrupted, and nothing else is known)."""
    if not path.exists():
        return Audit({}, {}, told, None, None)
    report = ledger.verify(path)
    verified = None if report.ok else f"{report.problem} at {report.first_bad}"
    entries = ledger.query(path)
    keys: dict[tuple[str, str], str] = {}
    tasks: dict[str, set[str]] = collections.defaultdict(set)
    ends: dict[str, str] = {}
    interrupted: set[str] = set()
    root_text = None
    for e in entries:
        if e.kind == "tool_request" and e.call_id and e.arguments:
            arguments = json.loads(e.arguments)
            keys[e.run_id or "", e.call_id] = (
                arguments.get("key") or f"delegate {arguments.get('task')}")
        elif e.kind == "prompt" and e.arguments is not None:
            tasks[e.arguments].add(e.run_id or "")
        elif e.kind == "run_end":
            ends[e.run_id or ""] = str(e.data.get("end_reason"))
        elif e.kind == "run_resumed":
            for call_id in str(e.data.get("interrupted") or "").split():
                interrupted.add(keys.get((e.run_id or "", call_id), f"?{call_id}"))
        elif e.kind == "model_response" and e.run_id == root_id:
            root_text = e.result
    return Audit(dict(tasks), ends, interrupted, verified, root_text)


@attrs.frozen
class Reference:
    """The uncrashed run: its point count and labels, and what it did."""

    points: list[str]
    output: str
    effects: collections.Counter[tuple[str, str]]
    audit: Audit
    runs: dict[str, str]


def reference(shape: Shape, folder: Path, mode: Mode = Mode()) -> Reference:
    files = Files(folder)
    folder.mkdir()
    code = phase(shape, files, "run", mode=mode)
    timeline = read_timeline(files.timeline)
    if code != 0 or len(timeline.outputs) != 1:
        raise AssertionError(f"{shape.name}: the uncrashed run failed ({code}): "
                             + "\n".join(timeline.lines[-20:]))
    audit = read_audit(files.ledger, f"{shape.root}/0001", timeline.told)
    return Reference(timeline.points, timeline.outputs[0], timeline.effects, audit,
                     timeline.runs)


def check(shape: Shape, ref: Reference, files: Files) -> tuple[list[str], list[str]]:
    """The violations of a cell whose every phase ran (and the documented windows it
    fell into): same output, each mutating call once (or interrupted, told, at most
    once), each idempotent or read-only call at least once, each task run by exactly
    one run id to the same end, the ledger verified, a second recover() empty."""
    found: list[str] = []
    windows: list[str] = []
    timeline = read_timeline(files.timeline)
    audit = read_audit(files.ledger, f"{shape.root}/0001", timeline.told)
    found += timeline.problems
    output = timeline.outputs[-1] if timeline.outputs else None
    root_id = f"{shape.root}/0001"
    # The points of every phase that crashed (all but the last: a pair's recovery too).
    phases = sum(1 for line in timeline.lines if line.startswith("phase "))
    crashed = [p for i in range(phases - 1) for p in read_timeline(files.timeline, i).points]
    if output is None and f"checkpoints: {root_id} ended" in crashed:
        # Ended before the crash, its caller never told: only the ledger has it.
        windows.append("the root ended before the crash: its output is in the ledger only")
        output = ref.output if shape.ledger == "none" or shape.root in shape.typed else (
            audit.root_text)
    if output != ref.output:
        if (output is not None and "steer" in str(shape.agents)
                and output == ref.output.replace("+steered", "")):
            windows.append("steering sent after the root's last checkpoint was lost")
        else:
            found.append(f"output {output!r}, not {ref.output!r}")
    for (tool, key), _count in ref.effects.items():
        ran = timeline.effects.get((tool, key), 0)
        parent = ref.runs[key].rsplit("/", 2)[0]
        if ran == 0 and f"checkpoints: {parent} ended" in crashed:
            # Its parent had ended at the crash: orphaned, not resumed
            # (docs/guides/crash-recovery.md).
            windows.append("a background child whose parent had ended: orphaned, not resumed")
            continue
        if tool in _MUTATING:
            if ran > 1:
                found.append(f"{tool} {key} ran {ran} times")
            elif key in audit.interrupted and key not in timeline.told:
                found.append(f"{tool} {key} interrupted, its model not told")
            elif ran == 0 and key not in audit.interrupted:
                found.append(f"{tool} {key} never ran (lost)")
        elif ran == 0:
            found.append(f"{tool} {key} never ran (lost)")
        if tool not in _MUTATING and key in audit.interrupted:
            found.append(f"{tool} {key} (idempotent or read-only) answered interrupted")
    for tool, key in timeline.effects.keys() - ref.effects.keys():
        found.append(f"{tool} {key} ran, not in the uncrashed run")
    for text, run_ids in ref.audit.tasks.items():
        now = audit.tasks.get(text, set())
        if len(now) != 1:
            found.append(f"task {text!r} run by {sorted(now)} (lost or doubled)")
        else:
            [run_id] = now
            [before] = run_ids
            parent = before.rsplit("/", 2)[0]
            if audit.ends.get(run_id) is None and f"checkpoints: {parent} ended" in crashed:
                continue  # orphaned at the crash (above)
            if audit.ends.get(run_id) != ref.audit.ends.get(before):
                found.append(f"task {text!r} ended {audit.ends.get(run_id)!r}, "
                             f"not {ref.audit.ends.get(before)!r}")
    for text in audit.tasks.keys() - ref.audit.tasks.keys():
        found.append(f"task {text!r} not in the uncrashed run")
    if audit.verified is not None:
        found.append(f"ledger does not verify: {audit.verified}")
    if timeline.again != ["0 0 0"]:
        found.append(f"a second recover() found (tasks, paused, failed) {timeline.again}")
    return found, windows


def _joins(label: str) -> bool:
    # Whether a point's trace label is a checkpoints transaction of two writes or more.
    return label.startswith("checkpoints: ") and ", " in label


@attrs.define
class Report:
    """What exploring shapes found."""

    shapes: int = 0
    points: int = 0
    cells: int = 0
    crashed: int = 0
    pairs: int = 0
    violations: list[str] = attrs.Factory(list)
    windows: collections.Counter[str] = attrs.Factory(collections.Counter)
    by_shape: dict[str, int] = attrs.Factory(dict)
    #: The points (by shape) whose transaction holds two writes or more.
    joined: dict[str, list[int]] = attrs.Factory(dict)

    def add(self, where: str, found: list[str], windows: list[str]) -> None:
        self.violations += [f"{where}: {v}" for v in found]
        self.windows.update(windows)


def _recover(shape: Shape, files: Files, where: str, report: Report,
             at: int = 0, mode: Mode = Mode()) -> int:
    code = phase(shape, files, "recover", at, mode=mode)
    if at and code == _crashpoints.CRASH_EXIT:
        code = phase(shape, files, "recover", mode=mode)
    if code != 0:
        report.violations.append(f"{where}: recovery exited {code}: "
                                 + " | ".join(read_timeline(files.timeline).lines[-6:]))
    return code


def explore(shapes: Iterable[Shape], *, pairs: bool = False, keep: Path | None = None,
            only: Iterable[tuple[int, str]] | None = None, mode: Mode = Mode(),
            joined: bool = False) -> Report:
    """Every crash point of each shape (and every pair, with ``pairs``), run as
    ``mode`` says; with ``joined``, only the run's points whose transaction holds two
    writes or more (their pairs: every point of the recovery)."""
    report = Report()
    # In memory where there is a tmpfs: a cell's SQLite commits wait on the disk.
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    base = Path(tempfile.mkdtemp(prefix="crashpts-", dir=keep or memory))
    try:
        for s, shape in enumerate(shapes):
            folder = base / f"{s}"
            folder.mkdir()
            ref = reference(shape, folder / "ref", mode)
            n = len(ref.points)
            report.shapes += 1
            report.points += n
            report.by_shape[shape.name] = n
            report.joined[shape.name] = [k for k in range(1, n + 1) if _joins(ref.points[k - 1])]
            points = report.joined[shape.name] if joined else range(1, n + 1)
            cells = list(only) if only is not None else [
                (k, when) for k in points for when in ("before", "after")]
            for k, when in cells:
                where = f"{shape.name} {when} {k} ({ref.points[k - 1]})"
                files = Files(folder / f"{k}{when}")
                files.folder.mkdir()
                code = phase(shape, files, "run", k, when, mode)
                report.cells += 1
                report.crashed += code == _crashpoints.CRASH_EXIT
                if code not in (0, _crashpoints.CRASH_EXIT):
                    report.violations.append(f"{where}: the run exited {code}")
                    continue
                crashed = folder / f"{k}{when}.crashed"
                if pairs and when == "before":
                    shutil.copytree(files.folder, crashed)
                if _recover(shape, files, where, report, mode=mode) == 0:
                    report.add(where, *check(shape, ref, files))
                if not (pairs and when == "before"):
                    shutil.rmtree(files.folder)
                    continue
                again = len(read_timeline(files.timeline, 1).points)
                shutil.rmtree(files.folder)
                for j in range(1, again + 1):
                    pair = Files(folder / f"{k}-{j}")
                    shutil.copytree(crashed, pair.folder)
                    there = f"{where} then recovery before {j}"
                    report.pairs += 1
                    if _recover(shape, pair, there, report, j, mode) == 0:
                        report.add(there, *check(shape, ref, pair))
                    shutil.rmtree(pair.folder)
                shutil.rmtree(crashed)
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return report


def main(argv: list[str]) -> None:
    """``python -m tests.durable.crashkit SHAPE... [--pairs] [--no-ledger] [--grouped]
    [--joined] [--unacknowledged] [--only K...]``: explore the shapes named
    (``--no-ledger``: their checkpoints' writes only; ``--grouped`` and
    ``--unacknowledged``: see :class:`Mode`; ``--joined``: only the points of a
    transaction of two writes or more; ``--only K``: only point K, before and after)
    and print the report as JSON."""
    pairs = "--pairs" in argv
    names = [a for k, a in enumerate(argv)
             if not a.startswith("--") and (k == 0 or argv[k - 1] != "--only")]
    shapes = [SHAPES[name] for name in names]
    if "--no-ledger" in argv:
        shapes = [attrs.evolve(shape, ledger="none") for shape in shapes]
    start = time.process_time()
    mode = Mode(grouped="--grouped" in argv, unacknowledged="--unacknowledged" in argv)
    only = [(int(argv[k + 1]), when) for k, a in enumerate(argv) if a == "--only"
            for when in ("before", "after")] or None
    report = explore(shapes, pairs=pairs, mode=mode, joined="--joined" in argv, only=only)
    children = os.times()
    print(json.dumps({
        "shapes": report.shapes, "points": report.points, "by_shape": report.by_shape,
        "joined": report.joined,
        "cells": report.cells, "crashed": report.crashed, "pairs": report.pairs,
        "violations": report.violations, "windows": dict(report.windows),
        "cpu": round(time.process_time() - start + children.children_user
                     + children.children_system, 2),
    }))


if __name__ == "__main__":
    main(sys.argv[1:])
