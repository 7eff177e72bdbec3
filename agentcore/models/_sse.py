"""A sans-IO parser of server-sent events (the ``text/event-stream`` format).

Both model APIs stream their replies as server-sent events. The parser follows the
WHATWG "event stream interpretation" rules: lines end in CRLF, LF or CR; a line
starting with ``:`` is a comment; ``field: value`` lines set ``data`` (multi-line
data is joined with LF), ``event``, ``id`` and ``retry``; a blank line dispatches the
event; an event without data is not dispatched. At the end of the stream
(:meth:`SSEParser.end`) an event missing only its blank line is still dispatched.
"""

from __future__ import annotations

import re

import attrs

from ._limits import DEFAULT_MAX_EVENT_CHARS, event_too_large

_LINE_END = re.compile(r"\r\n|\r|\n")


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
    depend on where the chunks were split. Work and memory are linear in the text fed:
    a line still open is kept as a list of its pieces, joined once when it ends.

    Args:
      max_event_chars: The longest line, and the most data one event may gather, in
        characters; past it :meth:`feed` raises :class:`LimitExceeded`.
    """

    max_event_chars: int = DEFAULT_MAX_EVENT_CHARS
    _pieces: list[str] = attrs.Factory(list)  # the open line, not yet ended
    _open_chars: int = 0
    _pending_cr: bool = False
    _started: bool = False
    _data: list[str] = attrs.Factory(list)
    _data_chars: int = 0
    _has_data: bool = False
    _event: str = ""
    _last_id: str = ""
    _retry: int | None = None

    def feed(self, text: str) -> list[ServerSentEvent]:
        """Parse ``text`` and return the events it completed, in order.

        Raises:
          LimitExceeded: a line or an event's data grew past ``max_event_chars``
            (the parser is then unusable).
        """
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
        start = 0
        for match in _LINE_END.finditer(text):
            line = text[start:match.start()]
            if self._pieces:
                self._pieces.append(line)
                line = "".join(self._pieces)
                self._pieces.clear()
                self._open_chars = 0
            if len(line) > self.max_event_chars:
                raise event_too_large(self.max_event_chars)
            start = match.end()
            if match.group() == "\r" and start == len(text):
                self._pending_cr = True
            event = self._line(line)
            if event is not None:
                events.append(event)
        if start < len(text):
            self._open_chars += len(text) - start
            if self._open_chars > self.max_event_chars:
                raise event_too_large(self.max_event_chars)
            self._pieces.append(text[start:])
        return events

    def end(self) -> list[ServerSentEvent]:
        """Close the stream and return its last event, if any.

        Lenient where servers are sloppy: an event whose final blank line is missing is
        still dispatched; a last line cut off before its line ending is dropped, since
        the connection may have been lost in the middle of it.
        """
        self._pieces.clear()
        self._open_chars = 0
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
            self._data_chars += len(value) + 1
            if self._data_chars > self.max_event_chars:
                raise event_too_large(self.max_event_chars)
            self._data.append(value)
            self._has_data = True
        elif name == "event":
            self._event = value
        elif name == "id":
            if "\0" not in value:
                self._last_id = value
        elif name == "retry" and value.isascii() and value.isdigit() and len(value) <= 18:
            # Longer is no usable time, and int() refuses over 4,300 digits (ValueError).
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
        self._data_chars = 0
        self._has_data = False
        self._event = ""
        self._retry = None
        return event


def parse_events(
    text: str, max_event_chars: int = DEFAULT_MAX_EVENT_CHARS
) -> list[ServerSentEvent]:
    """All the events of a complete event stream ``text``. Raises as :meth:`SSEParser.feed`."""
    parser = SSEParser(max_event_chars)
    return parser.feed(text) + parser.end()
