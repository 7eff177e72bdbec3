"""Typed subagents: a lead fans out to reviewers whose answers are typed ``Review``s,
and merges their findings as data, not prose.

Each reviewer has ``Spec(output_type=Review)``: its run offers a ``final_result``
tool whose parameters are ``Review``'s fields, and ends when the model calls it with
valid arguments. The security reviewer first gives a line number as a string: its
call gets an error result naming the field (``$.findings[0].line``), and it answers
again correctly. The delegation tool hands the lead each reviewer's JSON.
Runs fully offline (scripted models):  python examples/typed_reviewers.py
"""

from __future__ import annotations

import json
from typing import Literal

import attrs
import trio

from agentcore import FINAL_RESULT, Message, ModelRequest, ToolCall, TypedOutput
from agentcore.testing import ScriptedModel, ScriptItem, tool_call_reply
from subagent import Defaults, Spec, Stream, SubagentTool, open_pool


@attrs.frozen
class Finding:
    """One problem a reviewer found."""

    path: str
    line: int
    severity: Literal["low", "medium", "high"]
    note: str


@attrs.frozen
class Review:
    """A reviewer's answer: its findings and whether the change may go in."""

    findings: list[Finding]
    approve: bool


REVIEWERS = {
    "security_reviewer": "Review auth.py for security problems.",
    "style_reviewer": "Review auth.py for readability.",
}


def lead(request: ModelRequest) -> ScriptItem:
    """Fans out to both reviewers in one turn, then merges what they handed back."""
    results = [m for m in request.messages if m.role == "tool"]
    if not results:
        calls = tuple(
            ToolCall(f"d{i}", "subagent", json.dumps({"agent": agent, "task": task}))
            for i, (agent, task) in enumerate(REVIEWERS.items(), 1)
        )
        return Message("assistant", "", tool_calls=calls)
    reviews = [json.loads(m.content) for m in results]
    findings = sorted(
        (f for r in reviews for f in r["output"]["findings"]),
        key=lambda f: ("high", "medium", "low").index(f["severity"]),
    )
    verdict = "approve" if all(r["output"]["approve"] for r in reviews) else "changes needed"
    lines = [f"- {f['severity']}: {f['path']}:{f['line']} {f['note']}" for f in findings]
    return f"{verdict}; {len(findings)} findings:\n" + "\n".join(lines)


def review(*findings: dict[str, object], approve: bool, id: str) -> ScriptItem:
    return tool_call_reply(
        FINAL_RESULT, json.dumps({"findings": list(findings), "approve": approve}), id=id
    )


SQL = {"path": "auth.py", "line": 42, "severity": "high", "note": "SQL built by formatting"}
NAMES = {"path": "auth.py", "line": 7, "severity": "low", "note": "unclear name `x`"}


async def main() -> None:
    security = ScriptedModel([
        review({**SQL, "line": "42"}, approve=False, id="s1"),  # a string: invalid
        review(SQL, approve=False, id="s2"),
    ])
    style = ScriptedModel([review(NAMES, approve=True, id="y1")])
    stream = Stream(256)

    async def show(events: Stream) -> None:
        async for event in events:
            if event.kind == "output_validation" and event.event is not None:
                print(f"  {'/'.join(p.split('/')[0] for p in event.path)}: "
                      f"output_validation {event.event.text}")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(show, stream)
        async with open_pool(events=stream, defaults=Defaults(agent_id="example")) as pool:
            pool.register(Spec("lead", "Merges reviews.", model=ScriptedModel(lead),
                               tools=[SubagentTool(pool)]))
            pool.register(Spec("security_reviewer", "Finds security problems.",
                               model=security, output_type=Review))
            pool.register(Spec("style_reviewer", "Finds readability problems.",
                               model=style, output_type=Review))
            result = await (await pool.submit("lead", "Review the auth change.")).wait()
        stream.close()
    print("final_result parameters of a reviewer:")
    print(json.dumps(TypedOutput(Review).parameters, indent=2))
    print("lead's answer:")
    print(result.output)


if __name__ == "__main__":
    trio.run(main)
