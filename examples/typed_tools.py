"""Typed tools: ``@tool`` derives a tool's name, description and JSON Schema from a
typed function, and validates the model's arguments against it.

The scripted model first calls ``file_findings`` with a line number as a string: the
call gets an error result naming the field, and the model calls again correctly.
Runs fully offline:  python examples/typed_tools.py
"""

from __future__ import annotations

import json
from typing import Annotated, Literal

import attrs
import trio

from agentcore import Agent, Event, EventKind, tool
from agentcore.testing import ScriptedModel, tool_call_reply


@attrs.frozen
class Finding:
    """One problem found in a file."""

    path: str
    line: int
    severity: Literal["low", "high"] = "low"


@tool(read_only=True)
def count_lines(text: Annotated[str, "The text to count the lines of."]) -> int:
    """Count the lines of a text."""
    return len(text.splitlines())  # a sync function: it runs in a worker thread


@tool
async def file_findings(findings: list[Finding], reviewer: str = "bot") -> dict[str, int]:
    """File review findings and say how many of each severity were filed.

    Args:
      findings: The findings, one per problem.
      reviewer: Who found them.
    """
    counts = {"low": 0, "high": 0}
    for finding in findings:
        counts[finding.severity] += 1
    return counts


async def main() -> None:
    print("parameters of file_findings:")
    print(json.dumps(file_findings.parameters, indent=2))
    model = ScriptedModel([
        tool_call_reply("count_lines", json.dumps({"text": "a\nb\nc"})),
        tool_call_reply("file_findings", '{"findings": [{"path": "a.py", "line": "3"}]}'),
        tool_call_reply(
            "file_findings", '{"findings": [{"path": "a.py", "line": 3, "severity": "high"}]}'
        ),
        "Filed one high-severity finding.",
    ])
    agent = Agent(model=model, tools=[count_lines, file_findings])

    async def show(event: Event) -> None:
        if event.kind is EventKind.tool_end and event.call is not None:
            mark = "error" if event.is_error else "ok"
            print(f"  {event.call.name} -> {mark}: {event.text}")

    result = await agent.run("Review a.py.", emit=show)
    print("output:", result.output)


if __name__ == "__main__":
    trio.run(main)
