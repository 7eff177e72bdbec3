"""The SQL of :class:`subagent.SqliteCheckpoints`: its schema, its statements, and the
check that a file holds that schema and nothing else (no trigger, view or generated
column, whose SQL would run in this process on every read or write)."""

from __future__ import annotations

import sqlite3

SCHEMA = """
CREATE TABLE IF NOT EXISTS checkpoints (
  run_id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  parent TEXT,
  call_id TEXT,
  status TEXT NOT NULL,
  seq INTEGER NOT NULL,
  in_flight TEXT NOT NULL,
  state BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS resumed (
  run_id TEXT NOT NULL,
  key TEXT NOT NULL,
  PRIMARY KEY (run_id, key)
);
"""
CLAIM = "INSERT OR IGNORE INTO resumed (run_id, key) VALUES (?, ?)"
UPSERT = (
    "INSERT INTO checkpoints (run_id, name, parent, call_id, status, seq, in_flight, state) "
    "VALUES (?, ?, ?, ?, ?, 1, ?, ?) ON CONFLICT(run_id) DO UPDATE SET "
    "name = excluded.name, parent = excluded.parent, call_id = excluded.call_id, "
    "status = excluded.status, seq = seq + 1, in_flight = excluded.in_flight, "
    "state = excluded.state"
)
STATUSES = ("running", "paused", "ended")
# What the file may hold: the table above (each column: name, declared type, not null,
# primary key, hidden) and its key's index; no trigger, view or generated column, whose
# SQL would run in this process on every read or write.
_COLUMNS = [("run_id", "TEXT", 0, 1, 0), ("name", "TEXT", 1, 0, 0), ("parent", "TEXT", 0, 0, 0),
            ("call_id", "TEXT", 0, 0, 0), ("status", "TEXT", 1, 0, 0),
            ("seq", "INTEGER", 1, 0, 0), ("in_flight", "TEXT", 1, 0, 0),
            ("state", "BLOB", 1, 0, 0)]
_OBJECTS = [("index", "sqlite_autoindex_checkpoints_1"), ("table", "checkpoints")]
# Since resumes are claimed, the ``resumed`` table too (a file written before it is
# still read; its writer adds the table).
_RESUMED_COLUMNS = [("run_id", "TEXT", 1, 1, 0), ("key", "TEXT", 1, 2, 0)]
_OBJECTS_NOW = sorted([*_OBJECTS, ("index", "sqlite_autoindex_resumed_1"),
                       ("table", "resumed")])


def schema_ok(conn: sqlite3.Connection) -> bool:
    """Whether the database holds exactly what :data:`SCHEMA` creates. Not a checkpoint."""
    objects = sorted(conn.execute("SELECT type, name FROM sqlite_master LIMIT 100"))
    columns = [(name, kind, notnull, pk, hidden) for _, name, kind, notnull, _, pk, hidden
               in conn.execute("PRAGMA table_xinfo(checkpoints)").fetchmany(100)]
    resumed = [(name, kind, notnull, pk, hidden) for _, name, kind, notnull, _, pk, hidden
               in conn.execute("PRAGMA table_xinfo(resumed)").fetchmany(100)]
    return objects in (_OBJECTS, _OBJECTS_NOW) and columns == _COLUMNS and (
        objects == _OBJECTS or resumed == _RESUMED_COLUMNS
    )
