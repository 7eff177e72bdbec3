"""The crash-point harness: every durable write of a tree's run as a crash point.

For a shape: one run in a child process numbers its durable writes (``N`` points)
and stops itself (``SIGSTOP``: every thread at once, where SIGKILL would end them)
right before and right after each: while it is stopped there, this process copies
its files (checkpoints with their WAL, ledger, timeline), which are then what a
process ended there (``os._exit``, as SIGKILL would) leaves, the kernel holding all
that was written and nothing else. Let go, the run goes on to its end and is the
reference (outputs, side effects, tasks). Then for every ``k`` in ``1..N`` and
``before``/``after``: a fresh child recovers the copy (and resumes what is paused)
to the end; the invariants are checked (:func:`check`). With ``pairs``, for every
``k`` (crashed before it) its recovery is stopped before each of its writes ``j``
and copied the same way, and each copy recovered again.

One run gives every point's files, rather than one run to each point (``N`` times
the prefix; the same files, as the harness makes each tree's points fixed:
``ledger._crashpoints``).

Children are forked from this process, which never runs trio itself (it stays one
thread, so forking is safe): run it as its own process, ``python -m
tests.durable.crashkit SHAPE... [--pairs]`` (or :func:`explore` from such a process),
never inside a test process with threads.
"""

from __future__ import annotations

import collections
import contextlib
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
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


#: Called while a phase's child is stopped at a durable write: its number, "before"
#: or "after", and its label.
Stop = Callable[[int, str, str], None]


def _stop_at_writes(channel: tuple[int, int], whens: tuple[str, ...]) -> None:
    # In a phase's child: at each durable write, right ``whens``, once its trace line
    # is written, tell the parent ``K WHEN LABEL`` and wait for its byte to go on
    # (the parent stops the process meanwhile). One write waits at a time (the lock),
    # so no other write is made or traced while one is a crash point.
    tell, go = channel
    number, made = _crashpoints.before, _crashpoints.after
    step = threading.Lock()
    labels: dict[int, str] = {}

    def halt(k: int, when: str) -> None:
        if when in whens:
            os.write(tell, f"{k} {when} {labels[k]}\n".encode("utf-8", "replace"))
            if os.read(go, 1) != b"g":
                os._exit(_crashpoints.CRASH_EXIT)  # the parent is gone

    def before(label: str) -> int:
        with step:
            k = number(label)
            labels[k] = label.replace("\n", " ")
            halt(k, "before")
        return k

    def after(k: int) -> None:
        with step:
            made(k)
            halt(k, "after")

    _crashpoints.before, _crashpoints.after = before, after


def _frozen(pid: int) -> None:
    # Stop process ``pid`` (SIGSTOP) and return once every thread of it is stopped.
    os.kill(pid, signal.SIGSTOP)
    tasks = Path(f"/proc/{pid}/task")
    while True:
        states = []
        for task in tasks.iterdir():
            with contextlib.suppress(FileNotFoundError):  # a thread ended
                states.append((task / "stat").read_text().rpartition(")")[2].split()[0])
        if all(state in ("T", "t", "Z", "X") for state in states):
            return
        time.sleep(0.0002)


def _stepwise(body: Callable[[tuple[int, int]], None], stop: Stop) -> int:
    # Run ``body((tell, go))`` in a forked child that waits at writes
    # (_stop_at_writes): at each, the child is stopped (every thread: _frozen),
    # ``stop`` runs, and the child goes on; its exit code.
    told_out, tell = os.pipe()
    go, go_in = os.pipe()
    pid = None
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:  # the child: never returns
            os.close(told_out)
            os.close(go_in)
            code = 1
            try:
                signal.alarm(CHILD_LIMIT)
                body((tell, go))
                code = 0
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(tell)
        os.close(go)
        with os.fdopen(told_out, "rb") as told:
            for line in told:
                k, when, label = line.decode().rstrip("\n").split(" ", 2)
                _frozen(pid)
                stop(int(k), when, label)
                os.kill(pid, signal.SIGCONT)
                os.write(go_in, b"g")
        _, status = os.waitpid(pid, 0)
        pid = None
        return os.waitstatus_to_exitcode(status)
    finally:
        os.close(go_in)
        if pid is not None:  # this process failed while its child ran: end it
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)


def phase(shape: Shape, files: Files, name: str, mode: Mode = Mode(),
          stop: Stop | None = None, whens: tuple[str, ...] = ("before", "after")) -> int:
    """Run ``name`` ("run" or "recover") of ``shape`` on ``files`` in a child, as
    ``mode`` says; with ``stop``, stopped right ``whens`` each durable write, while
    ``stop`` runs here. Its exit code."""
    submitted = not mode.unacknowledged and files.timeline.exists() and (
        "submitted\n" in files.timeline.read_text())

    def body(channel: tuple[int, int] | None = None) -> None:
        import trio

        note(files, f"phase {name}")
        _crashpoints.arm(0, "before", str(files.timeline), grouped=mode.grouped)
        if channel is not None:
            _stop_at_writes(channel, whens)
        trio.run(drive, shape, files, name, submitted)

    return _fork(body) if stop is None else _stepwise(body, stop)


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


def reference(shape: Shape, folder: Path, mode: Mode = Mode(),
              stop: Stop | None = None) -> Reference:
    """The uncrashed run of ``shape`` in ``folder`` (``stop`` called at its writes:
    :func:`phase`)."""
    files = Files(folder)
    folder.mkdir()
    code = phase(shape, files, "run", mode=mode, stop=stop)
    timeline = read_timeline(files.timeline)
    if code != 0 or len(timeline.outputs) != 1:
        raise AssertionError(f"{shape.name}: the uncrashed run failed ({code}): "
                             + "\n".join(timeline.lines[-20:]))
    audit = read_audit(files.ledger, f"{shape.root}/0001", timeline.told)
    return Reference(timeline.points, timeline.outputs[0], timeline.effects, audit,
                     timeline.runs)


_CLAIM = re.compile(r"(: |, )claim ")


def _crash_points(lines: list[str]) -> tuple[dict[int, tuple[int, str]], int]:
    """Each phase's crash point (``crash K WHEN`` lines) by the phase's number, and
    the number of the last phase."""
    crashes: dict[int, tuple[int, str]] = {}
    phases = -1
    for line in lines:
        head, _, rest = line.partition(" ")
        if head == "phase":
            phases += 1
        elif head == "crash":
            number, when = rest.split(" ")
            crashes[phases] = (int(number), when)
    return crashes, phases


def lost_answers(lines: list[str]) -> list[str]:
    """The answers (``approved KEY`` notes) asked for again in a later phase although
    a resume claim committed after them in their own phase had stored them: a crash
    right before the claim's write (``crash K before``) loses an answer (asked again,
    rightly), one after it must not."""
    crashes, phases = _crash_points(lines)
    found: list[str] = []
    given: set[str] = set()  # answered in this phase, no claim committed since
    stored: set[str] = set()
    phases = -1
    for line in lines:
        head, _, rest = line.partition(" ")
        if head == "phase":
            phases += 1
            given = set()
        elif head == "approved":
            if rest in stored:
                found.append(f"the answer to {rest} was lost: asked again after the "
                             "claim that stored it")
            given.add(rest)
        elif (head.isdigit() and _CLAIM.search(rest)
              and crashes.get(phases) != (int(head), "before")):
            stored |= given
            given = set()
    return found


def ended_before_crash(lines: list[str]) -> set[str]:
    """The runs whose ``ended`` checkpoint a phase that crashed (every phase but the
    last: a pair's recovery too) had committed: each write of its transactions (a
    grouped one joins several: ``checkpoints: A running, B ended``) but those of the
    one it crashed right before (``crash K before``)."""
    crashes, phases = _crash_points(lines)
    ended: set[str] = set()
    phase = -1
    for line in lines:
        head, _, rest = line.partition(" ")
        if head == "phase":
            phase += 1
        elif (head.isdigit() and phase < phases and rest.startswith("checkpoints: ")
              and crashes.get(phase) != (int(head), "before")):
            for write in rest.removeprefix("checkpoints: ").split(", "):
                run_id, _, status = write.rpartition(" ")
                if status == "ended":
                    ended.add(run_id)
    return ended


def check(shape: Shape, ref: Reference, files: Files) -> tuple[list[str], list[str]]:
    """The violations of a cell whose every phase ran (and the documented windows it
    fell into): no answer lost (:func:`lost_answers`), same output, each mutating call
    once (or interrupted, told, at most once), each idempotent or read-only call at
    least once, each task run by exactly one run id to the same end, the ledger
    verified, a second recover() empty."""
    found: list[str] = []
    windows: list[str] = []
    timeline = read_timeline(files.timeline)
    audit = read_audit(files.ledger, f"{shape.root}/0001", timeline.told)
    found += timeline.problems
    found += lost_answers(timeline.lines)
    output = timeline.outputs[-1] if timeline.outputs else None
    root_id = f"{shape.root}/0001"
    ended = ended_before_crash(timeline.lines)
    if output is None and root_id in ended:
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
        if ran == 0 and parent in ended:
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
            if audit.ends.get(run_id) is None and parent in ended:
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


def _copies(source: Path, pattern: str, taken: list[tuple[int, str]],
            chosen: Callable[[int, str, str], bool] | None = None) -> Stop:
    # A Stop that copies ``source``, the stopped phase's files (those a crash there
    # leaves), to ``pattern`` (``{k}``, ``{when}`` filled) at each point ``chosen``,
    # and lists the point in ``taken``.
    def stop(k: int, when: str, label: str) -> None:
        if chosen is None or chosen(k, when, label):
            copy = Path(pattern.format(k=k, when=when))
            shutil.copytree(source, copy)
            note(Files(copy), f"crash {k} {when}")  # where the copied phase ended
            taken.append((k, when))

    return stop


def _recover(shape: Shape, files: Files, where: str, report: Report, mode: Mode = Mode(),
             stop: Stop | None = None) -> int:
    code = phase(shape, files, "recover", mode, stop, ("before",))
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
    wanted = None if only is None else set(only)

    def chosen(k: int, when: str, label: str) -> bool:
        return (wanted is None or (k, when) in wanted) and (not joined or _joins(label))

    # In memory where there is a tmpfs: a cell's SQLite commits wait on the disk.
    memory = "/dev/shm" if os.path.isdir("/dev/shm") else None
    base = Path(tempfile.mkdtemp(prefix="crashpts-", dir=keep or memory))
    try:
        for s, shape in enumerate(shapes):
            folder = base / f"{s}"
            folder.mkdir()
            cells: list[tuple[int, str]] = []
            ref = reference(shape, folder / "ref", mode,
                            _copies(folder / "ref", f"{folder}/{{k}}{{when}}", cells, chosen))
            n = len(ref.points)
            report.shapes += 1
            report.points += n
            report.by_shape[shape.name] = n
            report.joined[shape.name] = [k for k in range(1, n + 1) if _joins(ref.points[k - 1])]
            for k, when in cells:
                where = f"{shape.name} {when} {k} ({ref.points[k - 1]})"
                files = Files(folder / f"{k}{when}")
                report.cells += 1
                report.crashed += 1
                again: list[tuple[int, str]] = []
                pair = pairs and when == "before"
                # Each point of a pair's recovery (before its writes): a pair's files.
                copies = _copies(files.folder, f"{folder}/{k}-{{k}}", again) if pair else None
                if _recover(shape, files, where, report, mode, copies) == 0:
                    report.add(where, *check(shape, ref, files))
                shutil.rmtree(files.folder)
                for j, _ in again:
                    there = f"{where} then recovery before {j}"
                    pair_files = Files(folder / f"{k}-{j}")
                    report.pairs += 1
                    if _recover(shape, pair_files, there, report, mode) == 0:
                        report.add(there, *check(shape, ref, pair_files))
                    shutil.rmtree(pair_files.folder)
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
