"""The replay-file model, resolve_model, and importing without httpx."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentcore import (
    ChatModel,
    Message,
    ModelError,
    ModelRequest,
    ModelResponse,
    StreamingChatModel,
    ToolCall,
    Usage,
)
from agentcore.models import AnthropicChatModel, OpenAIChatModel, ReplayModel, resolve_model
from tests.models._support import Deltas

REQUEST = ModelRequest((Message("user", "hi"),))
REPLIES: list[dict[str, Any]] = [
    {
        "content": "Let me look.",
        "tool_calls": [{"id": "c1", "name": "grep", "arguments": '{"pattern": "x"}'}],
        "usage": {"input_tokens": 10, "output_tokens": 4},
    },
    {
        "tool_calls": [{"name": "read_file", "arguments": {"path": "a.txt"}}],
        "finish_reason": "length",
    },
    {"content": "Done.  All good."},
]


def write(tmp_path: Path, data: Any, name: str = "replay.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


async def test_replies_come_back_in_order_then_run_out(tmp_path: Path) -> None:
    model = ReplayModel.from_file(write(tmp_path, REPLIES))
    assert isinstance(model, StreamingChatModel)
    assert await model.complete(REQUEST) == ModelResponse(
        Message("assistant", "Let me look.", (ToolCall("c1", "grep", '{"pattern": "x"}'),)),
        "tool_calls",
        Usage(10, 4),
    )
    assert await model.complete(REQUEST) == ModelResponse(
        Message("assistant", "", (ToolCall("call_0", "read_file", '{"path": "a.txt"}'),)), "length"
    )
    deltas = Deltas()
    assert await model.stream(REQUEST, deltas) == ModelResponse(
        Message("assistant", "Done.  All good.")
    )
    assert deltas == ["Done.  ", "All ", "good."]
    assert model.remaining == 0
    with pytest.raises(ModelError) as info:
        await model.complete(REQUEST)
    assert str(info.value) == (
        f"Replay file {str(tmp_path / 'replay.json')!r} has no reply left: all 3 were used "
        "and the model was called again"
    )


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"content": "x"}, "must hold a JSON array of replies"),
        (["x"], "reply 0: must be an object"),
        (
            [{}, {"contnet": "typo"}],
            "reply 1: unknown reply key 'contnet' "
            "(expected content, finish_reason, tool_calls, usage)",
        ),
        ([{"content": 1}], "reply 0: content must be a string"),
        ([{"tool_calls": {}}], "reply 0: tool_calls must be an array"),
        ([{"tool_calls": [{"id": "c"}]}], "reply 0: tool_calls[0].name must be a string"),
        (
            [{"tool_calls": [{"name": "n", "arguments": 3}]}],
            "reply 0: tool_calls[0].arguments must be JSON text or an object",
        ),
        (
            [{"tool_calls": [{"name": "n", "args": "{}"}]}],
            "reply 0: unknown tool call key 'args' (expected arguments, id, name)",
        ),
        ([{"finish_reason": None}], "reply 0: finish_reason must be a string"),
        ([{"usage": {"input_tokens": -1}}], "reply 0: usage counts must be non-negative integers"),
        (
            [{"usage": {"tokens": 1}}],
            "reply 0: unknown usage key 'tokens' (expected input_tokens, output_tokens)",
        ),
    ],
)
def test_invalid_replay_files_are_named(tmp_path: Path, data: Any, problem: str) -> None:
    path = write(tmp_path, data)
    with pytest.raises(ValueError) as info:
        ReplayModel.from_file(path)
    assert str(info.value).startswith(f"Replay file {str(path)!r}")
    assert (
        str(info.value)
        == f"Replay file {str(path)!r}" + (" " if problem.startswith("must") else ", ") + problem
    )


def test_unreadable_replay_files(tmp_path: Path) -> None:
    missing = tmp_path / "missing.json"
    with pytest.raises(ValueError) as info:
        ReplayModel.from_file(missing)
    assert str(info.value) == f"Cannot read replay file {str(missing)!r}: No such file or directory"
    bad = tmp_path / "bad.json"
    bad.write_text("[{")
    with pytest.raises(ValueError) as info:
        ReplayModel.from_file(bad)
    assert str(info.value) == (
        f"Replay file {str(bad)!r} is not valid JSON: "
        "Expecting property name enclosed in double quotes: line 1 column 3 (char 2)"
    )


def test_resolve_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    openai = resolve_model("openai:llama3.1:8b")
    assert isinstance(openai, OpenAIChatModel)
    assert (openai.model, openai.base_url) == ("llama3.1:8b", "https://api.openai.com/v1")
    anthropic = resolve_model("anthropic:claude-test")
    assert isinstance(anthropic, AnthropicChatModel)
    assert (anthropic.model, anthropic.base_url) == ("claude-test", "https://api.anthropic.com")
    write(tmp_path, REPLIES, "script.json")
    scripted = resolve_model("scripted:script.json", base_dir=tmp_path)
    assert isinstance(scripted, ReplayModel) and isinstance(scripted, ChatModel)
    assert (scripted.source, scripted.remaining) == (str(tmp_path / "script.json"), 3)
    monkeypatch.chdir(tmp_path)
    assert isinstance(resolve_model("scripted:script.json"), ReplayModel)


@pytest.mark.parametrize("spec", ["gpt-4o", "azure:gpt-4o", "", ":x"])
def test_unknown_scheme(spec: str) -> None:
    with pytest.raises(ValueError) as info:
        resolve_model(spec)
    assert str(info.value) == (
        f"Unknown model spec {spec!r}: "
        "expected one of 'openai:...', 'anthropic:...', 'scripted:...'"
    )


def test_empty_model_name() -> None:
    with pytest.raises(ValueError, match=r"^Model spec 'openai:' names no model after 'openai:'$"):
        resolve_model("openai:")


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)


def test_agentcore_does_not_import_httpx() -> None:
    result = run_python("import sys, agentcore, agentcore.models; print('httpx' in sys.modules)")
    assert (result.returncode, result.stdout, result.stderr) == (0, "False\n", "")


def test_without_httpx_scripted_works_and_adapters_say_what_to_install(tmp_path: Path) -> None:
    path = write(tmp_path, REPLIES)
    code = f"""
import sys
sys.modules["httpx"] = None  # as if it were not installed
from agentcore.models import resolve_model
print(resolve_model("scripted:" + {str(path)!r}).remaining)
try:
    from agentcore.models import OpenAIChatModel
except ImportError as exc:
    print(exc)
try:
    resolve_model("anthropic:claude")
except ImportError as exc:
    print(exc)
"""
    result = run_python(code)
    message = (
        "The model adapters need httpx, which is not installed: pip install 'subagent[models]'"
    )
    assert (result.returncode, result.stdout, result.stderr) == (
        0,
        f"3\n{message}\n{message}\n",
        "",
    )
