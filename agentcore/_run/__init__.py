"""One run: ``Run`` and its turn loop, the model call, the tool call, hooks, the
end of a run, typed output, pause and resume (``RunState``, its codec and checks,
pending calls, checkpoints, the current tool call) and ``RunResult``.

May import: agentcore's leaf modules (messages, errors, events, steering, audit,
summary, history, hook sets) and ``agentcore._tools``; ``Agent`` only under
``TYPE_CHECKING`` (``tests/test_layers.py``).
"""
