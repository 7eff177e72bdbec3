"""What a pool is told to run: ``Spec`` and ``Defaults``, the declarative specs
file (reader, checks, limits), JSON-schema typed output, the history a task
may start from (``Pool.submit(..., history=...)``), and ``Submission``, what one
submit asks a pool for.

May import: agentcore, ledger, ``subagent._cost``, the tools a specs file names
(``subagent.tools``, ``subagent.mcp``) and the leaf values (``tests/test_layers.py``).
"""
