"""A model that replays replies from a JSON file (the ``scripted:`` model spec).

The file is a JSON array of replies, each an object with any of::

    {"content": "text",
     "tool_calls": [{"id": "call_1", "name": "grep", "arguments": "{\\"pattern\\": \\"x\\"}"}],
     "finish_reason": "tool_calls",
     "usage": {"input_tokens": 10, "output_tokens": 5}}

``arguments`` is JSON text (an object is accepted too and encoded); ``finish_reason``
defaults to ``tool_calls`` when there are tool calls, else ``stop``.

The file must be a regular file (a symbolic link to one is followed) of at most
:data:`MAX_REPLAY_BYTES`: a FIFO, a device (``/dev/zero``) or a directory is refused
before a byte is read, and never waited on.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from ledger._files import not_regular

from .._errors import ModelError
from .._messages import Message, ModelRequest, ModelResponse, ToolCall, Usage
from .._models import DeltaSink

_REPLY_KEYS = frozenset({"content", "tool_calls", "finish_reason", "usage"})
_CALL_KEYS = frozenset({"id", "name", "arguments"})
_USAGE_KEYS = frozenset({"input_tokens", "output_tokens"})
_WORDS = re.compile(r"\s*\S+\s*|\s+")
#: The largest replay file :meth:`ReplayModel.from_file` reads (16 MiB).
MAX_REPLAY_BYTES = 16 * 1024 * 1024
def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file at ``path``, which must hold at most ``limit``.

    Whatever is at ``path`` is looked at before it is opened, and opened without
    blocking (``O_NONBLOCK``, so a FIFO swapped in meanwhile is not waited on) and
    checked again on the open descriptor; the read stops after ``limit + 1`` bytes,
    however the file grows. Not a checkpoint (blocking file I/O).

    Raises:
      ValueError: it is missing or unreadable, not a regular file, or too large; the
        message says which, and does not name the path (the caller does).
    """
    try:
        mode = os.stat(path).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(not_regular(mode))
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(exc.strerror or "it cannot be read") from None
    except ValueError as exc:  # os.stat refuses a NUL in the path with a ValueError
        if "null" in str(exc):
            raise ValueError("the path holds a NUL character") from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(not_regular(st.st_mode))
        too_large = ValueError(f"it is larger than the limit of {limit} bytes")
        if st.st_size > limit:
            raise too_large
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise too_large
        return b"".join(chunks)
    except OSError as exc:
        raise ValueError(exc.strerror or "it cannot be read") from None
    finally:
        os.close(fd)


def _replies(replies: Iterable[ModelResponse]) -> tuple[ModelResponse, ...]:
    return tuple(replies)


@attrs.define(eq=False)
class ReplayModel:
    """A :class:`~agentcore.StreamingChatModel` that returns ``replies`` in order,
    whatever it is asked, and raises :class:`~agentcore.ModelError` once they run out.

    Build it with :meth:`from_file` or :meth:`from_json`. ``stream`` delivers each
    reply's text word by word.
    """

    replies: tuple[ModelResponse, ...] = attrs.field(converter=_replies)
    source: str = "<replies>"
    _used: int = 0

    @classmethod
    def from_file(cls, path: str | Path, *, max_bytes: int = MAX_REPLAY_BYTES) -> ReplayModel:
        """The replay model of the JSON file at ``path`` (read now, synchronously): a
        regular file of at most ``max_bytes`` (see the module docstring).

        Raises:
          ValueError: the file cannot be read, is not a regular file, is too large or
            is not a valid replay file; the message names the file and what is wrong.
        """
        try:
            text = read_regular_file(path, max_bytes).decode("utf-8")
        except (ValueError, UnicodeDecodeError) as exc:
            reason = "it is not UTF-8 text" if isinstance(exc, UnicodeDecodeError) else str(exc)
            raise ValueError(f"Cannot read replay file {str(path)!r}: {reason}") from None
        try:
            data = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise ValueError(f"Replay file {str(path)!r} is not valid JSON: {exc}") from None
        return cls.from_json(data, source=str(path))

    @classmethod
    def from_json(cls, data: object, *, source: str = "<replies>") -> ReplayModel:
        """The replay model of already-parsed replay data (see the module docstring).

        Raises:
          ValueError: ``data`` is not a list of valid replies; the message names
            ``source``, the reply's index and the problem.
        """
        if not isinstance(data, list):
            raise ValueError(f"Replay file {source!r} must hold a JSON array of replies")
        replies = []
        for i, raw in enumerate(data):
            try:
                replies.append(_reply(raw))
            except _Invalid as exc:
                raise ValueError(f"Replay file {source!r}, reply {i}: {exc}") from None
        return cls(replies, source)

    @property
    def remaining(self) -> int:
        """How many replies have not been returned yet."""
        return len(self.replies) - self._used

    def _next(self) -> ModelResponse:
        if self._used >= len(self.replies):
            raise ModelError(
                f"Replay file {self.source!r} has no reply left: all {len(self.replies)} "
                f"were used and the model was called again"
            )
        reply = self.replies[self._used]
        self._used += 1
        return reply

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next reply. A checkpoint.

        Raises:
          ModelError: every reply was already returned.
        """
        await trio.lowlevel.checkpoint()
        return self._next()

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        """The next reply, its text awaited into ``on_delta`` word by word. A checkpoint.

        Raises:
          ModelError: every reply was already returned.
        """
        await trio.lowlevel.checkpoint()
        reply = self._next()
        for word in _WORDS.findall(reply.message.content):
            await on_delta(word)
        return reply


class _Invalid(Exception):
    pass


def _check_keys(obj: Mapping[str, Any], allowed: frozenset[str], what: str) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise _Invalid(f"unknown {what} key {unknown[0]!r} (expected {', '.join(sorted(allowed))})")


def _reply(raw: object) -> ModelResponse:
    if not isinstance(raw, Mapping):
        raise _Invalid("must be an object")
    _check_keys(raw, _REPLY_KEYS, "reply")
    content = raw.get("content", "")
    if not isinstance(content, str):
        raise _Invalid("content must be a string")
    raw_calls = raw.get("tool_calls", [])
    if not isinstance(raw_calls, Sequence) or isinstance(raw_calls, str):
        raise _Invalid("tool_calls must be an array")
    calls = tuple(_tool_call(j, c) for j, c in enumerate(raw_calls))
    reason = raw.get("finish_reason", "tool_calls" if calls else "stop")
    if not isinstance(reason, str):
        raise _Invalid("finish_reason must be a string")
    return ModelResponse(Message("assistant", content, calls), reason, _usage(raw.get("usage", {})))


def _tool_call(j: int, raw: object) -> ToolCall:
    if not isinstance(raw, Mapping):
        raise _Invalid(f"tool_calls[{j}] must be an object")
    _check_keys(raw, _CALL_KEYS, "tool call")
    call_id, name = raw.get("id", f"call_{j}"), raw.get("name")
    if not isinstance(call_id, str):
        raise _Invalid(f"tool_calls[{j}].id must be a string")
    if not isinstance(name, str):
        raise _Invalid(f"tool_calls[{j}].name must be a string")
    arguments = raw.get("arguments", "{}")
    if isinstance(arguments, Mapping):
        arguments = json.dumps(arguments)
    if not isinstance(arguments, str):
        raise _Invalid(f"tool_calls[{j}].arguments must be JSON text or an object")
    return ToolCall(call_id, name, arguments)


def _usage(raw: object) -> Usage:
    if not isinstance(raw, Mapping):
        raise _Invalid("usage must be an object")
    _check_keys(raw, _USAGE_KEYS, "usage")
    counts = [raw.get(key, 0) for key in ("input_tokens", "output_tokens")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in counts):
        raise _Invalid("usage counts must be non-negative integers")
    return Usage(counts[0], counts[1])
