"""The adapters and workspace tools in a real agent run, over HTTP to the fake servers."""

from __future__ import annotations

from pathlib import Path

from agentcore import Agent, EndReason, Message, ToolCall, Usage
from agentcore.models import AnthropicChatModel, OpenAIChatModel
from subagent.tools import workspace_tools
from tests.models._fakeapi import FakeAPI, sse, sse_reply


async def test_openai_streamed_tool_call_then_answer(api: FakeAPI, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("the answer is 42\n")

    def chunk(delta: dict[str, object], finish: str | None = None) -> bytes:
        return sse({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})

    call = {"index": 0, "id": "call_1", "type": "function"}
    api.replies += [
        sse_reply(
            [
                chunk(
                    {"tool_calls": [{**call, "function": {"name": "read_file", "arguments": ""}}]}
                ),
                chunk(
                    {
                        "tool_calls": [
                            {"index": 0, "function": {"arguments": '{"path": "notes.txt"}'}}
                        ]
                    }
                ),
                chunk({}, "tool_calls"),
                sse({"choices": [], "usage": {"prompt_tokens": 10, "completion_tokens": 3}}),
                sse("[DONE]"),
            ]
        ),
        sse_reply([chunk({"content": "It is 42."}, "stop"), sse("[DONE]")]),
    ]
    model = OpenAIChatModel("gpt-test", api_key="sk-test-0000", base_url=api.url)
    agent = Agent(model=model, tools=workspace_tools(tmp_path), max_turns=4)
    result = await agent.run("What is the answer?")
    assert (result.output, result.summary.end_reason) == ("It is 42.", EndReason.stop)
    assert result.summary.usage == Usage(10, 3, model="gpt-test")
    assert result.messages[-3:] == (
        Message("assistant", "", (ToolCall("call_1", "read_file", '{"path": "notes.txt"}'),)),
        Message("tool", "the answer is 42\n", tool_call_id="call_1"),
        Message("assistant", "It is 42."),
    )
    assert api.requests[1].body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "the answer is 42\n",
    }


async def test_anthropic_tool_error_goes_back_as_an_error_result(
    api: FakeAPI, tmp_path: Path
) -> None:
    def events(block: dict[str, object], delta: dict[str, object], stop: str) -> list[bytes]:
        return [
            sse({"type": "message_start", "message": {"usage": {"input_tokens": 5}}}),
            sse({"type": "content_block_start", "index": 0, "content_block": block}),
            sse({"type": "content_block_delta", "index": 0, "delta": delta}),
            sse({"type": "content_block_stop", "index": 0}),
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop},
                    "usage": {"output_tokens": 2},
                }
            ),
            sse({"type": "message_stop"}),
        ]

    tool_use: dict[str, object] = {
        "type": "tool_use",
        "id": "toolu_1",
        "name": "read_file",
        "input": {},
    }
    api.replies += [
        sse_reply(
            events(
                tool_use,
                {"type": "input_json_delta", "partial_json": '{"path": "../x"}'},
                "tool_use",
            )
        ),
        sse_reply(
            events(
                {"type": "text", "text": ""}, {"type": "text_delta", "text": "Cannot."}, "end_turn"
            )
        ),
    ]
    model = AnthropicChatModel("claude-test", api_key="sk-ant-test-0000", base_url=api.url)
    agent = Agent(model=model, tools=workspace_tools(tmp_path), max_turns=4)
    result = await agent.run("Read ../x")
    assert (result.output, result.summary.tool_errors) == ("Cannot.", 1)
    assert result.summary.usage == Usage(10, 4, model="claude-test")
    [block] = api.requests[1].body["messages"][-1]["content"]
    assert block["type"] == "tool_result"
    assert (block["tool_use_id"], block["is_error"]) == ("toolu_1", True)
    assert "'../x' is outside the workspace" in block["content"]
