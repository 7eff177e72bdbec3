"""The command line's paused-run files: ``subagent run --approve-later FILE`` writes
one, ``pending`` / ``approve`` / ``deny`` read and answer it, ``resume`` continues it.

A file holds exactly ``RunState.to_json()``. It is read as hostile input: a regular
file only, at most ``MAX_STATE_BYTES``, decoded by ``RunState.from_json`` (version and
digest checked). It is written whole (a temporary file, then a rename) with mode 0600.

Answering is a read-modify-write of the whole file: it runs under an exclusive
advisory lock (``flock``) on ``FILE.lock`` (created 0600 beside it, never removed; a
symbolic link or anything but a regular file there is refused), so
two answers given at once are both kept; a lock held longer than ``LOCK_TIMEOUT``
seconds is an error, not a wait without end. ``subagent resume`` takes the file
under the same lock before it runs anything: it replaces the state in the file with
a *claim* (:data:`CLAIM_FORMAT`: the run id, the state's resume key and the state
itself), then renames it ``FILE.resumed``. A claimed file is refused by every
command (``pending``, ``approve``, ``deny``, ``resume``), whatever its name, so the
same paused run is not resumed twice (its approved calls would run twice); a copy
made before the resume is refused by the claim in the ledger (``_ledgerclaim``).
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import msgspec
import trio

from agentcore import GateDecision, GateRequest, RunState, RunStateError, is_read_only
from agentcore.limits import MAX_STATE_BYTES
from agentcore.models._replay import read_regular_file
from ledger import _crashpoints
from ledger._files import open_private, try_lock

from .._delegation._tool import SubagentTool
from .._durable._claims import resume_key
from .._durable._resumable import bind
from .._errors import SubagentError
from .._safe_text import one_line

if TYPE_CHECKING:
    from .._pool._pool import Pool

#: How much of a deferred call's arguments ``subagent pending`` shows.
SHOWN_ARGUMENTS = 500
#: How much of a deferred call's id, path, tool name and reason it shows.
SHOWN_FIELD = 200
#: The most seconds an answer (or a resume) waits for the lock of a paused-run file.
LOCK_TIMEOUT = 10.0
#: How long it waits between two tries of the lock.
_LOCK_POLL = 0.005


#: The format name of a paused-run file taken by ``subagent resume``.
CLAIM_FORMAT = "subagent.ResumedRun"


class StateFileError(SubagentError):
    """A paused-run file cannot be read, is not a RunState, or cannot be written."""


class _Claim(msgspec.Struct):
    # What ``subagent resume`` leaves in the file it took: never resumable again.
    format: str
    version: int
    run_id: str
    resume_key: str
    state: msgspec.Raw


class _Head(msgspec.Struct):
    format: str = ""


_head = msgspec.json.Decoder(_Head)


def resumed_path(path: Path) -> Path:
    """Where ``subagent resume`` moves the paused run at ``path`` when it takes it."""
    return path.with_name(path.name + ".resumed")


@contextlib.contextmanager
def locked(path: Path, timeout: float | None = None) -> Iterator[None]:
    """Hold the exclusive lock of the paused-run file ``path`` (``flock`` on
    ``path.lock``). Not a checkpoint: it blocks, polling, for at most ``timeout``
    seconds (default ``LOCK_TIMEOUT``).

    Raises:
      StateFileError: the lock file cannot be opened or locked, or another process
        held the lock for ``timeout`` seconds.
    """
    if timeout is None:
        timeout = LOCK_TIMEOUT
    _refuse_link(path)
    lock = path.with_name(path.name + ".lock")
    try:
        # Never through a symbolic link, never blocking on a FIFO put in its place.
        fd = open_private(str(lock), os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise StateFileError(f"cannot lock the paused run {path}: {exc.strerror}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StateFileError(
                f"cannot lock the paused run {path}: its lock file is not a regular file")
        deadline = time.monotonic() + timeout
        while True:
            try:
                if try_lock(fd):
                    break
            except OSError as exc:
                raise StateFileError(
                    f"cannot lock the paused run {path}: {exc.strerror}") from None
            if time.monotonic() >= deadline:
                raise StateFileError(
                    f"the paused run {path} is locked by another subagent command "
                    f"(approve, deny or resume) for more than {timeout:g}s; try again"
                )
            time.sleep(_LOCK_POLL)
        yield
    finally:
        os.close(fd)  # closing the file releases the lock


def _refuse_link(path: Path) -> None:
    # Through a symbolic link the lock and the claim would sit beside the link: the
    # file it points to, answered or resumed by its own name, would escape both.
    if path.is_symlink():
        raise StateFileError(
            f"cannot read the paused run {path}: it is a symbolic link; name the file it "
            "points to")


def read_state(path: Path) -> RunState:
    """The paused run stored at ``path``. Not a checkpoint (blocking file I/O).

    Raises:
      StateFileError: unreadable, a symbolic link or not a regular file, too large,
        or not a valid RunState (the reason is given; the path is the user's own); or resumed
        already (moved to ``FILE.resumed``).
    """
    _refuse_link(path)
    if not path.exists() and resumed_path(path).exists():
        raise StateFileError(
            f"the paused run {path} was resumed already (it is kept as "
            f"{resumed_path(path).name}): resuming or answering it again could run its "
            "approved calls twice"
        )
    try:
        data = read_regular_file(path, MAX_STATE_BYTES)
        # A claim, or a state taken by a version before claims (moved to FILE.resumed
        # as it was): both were resumed.
        if _is_claim(data) or path.name.endswith(".resumed"):
            raise StateFileError(
                f"the paused run {path} was resumed already: resuming or answering it "
                "again could run its approved calls twice")
        return RunState.from_json(data)
    except (ValueError, RunStateError) as exc:
        raise StateFileError(f"cannot read the paused run {path}: {exc}") from None


def _is_claim(data: bytes) -> bool:
    # Whether ``data`` is a JSON object whose format is CLAIM_FORMAT (anything else is
    # left to RunState.from_json, which says what is wrong, a RecursionError on deep
    # nesting included).
    try:
        return _head.decode(data).format == CLAIM_FORMAT
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return False


def write_state(path: Path, state: RunState) -> None:
    """Store ``state`` at ``path`` whole (0600), replacing what is there. Not a
    checkpoint (blocking file I/O)."""
    _write_whole(path, state.to_json().encode())


def check_free(path: Path) -> None:
    """Refuse ``path`` as the file a run that pauses is stored in when something is
    there already (it may be another paused run, its answers not yet resumed) or its
    folder does not exist. Not a checkpoint.

    Raises:
      StateFileError: something is at ``path``, or its folder does not exist.
    """
    if not (path.parent if str(path.parent) else Path(".")).is_dir():
        raise StateFileError(f"cannot store a paused run in {path}: its folder does not exist")
    if os.path.lexists(path):
        raise StateFileError(
            f"{path} exists: it may hold another paused run (answer and resume it, or "
            "move it away); a new one is never stored over it")


def store_paused(path: Path, state: RunState) -> None:
    """Store the run that just paused at ``path`` whole (0600), never over anything
    there (see :func:`check_free`). Not a checkpoint (blocking file I/O).

    Raises:
      StateFileError: something is at ``path`` already, or it cannot be written.
    """
    _write_whole(path, state.to_json().encode(), replace=False)


def _write_whole(path: Path, text: bytes, *, replace: bool = True) -> None:
    # ``text`` at ``path``, whole (a temporary file, fsync, rename), 0600; with
    # ``replace`` False, linked into place instead: never over an existing file.
    folder = path.parent if str(path.parent) else Path(".")
    try:
        k = _crashpoints.before("state file: temporary copy") if _crashpoints.ON else 0
        fd, temp = tempfile.mkstemp(prefix=".paused-", dir=folder)
        try:
            os.fchmod(fd, 0o600)
            os.write(fd, text)
            os.fsync(fd)
        finally:
            os.close(fd)
        if k:
            _crashpoints.after(k)
        try:
            k = _crashpoints.before("state file: rename into place") if _crashpoints.ON else 0
            if replace:
                os.replace(temp, path)
            else:
                os.link(temp, path)
                os.unlink(temp)
            if k:
                _crashpoints.after(k)
        except OSError:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temp)  # no stray copy of the state is left behind
            raise
    except FileExistsError:
        check_free(path)  # raises, saying what is wrong
        raise
    except OSError as exc:
        raise StateFileError(f"cannot write the paused run {path}: {exc.strerror}") from None


async def defer_changes(request: GateRequest) -> GateDecision:
    """The gate of ``--approve-later``: read-only tools and delegation run, any other
    call waits for a human (deferred). A checkpoint."""
    from trio.lowlevel import checkpoint

    await checkpoint()
    # The delegation tool by what it is, not by name: any tool (an MCP server's) may
    # be called "subagent".
    if isinstance(request.tool, SubagentTool):
        return GateDecision(True, "delegation")
    if is_read_only(request.tool):
        return GateDecision(True, "read-only")
    return GateDecision.defer(f"tool {request.tool.name!r} may change things: approve it later")


def print_pending(state: RunState, out: TextIO) -> int:
    """List the deferred calls of ``state`` on ``out`` (escaped); returns how many."""
    waiting = state.pending_approvals
    for p in waiting:
        arguments = p.arguments
        if len(arguments) > SHOWN_ARGUMENTS:
            arguments = arguments[:SHOWN_ARGUMENTS] + f"... ({len(p.arguments)} characters)"
        print(f"{one_line(p.call_id, SHOWN_FIELD)}  "
              f"{one_line('/'.join(p.path) or '(root)', SHOWN_FIELD)}  "
              f"{one_line(p.tool, SHOWN_FIELD)} {one_line(arguments)}  "
              f"({one_line(p.reason, SHOWN_FIELD)})", file=out)
    if not waiting:
        print("no call waits for an answer", file=out)
    return len(waiting)


def answer(path: Path, call_id: str, *, allow: bool, reason: str | None, by: str,
           run_path: str | None) -> None:
    """Record an answer in the paused run at ``path``, under its lock (see
    :func:`locked`). Not a checkpoint.

    Raises:
      StateFileError: the file cannot be read, locked or written, or no deferred call
        has that id (the message lists those waiting).
    """
    where = tuple(run_path.split("/")) if run_path else None
    where = None if where is None else tuple(
        "/".join(where[i:i + 2]) for i in range(0, len(where), 2)
    )
    with locked(path):
        state = read_state(path)
        try:
            if allow:
                state.approve(call_id, reason=reason or "approved", by=by, path=where)
            else:
                state.deny(call_id, reason or "denied", by=by, path=where)
        except RunStateError as exc:
            raise StateFileError(str(exc)) from None
        write_state(path, state)


async def take_checked(pool: Pool, path: Path) -> RunState:
    """The paused run at ``path``, checked against ``pool``'s specs as ``Pool.resume``
    checks it, then taken (:func:`take_for_resume`): a resume refused before anything
    runs (a tool missing or changed, an unknown agent) leaves the file as it was, to
    be answered again or resumed with the right specs. A checkpoint (file I/O and the
    lock's wait in a thread).

    Raises:
      StateFileError: as :func:`take_for_resume`.
      SubagentError, agentcore.ResumeError: as ``Pool.resume``'s checks.
    """
    bind(pool.specs, await trio.to_thread.run_sync(read_state, path), None)
    return await trio.to_thread.run_sync(take_for_resume, path)


def take_for_resume(path: Path) -> RunState:
    """Read the paused run at ``path``, replace it there by its claim
    (:data:`CLAIM_FORMAT`) and move it to ``FILE.resumed``, under its lock, before it
    is resumed: a second ``subagent resume`` (or a late answer) of that file, under
    either name, is refused instead of running its approved calls again. Not a
    checkpoint.

    Raises:
      StateFileError: as :func:`read_state` (including resumed already), or the file
        cannot be written or moved.
    """
    with locked(path):
        state = read_state(path)
        text = state.to_json()
        claim = _Claim(CLAIM_FORMAT, 1, state.run_id, resume_key(state),
                       msgspec.Raw(text.encode()))
        # The claim first, at the same name: a crash before the rename leaves it claimed.
        _write_whole(path, msgspec.json.encode(claim))
        try:
            k = _crashpoints.before("state file: rename to .resumed") if _crashpoints.ON else 0
            os.replace(path, resumed_path(path))
            if k:
                _crashpoints.after(k)
        except OSError as exc:
            raise StateFileError(
                f"cannot mark the paused run {path} resumed: {exc.strerror}") from None
        return state


def give_back(path: Path, state: RunState) -> None:
    """Undo :func:`take_for_resume` of ``path`` (its resume did not start: nothing of
    it ran): ``state`` is written back at ``path`` and ``FILE.resumed`` removed, under
    the file's lock. Not a checkpoint.

    Raises:
      StateFileError: the lock cannot be taken, or the file cannot be written (it then
        stays claimed: resuming it is refused, never run twice).
    """
    with locked(path):
        write_state(path, state)
        try:
            os.unlink(resumed_path(path))
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StateFileError(
                f"cannot give back the paused run {path}: {exc.strerror}") from None
