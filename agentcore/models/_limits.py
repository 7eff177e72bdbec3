"""The bounds on what a model server may send, and the sans-IO counters that apply them.

A server is untrusted (a plain-http ``OPENAI_BASE_URL`` is one MITM away from hostile),
so every reply is bounded: its decoded body, a streamed event or line, the text and
tool arguments it accumulates, its number of tool calls, and the error text shown from
it. Exceeding a bound raises :class:`LimitExceeded` here; the HTTP layer turns it into
a :class:`~agentcore.ModelError` naming the API, the bound and its value.
"""

from __future__ import annotations

from typing import Any

import attrs

from .._errors import ConfigurationError
from .._messages import ModelResponse

MiB = 1024 * 1024

#: Default cap on a reply's decoded body (after gzip/deflate), bytes.
DEFAULT_MAX_RESPONSE_BYTES = 32 * MiB
#: Default cap on the text of one reply, characters.
DEFAULT_MAX_TEXT_CHARS = 8 * MiB
#: Default cap on the tool-call arguments of one reply (all calls together), characters.
DEFAULT_MAX_ARGUMENTS_CHARS = 8 * MiB
#: Default cap on the tool calls of one reply.
DEFAULT_MAX_TOOL_CALLS = 256
#: Default cap on the JSON values of one non-streamed reply (commas and opening brackets
#: counted before parsing: 32 MiB of ``[{},{},...]`` would parse into 800 MB of dicts).
DEFAULT_MAX_JSON_VALUES = 1 << 20
#: Default cap on one server-sent event line, and on one event's data, characters.
DEFAULT_MAX_EVENT_CHARS = 1 * MiB
#: ``total_timeout`` defaults to this many times ``read_timeout``.
TOTAL_TIMEOUT_FACTOR = 10
#: Cap on the server text quoted in an error message, characters (after masking the key).
ERROR_TEXT_CHARS = 4096
#: Cap on the body of an error response read for its message, bytes; the rest is not read.
ERROR_BODY_BYTES = 1 * MiB


def default_total_timeout(adapter: Any) -> float:
    """An adapter's default ``total_timeout``: :data:`TOTAL_TIMEOUT_FACTOR` times its
    ``read_timeout`` (an attrs factory taking the instance)."""
    return float(TOTAL_TIMEOUT_FACTOR * adapter.read_timeout)


class LimitExceeded(Exception):
    """A reply passed one of the bounds; the message names it and its value (internal:
    the HTTP layer reports it as a ModelError naming the API)."""


def positive(_inst: object, attribute: attrs.Attribute[Any], value: float) -> None:
    """An attrs validator: ``value`` must be a positive number."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigurationError(f"{attribute.name} must be a positive number, not {value!r}")


@attrs.frozen(slots=True)
class ReplyLimits:
    """The bounds on one reply's content (a value; the adapters build it from their fields).

    Attributes:
      max_text_chars: Characters of reply text.
      max_arguments_chars: Characters of tool-call arguments, all calls together.
      max_tool_calls: Tool calls.
      max_event_chars: Characters of one server-sent event line or event's data.
      max_json_values: JSON values in a non-streamed reply's body (counted before
        parsing as its commas and opening brackets, those inside strings included).
    """

    max_text_chars: int = attrs.field(default=DEFAULT_MAX_TEXT_CHARS, validator=positive)
    max_arguments_chars: int = attrs.field(
        default=DEFAULT_MAX_ARGUMENTS_CHARS, validator=positive
    )
    max_tool_calls: int = attrs.field(default=DEFAULT_MAX_TOOL_CALLS, validator=positive)
    max_event_chars: int = attrs.field(default=DEFAULT_MAX_EVENT_CHARS, validator=positive)
    max_json_values: int = attrs.field(default=DEFAULT_MAX_JSON_VALUES, validator=positive)

    def check_body(self, body: bytes) -> bytes:
        """``body`` if its JSON cannot hold more than ``max_json_values`` values, else
        :class:`LimitExceeded`. Counts bytes, so it costs a few milliseconds per MiB
        and no memory: parsing is what would cost memory (a ``{}`` of 2 bytes is a dict
        of 64)."""
        values = body.count(b",") + body.count(b"[") + body.count(b"{")
        if values > self.max_json_values:
            raise LimitExceeded(
                f"reply has more JSON values than max_json_values ({self.max_json_values})"
            )
        return body

    def check(self, response: ModelResponse) -> ModelResponse:
        """``response`` if it is within the bounds, else :class:`LimitExceeded`."""
        tally = Tally(self)
        tally.add_text(len(response.message.content))
        for call in response.message.tool_calls:
            tally.add_call()
            tally.add_arguments(len(call.arguments) + len(call.name) + len(call.id))
        return response


@attrs.define(eq=False)
class Tally:
    """What a streamed reply has accumulated so far, checked against its limits as it
    grows (sans-IO; each stream state owns one)."""

    limits: ReplyLimits = ReplyLimits()
    text: int = 0
    arguments: int = 0
    calls: int = 0

    def add_text(self, n: int) -> None:
        """Count ``n`` more characters of text. Raises :class:`LimitExceeded`."""
        self.text += n
        if self.text > self.limits.max_text_chars:
            raise LimitExceeded(
                f"reply's text is longer than max_text_chars "
                f"({self.limits.max_text_chars} characters)"
            )

    def add_arguments(self, n: int) -> None:
        """Count ``n`` more characters of tool calls (arguments, names, ids). Raises
        :class:`LimitExceeded`."""
        self.arguments += n
        if self.arguments > self.limits.max_arguments_chars:
            raise LimitExceeded(
                f"reply's tool arguments are longer than max_arguments_chars "
                f"({self.limits.max_arguments_chars} characters)"
            )

    def add_call(self) -> None:
        """Count one more tool call. Raises :class:`LimitExceeded`."""
        self.calls += 1
        if self.calls > self.limits.max_tool_calls:
            raise LimitExceeded(
                f"reply has more tool calls than max_tool_calls ({self.limits.max_tool_calls})"
            )


def body_too_large(limit: int) -> LimitExceeded:
    """The error for a decoded body past ``limit`` bytes."""
    return LimitExceeded(f"reply is larger than max_response_bytes ({limit} bytes)")


def event_too_large(limit: int) -> LimitExceeded:
    """The error for a server-sent event line or event past ``limit`` characters."""
    return LimitExceeded(
        f"stream has an event line or event longer than max_event_chars ({limit} characters)"
    )


def cut(text: str, limit: int = ERROR_TEXT_CHARS) -> str:
    """``text``, cut to ``limit`` characters followed by ``...``. Mask secrets *before*
    cutting, or a key cut in two survives in part."""
    return text if len(text) <= limit else text[:limit] + "..."
