"""What a budget over a run had spent when its state was taken (:class:`Spent`).

agentcore only stores it: ``RunState.spent`` maps a name of the budget (``subagent``
writes ``"task"`` for the budget the run's task owns and ``"pool"`` for its pool's)
to its spend, kept by ``to_json`` and restored by ``from_json``, so that a resumed or
recovered run's budgets go on from what was spent instead of from zero.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Annotated, Any

import attrs
import msgspec


def _count(_inst: object, attribute: attrs.Attribute[Any], value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"Spent.{attribute.name} must be an integer of at least 0")


def _cost(_inst: object, _attribute: attrs.Attribute[Any], value: float | None) -> None:
    if value is not None and not (isinstance(value, int | float) and not isinstance(value, bool)
                                  and math.isfinite(value) and value >= 0):
        raise ValueError("Spent.cost must be a finite number of at least 0, or None")


@attrs.frozen
class Spent:
    """One budget's spend, as stored in a :class:`RunState` (``RunState.spent``).

    Attributes:
      input_tokens: Input tokens of its model calls.
      output_tokens: Output tokens of its model calls.
      cost: US dollars; ``None`` once a call came without a cost (unknown).
      model_calls: Model calls that returned.
      tasks: Tasks started under it.
    """

    input_tokens: int = attrs.field(default=0, validator=_count)
    output_tokens: int = attrs.field(default=0, validator=_count)
    cost: float | None = attrs.field(default=0.0, validator=_cost)
    model_calls: int = attrs.field(default=0, validator=_count)
    tasks: int = attrs.field(default=0, validator=_count)


_Count = Annotated[int, msgspec.Meta(ge=0)]


class _Stored(msgspec.Struct, forbid_unknown_fields=True):
    # A Spent as ``RunState.to_json`` writes it.
    input_tokens: _Count = 0
    output_tokens: _Count = 0
    cost: Annotated[float, msgspec.Meta(ge=0, le=1e15)] | None = 0.0
    model_calls: _Count = 0
    tasks: _Count = 0


#: The most budgets a stored state's ``spent`` names (each name at most 64 characters).
MAX_SPENT = 8
#: The ``spent`` field of a stored state (decoded against this: hostile input).
StoredSpent = Annotated[dict[Annotated[str, msgspec.Meta(max_length=64)], _Stored],
                        msgspec.Meta(max_length=MAX_SPENT)]


def spent_to_store(spent: Mapping[str, Spent]) -> dict[str, _Stored]:
    """``spent`` as the codec writes it (the first :data:`MAX_SPENT`)."""
    return {name: _Stored(v.input_tokens, v.output_tokens, v.cost, v.model_calls, v.tasks)
            for name, v in list(spent.items())[:MAX_SPENT]}


def spent_of(stored: Mapping[str, _Stored]) -> dict[str, Spent]:
    """The spend a decoded state stores. Raises ValueError for values Spent refuses."""
    return {name: Spent(v.input_tokens, v.output_tokens, v.cost, v.model_calls, v.tasks)
            for name, v in stored.items()}
