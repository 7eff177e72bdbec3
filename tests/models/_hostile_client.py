"""The client side of the hostile-server tests, run in a child process so that its
memory can be watched: ``python -m tests.models._hostile_client SPECS_JSON``.

SPECS_JSON is a list of calls, each naming the adapter (``openai`` or ``anthropic``),
the base URL, whether to stream, and keyword arguments for the adapter. The child
makes the calls one after the other and prints one JSON list: for each call, the
error's type and message (or null), and how much its peak resident memory (VmHWM)
grew during the call, in bytes (the peak is reset between calls through
``/proc/self/clear_refs``).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import json
import sys
from pathlib import Path
from typing import Any

import trio

from agentcore import Message, ModelError, ModelRequest
from agentcore.models import AnthropicChatModel, OpenAIChatModel

REQUEST = ModelRequest((Message("user", "hi"),))


def peak_rss() -> int:
    """This process's peak resident set size so far, in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reset_peak_rss() -> int:
    """Give freed memory back to the system, then reset this process's peak resident
    set size to its current size; return it. (Memory an earlier call freed but kept
    would otherwise absorb the next call's growth.)"""
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # glibc only
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    Path("/proc/self/clear_refs").write_text("5")
    return peak_rss()


async def call(spec: dict[str, Any]) -> dict[str, Any]:
    kind = OpenAIChatModel if spec["api"] == "openai" else AnthropicChatModel
    model = kind("m", api_key=spec["key"], base_url=spec["base_url"], **spec["kwargs"])

    async def ignore(text: str) -> None:
        pass

    before = reset_peak_rss()
    try:
        if spec["stream"]:
            await model.stream(REQUEST, ignore)
        else:
            await model.complete(REQUEST)
    except ModelError as exc:
        error: dict[str, Any] | None = {"type": type(exc).__name__, "message": str(exc)}
    else:
        error = None
    return {"error": error, "growth": peak_rss() - before}


async def call_all(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [await call(spec) for spec in specs]


def main() -> None:
    print(json.dumps(trio.run(call_all, json.loads(sys.argv[1]))))


if __name__ == "__main__":
    main()
