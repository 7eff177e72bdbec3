"""A ChatModel on an OpenAI-compatible chat-completions API (OpenAI, vLLM, Ollama,
llama.cpp server, ...)."""

from __future__ import annotations

import functools
import os
from collections.abc import Coroutine, Mapping
from typing import Any

import attrs

from .._messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
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
from ._usage import openai_usage, reported_model

DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"


def _env_key() -> str:
    return env_key("OPENAI_API_KEY")


def _env_base_url() -> str:
    return os.environ.get("OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL


@attrs.frozen(eq=False)
class OpenAIChatModel:
    """A :class:`~agentcore.StreamingChatModel` speaking the chat-completions API.

    Each call opens its own HTTP connection (no connection outlives the call) unless a
    caller-owned ``client`` is given. The adapter does not retry: it raises
    :class:`~agentcore.TransientModelError` (with ``retry_after`` from the server's
    ``Retry-After``) for 408, 409, 429, 5xx, timeouts and dropped connections, and the
    agent loop retries those with backoff.

    Args:
      model: The model name, e.g. ``gpt-4o-mini`` or ``llama3.1:8b``.
      api_key: The key; defaults to ``$OPENAI_API_KEY``. None of the servers that need
        no key (Ollama, llama.cpp) mind its absence: no ``Authorization`` is sent then.
        Never shown in reprs or error messages. Surrounding whitespace is stripped; a
        key holding a control character, a space or a non-ASCII character is refused
        with a ConfigurationError naming where it came from.
      base_url: Defaults to ``$OPENAI_BASE_URL``, else ``https://api.openai.com/v1``.
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
      max_tokens: The reply's token limit, if any (sent as ``max_tokens``).
      temperature: The sampling temperature, if any.
      stream_usage: Ask for usage in streamed replies (``stream_options``).
      client: A caller-owned ``httpx.AsyncClient`` to reuse connections; our timeouts
        still apply to each request. An HTTP/2 client (``http2=True``) carries many
        calls on one connection.
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
    max_tokens: int | None = attrs.field(kw_only=True, default=None)
    temperature: float | None = attrs.field(kw_only=True, default=None)
    stream_usage: bool = attrs.field(kw_only=True, default=True)
    client: httpx.AsyncClient | None = attrs.field(kw_only=True, default=None)
    prices: PriceTable | None = attrs.field(kw_only=True, default=None, repr=False)

    @functools.cached_property
    def _endpoint(self) -> Endpoint:
        # Made once (the fields it reads are frozen), not once a call: every call holds
        # it for as long as it runs.
        return Endpoint(
            api="OpenAI",
            secret=self.api_key,
            connect_timeout=self.connect_timeout,
            read_timeout=self.read_timeout,
            total_timeout=self.total_timeout,
            max_response_bytes=self.max_response_bytes,
            limits=self._limits,
            is_context_error=is_openai_context_error,
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
        return self.base_url.rstrip("/") + "/chat/completions"

    def _headers(self, *, stream: bool) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def request_body(self, request: ModelRequest, *, stream: bool) -> dict[str, Any]:
        """The JSON body of a chat-completions request for ``request``."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": [openai_message(m) for m in request.messages],
        }
        if request.tools:
            body["tools"] = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": dict(t.parameters),
                    },
                }
                for t in request.tools
            ]
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The model's reply to ``request``. A checkpoint.

        Raises:
          TransientModelError: worth retrying (429, 5xx, timeout, dropped connection).
          ContextTooLongError: the conversation is too long for the model.
          ModelError: any other failure, including a malformed reply.
        """
        await load_prices()
        response = await complete_json(
            self._endpoint,
            self._url,
            self._headers(stream=False),
            self.request_body(request, stream=False),
            parse_openai_response,
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
            read_openai_event,
            OpenAIStreamState(tally=Tally(endpoint.limits)),
            on_delta,
            self.model,
            self.prices,
        )


def read_openai_event(event: ServerSentEvent) -> Mapping[str, Any] | ApiError | None:
    """A streamed chunk's JSON data, its error, or None for the ``[DONE]`` marker."""
    if event.data.strip() == "[DONE]":
        return None
    chunk = event_json(event)
    error = chunk.get("error")
    if isinstance(error, Mapping):
        return error_from_object(None, error)
    return chunk


def is_openai_context_error(error: ApiError) -> bool:
    """Whether an OpenAI-compatible server said the conversation is too long."""
    return (
        error.code == "context_length_exceeded"
        or error.type == "exceed_context_size_error"  # llama.cpp server
        or "maximum context length" in error.message.lower()  # vLLM
    )


def openai_message(message: Message) -> dict[str, Any]:
    """``message`` in the chat-completions format."""
    if message.role == "tool":
        return {
            "role": "tool",
            "tool_call_id": message.tool_call_id or "",
            "content": message.content,
        }
    if message.role == "assistant" and message.tool_calls:
        return {
            "role": "assistant",
            "content": message.content or None,
            "tool_calls": [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in message.tool_calls
            ],
        }
    return {"role": message.role, "content": message.content}


def finish_reason(reason: str | None, has_tool_calls: bool) -> str:
    """Our finish reason for a chat-completions one. Some servers say ``stop`` with tool
    calls; a reply with tool calls always finishes ``tool_calls``."""
    if has_tool_calls and reason in (None, "stop", "function_call", "tool_calls"):
        return "tool_calls"
    if reason is None:
        return "stop"
    return reason


def _arguments(value: object, where: str) -> str:
    if value is None:
        return "{}"
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):  # some compatible servers send an object
        return encode_input(value)
    raise Malformed(f"{where} is neither a string nor an object")


def parse_openai_response(payload: object) -> ModelResponse:
    """A chat-completions response body as a ModelResponse. Raises :class:`Malformed`."""
    body = as_object(payload, "the response")
    choices = field(body, "choices", list, "response")
    if not choices:
        raise Malformed("response.choices is empty")
    choice = as_object(choices[0], "response.choices[0]")
    message = field(choice, "message", dict, "choices[0]")
    content = field(message, "content", str, "message", "")
    calls: list[ToolCall] = []
    for i, raw in enumerate(field(message, "tool_calls", list, "message", [])):
        where = f"message.tool_calls[{i}]"
        call = as_object(raw, where)
        function = field(call, "function", dict, where)
        calls.append(
            ToolCall(
                id=field(call, "id", str, where),
                name=field(function, "name", str, f"{where}.function"),
                arguments=_arguments(function.get("arguments"), f"{where}.function.arguments"),
            )
        )
    reason = field(choice, "finish_reason", str, "choices[0]", "")
    return ModelResponse(
        Message("assistant", content, tuple(calls)),
        finish_reason(reason or None, bool(calls)),
        openai_usage(body, "response"),
    )


@attrs.define(eq=False)
class OpenAIStreamState:
    """Accumulates the chunks of a streamed chat completion into one ModelResponse."""

    text: list[str] = attrs.Factory(list)
    finish_reason: str | None = None
    usage: Usage = Usage()
    model: str = ""
    tally: Tally = attrs.Factory(Tally)
    _calls: dict[int, list[str]] = attrs.Factory(dict)  # index -> [id, arguments...]
    # index -> the pieces of its name, joined at the end: concatenating a name sent a
    # character per chunk would cost time quadratic in its length.
    _names: dict[int, list[str]] = attrs.Factory(dict)

    @property
    def finished(self) -> bool:
        """Whether a chunk gave the finish reason."""
        return self.finish_reason is not None

    @property
    def stopped(self) -> bool:
        """Never: the ``[DONE]`` marker, not a chunk, ends the stream."""
        return False

    def feed(self, chunk: Mapping[str, Any]) -> str:
        """Take in one chunk; return its text delta ("" if none). Raises :class:`Malformed`,
        or :class:`LimitExceeded` once the reply passes its tally's limits."""
        self.model = reported_model(chunk, "chunk") or self.model
        if chunk.get("usage") is not None:
            self.usage = openai_usage(chunk, "chunk")
        choices = field(chunk, "choices", list, "chunk", [])
        if not choices:
            return ""
        choice = as_object(choices[0], "chunk.choices[0]")
        reason = field(choice, "finish_reason", str, "chunk.choices[0]", "")
        if reason:
            self.finish_reason = reason
        delta = field(choice, "delta", dict, "chunk.choices[0]", {})
        for position, raw in enumerate(field(delta, "tool_calls", list, "delta", [])):
            where = f"delta.tool_calls[{position}]"
            call = as_object(raw, where)
            index = field(call, "index", int, where, position)
            parts = self._calls.get(index)
            if parts is None:
                self.tally.add_call()
                parts = self._calls[index] = [""]
                self._names[index] = []
            parts[0] = field(call, "id", str, where, parts[0])
            function = field(call, "function", dict, where, {})
            name = field(function, "name", str, f"{where}.function", "")
            arguments = function.get("arguments")
            added = ""
            if arguments is not None:
                added = _arguments(arguments, f"{where}.function.arguments")
            self.tally.add_arguments(len(parts[0]) + len(name) + len(added))
            if name:
                self._names[index].append(name)
            if arguments is not None:
                parts.append(added)
        text = field(delta, "content", str, "delta", "")
        if text:
            self.tally.add_text(len(text))
            self.text.append(text)
        return text

    def response(self) -> ModelResponse:
        """The reply the chunks so far make up."""
        calls = tuple(
            ToolCall(
                parts[0] or f"call_{index}", "".join(self._names[index]),
                "".join(parts[1:]) or "{}",
            )
            for index, parts in sorted(self._calls.items())
        )
        return ModelResponse(
            Message("assistant", "".join(self.text), calls),
            finish_reason(self.finish_reason, bool(calls)),
            attrs.evolve(self.usage, model=self.usage.model or self.model),
        )
