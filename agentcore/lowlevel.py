"""The plumbing under agentcore's top level, as ``trio.lowlevel`` is trio's: what a
tool or a checkpoint store needs to take part in pause, resume and crash recovery.

- :func:`current_tool_call` / :class:`CurrentToolCall`: the call whose tool runs in
  this task (its ``idempotency_key`` is stable across pause and crash recovery).
- :func:`resumed_call_state`: the paused run a resumed call continues, if any.
- :func:`start_checkpoint`, :func:`recover_calls`, :data:`INTERRUPTED`: a run's
  first checkpoint, and what recovery does with the calls a crash interrupted.
"""

from ._run._checkpoint import INTERRUPTED as INTERRUPTED
from ._run._checkpoint import recover_calls as recover_calls
from ._run._checkpoint import start_checkpoint as start_checkpoint
from ._run._idempotency import CurrentToolCall as CurrentToolCall
from ._run._toolcall import current_tool_call as current_tool_call
from ._run._toolcall import resumed_call_state as resumed_call_state
