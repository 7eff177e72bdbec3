"""``python -m subagent`` and the ``subagent`` script: the command line (see
``subagent._cli._cli``)."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import NoReturn

#: What a signal that arrives while the command line is imported ends the process
#: with: the codes and lines of ``subagent._cli._exit`` (not imported from there: that
#: import is what the signal interrupts).
_STOPS = {signal.SIGINT: (130, "interrupted"), signal.SIGTERM: (143, "terminated")}


def run() -> NoReturn:
    """Run the command and exit with its code.

    ``subagent temporal ...`` leaves without finalizing the interpreter, once its
    output is flushed: temporalio's client threads can abort a finalizing
    interpreter ("PyGILState_Release ... finalizing", temporalio/sdk-python#300),
    which turned a finished command into exit code 134 about once in ten runs.
    """
    with _stopped_at_once():
        from ._cli._cli import main
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    if sys.argv[1:2] == ["temporal"]:
        os._exit(code)
    _ended(code)
    sys.exit(code)


def _ended(code: int) -> None:
    # The command has ended and said so: a Ctrl-C or SIGTERM while the interpreter
    # shuts down (a fifth of a second) ends it at once with that same code, instead
    # of killing it by the signal or printing an ignored KeyboardInterrupt.
    if threading.current_thread() is not threading.main_thread():
        return

    def leave(signum: int, frame: FrameType | None) -> None:
        os._exit(code)

    for sig in _STOPS:
        signal.signal(sig, leave)


@contextlib.contextmanager
def _stopped_at_once() -> Iterator[None]:
    # Importing the command line takes about a second (trio, httpx, the SDKs): a
    # Ctrl-C or SIGTERM meanwhile ends the process at once with its one line and
    # code, as nothing has started that would need stopping. The handlers before it
    # are put back (trio protects a run from Ctrl-C only over the default one).
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        code, line = _STOPS[signal.Signals(signum)]
        os.write(2, f"subagent: {line}\n".encode())
        os._exit(code)

    previous = {sig: signal.signal(sig, stop) for sig in _STOPS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


if __name__ == "__main__":
    run()
