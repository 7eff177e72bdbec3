"""Prototype sink designs of issue 35, measured beside the stock sinks in W1.

Not sinks to use: none of them keeps the stock sinks' guarantees (no crash test,
no error handling, no close protocol). Each answers one question about where a
durable entry's cost goes:

- ``jsonl-awaited``: every entry through the awaited ``record()`` (a
  :class:`ledger.JsonlSink` subclass overriding it, so the recorders build a
  ``Record`` and await it): one group ``write`` per trio tick, each recorder
  parked until its batch is written. What batching the writes costs in parks.
- ``sqlite-inline``: each tick's records committed in one transaction on the trio
  thread (the first recorder of a tick yields once, the others join), no writer
  thread. What the writer thread and its wakeups cost.
- ``jsonl-floor``: ``record_fields_nowait`` writes a fixed line of W1's length
  (one ``sha256``, one ``fstat``, one ``write``): what a JSONL entry would cost
  with an encoder that costs nothing.
- ``jsonl-floor-tick``: ``jsonl-floor`` with the lines written once per trio tick
  by a system task (one ``fstat`` and one ``write`` a tick). Not a design: an
  entry is written after its recorder went on. What the per-entry syscalls cost.
- ``jsonl-tick``: each entry encoded by ``record_fields_nowait`` (as the stock
  sink does) and queued, its recorder parked until one ``write`` a tick (the first
  recorder of the tick yields once, then writes): the per-tick group write with
  the acknowledgement unchanged; its recorders also build a ``Record`` per entry.
- ``parked``: a sink that keeps nothing, each entry awaited and parked once:
  what the acknowledgement by a parked recorder costs (beside ``nothing``, the
  sink of :mod:`bench.audit_parts` that takes each entry's fields and keeps
  nothing, without awaiting).
- ``sqlite-floor``: ``sqlite-inline`` with a fixed row per record (its own seq),
  nothing redacted, encoded nor hashed: what acknowledging at the commit costs in
  W1, where a transaction holds at most 8 entries (one per running run).
- ``sqlite-log``: the intent-log design (issue 35 item 1): each entry encoded,
  hashed, ``fstat``-checked and appended to a log beside the database with one
  ``write`` (``JsonlSink``'s line, as its ``record_fields_nowait`` makes it) and
  acknowledged then; a writer thread parses the lines back (``json.loads``) and
  inserts the stock rows in transactions of up to 512. What acknowledging at the
  log, not the commit, costs with the stock database format.
- ``sqlite-log-sql``: ``sqlite-log`` with SQLite building each row from the line's
  text (its JSON functions, the GIL released) instead of ``json.loads``.
- ``sqlite-log-lines``: ``sqlite-log`` moving each line into a table of
  (``seq``, line) with no secondary index: not the stock format; what the move
  costs without the columns and their four indexes.

Run ``python -m bench.sink_designs N MODE`` (under callgrind as ``bench.cg_w1``:
the same seeded scheduler and frozen clock; the sink closed at the end of W1, see
:func:`w1_closed`) or ``python -m bench.sink_designs wall
RUNS REPEAT [CASE,...]`` (wall and CPU time, medians of interleaved rounds, with no
audit and the stock JSONL and SQLite sinks beside them, or the cases named), or
``python -m bench.sink_designs commits`` (what one SQLite transaction of 1, 8 and 64
entries costs, and one ``write`` and one ``fstat``).
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from ledger import Entry, JsonlSink, Record, SqliteSink
from ledger._chain import Chain
from ledger._clock import read_clock, utc_now
from ledger._encoding import check_content, sorted_json
from ledger._fieldline import fields_body
from ledger._jsonl_file import open_for_append
from ledger._redact import redact_record
from ledger._sqlite_store import INSERT, Row, check_storable, connect, path_key, to_row

from .audit_cost import w1_body
from .audit_parts import _Nothing
from .cg_w1 import run_fixed

#: What JsonlTick's record() returns (the recorders drop it).
_ENTRY = Chain().link(Record("tool_result"), "2026-11-29T06:00:00.000000Z")[0]


def _file(suffix: str) -> str:
    return os.path.join(tempfile.mkdtemp(prefix="sink_designs-"), f"w1.{suffix}")


def _never(raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.FAILED


def _stop(raise_cancel: trio.lowlevel.RaiseCancelT) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.SUCCEEDED


class JsonlAwaited(JsonlSink):
    """Every entry through the awaited group write (the recorders await ``record``)."""

    async def record(self, record: Record) -> Entry:
        return await super().record(record)


class SqliteInline:
    """Each tick's records committed in one transaction on the trio thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.conn: sqlite3.Connection | None = None
        self.chain = Chain()
        # The open batch: its records and times, its entries once committed, and
        # the tasks waiting for it.
        self.batch: tuple[list[tuple[Record, str]], list[Entry],
                          list[trio.lowlevel.Task]] | None = None

    def _connect(self) -> sqlite3.Connection:
        if self.conn is None:
            self.conn = connect(self.path, fsync=False, timeout=5.0)
        return self.conn

    def _commit(self, rows: list[Row]) -> None:
        conn = self._connect()
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(INSERT, rows)
        conn.execute("COMMIT")

    async def record(self, record: Record) -> Entry:
        await trio.lowlevel.checkpoint_if_cancelled()
        record = redact_record(record)
        check_content(record)
        when = read_clock(utc_now)
        check_storable(record, when)
        batch = self.batch
        if batch is None:
            batch = self.batch = ([(record, when)], [], [])
            await trio.lowlevel.cancel_shielded_checkpoint()
            self.batch = None
            link = self.chain.link
            batch[1].extend(link(r, w)[0] for r, w in batch[0])
            self._commit([to_row(entry) for entry in batch[1]])
            for task in batch[2]:
                trio.lowlevel.reschedule(task)
            return batch[1][0]
        index = len(batch[0])
        batch[0].append((record, when))
        batch[2].append(trio.lowlevel.current_task())
        await trio.lowlevel.wait_task_rescheduled(_never)
        return batch[1][index]

    async def aclose(self) -> None:
        if self.conn is not None:
            self.conn.close()


class SqliteFloor(SqliteInline):
    """:class:`SqliteInline` with a fixed row per record: nothing encoded."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.seq = 0
        entry = Chain().link(Record("tool_result", "worker/0001", ("worker/0001",),
                                    tool="echo", call_id="c1", result='{"x": 1}'),
                             utc_now())[0]
        self.entry = entry  # what every record returns (the recorders drop it)
        self.row = to_row(entry)[1:]

    async def record(self, record: Record) -> Entry:
        batch = self.batch
        if batch is None:
            batch = self.batch = ([(record, "")], [], [])
            await trio.lowlevel.cancel_shielded_checkpoint()
            self.batch = None
            rows: list[Any] = []
            for _ in batch[0]:
                self.seq += 1
                rows.append((self.seq, *self.row))
            self._commit(rows)
            for task in batch[2]:
                trio.lowlevel.reschedule(task)
            return self.entry
        batch[0].append((record, ""))
        batch[2].append(trio.lowlevel.current_task())
        await trio.lowlevel.wait_task_rescheduled(_never)
        return self.entry


_FIXED = (
    b'{"agent_id":"worker","arguments":null,"call_id":"c1","data":{},'
    b'"duration":1.2e-05,"error":null,"kind":"tool_result","path":["worker/0001"],'
    b'"prev_hash":"' + b"0" * 64 + b'","reason":null,"result":"{\\"x\\": 1}",'
    b'"run_id":"worker/0001","seq":1,"time":"2026-11-29T06:00:00.000000Z",'
    b'"tool":"echo","verdict":null}'
)


class JsonlFloor(JsonlSink):
    """``record_fields_nowait`` writes a fixed line: one sha256, fstat and write."""

    def record_fields_nowait(self, *fields: object) -> None:
        fd = self._fd
        if fd is None:
            raise trio.WouldBlock
        digest = hashlib.sha256(_FIXED).hexdigest()
        if self._moved(fd) is None:
            self._append(fd, b'%s,"hash":"%s"}\n' % (_FIXED[:-1], digest.encode("ascii")))


class JsonlFloorTick(JsonlSink):
    """:class:`JsonlFloor` with its lines written once a tick, by a system task
    woken by the first line of the tick: one ``fstat`` and one ``write`` per tick.
    Not a design (an entry is written after its recorder went on): what the
    per-entry syscalls of :class:`JsonlFloor` cost."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.lines: list[bytes] = []
        self.writer: trio.lowlevel.Task | None = None
        self.parked = False

    async def _write_ticks(self) -> None:
        while True:
            self.parked = True
            await trio.lowlevel.wait_task_rescheduled(_stop)
            fd = self._fd
            if fd is not None and self._moved(fd) is None:
                self._append(fd, b"".join(self.lines))
            self.lines.clear()

    def record_fields_nowait(self, *fields: object) -> None:
        if self._fd is None:
            raise trio.WouldBlock
        if self.writer is None:
            self.writer = trio.lowlevel.spawn_system_task(self._write_ticks)
        digest = hashlib.sha256(_FIXED).hexdigest()
        self.lines.append(b'%s,"hash":"%s"}\n' % (_FIXED[:-1], digest.encode("ascii")))
        if self.parked and self.writer is not None:
            self.parked = False
            trio.lowlevel.reschedule(self.writer)

    async def aclose(self) -> None:
        fd = self._fd
        if fd is not None and self.lines:  # the last tick's lines, if not written yet
            self._append(fd, b"".join(self.lines))
            self.lines.clear()
        await super().aclose()


class JsonlTick(JsonlSink):
    """One ``fstat`` and one ``write`` per trio tick, each recorder parked until the
    write of its entry returned. ``record_fields_nowait`` encodes, hashes and
    queues the entry (as :class:`ledger.JsonlSink` does, its chain advanced), then
    raises ``trio.WouldBlock``; the recorders then build the ``Record`` and await
    ``record()``, which parks until the tick's write (the first recorder of a tick
    yields once, then writes every line queued). The ``Record`` built per entry is
    this prototype's overhead: a real design would await the fields."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.lines: list[bytes] = []
        self.waiting: list[trio.lowlevel.Task] = []
        self.queued = False  # an entry queued whose record() is still to come
        self.writing = False
        # Opened here (the stock sink opens on its first record, in a thread): every
        # entry then takes the queue, in order.
        self._fd, self._chain, self._offset = open_for_append(self.path)

    def record_fields_nowait(self, *fields: Any) -> None:
        fd = self._fd
        if fd is None or self.queued:
            raise trio.WouldBlock
        chain = self._chain
        seq = chain.seq + 1
        body = fields_body(seq, utc_now(), chain.head, *fields)
        encoded = body.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(encoded).hexdigest()
        self.lines.append(b'%s,"hash":"%s"}\n' % (encoded[:-1], digest.encode("ascii")))
        chain.seq, chain.head = seq, digest
        self.queued = True
        raise trio.WouldBlock

    def record_nowait(self, record: Record) -> Entry:
        raise trio.WouldBlock

    async def record(self, record: Record) -> Entry:
        if not self.queued:
            return await super().record(record)  # not from the recorders' fast path
        self.queued = False
        if self.writing:
            self.waiting.append(trio.lowlevel.current_task())
            await trio.lowlevel.wait_task_rescheduled(_never)
            return _ENTRY
        self.writing = True
        await trio.lowlevel.cancel_shielded_checkpoint()
        self.writing = False
        fd = self._fd
        if fd is not None and self._moved(fd) is None:
            self._append(fd, b"".join(self.lines))
        self.lines.clear()
        for task in self.waiting:
            trio.lowlevel.reschedule(task)
        self.waiting.clear()
        return _ENTRY


class SqliteLog:
    """The intent-log design: each entry encoded as :class:`ledger.JsonlSink`'s
    ``record_fields_nowait`` encodes it (``fields_body``, one ``sha256``), checked
    against the log (one ``fstat``) and appended to an intent log beside the
    database (one ``write``): acknowledged then. A writer thread moves the log's
    lines into SQLite in large transactions (each line parsed back with
    ``json.loads``, the stock row built from it), woken when ``LOG_BATCH`` lines
    are queued, and at close (only then: a timed wakeup fires after a few entries
    under valgrind, whose clock runs ~50 times slower, and would count smaller
    transactions than a native run makes)."""

    LOG_BATCH = 512

    def __init__(self, path: str) -> None:
        self.path = path
        self.conn = connect(path, fsync=False, timeout=5.0)
        self.fd = os.open(path + "-log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.offset = 0
        self.chain = Chain()
        self.queue: list[bytes] = []
        self.lock = threading.Lock()
        self.wakeup = threading.Condition(self.lock)
        self.closing = False
        self.transactions = 0
        self.moved = 0
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def record_fields_nowait(self, *fields: Any) -> None:
        chain = self.chain
        seq = chain.seq + 1
        body = fields_body(seq, utc_now(), chain.head, *fields)
        encoded = body.encode("utf-8", "surrogatepass")
        digest = hashlib.sha256(encoded).hexdigest()
        line = b'%s,"hash":"%s"}\n' % (encoded[:-1], digest.encode("ascii"))
        stat = os.fstat(self.fd)
        if stat.st_nlink == 0 or stat.st_size < self.offset:
            raise RuntimeError("log moved")
        self.offset += os.write(self.fd, line)
        chain.seq, chain.head = seq, digest
        queue = self.queue
        queue.append(line)
        if len(queue) == self.LOG_BATCH:
            with self.lock:
                self.wakeup.notify()

    async def record(self, record: Record) -> None:
        raise AssertionError("W1's records are plain")

    def _take(self) -> tuple[list[bytes], bool]:
        """Wait for ``LOG_BATCH`` lines or the close; return the lines queued and
        whether the sink closes."""
        with self.lock:
            while len(self.queue) < self.LOG_BATCH and not self.closing:
                self.wakeup.wait()
            # The same list stays the queue: the trio thread appends without the
            # lock, and a slice and its deletion each hold the GIL.
            lines = self.queue[:]
            del self.queue[:len(lines)]
            return lines, self.closing

    def _serve(self) -> None:
        loads = json.loads
        conn = self.conn
        while True:
            lines, closing = self._take()
            if lines:
                rows = []
                for line in lines:
                    d = loads(line)
                    path = d["path"]
                    data = d["data"]
                    rows.append((
                        d["seq"], d["time"], d["kind"], d["run_id"], sorted_json(path),
                        path_key(path), d["agent_id"], d["tool"], d["call_id"],
                        d["arguments"], d["verdict"], d["reason"], d["result"],
                        d["error"], d["duration"], sorted_json(data) if data else "{}",
                        d["prev_hash"], d["hash"]))
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(INSERT, rows)
                conn.execute("COMMIT")
                self.transactions += 1
            if closing and not lines:
                return

    async def aclose(self) -> None:
        with self.lock:
            self.closing = True
            self.wakeup.notify()
        await trio.to_thread.run_sync(self.thread.join)
        count = self.conn.execute("SELECT count(*) FROM entries").fetchone()[0]
        assert count == self.chain.seq, (count, self.chain.seq)
        print(f"{self.chain.seq} entries in {self.transactions} transactions", file=sys.stderr)
        self.conn.close()
        os.close(self.fd)


#: The stock row of a log line, built by SQLite from the line's JSON (its JSON1
#: functions, the GIL released): ``sqlite-log-sql``.
_INSERT_LINE = (
    "INSERT INTO entries (seq, time, kind, run_id, path, path_key, agent_id, tool,"
    " call_id, arguments, verdict, reason, result, error, duration, data, prev_hash, hash)"
    " SELECT j->>'seq', j->>'time', j->>'kind', j->>'run_id', j->'path',"
    " coalesce((SELECT group_concat(value || char(31), '') FROM json_each(j, '$.path')), ''),"
    " j->>'agent_id', j->>'tool', j->>'call_id', j->>'arguments', j->>'verdict',"
    " j->>'reason', j->>'result', j->>'error', j->>'duration', j->'data', j->>'prev_hash',"
    " j->>'hash' FROM (SELECT ? AS j)"
)


class SqliteLogSql(SqliteLog):
    """:class:`SqliteLog` with each line turned into its row by SQLite's JSON
    functions (one ``executemany`` of the lines' text, the GIL released), not by
    ``json.loads`` in Python. Rows byte-identical for W1's entries (``ledger verify``
    passes); not proved for every entry (SQLite's JSON text of a path or data with
    non-ASCII, or of a float, may differ from ``sorted_json``'s)."""

    def _serve(self) -> None:
        conn = self.conn
        while True:
            lines, closing = self._take()
            if lines:
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(_INSERT_LINE, [(line[:-1].decode(),) for line in lines])
                conn.execute("COMMIT")
                self.transactions += 1
            if closing and not lines:
                return


class SqliteLogLines(SqliteLog):
    """:class:`SqliteLog` moving each line into a table of lines (``seq``, the line's
    text; no other column, no secondary index) rather than the stock ``entries``
    table: not the stock format (``ledger verify`` and ``query`` do not read it).
    What the move would cost if the database kept the lines and indexed nothing."""

    def __init__(self, path: str) -> None:
        super().__init__(path)
        self.conn.execute("CREATE TABLE lines (seq INTEGER PRIMARY KEY, line TEXT NOT NULL)")

    def _serve(self) -> None:
        conn = self.conn
        while True:
            lines, closing = self._take()
            if lines:
                seq = self.moved
                rows = [(seq + k, line[:-1].decode()) for k, line in enumerate(lines, 1)]
                self.moved = seq + len(lines)
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany("INSERT INTO lines (seq, line) VALUES (?, ?)", rows)
                conn.execute("COMMIT")
                self.transactions += 1
            if closing and not lines:
                return

    async def aclose(self) -> None:
        with self.lock:
            self.closing = True
            self.wakeup.notify()
        await trio.to_thread.run_sync(self.thread.join)
        count = self.conn.execute("SELECT count(*) FROM lines").fetchone()[0]
        assert count == self.chain.seq, (count, self.chain.seq)
        print(f"{self.chain.seq} entries in {self.transactions} transactions", file=sys.stderr)
        self.conn.close()
        os.close(self.fd)


class Parked:
    """Keeps nothing; each entry awaited (the recorders build its ``Record``) and
    parked once (one ``cancel_shielded_checkpoint``): what acknowledging an entry
    by waking its parked recorder costs, with nothing encoded nor written."""

    async def record(self, record: Record) -> None:
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def aclose(self) -> None:
        return None


#: The prototypes by mode name (each a new file).
DESIGNS: dict[str, Callable[[], Any]] = {
    "jsonl-awaited": lambda: JsonlAwaited(_file("jsonl")),
    "sqlite-inline": lambda: SqliteInline(_file("db")),
    "jsonl-floor": lambda: JsonlFloor(_file("jsonl")),
    "sqlite-floor": lambda: SqliteFloor(_file("db")),
    "jsonl-floor-tick": lambda: JsonlFloorTick(_file("jsonl")),
    "jsonl-tick": lambda: JsonlTick(_file("jsonl")),
    "parked": Parked,
    "sqlite-log": lambda: SqliteLog(_file("db")),
    "sqlite-log-sql": lambda: SqliteLogSql(_file("db")),
    "sqlite-log-lines": lambda: SqliteLogLines(_file("db")),
}


def w1_closed(runs: int, make: Callable[[], Any]) -> Callable[[], Awaitable[int]]:
    """W1's body (:func:`bench.audit_cost.w1_body`) with the sink closed at its end
    (the pool does not close it): the intent-log prototypes move what is left of
    their log into the database then, and that work is W1's."""

    async def main() -> int:
        sink = make()
        done = await w1_body(runs, lambda: sink)()
        if sink is not None:
            await sink.aclose()
        return done

    return main


def wall(runs: int, repeat: int, only: list[str] | None = None) -> None:
    """Print W1's wall and CPU time per run for no audit, the stock file sinks and
    the prototypes (or no audit and the cases named in ``only``): medians of
    ``repeat`` interleaved rounds, each starting at the next case."""
    cases: dict[str, Callable[[], Any]] = {
        "off": lambda: None,
        "jsonl": lambda: JsonlSink(_file("jsonl")),
        "sqlite": lambda: SqliteSink(_file("db")),
        "nothing": _Nothing,
        **DESIGNS,
    }
    if only is not None:
        cases = {name: cases[name] for name in ["off", *only]}
    walls: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    names = list(cases)
    for round_ in range(repeat):
        # Each round starts at another case: the first case of a round ran slower.
        for name in names[round_ % len(names):] + names[:round_ % len(names)]:
            make = cases[name]
            gc.collect()
            start, cpu = time.perf_counter(), time.process_time()
            trio.run(w1_closed(runs, make))
            walls[name].append((time.perf_counter() - start) / runs * 1e6)
            cpus[name].append((time.process_time() - cpu) / runs * 1e6)
    print(f"W1, {runs} runs, medians of {repeat} interleaved rounds; load average "
          + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    wall0, cpu0 = statistics.median(walls["off"]), statistics.median(cpus["off"])
    for name in cases:
        w, c = statistics.median(walls[name]), statistics.median(cpus[name])
        print(f"  {name:<14} wall {w:7.0f} us/run ({w / wall0:4.2f}x)"
              f"  cpu {c:7.0f} us/run ({c / cpu0:4.2f}x)")


def commits(rounds: int = 5) -> None:
    """Print what one SQLite ledger transaction of 1, 8 and 64 W1-sized entries
    costs (as the writer thread commits them: ``BEGIN IMMEDIATE``, ``executemany``,
    ``COMMIT``, WAL, ``synchronous=NORMAL``), and one ``write`` of a W1-sized line and
    one ``fstat``: medians of ``rounds``, CPU time (``process_time``) and wall."""
    conn = connect(_file("db"), fsync=False, timeout=5.0)
    entry = Chain().link(Record("tool_result", "worker/0001", ("worker/0001",), tool="echo",
                                call_id="c1", result='{"x": 1}', duration=1.2e-05),
                         utc_now())[0]
    row = to_row(entry)[1:]
    seq = 0
    print("load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    for size in (1, 8, 64):
        walls: list[float] = []
        cpus: list[float] = []
        for _ in range(rounds):
            count = 4096 // size
            start, cpu = time.perf_counter(), time.process_time()
            for _ in range(count):
                rows: list[Any] = []
                for _ in range(size):
                    seq += 1
                    rows.append((seq, *row))
                conn.execute("BEGIN IMMEDIATE")
                conn.executemany(INSERT, rows)
                conn.execute("COMMIT")
            walls.append((time.perf_counter() - start) / count * 1e6)
            cpus.append((time.process_time() - cpu) / count * 1e6)
        w, c = statistics.median(walls), statistics.median(cpus)
        print(f"  a transaction of {size:2} entries: wall {w:7.1f} us, cpu {c:6.1f} us"
              f" ({c / size:5.1f} us an entry)")
    conn.close()
    fd = os.open(_file("jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    line = b"x" * 480 + b"\n"
    for name, call in (("write of 481 bytes", lambda: os.write(fd, line)),
                       ("fstat", lambda: os.fstat(fd))):
        cpu = time.process_time()
        for _ in range(100_000):
            call()
        print(f"  {name}: cpu {(time.process_time() - cpu) / 100_000 * 1e9:5.0f} ns")
    os.close(fd)


def main(argv: list[str]) -> None:
    if argv == ["commits"]:
        commits()
        return
    if len(argv) in (3, 4) and argv[0] == "wall":
        wall(int(argv[1]), int(argv[2]), argv[3].split(",") if len(argv) == 4 else None)
        return
    if len(argv) != 2 or argv[1] not in DESIGNS:
        raise SystemExit(
            f"usage: python -m bench.sink_designs N {'|'.join(DESIGNS)}"
            " | python -m bench.sink_designs wall RUNS REPEAT [CASE,...]"
            " | python -m bench.sink_designs commits"
        )
    run_fixed(w1_closed(int(argv[0]), DESIGNS[argv[1]]))


if __name__ == "__main__":
    main(sys.argv[1:])
