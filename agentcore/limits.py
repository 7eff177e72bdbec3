"""agentcore's bounds on hostile input, in one place (as ``msgspec.json`` holds
msgspec's JSON functions): a tool call's arguments, a saved run state, and the
threads of typed tools.
"""

from ._run._codec import MAX_STATE_BYTES as MAX_STATE_BYTES
from ._run._codec import MAX_STATE_DEPTH as MAX_STATE_DEPTH
from ._run._statechecks import MAX_STATE_STEERING as MAX_STATE_STEERING
from ._tools._arguments import MAX_ARGUMENT_BYTES as MAX_ARGUMENT_BYTES
from ._tools._arguments import MAX_ARGUMENT_DEPTH as MAX_ARGUMENT_DEPTH
from ._tools._typed import MAX_TOOL_THREADS as MAX_TOOL_THREADS
