"""subagent's bounds on hostile input, in one place: checkpoint rows and states
read back, resume claims kept, and the history a submit may start from.
"""

from ._durable._store import MAX_CHECKPOINT_BYTES as MAX_CHECKPOINT_BYTES
from ._durable._store import MAX_CHECKPOINT_ROWS as MAX_CHECKPOINT_ROWS
from ._durable._store import MAX_RESUME_CLAIMS as MAX_RESUME_CLAIMS
from ._specs._history import MAX_HISTORY_BYTES as MAX_HISTORY_BYTES
from ._specs._history import MAX_HISTORY_MESSAGES as MAX_HISTORY_MESSAGES
