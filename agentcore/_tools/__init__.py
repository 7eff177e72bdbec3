"""Defining tools: the ``Tool`` protocol and ``FunctionTool``, typed tools and
``@tool``, JSON schemas of parameters, bounded argument decoding, and the gates that
decide whether a call may run. (Calling a tool is part of a run: ``agentcore._run``.)

May import: ``agentcore._errors`` and ``agentcore._messages`` only
(``tests/test_layers.py``).
"""
