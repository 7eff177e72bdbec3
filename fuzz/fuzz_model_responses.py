"""Model adapters' response, stream-event and error parsers: a value, ``Malformed`` or
``LimitExceeded``, nothing else; error text never holds the key and stays within its cap;
tool input re-encodes as ``json.dumps`` would."""

from __future__ import annotations

import json

from agentcore.models._anthropic import AnthropicStreamState, parse_anthropic_response
from agentcore.models._apierror import api_error_to_exception, parse_api_error
from agentcore.models._limits import ERROR_TEXT_CHARS, LimitExceeded, ReplyLimits, Tally
from agentcore.models._openai import OpenAIStreamState, parse_openai_response
from agentcore.models._payload import Malformed, encode_input, try_loads

from ._runner import main

ALLOWED: tuple[type[BaseException], ...] = (Malformed, LimitExceeded)

KEY = "sk-fuzz-0123456789"


def _limits(byte: int) -> ReplyLimits:
    # Tiny limits half the time, so that the bounds are reached.
    if byte % 2:
        return ReplyLimits()
    return ReplyLimits(byte % 5 + 1, byte % 7 + 1, byte % 3 + 1, byte % 11 + 1, byte % 13 + 1)


def _error_text(body: bytes) -> None:
    for status in (None, 400, 429, 500):
        exc = api_error_to_exception(
            "API", parse_api_error(status, body), secret=KEY, is_context_error=lambda e: False
        )
        message = str(exc)
        assert KEY not in message, message
        assert len(message) <= len("API API error (HTTP 500): ") + ERROR_TEXT_CHARS + 3


def target(data: bytes) -> None:
    if len(data) < 2:
        return
    which, limits, body = data[0] % 6, _limits(data[1]), data[2:]
    if which == 5:
        # The key in one of its forms, somewhere in the error body.
        form = (KEY, repr(KEY), "".join(f"\\x{ord(c):02x}" for c in KEY))[data[1] % 3]
        at = data[1] * 37 % (len(body) + 1)
        _error_text(body[:at] + form.encode() + body[at:])
        return
    payload, problem = try_loads(limits.check_body(body).decode("utf-8", "replace"))
    if problem is not None:
        return
    try:
        expected = json.dumps(payload)
    except RecursionError:  # parsed near the recursion limit, dumped deeper in the stack
        expected = None
    assert expected is None or encode_input(payload) == expected
    if which == 0:
        limits.check(parse_openai_response(payload))
    elif which == 1:
        limits.check(parse_anthropic_response(payload))
    elif which in (2, 3) and isinstance(payload, dict):
        openai = OpenAIStreamState(tally=Tally(limits))
        for _ in range(which):  # the same chunk again: fragments accumulate
            openai.feed(payload)
        openai.response()
    elif isinstance(payload, dict):
        anthropic = AnthropicStreamState(tally=Tally(limits))
        anthropic.feed(payload)
        anthropic.feed(payload)
        anthropic.response()


if __name__ == "__main__":
    main(target, ALLOWED)
