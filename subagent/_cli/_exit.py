"""How every ``subagent`` command ends: one line on standard error and a documented
exit code, whatever ends it (Ctrl-C, SIGTERM, a typed error, an exception group from
trio's nurseries, an unexpected exception).

SIGTERM (how systemd, ``docker stop`` and Kubernetes stop a process) is handled as
Ctrl-C is: the command's own SIGINT handling runs (trio's or asyncio's, which cancel
the work and stop the child processes the command started), and the command then
exits 143 (128 + SIGTERM) with ``subagent: terminated``; Ctrl-C exits 130 with
``subagent: interrupted``.
"""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import warnings
from collections.abc import Callable, Iterator
from types import FrameType

import attrs

import ledger

from .._errors import SubagentError
from .._safe_text import one_line
from ._base import EXIT_INTERRUPTED, EXIT_LEDGER, EXIT_TASK_FAILED, EXIT_USAGE

#: The exit code after SIGTERM (128 + 15).
EXIT_TERMINATED = 143


@attrs.define
class Termination:
    """Whether SIGTERM arrived while a command ran (set by its handler)."""

    fired: bool = False


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[Termination]:
    """Within the block, SIGTERM does what Ctrl-C does (the SIGINT handler current
    when it arrives runs: trio's or asyncio's, else KeyboardInterrupt is raised) and
    is remembered. Outside the main thread, nothing is installed."""
    seen = Termination()
    try:
        previous = signal.signal(signal.SIGTERM, _handler(seen))
    except ValueError:  # not the main thread: signals are not ours to take
        yield seen
        return
    hook = sys.unraisablehook
    try:
        with warnings.catch_warnings():
            yield seen
            if seen.fired:
                gc.collect()  # under the quiet filters: what the signal cut short goes now
    finally:
        signal.signal(signal.SIGTERM, previous)
        sys.unraisablehook = hook


def _handler(seen: Termination) -> Callable[[int, FrameType | None], None]:
    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        seen.fired = True
        _quiet_teardown()
        interrupt = signal.getsignal(signal.SIGINT)
        if callable(interrupt):
            interrupt(signal.SIGINT, frame)
        else:
            raise KeyboardInterrupt
    return on_sigterm


def _quiet_teardown() -> None:
    """The command is stopping on a signal, which may have landed between any two
    bytecodes: what the interpreter would print about the work it cut short (a
    coroutine created but never awaited, a ``__del__`` failing on a half-built asyncio
    loop) is not for the user, who gets the one line. Undone when the block ends."""
    warnings.filterwarnings("ignore", message=r"coroutine .* was never awaited",
                            category=RuntimeWarning)
    sys.unraisablehook = _drop


def _drop(unraisable: sys.UnraisableHookArgs) -> None:
    del unraisable


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions an exception (group) holds, groups flattened, in order. Pure."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def ending(exc: BaseException, terminated: bool) -> tuple[int, str] | None:
    """The exit code and one line of what ended a command with ``exc``; None for
    ``SystemExit`` alone (argparse's, which says its own line). Pure.

    A KeyboardInterrupt anywhere in a group is the interrupt (the rest are what it
    cancelled); a group of typed errors only is their first, with how many more.
    """
    found = leaves(exc)
    if all(isinstance(e, SystemExit) for e in found):
        return None
    if any(isinstance(e, KeyboardInterrupt) for e in found):
        return (EXIT_TERMINATED, "terminated") if terminated else (
            EXIT_INTERRUPTED, "interrupted")
    first = found[0]
    more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
    if all(isinstance(e, SubagentError) for e in found):
        return EXIT_USAGE, one_line(str(first)) + more
    if all(isinstance(e, ledger.VerifyError) for e in found):
        return EXIT_LEDGER, one_line(str(first)) + more
    return EXIT_TASK_FAILED, f"unexpected error: {type(first).__name__}: " + one_line(
        str(first)) + more


def say(text: str) -> None:
    """Print one ``subagent:`` line on standard error."""
    print(f"subagent: {text}", file=sys.stderr, flush=True)
