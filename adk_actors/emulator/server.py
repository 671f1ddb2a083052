"""The emulator server: asyncio HTTP/1.1 on its own event-loop thread, routing, record/replay, the request log."""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import json
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from adk_actors.content.canonical import canonical_dumps
from adk_actors.errors import ConfigError, ValidationError

from . import httpio
from .engine import Engine, Reply, error_reply
from .live import LiveServer
from .live_wire import LIVE_PATH_TEMPLATE, split_script
from .script import Scenario
from .wire import (
    ApiError,
    api_key_invalid,
    api_key_missing,
    canonical_json,
    dumps_line,
    dumps_pretty,
    invalid_argument,
)

MAX_BODY = 64 * 1024 * 1024
REDACTED = "REDACTED"
JSON_TYPE = "application/json; charset=UTF-8"
SSE_TYPE = "text/event-stream"
_VERSIONS = "v1|v1beta|v1alpha"
_RE_MODEL_RPC = re.compile(rf"^/({_VERSIONS})/models/([^/:]+):([A-Za-z]+)$")
_RE_MODEL = re.compile(rf"^/({_VERSIONS})/models/([^/:]+)$")
_RE_MODELS = re.compile(rf"^/({_VERSIONS})/models$")
_RE_CACHES = re.compile(rf"^/({_VERSIONS})/cachedContents$")
_RE_CACHE = re.compile(rf"^/({_VERSIONS})/cachedContents/([^/]+)$")
_RE_VERSION = re.compile(rf"^/({_VERSIONS})/")
CONTROL_PREFIX = "/_emulator/"
_FORWARD_HEADERS = ("content-type", "x-goog-api-key", "x-goog-api-client", "user-agent", "x-server-timeout")
UPSTREAM_TIMEOUT_S = 30.0
"""Connect and read timeout of one record-mode upstream call."""

ServedHook = Callable[[str, str, int, bytes], None]
"""``hook(method, path, status, body)``: one JSON document the emulator served (a whole body or one stream chunk)."""
_served_hooks: list[ServedHook] = []
_hooks_lock = threading.Lock()


def add_served_hook(hook: ServedHook) -> None:
    """Test hook: call ``hook`` for every JSON document any emulator of this process serves on an API route.

    It runs on the emulator's event-loop thread and must be quick and must not raise; ``body`` is the JSON exactly
    as sent (for streams, one chunk at a time; the SSE framing and array punctuation are not included).
    """
    with _hooks_lock:
        _served_hooks.append(hook)


def remove_served_hook(hook: ServedHook) -> None:
    """Undo :func:`add_served_hook` (no-op when ``hook`` is not registered)."""
    with _hooks_lock:
        with contextlib.suppress(ValueError):
            _served_hooks.remove(hook)


def _served(method: str, path: str, status: int, body: bytes) -> None:
    hooks = _served_hooks
    if not hooks:
        return
    with _hooks_lock:
        current = list(hooks)
    for hook in current:
        with contextlib.suppress(Exception):
            hook(method, path, status, body)


def _redact_headers(headers: dict[str, str]) -> dict[str, str]:
    return {k: (REDACTED if k in ("x-goog-api-key", "authorization") else v) for k, v in headers.items()}


def _redact_query(query: dict[str, list[str]]) -> dict[str, list[str]]:
    return {k: ([REDACTED] * len(v) if k == "key" else list(v)) for k, v in query.items()}


def _parse_body(raw: bytes) -> Any:
    if not raw.strip():
        return {}
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        snippet = raw[:60].decode("utf-8", "replace")
        raise invalid_argument(
            f"Invalid JSON payload received. Unexpected token.\n{snippet}\n^",
            violations=[{"description": "Invalid JSON payload received. Unexpected token."}],
        ) from None


def _strip_target(path: str, query: dict[str, list[str]]) -> str:
    """Path plus the key-less, sorted query: the replay match key's URL part."""
    items = sorted((k, v) for k, vs in query.items() if k != "key" for v in vs)
    return path + ("?" + "&".join(f"{k}={v}" for k, v in items) if items else "")


def _split_sse(body: bytes) -> list[str]:
    events = re.findall(rb".*?(?:\r\n\r\n|\n\n|\r\r)", body, re.S)
    tail = body[sum(len(e) for e in events) :]
    if tail:
        events.append(tail)
    return [e.decode("utf-8", "replace") for e in events]


class Emulator:
    """A Gemini-compatible local server (REST + SSE, countTokens, cachedContents, Live) driven by a scenario script.

    ``Emulator(...).start()`` binds and serves on a background thread with its own asyncio loop (with ``live=True``,
    the default, also the Live ws:// and wss:// listeners on ``live_port`` / ``live_tls_port``, 0 = free ports);
    ``stop()`` closes every socket and joins the thread. See the package docstring for the script format.
    """

    def __init__(
        self,
        script: dict[str, Any] | str | Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        latency_ms: int = 0,
        api_keys: list[str] | None = None,
        strict_signatures: bool = True,
        record: str | Path | None = None,
        upstream: str | None = None,
        replay: str | Path | None = None,
        *,
        min_cache_tokens: int = 1024,
        models: list[str] | None = None,
        max_body: int = MAX_BODY,
        log_size: int = 10_000,
        strict: bool = False,
        live: bool = True,
        live_port: int = 0,
        live_tls_port: int = 0,
    ) -> None:
        if (record is None) != (upstream is None):
            raise ValueError("record and upstream must be given together")
        if replay is not None and record is not None:
            raise ValueError("record and replay are mutually exclusive")
        self.host = host
        self._requested_port = port
        self._latency_ms = latency_ms
        self.api_keys = list(api_keys) if api_keys is not None else None
        rest_script, self._live_script = split_script(script)
        self._scenario = Scenario(rest_script)
        self.engine = Engine(self._scenario, strict_signatures, min_cache_tokens, models, strict)
        self._live: LiveServer | None = None
        if live:
            self._live = LiveServer(
                engine=self.engine,
                script=lambda: self._live_script,
                api_keys=lambda: self.api_keys,
                host=host,
                port=live_port,
                tls_port=live_tls_port,
                log_size=log_size,
                on_frame=lambda path, body: _served("WS", path, 200, body),
            )
        self.record_path = Path(record) if record is not None else None
        self.upstream = upstream.rstrip("/") if upstream else None
        self.replay_path = Path(replay) if replay is not None else None
        self.max_body = max_body
        self._log: collections.deque[dict[str, Any]] = collections.deque(maxlen=log_size)
        self._log_lock = threading.Lock()
        self._record_lock = threading.Lock()
        self._replay: dict[str, list[dict[str, Any]]] = {}
        self._replay_pos: dict[str, int] = {}
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop_event: asyncio.Event | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        self._server: asyncio.AbstractServer | None = None
        self._conn_tasks: set[asyncio.Task[Any]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._port: int | None = None
        self._stopped = False

    # ------------------------------------------------------------------------------------------------ public API
    def start(self) -> Emulator:
        """Bind and serve on a background thread; returns self. Raises if binding fails."""
        if self._thread is not None:
            return self
        if self.replay_path is not None:
            self._load_replay(self.replay_path)
        self._thread = threading.Thread(target=self._run, name="gemini-emulator", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            raise self._start_error
        return self

    def stop(self) -> None:
        """Close the listening socket and every connection, join the thread. Idempotent."""
        thread, loop, stop_event = self._thread, self._loop, self._stop_event
        if thread is None or self._stopped:
            return
        self._stopped = True
        if loop is not None and stop_event is not None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(stop_event.set)
        thread.join(timeout=30)

    def __enter__(self) -> Emulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The bound port (after start)."""
        if self._port is None:
            raise RuntimeError("emulator not started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT`` — clients append ``/v1beta/models/...``."""
        return f"http://{self.host}:{self.port}"

    @property
    def latency_ms(self) -> int:
        """Global latency added to every API request (constructor value, else the script's ``latency_ms``)."""
        return self._latency_ms or self._scenario.latency_ms

    @latency_ms.setter
    def latency_ms(self, value: int) -> None:
        self._latency_ms = int(value)

    # ---------------------------------------------------------------------------------------------------- Live
    def _live_server(self) -> LiveServer:
        if self._live is None:
            raise ConfigError("the Live endpoint is disabled (Emulator(live=False))", reason="live_disabled")
        if self._live.port is None:
            raise ConfigError("emulator not started", reason="emulator_not_started")
        return self._live

    @property
    def live_url(self) -> str:
        """``ws://HOST:P/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent``.

        Raises:
            ConfigError: not started (``emulator_not_started``) or ``live=False`` (``live_disabled``).
        """
        live = self._live_server()
        return f"ws://{self.host}:{live.port}" + LIVE_PATH_TEMPLATE.format(version="v1beta")

    @property
    def live_tls_url(self) -> str:
        """The same endpoint over TLS (``wss://``, self-signed: trust :attr:`live_ca_file`).

        Raises:
            ConfigError: ``live_tls_unavailable`` when ``cryptography`` is not installed (no wss listener), or as
                :attr:`live_url`.
        """
        live = self._live_server()
        if live.tls_port is None:
            raise ConfigError(f"no wss listener: {live.tls_error}", reason="live_tls_unavailable")
        return f"wss://{self.host}:{live.tls_port}" + LIVE_PATH_TEMPLATE.format(version="v1beta")

    @property
    def live_ca_file(self) -> str:
        """Path of the PEM certificate to trust for :attr:`live_tls_url` (deleted by :meth:`stop`).

        Raises:
            ConfigError: as :attr:`live_tls_url`.
        """
        live = self._live_server()
        if live.ca_file is None:
            raise ConfigError(f"no wss listener: {live.tls_error}", reason="live_tls_unavailable")
        return str(live.ca_file)

    def live_connections(self) -> int:
        """Test hook: how many Live connections are open now (0 when Live is disabled or stopped)."""
        return self._live.connections if self._live is not None else 0

    @property
    def live_log(self) -> list[dict[str, Any]]:
        """Test hook: the Live frame log, oldest first — never frame contents or audio, only sizes.

        Each entry: ``connection`` (int id), ``direction`` (``"in"``/``"out"``), ``kind`` (``"setup"``,
        ``"realtimeInput.audio"``, ``"serverContent.modelTurn"``, ``"toolCall"``, ``"close"``, ``"drop"``...),
        ``bytes`` (frame size), ``timestamp``; ``audio_bytes`` for audio; ``code``/``reason`` for ``close``.
        """
        return self._live.log_entries() if self._live is not None else []

    def live_go_away(self, time_left_ms: int) -> None:
        """Test hook: send ``goAway{timeLeft}`` to every open Live connection, then close each with 1000 after it.

        Raises:
            ConfigError: as :attr:`live_url`.
        """
        self._on_loop(self._live_server().go_away(int(time_left_ms)))

    def live_drop_all(self) -> None:
        """Test hook: abort the TCP connection of every open Live connection (no close frame).

        Raises:
            ConfigError: as :attr:`live_url`.
        """
        self._on_loop(self._live_server().drop_all())

    def _on_loop(self, coro: Any) -> None:
        loop = self._loop
        if loop is None or self._stopped:
            coro.close()
            raise ConfigError("emulator not started", reason="emulator_not_started")
        asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=30)

    def set_script(self, script: dict[str, Any] | str | Path | None) -> None:
        """Replace the scenario (validated first; hit counters restart). Thread-safe."""
        rest_script, live_script = split_script(script)
        scenario = Scenario(rest_script)
        self._scenario = scenario
        self.engine.scenario = scenario
        self._live_script = live_script

    @property
    def rule_hits(self) -> dict[str, int]:
        """How many times each rule matched, keyed by rule ``id`` (or index)."""
        return self._scenario.hits()

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Snapshot of the request log (oldest first)."""
        with self._log_lock:
            return [dict(e) for e in self._log]

    def clear_requests(self) -> None:
        """Empty the request log."""
        with self._log_lock:
            self._log.clear()

    # ----------------------------------------------------------------------------------------------- event loop
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            # Like asyncio.run(): cancel whatever is still pending (a connection accepted in the last moment)
            # so no handler outlives the loop.
            pending = [task for task in asyncio.all_tasks(loop) if not task.done()]
            for task in pending:
                task.cancel()
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_default_executor())
            loop.close()

    async def _serve(self) -> None:
        self._stop_event = asyncio.Event()
        try:
            self._server = await asyncio.start_server(
                self._on_connection,
                self.host,
                self._requested_port,
                backlog=2048,
                limit=httpio.MAX_HEADER_BYTES,
                reuse_address=True,
            )
        except BaseException as exc:
            self._start_error = exc
            self._started.set()
            return
        self._port = self._server.sockets[0].getsockname()[1]
        if self._live is not None:
            try:
                await self._live.start()
            except BaseException as exc:
                self._start_error = exc
                self._server.close()
                await self._live.stop()
                await self._server.wait_closed()
                self._started.set()
                return
        self._started.set()
        await self._stop_event.wait()
        if self._live is not None:
            await self._live.stop()
        self._server.close()
        # Connections accepted just before close() have a handler task that has not run yet: let them start,
        # then cancel every handler and abort whatever transport is still open (nothing may outlive stop()).
        await asyncio.sleep(0)
        for task in list(self._conn_tasks):
            task.cancel()
        await asyncio.gather(*self._conn_tasks, return_exceptions=True)
        for writer in list(self._writers):
            writer.transport.abort()
        self._writers.clear()
        await self._server.wait_closed()

    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conn_tasks.add(task)
        self._writers.add(writer)
        try:
            while True:
                try:
                    req = await httpio.read_request(reader, self.max_body, writer)
                except httpio.HttpError as exc:
                    status = 413 if exc.status == 413 else 400
                    err = ApiError(status, exc.message, "INVALID_ARGUMENT")
                    writer.write(httpio.full_response(exc.status, dumps_pretty(err.body()), JSON_TYPE, False))
                    await writer.drain()
                    return
                if req is None:
                    return
                if not await self._handle(req, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._conn_tasks.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    # --------------------------------------------------------------------------------------------------- handling
    def _log_request(self, req: httpio.Request) -> dict[str, Any]:
        m = _RE_VERSION.match(req.path)
        try:
            body: Any = json.loads(req.body) if req.body.strip() else None
        except (UnicodeDecodeError, json.JSONDecodeError):
            body = req.body.decode("utf-8", "replace")
        entry: dict[str, Any] = {
            "method": req.method,
            "path": req.path,
            "query": _redact_query(req.query),
            "headers": _redact_headers(req.headers),
            "body": body,
            "timestamp": time.time(),
            "api_version": m.group(1) if m else None,
            "status": None,
            "rule": None,
        }
        with self._log_lock:
            self._log.append(entry)
        return entry

    async def _handle(self, req: httpio.Request, writer: asyncio.StreamWriter) -> bool:
        keep = req.keep_alive
        if req.path.startswith(CONTROL_PREFIX):
            reply = self._control(req)
            writer.write(httpio.full_response(reply.status, dumps_pretty(reply.body), JSON_TYPE, keep))
            await writer.drain()
            return keep
        entry = self._log_request(req)
        if self.replay_path is not None:
            reply = self._replay_reply(req)
        elif self.upstream is not None:
            reply = await self._proxy(req)
        else:
            if self.latency_ms:
                await asyncio.sleep(self.latency_ms / 1000.0)
            try:
                reply = self._route(req)
            except ApiError as exc:
                reply = error_reply(exc)
            except Exception as exc:  # an emulator bug: answer 500 rather than dropping the connection
                # Structural only: the exception text may hold request data (keys, prompts).
                reply = error_reply(ApiError(500, f"Emulator internal error ({type(exc).__name__}).", "INTERNAL"))
        entry["status"] = reply.status
        entry["rule"] = reply.rule
        if reply.delay:
            await asyncio.sleep(reply.delay)
        if reply.kind == "drop":
            writer.transport.abort()
            return False
        if reply.kind == "raw":
            return await self._send_raw(req, reply, writer, keep)
        if reply.kind == "stream":
            return await self._send_stream(req, reply, writer, keep)
        body = [reply.body] if reply.array_wrap else reply.body
        payload = dumps_pretty(body)
        _served(req.method, req.path, reply.status, payload)
        writer.write(httpio.full_response(reply.status, payload, JSON_TYPE, keep, reply.headers))
        await writer.drain()
        return keep

    def _control(self, req: httpio.Request) -> Reply:
        """Out-of-process control: ``/_emulator/script``, ``/_emulator/requests``, ``/_emulator/hits``."""
        name, method = req.path[len(CONTROL_PREFIX) :], req.method
        try:
            if name == "script" and method in ("PUT", "POST"):
                self.set_script(json.loads(req.body or b"null"))
                return Reply(body={})
            if name == "requests" and method == "GET":
                return Reply(body={"requests": self.requests})
            if name == "requests" and method == "DELETE":
                self.clear_requests()
                return Reply(body={})
            if name == "hits" and method == "GET":
                return Reply(body={"hits": self.rule_hits})
            if name == "health" and method == "GET":
                return Reply(body={"status": "ok"})
        except (ValueError, TypeError) as exc:
            return error_reply(invalid_argument(f"Invalid script: {exc}"))
        return error_reply(ApiError(404, f"Unknown control endpoint: {method} {req.path}", "NOT_FOUND"))

    def _route(self, req: httpio.Request) -> Reply:
        path, method = req.path, req.method
        m = _RE_MODEL_RPC.match(path)
        if m and method == "POST":
            version, model, rpc = m.groups()
            self._auth(req)
            body = _parse_body(req.body)
            if rpc == "generateContent":
                return self.engine.generate(model, body, version, stream=False)
            if rpc == "streamGenerateContent":
                reply = self.engine.generate(model, body, version, stream=True)
                return reply
            if rpc == "countTokens":
                return self.engine.count_tokens(model, body, version)
            self.engine.check_model(model, rpc, version)
            raise ApiError(404, f"Method not found: {rpc}.", "NOT_FOUND")
        m = _RE_MODELS.match(path)
        if m and method == "GET":
            self._auth(req)
            return Reply(body=self.engine.list_models())
        m = _RE_MODEL.match(path)
        if m and method == "GET":
            self._auth(req)
            version, model = m.groups()
            if self.engine.model_methods(model) is None:
                raise ApiError(404, f"models/{model} is not found for API version {version}.", "NOT_FOUND")
            return Reply(body=self.engine.model_resource(model))
        m = _RE_CACHES.match(path)
        if m and method in ("POST", "GET"):
            self._auth(req)
            if method == "POST":
                return self.engine.cache_create(_parse_body(req.body), m.group(1))
            size = req.query.get("pageSize", req.query.get("page_size", ["0"]))[0]
            token = req.query.get("pageToken", req.query.get("page_token", [""]))[0]
            return self.engine.cache_list(int(size) if size.isdigit() else 0, token)
        m = _RE_CACHE.match(path)
        if m and method in ("GET", "PATCH", "DELETE"):
            self._auth(req)
            cid = m.group(2)
            if method == "GET":
                return self.engine.cache_get(cid)
            if method == "DELETE":
                return self.engine.cache_delete(cid)
            mask = req.query.get("updateMask", req.query.get("update_mask", [None]))[0]
            return self.engine.cache_patch(cid, _parse_body(req.body), mask)
        raise ApiError(404, f"Method not found: {method} {path}", "NOT_FOUND")

    def _auth(self, req: httpio.Request) -> None:
        key = req.headers.get("x-goog-api-key") or (req.query.get("key") or [""])[0]
        if not key:
            raise api_key_missing()
        if self.api_keys is not None and key not in self.api_keys:
            raise api_key_invalid()

    async def _send_stream(self, req: httpio.Request, reply: Reply, writer: asyncio.StreamWriter, keep: bool) -> bool:
        sse = (req.query.get("alt") or [""])[0] == "sse"
        fault = reply.fault or {}
        kind = fault.get("kind")
        chunks = reply.chunks
        limit = len(chunks)
        if kind:
            limit = max(0, min(int(fault.get("after_chunks", 1)), len(chunks) - 1))
        headers = [
            ("Content-Type", SSE_TYPE if sse else JSON_TYPE),
            ("Transfer-Encoding", "chunked"),
            ("Vary", "Origin, X-Origin, Referer"),
            ("Server", "scaffolding on HTTPServer2"),
        ]
        if kind:
            keep = False
        if not keep:
            headers.append(("Connection", "close"))
        writer.write(httpio.head(200, headers))
        for i, item in enumerate(chunks[:limit]):
            doc = dumps_line(item) if sse else json.dumps(item, indent=2, ensure_ascii=False)
            _served(req.method, req.path, 200, doc.encode())
            framed = f"data: {doc}\r\n\r\n" if sse else ("[" if i == 0 else ",\r\n") + doc
            writer.write(httpio.chunk(framed.encode()))
            await writer.drain()
        if kind == "drop_connection":
            writer.transport.abort()
            return False
        if kind == "midstream_error":
            status = int(fault.get("status", 503))
            err = ApiError(status, str(fault.get("message") or "The model is overloaded. Please try again later."))
            _served(req.method, req.path, status, dumps_line(err.body()).encode())
            if sse:
                data = f"data: {dumps_line(err.body())}\r\n\r\n".encode()
            else:
                data = (("[" if limit == 0 else ",\r\n") + json.dumps(err.body(), indent=2) + "]").encode()
            writer.write(httpio.chunk(data))
        elif kind == "truncate_sse":
            pass
        elif not sse:
            writer.write(httpio.chunk(b"]" if chunks else b"[]"))
        writer.write(httpio.LAST_CHUNK)
        await writer.drain()
        return keep

    # ------------------------------------------------------------------------------------------- record / replay
    async def _proxy(self, req: httpio.Request) -> Reply:
        try:
            status, ctype, body = await self._forward_async(req)
        except Exception as exc:
            # Structural only: the exception text names the upstream URL, whose query may carry ?key=<API key>.
            return error_reply(ApiError(502, f"Upstream request failed ({type(exc).__name__}).", "UNAVAILABLE"))
        record: dict[str, Any] = {
            "ts": time.time(),
            "method": req.method,
            "path": req.path,
            "query": {k: v for k, v in req.query.items() if k != "key"},
            "request_headers": _redact_headers({k: v for k, v in req.headers.items() if k in _FORWARD_HEADERS}),
            "request_body": _maybe_json(req.body),
            "status": status,
            "response_headers": {"content-type": ctype},
        }
        if ctype.startswith(SSE_TYPE):
            record["sse_events"] = _split_sse(body)
        else:
            record["response_body"] = body.decode("utf-8", "replace")
        assert self.record_path is not None
        line = _tape_line(record, req.body, body) + "\n"
        with self._record_lock, self.record_path.open("a", encoding="utf-8") as fh:
            fh.write(line)
        return _raw_reply(record)

    def _forward_async(self, req: httpio.Request) -> asyncio.Future[tuple[int, str, bytes]]:
        """Run :meth:`_forward` on a daemon thread of its own: ``stop()`` never waits for an upstream call.

        (The loop's default executor would make ``stop()`` wait up to the upstream timeout for in-flight calls.)
        """
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[int, str, bytes]] = loop.create_future()

        def settle(result: tuple[int, str, bytes] | None, exc: BaseException | None) -> None:
            if future.done():
                return
            if exc is not None:
                future.set_exception(exc)
            else:
                assert result is not None
                future.set_result(result)

        def work() -> None:
            result: tuple[int, str, bytes] | None = None
            error: BaseException | None = None
            try:
                result = self._forward(req)
            except Exception as exc:
                error = exc
            with contextlib.suppress(RuntimeError):  # the loop is already closed: nobody waits any more
                loop.call_soon_threadsafe(settle, result, error)

        threading.Thread(target=work, name="gemini-emulator-upstream", daemon=True).start()
        return future

    def _forward(self, req: httpio.Request) -> tuple[int, str, bytes]:
        import requests  # local import: only record mode needs it

        headers = {k: v for k, v in req.headers.items() if k in _FORWARD_HEADERS}
        with requests.Session() as session:
            session.trust_env = False
            resp = session.request(
                req.method,
                f"{self.upstream}{req.target}",
                data=req.body or None,
                headers=headers,
                timeout=(UPSTREAM_TIMEOUT_S, UPSTREAM_TIMEOUT_S),
            )
            return resp.status_code, resp.headers.get("content-type", ""), resp.content

    def _load_replay(self, path: Path) -> None:
        self._replay.clear()
        self._replay_pos.clear()
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if not line.strip():
                    continue
                rec = json.loads(line)
                target = _strip_target(rec["path"], rec.get("query") or {})
                if "request_body_b64" in rec:
                    rec["request_body"] = _maybe_json(base64.b64decode(rec["request_body_b64"]))
                if "response_body_b64" in rec:
                    rec["response_body"] = base64.b64decode(rec["response_body_b64"]).decode("utf-8", "replace")
                key = _replay_key(rec["method"], target, rec.get("request_body"))
                self._replay.setdefault(key, []).append(rec)

    def _replay_reply(self, req: httpio.Request) -> Reply:
        key = _replay_key(req.method, _strip_target(req.path, req.query), _maybe_json(req.body))
        recs = self._replay.get(key)
        if not recs:
            return error_reply(ApiError(404, f"Replay: no recorded exchange for {req.method} {req.path}.", "NOT_FOUND"))
        pos = self._replay_pos.get(key, 0)
        self._replay_pos[key] = min(pos + 1, len(recs) - 1)
        reply = _raw_reply(recs[pos])
        if self.latency_ms:
            reply.delay = self.latency_ms / 1000.0
        return reply

    async def _send_raw(self, req: httpio.Request, reply: Reply, writer: asyncio.StreamWriter, keep: bool) -> bool:
        method, path = req.method, req.path
        body = reply.body
        ctype = reply.headers.get("content-type", JSON_TYPE)
        if isinstance(body, list):  # SSE events, one chunk each
            headers = [("Content-Type", ctype), ("Transfer-Encoding", "chunked")]
            if not keep:
                headers.append(("Connection", "close"))
            writer.write(httpio.head(reply.status, headers))
            for event in body:
                data = event.strip()
                if _served_hooks and data.startswith("data:"):
                    doc = data[len("data:") :].strip()
                    _served(method, path, _event_status(doc, reply.status), doc.encode("utf-8"))
                writer.write(httpio.chunk(event.encode("utf-8")))
                await writer.drain()
            writer.write(httpio.LAST_CHUNK)
        else:
            payload = str(body).encode("utf-8")
            _served(method, path, reply.status, payload)
            writer.write(httpio.full_response(reply.status, payload, ctype, keep))
        await writer.drain()
        return keep


def _maybe_json(raw: bytes) -> Any:
    if not raw.strip():
        return None
    try:
        return json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        return raw.decode("utf-8", "replace")


def _event_status(doc: str, default: int) -> int:
    """The status an SSE event stands for: a recorded in-stream ``{"error": {"code": N}}`` event is N."""
    try:
        parsed = json.loads(doc)
    except ValueError:
        return default
    error = parsed.get("error") if isinstance(parsed, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, int) and not isinstance(code, bool) else default


def _tape_line(record: dict[str, Any], request_raw: bytes, response_raw: bytes) -> str:
    """One record as canonical JSON (sorted keys; no NaN/Infinity/NUL).

    A request or response body that cannot be canonical JSON (NaN, NUL...) is stored as base64 in
    ``request_body_b64`` / ``response_body_b64`` instead; replay reads either form.
    """
    try:
        return canonical_dumps(record)
    except ValidationError:
        pass
    record = dict(record)
    record.pop("request_body", None)
    record["request_body_b64"] = base64.b64encode(request_raw).decode("ascii")
    try:
        return canonical_dumps(record)
    except ValidationError:
        pass
    record.pop("response_body", None)
    record.pop("sse_events", None)
    record["response_body_b64"] = base64.b64encode(response_raw).decode("ascii")
    return canonical_dumps(_scrub_nul(record))  # what is left is text from the URL and headers


def _scrub_nul(value: Any) -> Any:
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, dict):
        return {_scrub_nul(k): _scrub_nul(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_scrub_nul(v) for v in value]
    return value


def _replay_key(method: str, target: str, body: Any) -> str:
    return f"{method} {target} {canonical_json(body)}"


def _raw_reply(record: dict[str, Any]) -> Reply:
    ctype = (record.get("response_headers") or {}).get("content-type", JSON_TYPE)
    body: Any = record["sse_events"] if "sse_events" in record else record.get("response_body", "")
    return Reply("raw", int(record["status"]), body, headers={"content-type": ctype})
