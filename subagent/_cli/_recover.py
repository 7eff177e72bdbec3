"""The command line of crash recovery: ``subagent run --checkpoints FILE`` and
``subagent recover FILE SPECS`` (their arguments; ``_cli.run_specs`` runs them)."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentcore import RunState

from .._safe_text import one_line
from ._statefile import print_pending


def add_recover(run: argparse.ArgumentParser, commands: Any) -> None:
    """Add ``--checkpoints`` to the ``run`` command and the ``recover`` command."""
    run.add_argument("--checkpoints", type=Path, default=None, metavar="FILE",
                     help="commit every task's state to this SQLite file at each turn "
                          "(then `subagent recover FILE SPECS` after a crash)")
    recover = commands.add_parser("recover", help="resume the tasks a crash left unfinished "
                                  "(run --checkpoints)")
    recover.add_argument("file", type=Path, help="the checkpoints file")
    recover.add_argument("specs", type=Path, help="the TOML specs file it ran with")
    recover.add_argument("--workspace", type=Path, default=None,
                         help="root of the workspace tools (default: the current directory)")
    recover.add_argument("--ledger", type=Path, default=None,
                         help="the ledger file the run wrote (its chain is continued)")
    recover.add_argument("--plain", action="store_true", help="plain lines, no live tree")
    gates = recover.add_mutually_exclusive_group()
    gates.add_argument("--approve", action="store_true", help="ask on the terminal per tool call")
    gates.add_argument("--yes", action="store_true", help="allow every tool call")
    gates.add_argument("--approve-later", type=Path, default=None, metavar="FILE",
                       help="store each tree that waits for approval (paused before the "
                            "crash, or pausing now) in FILE, FILE.2, ... to answer it")


def paused_files(base: Path | None) -> Iterator[Path | None]:
    """Where ``recover --approve-later FILE`` stores the paused trees, in turn: FILE,
    then FILE.2, FILE.3, ... (``None`` each time without the option)."""
    yield base
    k = 2
    while True:
        yield None if base is None else base.with_name(f"{base.name}.{k}")
        k += 1


def left_paused(state: RunState, checkpoint: str, how: str) -> str:
    """What ``recover`` says of a tree it found waiting for a human: its checkpoint,
    the deferred calls (as ``subagent pending`` lists them) and ``how`` to answer
    (the ``--approve-later`` text)."""
    listed = io.StringIO()
    print_pending(state, listed)
    return (f"left paused at checkpoint {one_line(checkpoint, 200)} (it waits for a "
            f"human):\n{listed.getvalue()}{how}")


def left_failed(run_id: str, error: Exception) -> str:
    """What ``recover`` says of a tree it could not recover (``Recovered.failed``)."""
    return (f"not recovered: run {one_line(run_id, 200)}: {type(error).__name__}: "
            f"{one_line(str(error), 500)}")
