"""A ChatModel on the Anthropic messages API."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Coroutine, Mapping
from typing import Any

import attrs

from .._errors import ModelError
from .._messages import Message, ModelRequest, ModelResponse, ToolCall
from .._models import DeltaSink
from ._apierror import ApiError, error_from_object
from ._http import Endpoint, complete_json, httpx, stream_reply
from ._keys import argument_key, env_key, mask
from ._limits import (
    DEFAULT_MAX_ARGUMENTS_CHARS,
    DEFAULT_MAX_EVENT_CHARS,
    DEFAULT_MAX_JSON_VALUES,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_TEXT_CHARS,
    DEFAULT_MAX_TOOL_CALLS,
    ReplyLimits,
    Tally,
    default_total_timeout,
    positive,
)
from ._payload import Malformed, as_object, encode_input, event_json, field
from ._prices import PriceTable, load_prices, priced
from ._sse import ServerSentEvent
from ._usage import anthropic_counts, anthropic_usage, reported_model

DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"

_STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


def _env_key() -> str:
    return env_key("ANTHROPIC_API_KEY")


def _env_base_url() -> str:
    return os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_BASE_URL


@attrs.frozen(eq=False)
class AnthropicChatModel:
    """A :class:`~agentcore.StreamingChatModel` speaking the Anthropic messages API.

    System messages go to the request's ``system``; tool results become ``tool_result``
    blocks of a user message (consecutive ones merged into one message). Each call
    opens its own HTTP connection unless a caller-owned ``client`` is given. The
    adapter does not retry: it raises :class:`~agentcore.TransientModelError` (with
    ``retry_after`` from ``Retry-After``) for 408, 409, 429, 5xx (529 overloaded
    included), timeouts and dropped connections; the agent loop retries those.

    Args:
      model: The model name, e.g. ``claude-sonnet-4-5``.
      api_key: The key; defaults to ``$ANTHROPIC_API_KEY``. Never shown in reprs or
        error messages. Surrounding whitespace is stripped; a key holding a control
        character, a space or a non-ASCII character is refused with a
        ConfigurationError naming where it came from.
      base_url: Defaults to ``$ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``.
      connect_timeout: Seconds to establish a connection.
      read_timeout: Seconds to wait for each chunk of the reply.
      total_timeout: Seconds the whole call may take, trickling body included (default
        ``10 * read_timeout``); past it, a TransientModelError. The time a streaming
        caller's ``on_delta`` takes does not count.
      max_response_bytes: The most bytes a reply's body may hold once decompressed (a
        whole stream included); past it, a ModelError.
      max_text_chars: The most characters of text in one reply.
      max_arguments_chars: The most characters of tool calls (arguments, names and
        ids, all calls together) in one reply.
      max_tool_calls: The most tool calls in one reply.
      max_event_chars: The longest line, and the most data of one event, in a streamed
        reply.
      max_json_values: The most JSON values in a non-streamed reply (its commas and
        opening brackets, counted before parsing: parsed, 2 bytes of ``{}`` take 64).
      max_tokens: The reply's token limit (the API requires one).
      temperature: The sampling temperature, if any.
      client: A caller-owned ``httpx.AsyncClient`` to reuse connections; our timeouts
        still apply to each request.
      prices: The caller's :data:`~agentcore.models.PriceTable`, which wins over
        genai-prices in pricing each answer's ``usage.cost``.
    """

    model: str
    api_key: str = attrs.field(
        kw_only=True, factory=_env_key, converter=argument_key, repr=mask
    )
    base_url: str = attrs.field(kw_only=True, factory=_env_base_url)
    connect_timeout: float = attrs.field(kw_only=True, default=10.0)
    read_timeout: float = attrs.field(kw_only=True, default=120.0, validator=positive)
    total_timeout: float = attrs.field(
        kw_only=True,
        default=attrs.Factory(default_total_timeout, takes_self=True),
        validator=positive,
    )
    max_response_bytes: int = attrs.field(
        kw_only=True, default=DEFAULT_MAX_RESPONSE_BYTES, validator=positive
    )
    max_text_chars: int = attrs.field(
        kw_only=True, default=DEFAULT_MAX_TEXT_CHARS, validator=positive
    )
    max_arguments_chars: int = attrs.field(
        kw_only=True, default=DEFAULT_MAX_ARGUMENTS_CHARS, validator=positive
    )
    max_tool_calls: int = attrs.field(
        kw_only=True, default=DEFAULT_MAX_TOOL_CALLS, validator=positive
    )
    max_event_chars: int = attrs.field(
        kw_only=True, default=DEFAULT_MAX_EVENT_CHARS, validator=positive
    )
    max_json_values: int = attrs.field(
        kw_only=True, default=DEFAULT_MAX_JSON_VALUES, validator=positive
    )
    max_tokens: int = attrs.field(kw_only=True, default=4096)
    temperature: float | None = attrs.field(kw_only=True, default=None)
    client: httpx.AsyncClient | None = attrs.field(kw_only=True, default=None)
    prices: PriceTable | None = attrs.field(kw_only=True, default=None, repr=False)

    @functools.cached_property
    def _endpoint(self) -> Endpoint:
        # Made once (the fields it reads are frozen), not once a call: every call holds
        # it for as long as it runs.
        return Endpoint(
            api="Anthropic",
            secret=self.api_key,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            total_timeout=self.total_timeout,
            max_response_bytes=self.max_response_bytes,
            limits=self._limits,
            is_context_error=is_anthropic_context_error,
            client=self.client,
        )

    @property
    def _limits(self) -> ReplyLimits:
        return ReplyLimits(
            self.max_text_chars,
            self.max_arguments_chars,
            self.max_tool_calls,
            self.max_event_chars,
            self.max_json_values,
        )

    @property
    def _url(self) -> str:
        return self.base_url.rstrip("/") + "/v1/messages"

    def _headers(self, *, stream: bool) -> dict[str, str]:
        if not self.api_key:
            raise ModelError(
                "No Anthropic API key: pass api_key= or set the ANTHROPIC_API_KEY variable"
            )
        return {
            "x-api-key": self.api_key,
            "anthropic-version": ANTHROPIC_VERSION,
            "Accept": "text/event-stream" if stream else "application/json",
        }

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a messages request for ``request``."""
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        if system:
            body["system"] = system
        body["messages"] = anthropic_messages(request.messages)
        if request.tools:
            body["tools"] = [
                {"name": t.name, "description": t.description, "input_schema": dict(t.parameters)}
                for t in request.tools
            ]
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if stream:
            body["stream"] = True
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The model's reply to ``request``. A checkpoint.

        Raises:
          TransientModelError: worth retrying (429, 5xx, timeout, dropped connection).
          ContextTooLongError: the conversation is too long for the model.
          ModelError: any other failure, including a malformed reply or a missing key.
        """
        headers = self._headers(stream=False)
        await load_prices()
        response = await complete_json(
            self._endpoint,
            self._url,
            headers,
            self.request_body(request, stream=False),
            parse_anthropic_response,
        )
        return priced(response, self.model, self.prices)

    def _stream_parts(self, request: ModelRequest) -> tuple[dict[str, str], dict[str, Any]]:
        # A streamed call's headers and body, built when the call is awaited.
        return self._headers(stream=True), self.request_body(request, stream=True)

    def stream(
        self, request: ModelRequest, on_delta: DeltaSink
    ) -> Coroutine[Any, Any, ModelResponse]:
        """The model's reply to ``request``, streamed: ``on_delta`` is awaited with each
        text delta as it arrives. A checkpoint (a coroutine to await: made here, without
        a frame of its own, so that a call parked in the stream holds one coroutine,
        :func:`~._http.stream_reply`, which builds the request when awaited). Raises as
        :meth:`complete`, when awaited."""
        endpoint = self._endpoint
        return stream_reply(
            endpoint,
            self._url,
            self._stream_parts,
            request,
            read_anthropic_event,
            AnthropicStreamState(tally=Tally(endpoint.limits)),
            on_delta,
            self.model,
            self.prices,
        )


def read_anthropic_event(event: ServerSentEvent) -> Mapping[str, Any] | ApiError:
    """A streamed event's JSON data, or its error."""
    data = event_json(event)
    if data.get("type", event.event) == "error":
        return error_from_object(None, field(data, "error", dict, "error event"))
    return data


def is_anthropic_context_error(error: ApiError) -> bool:
    """Whether the Anthropic API said the conversation is too long."""
    message = error.message.lower()
    return error.status in (400, 413, None) and (
        "prompt is too long" in message or "exceed context limit" in message
    )


def _tool_input(arguments: str) -> dict[str, Any]:
    # The API wants an object; arguments that are not a JSON object are sent as {}.
    try:
        value = json.loads(arguments)
    except (ValueError, RecursionError):
        return {}
    return value if isinstance(value, dict) else {}


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.role == "tool":
        return [
            {
                "type": "tool_result",
                "tool_use_id": message.tool_call_id or "",
                "content": message.content,
                "is_error": message.is_error,
            }
        ]
    blocks: list[dict[str, Any]] = []
    if message.content:
        blocks.append({"type": "text", "text": message.content})
    for call in message.tool_calls:
        blocks.append(
            {
                "type": "tool_use",
                "id": call.id,
                "name": call.name,
                "input": _tool_input(call.arguments),
            }
        )
    return blocks


def anthropic_messages(messages: tuple[Message, ...]) -> list[dict[str, Any]]:
    """The non-system ``messages`` in the messages-API format.

    Tool messages become ``tool_result`` blocks of a user message; consecutive user-side
    messages are merged into one, tool results first (as the API requires). Messages
    with nothing to say (empty text, no tool calls) are left out: the API refuses them.
    """
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    for entry in out:
        if entry["role"] == "user":
            entry["content"].sort(key=lambda b: b["type"] != "tool_result")
    return out


def stop_reason(reason: str | None) -> str:
    """Our finish reason for an Anthropic ``stop_reason`` (unknown ones pass through)."""
    if reason is None:
        return "stop"
    return _STOP_REASONS.get(reason, reason)


def parse_anthropic_response(payload: object) -> ModelResponse:
    """A messages-API response body as a ModelResponse. Raises :class:`Malformed`."""
    body = as_object(payload, "the response")
    text: list[str] = []
    calls: list[ToolCall] = []
    for i, raw in enumerate(field(body, "content", list, "response")):
        where = f"response.content[{i}]"
        block = as_object(raw, where)
        kind = field(block, "type", str, where)
        if kind == "text":
            text.append(field(block, "text", str, where))
        elif kind == "tool_use":
            calls.append(
                ToolCall(
                    field(block, "id", str, where),
                    field(block, "name", str, where),
                    encode_input(field(block, "input", dict, where, {})),
                )
            )
    counts = anthropic_counts(field(body, "usage", dict, "response", {}), "usage")
    return ModelResponse(
        Message("assistant", "".join(text), tuple(calls)),
        stop_reason(field(body, "stop_reason", str, "response", "") or None),
        anthropic_usage(counts, reported_model(body, "response")),
    )


@attrs.define(eq=False)
class AnthropicStreamState:
    """Accumulates the events of a streamed message into one ModelResponse."""

    stop_reason: str | None = None
    stopped: bool = False
    model: str = ""
    tally: Tally = attrs.Factory(Tally)
    _text: list[str] = attrs.Factory(list)
    # block index -> [id, name, initial input JSON, partial JSON...] for tool_use blocks
    _calls: dict[int, list[str]] = attrs.Factory(dict)
    # usage key -> its latest count (message_delta's counts are cumulative)
    _counts: dict[str, int] = attrs.Factory(dict)

    @property
    def finished(self) -> bool:
        """Whether an event gave the stop reason."""
        return self.stop_reason is not None

    def feed(self, data: Mapping[str, Any]) -> str:
        """Take in one event's data; return its text delta ("" if none).
        Raises :class:`Malformed`, or :class:`LimitExceeded` once the reply passes its
        tally's limits."""
        kind = field(data, "type", str, "event")
        if kind == "message_start":
            message = field(data, "message", dict, "message_start")
            self.model = reported_model(message, "message_start.message")
            self._take_usage(field(message, "usage", dict, "message_start.message", {}))
        elif kind == "content_block_start":
            index = field(data, "index", int, "content_block_start")
            block = field(data, "content_block", dict, "content_block_start")
            block_type = field(block, "type", str, "content_block")
            if block_type == "text":
                return self._add_text(field(block, "text", str, "content_block", ""))
            if block_type == "tool_use":
                initial = field(block, "input", dict, "content_block", {})
                call = [
                    field(block, "id", str, "content_block"),
                    field(block, "name", str, "content_block"),
                    encode_input(initial) if initial else "",
                ]
                if index not in self._calls:
                    self.tally.add_call()
                self.tally.add_arguments(sum(map(len, call)))
                self._calls[index] = call
        elif kind == "content_block_delta":
            index = field(data, "index", int, "content_block_delta")
            delta = field(data, "delta", dict, "content_block_delta")
            delta_type = field(delta, "type", str, "delta")
            if delta_type == "text_delta":
                return self._add_text(field(delta, "text", str, "delta"))
            if delta_type == "input_json_delta":
                if index not in self._calls:
                    raise Malformed(f"input_json_delta for block {index}, which is not tool_use")
                partial = field(delta, "partial_json", str, "delta")
                self.tally.add_arguments(len(partial))
                self._calls[index].append(partial)
        elif kind == "message_delta":
            delta = field(data, "delta", dict, "message_delta")
            reason = field(delta, "stop_reason", str, "message_delta.delta", "")
            if reason:
                self.stop_reason = reason
            self._take_usage(field(data, "usage", dict, "message_delta", {}))
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def _add_text(self, text: str) -> str:
        if text:
            self.tally.add_text(len(text))
            self._text.append(text)
        return text

    def _take_usage(self, usage: Mapping[str, Any]) -> None:
        # Counts in message_delta are cumulative: they replace the earlier ones.
        self._counts.update(anthropic_counts(usage, "usage"))

    def response(self) -> ModelResponse:
        """The reply the events so far make up."""
        calls = []
        for _, parts in sorted(self._calls.items()):
            partial = "".join(parts[3:])
            calls.append(ToolCall(parts[0], parts[1], partial or parts[2] or "{}"))
        return ModelResponse(
            Message("assistant", "".join(self._text), tuple(calls)),
            stop_reason(self.stop_reason),
            anthropic_usage(self._counts, self.model),
        )
