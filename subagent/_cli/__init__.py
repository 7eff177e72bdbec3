"""The ``subagent`` command line: its commands (run, resume, recover, demo, mcp,
temporal), the terminal view, paused-run state files, the ledger's resume claims,
the MCP server of a specs file, and how every command ends (exit codes).

May import anything in subagent; only ``__main__`` imports it
(``tests/test_layers.py``).
"""
