"""What a parent run is handed of a child's answer: JSON with the child's output.

A text child's output is a JSON string; a typed child's (``Spec.output_type``)
answer is its JSON value itself, so the parent model reads the structure rather than
a string of escaped JSON.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from agentcore import EndReason

if TYPE_CHECKING:
    from ._pool._task import Task


def with_output(body: dict[str, object], task: Task, output: str) -> str:
    """``body`` as JSON text with ``"output"`` added last: ``output`` as a JSON string,
    or, for a typed task that ended with an accepted answer, as the JSON value it is.
    Pure.

    A typed run ends ``stop`` only by an accepted ``final_result``, and its output is
    then the answer's JSON as msgspec encoded it: it is inserted as it is.
    """
    summary = task._summary
    typed = (
        task.spec.output_type is not None
        and summary is not None
        and summary.end_reason is EndReason.stop
    )
    if not typed:
        body["output"] = output
        return json.dumps(body)
    head = json.dumps(body)
    return f"{head[:-1]}, \"output\": {output}}}" if body else f"{{\"output\": {output}}}"
