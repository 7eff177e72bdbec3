"""SSE parser: never raises, and the events do not depend on how the text is chunked."""

from __future__ import annotations

from agentcore.models._sse import SSEParser, parse_events

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = ()


def target(data: bytes) -> None:
    if not data:
        return
    cut = data[0]
    text = data[1:].decode("utf-8", "replace")
    whole = parse_events(text)
    parser = SSEParser()
    step = cut % 7 + 1
    chunked = []
    for start in range(0, len(text), step):
        chunked += parser.feed(text[start:start + step])
    chunked += parser.end()
    assert chunked == whole, (text, step)


if __name__ == "__main__":
    main(target, ALLOWED)
