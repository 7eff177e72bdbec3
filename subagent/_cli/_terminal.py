"""The terminal of ``subagent run``: its lines, and ``--approve``'s questions.

:class:`Screen` prints whole lines and holds them back while a question waits for
its answer, so nothing splits the question's line. :class:`TerminalApproval` is the
``--approve`` gate: it asks one question at a time (a :class:`trio.Lock`, which is
fair, so questions are asked in the order they came), each on one line with the
agent path, the tool and its arguments escaped and capped, and it applies the answer
to the call shown. :class:`TerminalAnswers` reads the answers from a file
descriptor on the event loop (no thread that could outlive a question and eat the
answer meant for the next one).
"""

from __future__ import annotations

import contextlib
import errno
import os
import termios
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

import attrs
import trio

from agentcore import GateDecision, GateRequest

from .._errors import format_path
from .._safe_text import one_line

#: The longest answer line read; the rest of a longer line is dropped (it is no "y").
MAX_ANSWER_BYTES = 4096
#: How much of an over-long line is dropped before the input counts as ended.
MAX_SKIPPED_BYTES = 1024 * 1024
#: Lines held back while a question waits; more are counted, not kept.
MAX_HELD_LINES = 1000


@attrs.define(eq=False)
class Screen:
    """Where the CLI prints: whole lines, held back while a question is on screen."""

    out: TextIO
    _held: list[str] | None = None
    _dropped: int = 0

    def line(self, text: str) -> None:
        """Print ``text`` (already made safe) as a line, or hold it while a question waits."""
        if self._held is None:
            print(text, file=self.out, flush=True)
        elif len(self._held) < MAX_HELD_LINES:
            self._held.append(text)
        else:
            self._dropped += 1

    @contextmanager
    def question(self, text: str) -> Iterator[None]:
        """Show ``text`` (already made safe, without a line end) and hold other lines
        until the block ends; then print them."""
        print(text, end="", file=self.out, flush=True)
        self._held = []
        try:
            yield
        finally:
            held, self._held = self._held, None
            for text in held:
                self.line(text)
            if self._dropped:
                self.line(f"({self._dropped} more lines were not shown while asking)")
                self._dropped = 0


@attrs.define(eq=False)
class TerminalAnswers:
    """Lines read from a file descriptor (standard input) under trio.

    The descriptor is waited on with :func:`trio.lowlevel.wait_readable` and read
    with :func:`os.read` once it is readable, so a cancelled question leaves nothing
    behind; descriptors that cannot be polled (a regular file, ``/dev/null``) are read
    directly, as they never block.
    """

    fd: int
    _buffer: bytearray = attrs.Factory(bytearray)
    _eof: bool = False
    _pollable: bool = True
    _skipping: bool = False
    _skipped: int = 0

    def discard_typeahead(self) -> None:
        """On a terminal, forget what was typed before the question was shown, so an
        answer meant for an earlier question cannot answer this one. Not a checkpoint."""
        if not os.isatty(self.fd):
            return
        self._buffer.clear()
        with contextlib.suppress(termios.error, OSError):  # not ours to flush: keep them
            termios.tcflush(self.fd, termios.TCIFLUSH)

    async def readline(self) -> str | None:
        """The next line, without its end (at most :data:`MAX_ANSWER_BYTES`), or None
        at the end of input. A checkpoint."""
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0 or self._eof or len(self._buffer) >= MAX_ANSWER_BYTES:
                break
            await self._fill()
        if end < 0 and self._eof and not self._buffer:
            await trio.lowlevel.checkpoint()
            return None
        if end < 0:  # the last line, or an over-long one: the rest of it is dropped
            line = bytes(self._buffer[:MAX_ANSWER_BYTES])
            self._buffer.clear()
            self._skipping = not self._eof
        else:
            line = bytes(self._buffer[:end])
            del self._buffer[: end + 1]
        await trio.lowlevel.checkpoint()
        return line.decode("utf-8", "replace")

    async def _fill(self) -> None:
        if self._pollable:
            try:
                await trio.lowlevel.wait_readable(self.fd)
            except OSError as exc:
                if exc.errno != errno.EPERM:
                    self._eof = True  # a closed or invalid descriptor: no more answers
                    return
                self._pollable = False
            except ValueError:  # a negative descriptor: there is no input
                self._eof = True
                return
        else:
            await trio.lowlevel.checkpoint()
        try:
            chunk = os.read(self.fd, MAX_ANSWER_BYTES)
        except BlockingIOError:
            return
        except OSError:
            self._eof = True
            return
        if not chunk:
            if os.isatty(self.fd):  # Ctrl-D on a terminal: no answer now, more may come
                self._buffer += b"\n"
            else:
                self._eof = True
        elif self._skipping:
            end = chunk.find(b"\n")
            if end >= 0:
                self._skipping = False
                self._skipped = 0
                self._buffer += chunk[end + 1 :]
            else:
                self._skipped += len(chunk)
                # Input with no line ends at all (``< /dev/zero``) answers nothing more.
                self._eof = self._skipped > MAX_SKIPPED_BYTES
        else:
            self._buffer += chunk


def approval_question(request: GateRequest, max_shown: int) -> str:
    """The one-line question about ``request``: agent path, tool name and arguments,
    escaped (no line end, no control character), the arguments capped at ``max_shown``
    characters."""
    path = one_line(format_path(request.path), 200)
    tool = one_line(request.tool.name, 100)
    arguments = one_line(request.call.arguments, max_shown)
    return f"allow {path} to call {tool} {arguments}? [y/N] "


@attrs.define(eq=False)
class TerminalApproval:
    """The ``--approve`` gate: asks on the terminal, one question at a time.

    Args:
      screen: Where the questions are shown (and other lines held meanwhile).
      answers: Where the answers are read.
      timeout: Seconds to wait for an answer once the question is shown; no answer by
        then denies. Waiting for an earlier question to be answered does not count
        (the run's own ``gate_timeout`` bounds the whole wait).
      max_shown: How many characters of the arguments the question shows.

    Calling the gate is a checkpoint.
    """

    screen: Screen
    answers: TerminalAnswers
    timeout: float = 60.0
    max_shown: int = 500
    _turn: trio.Lock = attrs.Factory(trio.Lock)

    async def __call__(self, request: GateRequest) -> GateDecision:
        async with self._turn:
            return await self._ask(request)

    async def _ask(self, request: GateRequest) -> GateDecision:
        name = request.tool.name
        echo = not os.isatty(self.answers.fd)  # a terminal echoes the answer itself
        self.answers.discard_typeahead()
        with self.screen.question(approval_question(request, self.max_shown)):
            try:
                with trio.move_on_after(self.timeout):
                    answer = await self.answers.readline()
                    if echo:
                        print(one_line(answer or "", 40), file=self.screen.out, flush=True)
                    if answer is None:
                        return GateDecision(
                            False, f"no approval for tool {name!r}: the terminal's input is closed"
                        )
                    if answer.strip().lower() in ("y", "yes"):
                        return GateDecision(True, "approved")
                    return GateDecision(False, f"the approver refused tool {name!r}")
            except trio.Cancelled:
                print("\n(question withdrawn: the run ended)", file=self.screen.out, flush=True)
                raise
            print(f"\n(no answer within {self.timeout:g}s: denied)", file=self.screen.out,
                  flush=True)
        return GateDecision(False, f"no approval for tool {name!r} within {self.timeout:g}s")
