"""A hostile stdio MCP server for the tests (and bench/mcp_listing_memory.py): plain
JSON-RPC lines, no SDK. ``python hostile_stdio.py MODE [ARG]``:

- ``values N``: ``tools/list`` answers one line of about N bytes of ``[0,0,...]`` in a
  tool's schema (far more JSON values than bytes would suggest).
- ``nan``: ``tools/list`` lists ``bad`` (a ``NaN`` in its schema), ``inf`` (``Infinity``),
  ``big`` (``1e400``) and ``echo`` (a clean schema).
- ``fake-closed FILE``: ``tools/call`` answers a JSON-RPC error with code -32000 (the
  SDK's "connection closed") and the message ``Connection closed``; pings are answered,
  and a line written to FILE for each.
- ``refloop``: ``tools/list`` lists ``loop`` (a ``$ref`` loop behind a property),
  ``tree`` (a reference through ``items``: ends with the value) and ``echo``.
- ``names A,B``: ``tools/list`` lists tools of those names (open schemas).
- ``echo-env``: ``tools/call`` echoes the server's ``API_KEY`` environment value: in a
  JSON-RPC error when the arguments hold ``"refuse"``, else in its text result.
- ``stderr-edge``: writes its ``API_KEY`` environment value to stderr, then a space and
  a path of 8,179 bytes (deep folders: cut to its last part in a report), and exits.
- ``stderr N``: writes N bytes of noise, a secret and a host path to stderr, then exits
  before answering ``initialize``.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

SECRET = "env-secret-value-0123456789"


def reply(request_id: object, result: object) -> None:
    line = json.dumps({"jsonrpc": "2.0", "id": request_id, "result": result})
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def tools(mode: str, arg: str) -> list[dict[str, Any]]:
    echo = {"name": "echo", "inputSchema": {"type": "object"}}
    if mode == "values":
        return [{"name": "many", "inputSchema": {"type": "object", "x": [{}] * (int(arg) // 3)}}]
    if mode == "nan":
        return [
            {"name": "bad", "inputSchema": {"type": "object", "maximum": float("nan")}},
            {"name": "inf", "inputSchema": {"type": "object", "maximum": float("inf")}},
            {"name": "big", "inputSchema": "BIG"},
            echo,
        ]
    if mode == "refloop":
        behind = {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
                  "$defs": {"x": {"anyOf": [{"$ref": "#/$defs/y"}]},
                            "y": {"allOf": [{"$ref": "#/$defs/x"}]}}}
        tree = {"type": "object", "properties": {"kids": {"items": {"$ref": "#"}}}}
        return [{"name": "loop", "inputSchema": behind}, {"name": "tree", "inputSchema": tree},
                echo]
    if mode == "names":
        return [{"name": name, "inputSchema": {"type": "object"}} for name in arg.split(",")]
    return [echo]


def main() -> None:
    mode = sys.argv[1]
    arg = sys.argv[2] if len(sys.argv) > 2 else "0"
    if mode == "stderr-edge":
        path = "/" + "d/" * 4085 + "srv.py"
        sys.stderr.write(f"key {os.environ.get('API_KEY', '')} {path}\n")
        sys.stderr.flush()
        sys.exit(3)
    if mode == "stderr":
        where = "/home/someone/secret/project/srv.py"
        sys.stderr.write("x" * int(arg) + f"\nTraceback: {where}: key {SECRET}\n")
        sys.stderr.flush()
        sys.exit(3)
    for line in sys.stdin:
        message = json.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            reply(request_id, {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "hostile", "version": "1"},
            })
        elif method == "tools/list":
            text = json.dumps({"jsonrpc": "2.0", "id": request_id,
                               "result": {"tools": tools(mode, arg)}}, separators=(",", ":"))
            big = '{"type":"object","minimum":1e400}'
            sys.stdout.write(text.replace('"BIG"', big) + "\n")
            sys.stdout.flush()
        elif method == "tools/call" and mode == "fake-closed":
            error = {"code": -32000, "message": "Connection closed"}
            answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
        elif method == "tools/call" and mode == "echo-env":
            key = os.environ.get("API_KEY", "")
            if "refuse" in message["params"].get("arguments", {}):
                error = {"code": -32602, "message": f"bad key {key}"}
                answer = {"jsonrpc": "2.0", "id": request_id, "error": error}
                sys.stdout.write(json.dumps(answer) + "\n")
                sys.stdout.flush()
            else:
                reply(request_id, {"content": [{"type": "text", "text": f"key is {key}"}]})
        elif method == "tools/call":
            reply(request_id, {"content": [{"type": "text", "text": "ok"}]})
        else:
            if method == "ping" and mode == "fake-closed":
                with open(arg, "a") as pings:
                    pings.write("ping\n")
            reply(request_id, {})


if __name__ == "__main__":
    main()
