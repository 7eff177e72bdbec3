"""The context variable naming the pool task whose run the calling code belongs to."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._pool._task import Task

#: Set by the pool around each task's run; the delegation tool reads it to find its parent.
current_task: contextvars.ContextVar[Task | None] = contextvars.ContextVar(
    "subagent_current_task", default=None
)
