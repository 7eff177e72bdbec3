"""The command line on Temporal: ``subagent temporal ...`` (its arguments, and the
dispatch that imports ``subagent.temporal``, and so temporalio, only when used)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

from .._errors import SubagentError
from .._safe_text import one_line
from ._base import EXIT_USAGE


def add_temporal(commands: Any) -> None:
    """``subagent temporal dev|worker|run|pending|approve|deny|interrupt|steer`` (needs
    the ``temporal`` extra to run)."""
    temporal = commands.add_parser("temporal", help="run agents on Temporal (extra 'temporal')")
    subs = temporal.add_subparsers(dest="temporal_command", required=True)
    dev = subs.add_parser("dev", help="the Temporal dev server on 127.0.0.1 and a worker")
    dev.add_argument("--port", type=int, default=7233, help="gRPC port (default 7233)")
    dev.add_argument("--db", type=Path, default=None,
                     help="SQLite file keeping the server's state (default: in memory)")
    worker = subs.add_parser("worker", help="a worker for a specs file")
    trun = subs.add_parser("run", help="submit a root workflow and follow it")
    trun.add_argument("--agent", required=True, help="the agent to run")
    trun.add_argument("--id", default=None, help="the workflow id (default: agent/<random>)")
    for sub in (dev, worker, trun):
        sub.add_argument("specs", type=Path, help="the TOML specs file")
        sub.add_argument("--task-queue", default="subagent", help="default: subagent")
        sub.add_argument("--workspace", type=Path, default=None,
                         help="root of the workspace tools (default: the current directory)")
    for sub in (worker, trun):
        sub.add_argument("--address", default="127.0.0.1:7233", help="the Temporal frontend")
    for sub in (dev, worker):
        sub.add_argument("--ledger-dir", type=Path, default=None,
                         help="one ledger per root workflow here (default: in the state "
                              "directory)")
        sub.add_argument("--max-roots", type=int, default=16,
                         help="roots this worker runs at once (default 16)")
        sub.add_argument("--yes", action="store_true", help="allow every tool call")
        sub.add_argument("--approve-later", action="store_true",
                         help="defer calls of tools that may change things: the workflow "
                              "pauses until they are answered (temporal approve|deny)")
    trun.add_argument("task", help="the task text")
    tpending = subs.add_parser("pending", help="the calls a paused root workflow waits on")
    tapprove = subs.add_parser("approve", help="approve a deferred call of a paused workflow")
    tdeny = subs.add_parser("deny", help="deny a deferred call of a paused workflow")
    tinterrupt = subs.add_parser("interrupt", help="ask a root workflow to stop gracefully")
    tsteer = subs.add_parser("steer", help="add a user message to a root workflow's run")
    for sub in (tpending, tapprove, tdeny, tinterrupt, tsteer):
        sub.add_argument("workflow_id", help="the root workflow's id")
        sub.add_argument("--address", default="127.0.0.1:7233", help="the Temporal frontend")
    for sub in (tapprove, tdeny):
        sub.add_argument("call_id", help="the deferred call's id (see: temporal pending)")
        sub.add_argument("--reason", default=None, help="why (recorded in the ledger)")
        sub.add_argument("--by", default="", help="who answers (recorded in the ledger)")
        sub.add_argument("--path", default=None,
                         help="the run's path, when several deferred calls share the id")
    tsteer.add_argument("text", help="the message")


def run_temporal(args: argparse.Namespace, out: TextIO) -> int:
    """Run a ``subagent temporal`` command (importing temporalio only now)."""
    try:
        from . import _temporal_command as _command
    except ImportError as exc:
        print(f"subagent: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
    try:
        return _command.main(args, out)
    except SubagentError as exc:
        print(f"subagent: {one_line(str(exc))}", file=sys.stderr)
        return EXIT_USAGE
