"""Delegation: the tools a run calls to start subagents (``SubagentTool``,
``SubagentResultsTool``) and their steps into the pool, background children and
their state in a paused tree.

May import: agentcore, ledger, ``subagent._core``, ``subagent._durable`` and the
leaf values; the pool shell only under ``TYPE_CHECKING`` (``tests/test_layers.py``).
"""
