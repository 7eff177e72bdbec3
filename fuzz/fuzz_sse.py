"""SSE parser: chunking does not change the events, nor whether a line or event passes
``max_event_chars`` (the only error it raises: ``LimitExceeded``)."""

from __future__ import annotations

from agentcore.models._limits import LimitExceeded
from agentcore.models._sse import ServerSentEvent, SSEParser, parse_events

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (LimitExceeded,)


def _chunked(text: str, step: int, limit: int) -> list[ServerSentEvent]:
    parser = SSEParser(limit)
    events = []
    for start in range(0, len(text), step):
        events += parser.feed(text[start:start + step])
    return events + parser.end()


def target(data: bytes) -> None:
    if len(data) < 2:
        return
    step = data[0] % 7 + 1
    # Small limits half the time, so the bound is reached often; else the default.
    limit = data[1] % 64 + 1 if data[1] % 2 else 1 << 20
    text = data[2:].decode("utf-8", "replace")
    try:
        whole = parse_events(text, limit)
    except LimitExceeded:
        whole = None
    try:
        chunked = _chunked(text, step, limit)
    except LimitExceeded:
        chunked = None
    assert chunked == whole, (text, step, limit)


if __name__ == "__main__":
    main(target, ALLOWED)
