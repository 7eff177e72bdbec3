"""The command line's ledger files: where they live by default, private folders for
them, and opening the sink a path names."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ._errors import SubagentError


class LedgerOpenError(SubagentError):
    """The ledger file (or its folder) cannot be created; exit code 2."""


def state_dir() -> Path:
    """The CLI's state directory: ``$XDG_STATE_HOME/subagent`` (default
    ``~/.local/state/subagent``), where the default ledgers go."""
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    return state / "subagent"


def default_ledger_path() -> Path:
    """A fresh ledger file in the user's state directory."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    return state_dir() / f"ledger-{stamp}-{os.getpid()}.jsonl"


def make_private_dirs(folder: Path) -> None:
    """Create ``folder`` and every missing parent with mode 0700 (ledgers hold prompts
    and tool output). The state directory itself, when it already exists, is narrowed
    to 0700 if it is ours; other existing folders are left as they are.

    Raises:
      OSError: a folder cannot be created.
    """
    missing: list[Path] = []
    for candidate in (folder, *folder.parents):
        if candidate.is_dir():
            break
        missing.append(candidate)
    for candidate in reversed(missing):
        try:
            os.mkdir(candidate, 0o700)
        except FileExistsError:  # made meanwhile by another process, or not a folder
            if not candidate.is_dir():
                raise
    if folder == state_dir():
        st = folder.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            os.chmod(folder, 0o700)


def open_sink(path: Path) -> Any:
    """The ledger sink for ``path``: SQLite for ``.sqlite``/``.db``, JSON Lines otherwise.

    Raises:
      LedgerOpenError: the folder or the file cannot be created.
    """
    import ledger

    try:
        make_private_dirs(path.parent)
        if path.suffix in (".sqlite", ".sqlite3", ".db"):
            return ledger.SqliteSink(path)
        return ledger.JsonlSink(path)
    except OSError as exc:
        raise LedgerOpenError(f"cannot create the ledger {str(path)!r}: {exc.strerror}") from exc
    except ledger.LedgerError as exc:
        raise LedgerOpenError(f"cannot open the ledger {str(path)!r}: {exc}") from exc
