"""A sans-IO parser of server-sent events (the ``text/event-stream`` format).

Both model APIs stream their replies as server-sent events. The parser follows the
WHATWG "event stream interpretation" rules: lines end in CRLF, LF or CR; a line
starting with ``:`` is a comment; ``field: value`` lines set ``data`` (multi-line
data is joined with LF), ``event``, ``id`` and ``retry``; a blank line dispatches the
event; an event without data is not dispatched. At the end of the stream
(:meth:`SSEParser.end`) an event missing only its blank line is still dispatched.
"""

from __future__ import annotations

import attrs


@attrs.frozen(slots=True)
class ServerSentEvent:
    """One dispatched event.

    Attributes:
      data: The data lines joined with LF.
      event: The event type (``message`` when the stream did not name one).
      id: The last event id seen so far in the stream.
      retry: The reconnection time in milliseconds, if this event set one.
    """

    data: str
    event: str = "message"
    id: str = ""
    retry: int | None = None


@attrs.define(eq=False)
class SSEParser:
    """Turns decoded text chunks of an event stream into :class:`ServerSentEvent` values.

    Feed it text in chunks of any size with :meth:`feed`; the events it returns do not
    depend on where the chunks were split.
    """

    _buffer: str = ""
    _pending_cr: bool = False
    _started: bool = False
    _data: list[str] = attrs.Factory(list)
    _has_data: bool = False
    _event: str = ""
    _last_id: str = ""
    _retry: int | None = None

    def feed(self, text: str) -> list[ServerSentEvent]:
        """Parse ``text`` and return the events it completed, in order. Never raises."""
        if not self._started and text:
            self._started = True
            if text.startswith("\ufeff"):
                text = text[1:]
        if self._pending_cr and text:
            # A CR ended the previous chunk; an LF starting this one is part of that CRLF.
            self._pending_cr = False
            if text.startswith("\n"):
                text = text[1:]
        events: list[ServerSentEvent] = []
        buffer = self._buffer + text
        start = 0
        length = len(buffer)
        while True:
            cr = buffer.find("\r", start)
            lf = buffer.find("\n", start)
            if cr == -1 and lf == -1:
                break
            end = lf if cr == -1 else cr if lf == -1 else min(cr, lf)
            line = buffer[start:end]
            if buffer[end] == "\r":
                if end + 1 < length:
                    start = end + 2 if buffer[end + 1] == "\n" else end + 1
                else:
                    self._pending_cr = True
                    start = end + 1
            else:
                start = end + 1
            event = self._line(line)
            if event is not None:
                events.append(event)
        self._buffer = buffer[start:]
        return events

    def end(self) -> list[ServerSentEvent]:
        """Close the stream and return its last event, if any.

        Lenient where servers are sloppy: an event whose final blank line is missing is
        still dispatched; a last line cut off before its line ending is dropped, since
        the connection may have been lost in the middle of it.
        """
        self._buffer = ""
        self._pending_cr = False
        event = self._dispatch()
        return [] if event is None else [event]

    def _line(self, line: str) -> ServerSentEvent | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            self._retry = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        event = None
        if self._has_data:
            event = ServerSentEvent(
                data="\n".join(self._data),
                event=self._event or "message",
                id=self._last_id,
                retry=self._retry,
            )
        self._data.clear()
        self._has_data = False
        self._event = ""
        self._retry = None
        return event


def parse_events(text: str) -> list[ServerSentEvent]:
    """All the events of a complete event stream ``text``. Never raises."""
    parser = SSEParser()
    return parser.feed(text) + parser.end()
