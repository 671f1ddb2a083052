"""A hand-written MCP server speaking newline-delimited JSON-RPC on stdio, with misbehaviours chosen by argv.

Usage: ``python line_server.py [MODE] [--log FILE] [--marker TEXT]``. It answers ``initialize`` (echoing a
supported requested version), ``ping``, ``tools/list`` (one tool, ``search(query)``) and ``tools/call`` (``{"content":
[{"type": "text", "text": "found: <query>"}], "isError": false}``); any other request gets ``-32601``. With
``--log FILE`` it appends one JSON line per event worth checking: ``{"cancelled": <requestId>}`` for each
``notifications/cancelled``, and the ``ping`` mode's answers. ``--marker`` is ignored (a test's way to find its
processes). ``--stay 1`` keeps the process running after stdin closes (as a careless server would: only a signal
ends it).

Modes:

* ``normal`` (default);
* ``garbage``: writes a line that is not JSON right after ``notifications/initialized``;
* ``hang``: never answers ``tools/call``;
* ``exit``: exits (status 3) when it receives ``tools/call``;
* ``huge``: answers ``tools/call`` with one line of about 64 KiB;
* ``silent``: never answers ``initialize``;
* ``list-changed``: after answering the first ``tools/call``, sends ``notifications/tools/list_changed`` and
  changes the tool's description;
* ``ping``: before answering a ``tools/call``, sends the client a ``ping`` request and a
  ``sampling/createMessage`` request, logs both answers (``{"answer": "ping"|"sampling", "message": ...}``), then
  answers the call.
"""

from __future__ import annotations

import json
import sys
import threading
from typing import Any

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26")


def main(argv: list[str]) -> int:
    options: dict[str, str] = {}
    words: list[str] = []
    rest = iter(argv)
    for word in rest:
        if word.startswith("--"):
            options[word[2:]] = next(rest, "")
        else:
            words.append(word)
    mode = words[0] if words else "normal"
    log_path = options.get("log", "")
    description = "Search the index."
    calls = 0
    held: dict[str, Any] | None = None
    answers: dict[str, Any] = {}

    def send(message: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def log(entry: dict[str, Any]) -> None:
        if log_path:
            with open(log_path, "a") as fh:
                fh.write(json.dumps(entry) + "\n")

    def result(request_id: Any, value: dict[str, Any]) -> None:
        send({"jsonrpc": "2.0", "id": request_id, "result": value})

    def answer_call(request: dict[str, Any]) -> None:
        query = str((request.get("params") or {}).get("arguments", {}).get("query", ""))
        result(request["id"], {"content": [{"type": "text", "text": f"found: {query}"}], "isError": False})

    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        request_id = message.get("id")
        if method is None:  # an answer to one of our requests
            which = {"s-ping": "ping", "s-sampling": "sampling"}.get(str(request_id))
            if which is not None:
                answers[which] = message
                log({"answer": which, "message": message})
            if held is not None and len(answers) == 2:
                answer_call(held)
                held = None
            continue
        if method == "notifications/cancelled":
            log({"cancelled": (message.get("params") or {}).get("requestId")})
            continue
        if method == "notifications/initialized":
            if mode == "garbage":
                sys.stdout.write("this is not a JSON-RPC message\n")
                sys.stdout.flush()
            continue
        if request_id is None:
            continue
        if method == "initialize":
            if mode == "silent":
                continue
            requested = (message.get("params") or {}).get("protocolVersion")
            result(
                request_id,
                {
                    "protocolVersion": requested if requested in VERSIONS else VERSIONS[0],
                    "capabilities": {"tools": {"listChanged": True}},
                    "serverInfo": {"name": "line-server", "version": "1.0"},
                },
            )
        elif method == "ping":
            result(request_id, {})
        elif method == "tools/list":
            schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
            result(request_id, {"tools": [{"name": "search", "description": description, "inputSchema": schema}]})
        elif method == "tools/call":
            calls += 1
            if mode == "hang":
                continue
            if mode == "exit":
                return 3
            if mode == "huge":
                result(request_id, {"content": [{"type": "text", "text": "x" * 65536}], "isError": False})
            elif mode == "ping":
                held, answers = message, {}
                send({"jsonrpc": "2.0", "id": "s-ping", "method": "ping"})
                send(
                    {
                        "jsonrpc": "2.0",
                        "id": "s-sampling",
                        "method": "sampling/createMessage",
                        "params": {
                            "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
                            "maxTokens": 10,
                        },
                    }
                )
            else:
                answer_call(message)
                if mode == "list-changed" and calls == 1:
                    description = "Search the new index."
                    send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
        else:
            send({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32601, "message": "Method not found"}})
    if options.get("stay"):
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
