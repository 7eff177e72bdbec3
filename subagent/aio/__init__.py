"""The pool from asyncio code: :func:`open_pool` runs it in a trio guest run.

Trio's guest mode (``trio.lowlevel.start_guest_run``) runs trio's scheduler on top
of the asyncio loop of the calling thread: the pool, its runs, their tools and
models are trio tasks as under ``trio.run``, while the asyncio side holds proxies
(:class:`AioPool`, :class:`AioTask`, :class:`Stream`) whose methods keep the trio
ones' meaning:

- ``await pool.submit(...)``, ``await pool.resume(...)``, ``await pool.recover()``,
  ``await task.wait()`` and ``async for event in stream`` run the trio call in the
  guest run and wait for its outcome; exceptions are the trio call's own objects
  (``subagent.TaskFailed``, ``trio.EndOfChannel``, ...). Cancelling the asyncio task
  that awaits cancels that call only: ``task.wait()`` is a view, as in trio, so the
  subagent task goes on; a ``submit`` cancelled after the pool accepted the task
  cancels that task (nobody holds it).
- ``pool.register``, ``pool.statistics()``, ``task.cancel()``, ``task.steer()``,
  ``stream.close()`` and the other synchronous methods are called directly: both
  loops share this thread, and trio's run context is the thread's for the whole
  guest run, so they act at once (a guest run notices the tasks and deadlines they
  change and runs a tick for them).
- An asyncio consumer that stops reading a :class:`Stream` blocks the runs sending
  to it exactly as a trio consumer does: the trio stream's bound is the only buffer.
- :func:`tool` makes a tool of an asyncio coroutine function: each call runs as an
  asyncio task on the host loop, cancelled when its call is (a ``tool_timeout``, the
  run's end).

One guest run serves every pool opened by :func:`open_pool` on a thread at a time;
it starts with the first and ends when the last one closes. This module imports
only the public names of ``subagent`` and ``agentcore``.
"""


from __future__ import annotations

from ._host import TOOL_CANCEL_GRACE
from ._pool import AioPool, AioTask, open_pool
from ._stream import Stream
from ._tool import tool

__all__ = ["TOOL_CANCEL_GRACE", "AioPool", "AioTask", "Stream", "open_pool", "tool"]
