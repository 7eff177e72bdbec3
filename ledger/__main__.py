"""The ``python -m ledger`` command line: verify, pin, repair, tail and query ledgers."""

from __future__ import annotations

import argparse
import datetime
import signal
import sys
from collections.abc import Sequence

from ._encoding import entry_to_dict
from ._entry import Entry
from ._errors import LedgerError
from ._format import as_json as json_line
from ._format import format_entry
from ._query import query, tail
from ._verify import repair, verify

EXIT_OK = 0
"""The ledger is sound (or the command succeeded)."""
EXIT_BAD = 1
"""The ledger is not sound (or does not hold the pinned head); the message
names the first bad entry."""
EXIT_ERROR = 2
"""The ledger could not be read (or repaired), or the command line is wrong."""
EXIT_INTERRUPTED = 130
"""Interrupted (Ctrl-C): one line, ``interrupted``, never a traceback."""
EXIT_TERMINATED = 143
"""Stopped by SIGTERM (128 + 15): one line, ``terminated``, never a traceback."""


class _Terminated(BaseException):
    """Raised by the SIGTERM handler :func:`main` installs, as Ctrl-C raises
    ``KeyboardInterrupt``: only reads, or repair's one truncate or append, are cut."""


def _terminate(signum: int, frame: object) -> None:
    raise _Terminated


def _head(text: str) -> str:
    value = text.strip().lower()
    if len(value) != 64 or value.strip("0123456789abcdef"):
        raise argparse.ArgumentTypeError("a head is 64 hexadecimal digits")
    return value


def _time(text: str) -> str:
    """``text`` (ISO-8601; no offset means UTC) as an entry's time is written
    (``YYYY-MM-DDTHH:MM:SS.ffffffZ``), so that comparing the two as text compares
    the times: ``...:02Z`` given as is sorts after ``...:02.000000Z``."""
    try:
        when = datetime.datetime.fromisoformat(text)
        if when.tzinfo is not None:
            when = when.astimezone(datetime.UTC).replace(tzinfo=None)
    except (ValueError, OverflowError):  # OverflowError: past year 9999 once in UTC
        raise argparse.ArgumentTypeError(f"not an ISO-8601 time: {text[:100]!r}") from None
    return when.isoformat(timespec="microseconds") + "Z"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ledger",
        description="Check and read audit ledgers (JSONL or SQLite).",
        epilog="exit codes: 0 sound (or done), 1 not sound or the pinned head is missing,"
        " 2 the ledger cannot be read or repaired, or a wrong command line, 130 interrupted,"
        " 143 terminated (SIGTERM)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "verify", help="check the hash chain; exit 1 if it is broken; print its head"
    )
    check.add_argument("file")
    check.add_argument(
        "--head",
        type=_head,
        metavar="HASH",
        help="a head printed earlier: exit 1 unless an entry has it (catches a cut or rollback)",
    )
    pin = commands.add_parser(
        "head", help="print the head (last entry's hash) of a sound ledger, to pin it"
    )
    pin.add_argument("file")
    fix = commands.add_parser(
        "repair",
        help="mend a torn last line (JSONL): a whole entry gets its newline, a cut one goes",
    )
    fix.add_argument("file")
    show = commands.add_parser("tail", help="show the last entries")
    show.add_argument("file")
    show.add_argument("-n", type=int, default=10, metavar="N", help="how many (default 10)")
    find = commands.add_parser("query", help="show the entries matching every filter")
    find.add_argument("file")
    find.add_argument(
        "--path",
        action="append",
        default=None,
        metavar="SEGMENT",
        help="AgentPath prefix, one segment per --path, outermost first",
    )
    find.add_argument("--run", help="run id")
    find.add_argument("--kind", help="entry kind, e.g. tool_request")
    find.add_argument("--since", type=_time,
                      help="at or after this time (ISO-8601; without an offset, UTC)")
    find.add_argument("--until", type=_time,
                      help="before this time (ISO-8601; without an offset, UTC)")
    find.add_argument("--limit", type=int, help="at most this many")
    for sub in (show, find):
        sub.add_argument("--json", action="store_true", help="one JSON object per line")
        sub.add_argument("--full", action="store_true", help="do not shorten long values")
    return parser


def _show(entries: Sequence[Entry], *, as_json: bool, full: bool) -> None:
    for entry in entries:
        if as_json:
            print(json_line(entry_to_dict(entry)))
        else:
            print(format_entry(entry, width=None if full else 200))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; return the exit status (0 sound, 1 not sound, 2 error).

    Nothing in a ledger file makes it end other than with one of these
    (argparse exits with 2 on a wrong command line); Ctrl-C ends it with 130,
    SIGTERM with 143 (in the main thread, where it takes SIGTERM while it runs).
    """
    args = _parser().parse_args(argv)
    try:
        previous = signal.signal(signal.SIGTERM, _terminate)
    except ValueError:  # not the main thread: signals are not ours to take
        previous = None
    try:
        return _run(args)
    except _Terminated:
        print("terminated", file=sys.stderr)
        return EXIT_TERMINATED
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _run(args: argparse.Namespace) -> int:
    try:
        if args.command == "verify":
            report = verify(args.file, head=args.head)
            print(report.message, file=sys.stdout if report.ok else sys.stderr)
            return EXIT_OK if report.ok else EXIT_BAD
        if args.command == "head":
            report = verify(args.file)
            if not report.ok:
                print(report.message, file=sys.stderr)
                return EXIT_BAD
            print(report.head)
            return EXIT_OK
        if args.command == "repair":
            before = verify(args.file)
            report = repair(args.file)
            if before.ok:
                print(f"{report.message}; nothing to repair")
            elif report.ok and before.torn_complete:
                seq = before.first_bad
                print(f"added the missing final newline of entry {seq}; {report.message}")
            elif report.ok:
                print(f"removed a torn last line of {before.torn_bytes} bytes; {report.message}")
            else:
                print(f"cannot repair: {report.message}", file=sys.stderr)
                return EXIT_BAD
            return EXIT_OK
        if args.command == "tail":
            _show(tail(args.file, args.n), as_json=args.json, full=args.full)
            return EXIT_OK
        entries = query(
            args.file,
            path_prefix=args.path,
            run_id=args.run,
            kind=args.kind,
            since=args.since,
            until=args.until,
            limit=args.limit,
        )
        _show(entries, as_json=args.json, full=args.full)
        return EXIT_OK
    except LedgerError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        # Only reads, or repair's one truncate or append: nothing is left half done.
        print("interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
