"""Model adapters' response and stream-event parsers: a value or ``Malformed``, nothing else."""

from __future__ import annotations

import json

from agentcore.models._anthropic import AnthropicStreamState, parse_anthropic_response
from agentcore.models._openai import OpenAIStreamState, parse_openai_response
from agentcore.models._payload import Malformed

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (Malformed,)


def target(data: bytes) -> None:
    try:
        payload = json.loads(data[1:].decode("utf-8", "replace")) if data else None
    except ValueError:
        return
    which = data[0] % 4 if data else 0
    if which == 0:
        parse_openai_response(payload)
    elif which == 1:
        parse_anthropic_response(payload)
    elif which == 2 and isinstance(payload, dict):
        state = OpenAIStreamState()
        state.feed(payload)
        state.response()
    elif isinstance(payload, dict):
        anthropic = AnthropicStreamState()
        anthropic.feed(payload)


if __name__ == "__main__":
    main(target, ALLOWED)
