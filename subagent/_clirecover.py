"""The command line of crash recovery: ``subagent run --checkpoints FILE`` and
``subagent recover FILE SPECS`` (their arguments; ``_cli.run_specs`` runs them)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any


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
