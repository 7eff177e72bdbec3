"""Parts shared by the tests of background children (``wait: false``) in paused and
recovered trees: root's call that starts ``bg`` and its answer, and a ``bg`` model."""

from __future__ import annotations

from agentcore import Message, ModelRequest, ToolCall
from agentcore.testing import ScriptedModel

#: Root's call that starts ``bg`` in the background, and the tool's answer to it.
START = ToolCall("start-bg", "subagent", '{"agent": "bg", "task": "work", "wait": false}')
STARTED = '{"agent": "bg", "path": ["root/0001", "bg/0002"], "status": "started"}'


def one_call_model(tool: str) -> ScriptedModel:
    """``bg``: first calls ``tool`` (call id ``b1``), then answers ``bg done: <result>``."""

    def reply(request: ModelRequest) -> Message:
        if not any(m.role == "assistant" for m in request.messages):
            return Message("assistant", "", tool_calls=[ToolCall("b1", tool, "{}")])
        return Message("assistant", f"bg done: {request.messages[-1].content}")

    return ScriptedModel(reply)
