"""The emulator's Gemini Live endpoint: ``BidiGenerateContent`` over WebSocket (ws:// and TLS wss://).

:class:`LiveServer` runs on the emulator's event loop next to the REST server (``websockets`` asyncio server, one
task per connection plus one answering task per open session). One script drives REST and Live: a turn is matched
against the same rules (``when`` on the turn's user text, ``respond.text`` / ``function_calls``, templates,
``times``); the Live-only ``respond`` keys are taken out of the script by :func:`.live_wire.split_script` before the
REST scenario compiles it. Protocol errors are WebSocket close frames (1007 invalid argument, 1008 policy, 1011
internal), as on the real service. The script keys are documented in the package docstring and ``docs/EMULATOR.md``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import copy
import itertools
import json
import math
import secrets
import shutil
import ssl
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.protocol import State

from . import live_audio, schema, validate
from .engine import Engine, _grounding
from .live_wire import (
    AUDIO_CAP_MS,
    BAD_HANDLE,
    CLIENT_MESSAGE,
    CLOSE_TIMEOUT_S,
    DEFAULT_CHUNK_MS,
    DEFAULT_HEARD,
    DEFAULT_MS_PER_CHAR,
    DEFAULT_SILENCE_MS,
    INTERNAL,
    INVALID,
    KEY_INVALID,
    KEY_MISSING,
    LIVE_PATH_TEMPLATE,
    LOG,
    MAX_HANDLES,
    MAX_MESSAGE_BYTES,
    PATH_RE,
    PRECONDITION,
    WS_LOG,
    CloseConnection,
    Dropped,
    LiveScript,
    live_call_id,
    live_fault,
    make_tls_files,
    truncate_reason,
)
from .script import render, render_value, template_vars
from .wire import ApiError, b64decode_any, b64encode_std, contents_tokens, format_duration, text_tokens, tools_tokens


# ---------------------------------------------------------------------------------------------------------- server
@dataclass
class _Snapshot:
    history: list[dict[str, Any]]
    audio_in_ms: float


class LiveServer:
    """The Live listeners (ws and, when ``cryptography`` is importable, wss) and their open sessions.

    Runs on the emulator's event loop: :meth:`start`, :meth:`stop`, :meth:`go_away` and :meth:`drop_all` must be
    awaited / called there. :meth:`log` and :attr:`connections` may be read from any thread.
    """

    def __init__(
        self,
        *,
        engine: Engine,
        script: Callable[[], LiveScript],
        api_keys: Callable[[], list[str] | None],
        host: str,
        port: int = 0,
        tls_port: int = 0,
        log_size: int = 10_000,
        on_frame: Callable[[str, bytes], None] | None = None,
    ) -> None:
        self.engine = engine
        self.script = script
        self.api_keys = api_keys
        self.host = host
        self._requested = (port, tls_port)
        self.port: int | None = None
        self.tls_port: int | None = None
        self.ca_file: Path | None = None
        self.tls_error: str | None = None
        self.on_frame = on_frame
        self.sessions: dict[int, _Session] = {}
        self._handles: collections.OrderedDict[str, _Snapshot] = collections.OrderedDict()
        self._servers: list[Server] = []
        self._connections: weakref.WeakSet[ServerConnection] = weakref.WeakSet()
        self._tls_dir: Path | None = None
        self._tls_cleanup: weakref.finalize[Any, Any] | None = None
        self._ids = itertools.count(1)
        self._log: collections.deque[dict[str, Any]] = collections.deque(maxlen=log_size)
        self._log_lock = threading.Lock()

    async def start(self) -> None:
        """Bind the ws listener, then the wss one (skipped, with :attr:`tls_error` set, without cryptography).

        Raises:
            OSError: a port cannot be bound.
        """
        options: dict[str, Any] = {
            "process_request": self._process_request, "compression": None, "max_size": MAX_MESSAGE_BYTES,
            "ping_interval": None, "close_timeout": CLOSE_TIMEOUT_S, "server_header": None, "logger": WS_LOG,
            "backlog": 2048, "create_connection": self._new_connection,
        }  # fmt: skip
        plain = await serve(self._handle, self.host, self._requested[0], **options)
        self._servers.append(plain)
        self.port = plain.sockets[0].getsockname()[1]
        context = self._tls_context()
        if context is not None:
            secure = await serve(self._handle, self.host, self._requested[1], ssl=context, **options)
            self._servers.append(secure)
            self.tls_port = secure.sockets[0].getsockname()[1]

    def _tls_context(self) -> ssl.SSLContext | None:
        try:
            import cryptography  # noqa: F401  (optional: only the wss listener needs it)
        except ImportError:
            self.tls_error = "the 'cryptography' package is not installed (pip install 'adk_actors[dev]')"
            return None
        self._tls_dir = tls_dir = Path(tempfile.mkdtemp(prefix="adk-emu-tls-"))
        # An emulator never stopped still removes its directory when collected or at interpreter exit.
        self._tls_cleanup = weakref.finalize(self, shutil.rmtree, tls_dir, ignore_errors=True)
        cert, key = make_tls_files(tls_dir, [self.host])
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_cert_chain(cert, key)
        finally:
            key.unlink()  # loaded: the private key never outlives start() on disk, even if the process is killed
        self.ca_file = cert
        return context

    async def stop(self) -> None:
        """Abort every session, close the listeners, delete the TLS files and forget every resumption handle."""
        for session in list(self.sessions.values()):
            session.abort()
        for server in self._servers:
            server.close(close_connections=False)
        # Connections still in their opening handshake have no session yet: abort them too, so stop() never waits
        # for a silent client's handshake timeout.
        for connection in list(self._connections):
            transport = getattr(connection, "transport", None)
            if transport is not None:
                transport.abort()
        for server in self._servers:
            await server.wait_closed()
        self._servers.clear()
        self._handles.clear()
        if self._tls_cleanup is not None:
            self._tls_cleanup()
            self._tls_dir = None

    @property
    def connections(self) -> int:
        """Live connections open now (a connection whose close handshake is done no longer counts, even while its
        TCP connection winds down)."""
        return sum(1 for s in list(self.sessions.values()) if s.ws.state is State.OPEN)

    def log_entries(self) -> list[dict[str, Any]]:
        """A snapshot of the frame log (oldest first)."""
        with self._log_lock:
            return [dict(e) for e in self._log]

    def log(self, conn: int, direction: str, kind: str, size: int, **extra: Any) -> None:
        """Record one frame: never its content, only sizes (and close codes)."""
        entry = {"connection": conn, "direction": direction, "kind": kind, "bytes": size, "timestamp": time.time()}
        entry.update(extra)
        with self._log_lock:
            self._log.append(entry)

    async def go_away(self, time_left_ms: int) -> None:
        """Send ``goAway`` to every open session, each then closing with 1000 after ``time_left_ms``."""
        for session in list(self.sessions.values()):
            with contextlib.suppress(ConnectionClosed):
                await session.go_away(time_left_ms)

    async def drop_all(self) -> None:
        """Abort the TCP connection of every open session (no close frame)."""
        for session in list(self.sessions.values()):
            session.abort()

    def remember(self, snapshot: _Snapshot) -> str:
        """Store a conversation for resumption; returns its new handle."""
        handle = secrets.token_urlsafe(24)
        self._handles[handle] = snapshot
        while len(self._handles) > MAX_HANDLES:
            self._handles.popitem(last=False)
        return handle

    def recall(self, handle: str) -> _Snapshot | None:
        """The conversation a handle stands for (``None``: unknown or expired)."""
        return self._handles.get(handle)

    def _new_connection(self, *args: Any, **kwargs: Any) -> ServerConnection:
        connection = ServerConnection(*args, **kwargs)
        self._connections.add(connection)
        return connection

    def _process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        if PATH_RE.match(request.path.partition("?")[0]) is None:
            return connection.respond(HTTPStatus.NOT_FOUND, "Not Found\n")
        return None

    async def _handle(self, ws: ServerConnection) -> None:
        conn = next(self._ids)
        session = _Session(self, ws, conn)
        self.sessions[conn] = session
        try:
            await session.run()
        finally:
            self.sessions.pop(conn, None)


# --------------------------------------------------------------------------------------------------------- session
@dataclass
class _Job:
    """One unit of the ordered input stream: contents to append, a turn to answer, or a context update."""

    kind: str  # "contents" | "text" | "audio" | "update"
    contents: list[dict[str, Any]] = field(default_factory=list)
    text: str = ""
    audio_ms: int = 0
    answer: bool = True
    update: dict[str, Any] = field(default_factory=dict)


def _user(text: str) -> dict[str, Any]:
    return {"role": "user", "parts": [{"text": text}]}


def _text_of(content: dict[str, Any] | None) -> str:
    return "\n".join(p["text"] for p in (content or {}).get("parts") or [] if "text" in p)


def _message_kind(msg: dict[str, Any]) -> str:
    top = next((k for k in msg if k != "usageMetadata"), "usageMetadata")
    inner = msg[top]
    if top in ("serverContent", "realtimeInput") and isinstance(inner, dict) and inner:
        return f"{top}.{next(iter(inner))}"
    return top


class _Session:
    """One Live connection: setup, then a reader (this task) and an answering task fed through a job queue."""

    def __init__(self, server: LiveServer, ws: ServerConnection, conn: int) -> None:
        self.server, self.ws, self.conn = server, ws, conn
        assert ws.request is not None
        path, _, query = ws.request.path.partition("?")
        match = PATH_RE.match(path)
        self.version = match.group(1) if match else "v1beta"
        self.key = ws.request.headers.get("x-goog-api-key") or (parse_qs(query).get("key") or [""])[0]
        self.text_frames = False
        self.model = ""
        self.audio_out = True
        self.tools: list[dict[str, Any]] = []
        self.system: dict[str, Any] | None = None
        self.gen_cfg: dict[str, Any] = {}
        self.input_tx = self.output_tx = self.resumable = False
        self.auto_vad, self.interrupts = True, True
        self.vad = live_audio.Vad()
        self.manual_active, self.manual_ms = False, 0.0
        self.history: list[dict[str, Any]] = []
        self.audio_in_ms = 0.0
        self.jobs: asyncio.Queue[_Job] = asyncio.Queue()
        self.answering = False
        self.interrupt = asyncio.Event()
        self.pending_calls: dict[str, dict[str, Any]] = {}
        self.tool_results: dict[str, dict[str, Any]] = {}
        self.tools_done = asyncio.Event()
        self._responder: asyncio.Task[None] | None = None
        self._go_away_task: asyncio.Task[None] | None = None
        self._close_task: asyncio.Task[None] | None = None
        self._dropped = False

    # ------------------------------------------------------------------------------------------------ lifecycle
    async def run(self) -> None:
        try:
            await self._setup(await self.ws.recv())
            self._responder = asyncio.create_task(self._respond_loop())
            async for raw in self.ws:
                self._on_message(raw)
        except CloseConnection as exc:
            await self.close(exc.code, exc.reason)
        except (ConnectionClosed, Dropped):
            pass
        except Exception as exc:  # an emulator bug: close like the real service's internal error
            LOG.debug("live session %s failed: %s", self.conn, type(exc).__name__)
            await self.close(1011, INTERNAL)
        finally:
            await self._finish()

    async def _finish(self) -> None:
        if self._close_task is not None:
            await asyncio.wait([self._close_task], timeout=CLOSE_TIMEOUT_S + 1)
        tasks = [t for t in (self._responder, self._go_away_task, self._close_task) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def close(self, code: int, reason: str) -> None:
        """Close with ``code``/``reason`` (once; later calls wait for the first)."""
        if self._close_task is None:
            reason = truncate_reason(reason)
            self.server.log(self.conn, "out", "close", 0, code=code, reason=reason)
            self._close_task = asyncio.ensure_future(self.ws.close(code, reason))
        with contextlib.suppress(Exception):
            await asyncio.shield(self._close_task)

    def abort(self) -> None:
        """Abort the TCP connection (no close frame)."""
        if not self._dropped:
            self._dropped = True
            self.server.log(self.conn, "out", "drop", 0)
            self.ws.transport.abort()

    async def go_away(self, time_left_ms: int) -> None:
        """Send ``goAway{timeLeft}`` and close with 1000 once that time has passed."""
        await self.send({"goAway": {"timeLeft": format_duration(time_left_ms / 1000)}})
        if self._go_away_task is None:
            self._go_away_task = asyncio.create_task(self._close_after(time_left_ms))

    async def _close_after(self, ms: int) -> None:
        await asyncio.sleep(ms / 1000)
        await self.close(1000, "")

    async def send(self, msg: dict[str, Any], audio_bytes: int = 0) -> None:
        """Send one server message (binary frame of UTF-8 JSON unless the script asks for text frames)."""
        if self._dropped:
            raise Dropped
        data = json.dumps(msg, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        if self.server.on_frame is not None:
            self.server.on_frame(LIVE_PATH_TEMPLATE.format(version=self.version), data)
        extra = {"audio_bytes": audio_bytes} if audio_bytes else {}
        self.server.log(self.conn, "out", _message_kind(msg), len(data), **extra)
        await self.ws.send(data.decode("utf-8") if self.text_frames else data)

    # ---------------------------------------------------------------------------------------------------- input
    def _parse(self, raw: str | bytes) -> tuple[str, dict[str, Any]]:
        try:
            msg = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        except (UnicodeDecodeError, ValueError, RecursionError):
            msg = None
        if not isinstance(msg, dict) or len(msg) != 1:
            raise CloseConnection(1007, INVALID)
        ((name, value),) = msg.items()
        canon = CLIENT_MESSAGE.lookup(name)
        if canon is None or value is None:
            raise CloseConnection(1007, INVALID)
        try:
            body = schema.normalize({canon: value}, CLIENT_MESSAGE)[canon]
        except (ApiError, ValueError, TypeError, OverflowError, RecursionError):
            raise CloseConnection(1007, INVALID) from None
        return canon, body

    def _log_in(self, raw: str | bytes, kind: str, audio_bytes: int = 0) -> None:
        size = len(raw.encode("utf-8") if isinstance(raw, str) else raw)
        self.server.log(self.conn, "in", kind, size, **({"audio_bytes": audio_bytes} if audio_bytes else {}))

    async def _setup(self, raw: str | bytes) -> None:
        error: CloseConnection | None = None
        try:
            kind, setup = self._parse(raw)
        except CloseConnection as exc:
            kind, setup, error = "invalid", {}, exc
        self._log_in(raw, kind)
        keys = self.server.api_keys()  # the key is checked first: the real service does it at the handshake
        if not self.key:
            raise CloseConnection(1008, KEY_MISSING)
        if keys is not None and self.key not in keys:
            raise CloseConnection(1008, KEY_INVALID)
        if error is not None:
            raise error
        if kind != "setup":
            raise CloseConnection(1007, PRECONDITION)
        probs = validate.Problems("BidiGenerateContentSetup")
        validate.check_tools(setup.get("tools") or [], probs, "")
        validate.check_generation_config(setup.get("generationConfig") or {}, probs, "")
        if probs.items or not setup.get("model"):
            raise CloseConnection(1007, INVALID)
        model = setup["model"].removeprefix("models/")
        methods = self.server.engine.model_methods(model)
        if methods is None or "bidiGenerateContent" not in methods:
            raise CloseConnection(
                1008,
                f"models/{model} is not found for API version {self.version}, or is not supported for "
                "bidiGenerateContent. Call ListModels to see the list of available models and their supported "
                "methods.",
            )
        self.model = model
        self.gen_cfg = setup.get("generationConfig") or {}
        modalities = self.gen_cfg.get("responseModalities") or ["AUDIO"]
        if len(modalities) != 1 or modalities[0] not in ("AUDIO", "TEXT"):
            raise CloseConnection(1007, INVALID)
        self.audio_out = modalities[0] == "AUDIO"
        self.system = setup.get("systemInstruction")
        self.tools = setup.get("tools") or []
        self.input_tx = "inputAudioTranscription" in setup
        self.output_tx = "outputAudioTranscription" in setup
        realtime = setup.get("realtimeInputConfig") or {}
        aad = realtime.get("automaticActivityDetection") or {}
        self.auto_vad = not aad.get("disabled", False)
        silence_ms = aad.get("silenceDurationMs") or 0
        self.vad = live_audio.Vad(silence_ms=silence_ms if silence_ms > 0 else DEFAULT_SILENCE_MS)
        self.interrupts = realtime.get("activityHandling") != "NO_INTERRUPTION"
        resumption = setup.get("sessionResumption")
        self.resumable = resumption is not None
        if resumption and resumption.get("handle"):
            snapshot = self.server.recall(resumption["handle"])
            if snapshot is None:
                raise CloseConnection(1008, BAD_HANDLE)
            self.history = copy.deepcopy(snapshot.history)
            self.audio_in_ms = snapshot.audio_in_ms
        self.text_frames = self.server.script().text_frames
        await self.send({"setupComplete": {}})

    def _on_message(self, raw: str | bytes) -> None:
        try:
            kind, body = self._parse(raw)
        except CloseConnection:
            self._log_in(raw, "invalid")
            raise
        if kind == "setup":
            self._log_in(raw, kind)
            raise CloseConnection(1007, INVALID)
        if kind == "realtimeInput":
            audio = sum(self._blob_bytes(b) for b in [body.get("audio"), *(body.get("mediaChunks") or [])] if b)
            self._log_in(raw, "realtimeInput." + next(iter(body), "empty"), audio)
            self._realtime(body)
            return
        self._log_in(raw, kind)
        if kind == "clientContent":
            turns = body.get("turns") or []
            probs = validate.Problems("BidiGenerateContentClientContent")
            try:
                validate.check_contents(turns, probs, "", required=False)
            except ApiError:
                raise CloseConnection(1007, INVALID) from None
            if probs.items:
                raise CloseConnection(1007, INVALID)
            self.jobs.put_nowait(_Job("contents", contents=turns, answer=bool(body.get("turnComplete"))))
        elif kind == "toolResponse":
            self._tool_response(body.get("functionResponses") or [])
        elif kind == "contextUpdate":
            self.jobs.put_nowait(_Job("update", update=body, answer=False))

    @staticmethod
    def _blob_bytes(blob: dict[str, Any]) -> int:
        if not str(blob.get("mimeType", "")).startswith("audio/"):
            return 0
        return len(str(blob.get("data", "")).rstrip("=")) * 3 // 4  # the decoded size, without decoding

    def _realtime(self, body: dict[str, Any]) -> None:
        if "activityStart" in body:
            if self.auto_vad:
                raise CloseConnection(1007, INVALID)
            self.manual_active, self.manual_ms = True, 0.0
            self._barge_in()
        for blob in body.get("mediaChunks") or []:
            if str(blob.get("mimeType", "")).startswith("audio/"):
                self._audio(blob)
        if "audio" in body:
            self._audio(body["audio"])
        if "text" in body:
            self.jobs.put_nowait(_Job("text", text=body["text"]))
        if "activityEnd" in body:
            if self.auto_vad:
                raise CloseConnection(1007, INVALID)
            if self.manual_active:
                self.manual_active = False
                if self.manual_ms > 0:
                    self.jobs.put_nowait(_Job("audio", audio_ms=round(self.manual_ms)))
        if body.get("audioStreamEnd"):
            if not self.auto_vad:
                raise CloseConnection(1007, INVALID)
            event = self.vad.flush()
            if event is not None:
                self.jobs.put_nowait(_Job("audio", audio_ms=event.speech_ms))

    def _audio(self, blob: dict[str, Any]) -> None:
        try:
            rate = live_audio.pcm_rate(str(blob.get("mimeType", "")))
            data = b64decode_any(str(blob.get("data", "")))
            live_audio.check_pcm(data)
        except ValueError:
            raise CloseConnection(1007, INVALID) from None
        if not self.auto_vad:
            if self.manual_active:
                self.manual_ms += len(data) / 2 * 1000 / rate
            return
        for event in self.vad.feed(data, rate):
            if event.kind == "start":
                self._barge_in()
            else:
                self.jobs.put_nowait(_Job("audio", audio_ms=event.speech_ms))

    def _barge_in(self) -> None:
        if self.answering and self.interrupts:
            self.interrupt.set()

    def _tool_response(self, responses: list[dict[str, Any]]) -> None:
        for response in responses:
            fid = response.get("id")
            if not fid or fid not in self.pending_calls or fid in self.tool_results:
                raise CloseConnection(1007, INVALID)
            response.setdefault("name", self.pending_calls[fid]["name"])
            self.tool_results[fid] = response
        if self.pending_calls and len(self.tool_results) == len(self.pending_calls):
            self.tools_done.set()

    # -------------------------------------------------------------------------------------------------- answers
    async def _respond_loop(self) -> None:
        try:
            while True:
                job = await self.jobs.get()
                await self._run_job(job)
        except CloseConnection as exc:
            await self.close(exc.code, exc.reason)
        except (ConnectionClosed, Dropped):
            pass
        except Exception as exc:  # an emulator bug: close like the real service's internal error
            LOG.debug("live session %s answer failed: %s", self.conn, type(exc).__name__)
            await self.close(1011, INTERNAL)

    async def _run_job(self, job: _Job) -> None:
        if job.kind == "update":
            if "systemInstruction" in job.update:
                self.system = job.update["systemInstruction"]
            if "tools" in job.update:
                self.tools = (job.update["tools"] or {}).get("tools") or []
            return
        if job.kind == "contents":
            self.history.extend(job.contents)
            if not job.answer:
                return
        elif job.kind == "text":
            self.history.append(_user(job.text))
        else:
            self.history.append(_user(render(DEFAULT_HEARD, {"audio_ms": job.audio_ms})))
            self.audio_in_ms += job.audio_ms
        await self._answer(job)

    async def _pause(self, seconds: float) -> bool:
        """Wait ``seconds`` (answer pacing); True when a barge-in cut it short."""
        if seconds > 0 and not self.interrupt.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.interrupt.wait(), seconds)
        return self.interrupt.is_set()

    async def _answer(self, job: _Job) -> None:
        engine = self.server.engine
        live_script = self.server.script()
        self.interrupt.clear()
        self.answering = True
        heard_at = len(self.history) - 1
        out_text_tokens, out_audio_ms, prompt = 0, 0, (0, 0)
        interrupted, extra = False, {}
        try:
            for step in itertools.count():
                ctx = engine._context(self.model, False, self.history, self.tools, self.system, self.gen_cfg)
                found = engine.scenario.match(ctx)
                respond: dict[str, Any] = found.rule.respond if found else {"text": "You said: {user_text}"}
                extra = live_script.extras.get(found.rule.index, {}) if found else {}
                variables = template_vars(ctx, found.variables if found else {})
                variables["audio_ms"] = job.audio_ms
                if step == 0 and job.kind == "audio":
                    heard = render(str(extra.get("input_transcription", DEFAULT_HEARD)), variables)
                    self.history[heard_at] = _user(heard)
                    variables["user_text"] = heard  # what the answer's templates quote
                    if self.input_tx:
                        await self.send({"serverContent": {"inputTranscription": {"text": heard, "finished": True}}})
                prompt = self._prompt_tokens()
                fault = live_fault(respond, extra)
                delay = (fault or {}).get("delay_ms", 0) if (fault or {}).get("kind") == "slow" else 0
                if await self._pause((delay + float(respond.get("delay_ms", 0) or 0)) / 1000):
                    interrupted = True
                    break
                calls = [self._call(spec, variables) for spec in respond.get("function_calls") or []]
                text = self._answer_text(respond, variables, bool(calls))
                spoken, audio_ms, interrupted = await self._stream(text, extra, fault)
                out_audio_ms += audio_ms
                out_text_tokens += 0 if self.audio_out else text_tokens(spoken)
                parts: list[dict[str, Any]] = [{"text": spoken}] if spoken else []
                if interrupted or not calls:
                    if parts:
                        self.history.append({"role": "model", "parts": parts})
                    if not interrupted:
                        await self._finish_answer(respond, ctx.google_search, variables, spoken)
                    break
                out_text_tokens += sum(text_tokens(c["name"] + json.dumps(c["args"], sort_keys=True)) for c in calls)
                self.history.append({"role": "model", "parts": parts + [{"functionCall": c} for c in calls]})
                if not await self._await_tools(calls):
                    interrupted = True
                    break
        finally:
            self.answering = False
        if interrupted:
            await self.send({"serverContent": {"interrupted": True}})
        await self.send(
            {
                "serverContent": {"turnComplete": True},
                "usageMetadata": self._usage(prompt, out_text_tokens, out_audio_ms),
            }
        )
        if self.resumable:
            handle = self.server.remember(_Snapshot(copy.deepcopy(self.history), self.audio_in_ms))
            await self.send({"sessionResumptionUpdate": {"newHandle": handle, "resumable": True}})
        if "go_away_ms" in extra:
            await self.go_away(int(extra["go_away_ms"]))

    def _answer_text(self, respond: dict[str, Any], variables: dict[str, Any], has_calls: bool) -> str:
        if "text" in respond:
            return render(str(respond["text"]), variables)
        if "json" in respond:
            return json.dumps(render_value(respond["json"], variables), ensure_ascii=False)
        return "" if has_calls else render("You said: {user_text}", variables)

    def _call(self, spec: dict[str, Any], variables: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": str(spec.get("id") or live_call_id()),
            "name": render(str(spec["name"]), variables),
            "args": render_value(spec.get("args", {}), variables),
        }

    async def _finish_answer(self, respond: dict[str, Any], search: bool, variables: dict[str, Any], text: str) -> None:
        grounding = respond.get("grounding")
        if grounding and search:
            user_text = str(variables.get("user_text", ""))
            meta = render_value(grounding, variables) if isinstance(grounding, dict) else _grounding(text, user_text)
            await self.send({"serverContent": {"groundingMetadata": meta}})
        await self.send({"serverContent": {"generationComplete": True}})

    async def _stream(self, text: str, extra: dict[str, Any], fault: dict[str, Any] | None) -> tuple[str, int, bool]:
        """Send the answer in chunks (with pacing, transcription and faults); returns (spoken, audio ms, cut).

        AUDIO: ``chunk_ms`` pieces of the synthetic voice (the last one shorter), each followed by the slice of the
        text it says as ``outputTranscription`` when enabled. TEXT: as many text pieces as the voice would need
        chunks (at most one per character). ``pace`` scales the wait between chunks: 0 none, 1.0 real time.
        """
        rate = live_audio.OUTPUT_RATE
        per_char = float(extra.get("audio_ms_per_char", DEFAULT_MS_PER_CHAR))
        chunk_ms = int(extra.get("chunk_ms", DEFAULT_CHUNK_MS))
        pace = float(extra.get("pace", 0))
        total_ms = live_audio.speech_ms(text, per_char, AUDIO_CAP_MS)
        if self.audio_out:
            total, unit_ms = total_ms * rate // 1000, 1000 / rate
            cuts = [*range(0, total, max(1, chunk_ms * rate // 1000)), total] if total else [0]
            pcm = live_audio.speak(text, total_ms)
        else:
            total = min(len(text), max(1, math.ceil(total_ms / chunk_ms))) if text else 0
            unit_ms, cuts, pcm = (total_ms / total if total else 0.0), list(range(total + 1)), b""
        count = len(cuts) - 1
        kind = (fault or {}).get("kind")
        fault_at = min(int((fault or {}).get("after_chunks", 1)), max(count - 1, 0))
        spoken = ""
        for i in range(count):
            if kind in ("drop", "close", "malformed") and i == fault_at:
                await self._fault(fault or {})
            wait = (cuts[i] - cuts[i - 1]) * unit_ms / 1000 * pace if i else 0.0
            if await self._pause(wait):
                return spoken, round(cuts[i] * unit_ms) if self.audio_out else 0, True
            piece = text[len(text) * cuts[i] // total : len(text) * cuts[i + 1] // total]
            if self.audio_out:
                lo, hi = cuts[i], cuts[i + 1]
                blob = {"mimeType": live_audio.OUTPUT_MIME, "data": b64encode_std(pcm[2 * lo : 2 * hi])}
                await self.send({"serverContent": {"modelTurn": {"role": "model", "parts": [{"inlineData": blob}]}}},
                                audio_bytes=2 * (hi - lo))  # fmt: skip
                if self.output_tx and piece:
                    await self.send({"serverContent": {"outputTranscription": {"text": piece}}})
            else:
                await self.send({"serverContent": {"modelTurn": {"role": "model", "parts": [{"text": piece}]}}})
            spoken += piece
        if count == 0:
            if kind in ("drop", "close"):
                await self._fault(fault or {})
            spoken = text  # silent (audio_ms_per_char 0): the words count as said
        return spoken, total_ms if self.audio_out else 0, False

    async def _fault(self, fault: dict[str, Any]) -> None:
        kind = fault.get("kind")
        if kind == "drop":
            self.abort()
            raise Dropped
        if kind == "close":
            raise CloseConnection(int(fault.get("code", 1011)), str(fault.get("reason", INTERNAL)))
        self.server.log(self.conn, "out", "malformed", 13)
        await self.ws.send(b"\x00not-json{{{\xff")

    async def _await_tools(self, calls: list[dict[str, Any]]) -> bool:
        """Send ``toolCall`` and wait for every response (True) or a barge-in (False: the call is cancelled)."""
        self.pending_calls = {c["id"]: c for c in calls}
        self.tool_results = {}
        self.tools_done.clear()
        await self.send({"toolCall": {"functionCalls": calls}})
        done = asyncio.ensure_future(self.tools_done.wait())
        cut = asyncio.ensure_future(self.interrupt.wait())
        try:
            await asyncio.wait([done, cut], return_when=asyncio.FIRST_COMPLETED)
        finally:
            done.cancel()
            cut.cancel()
        pending, results = self.pending_calls, self.tool_results
        self.pending_calls, self.tool_results = {}, {}
        if not self.tools_done.is_set():
            self.history.pop()  # the unanswered call
            await self.send({"toolCallCancellation": {"ids": list(pending)}})
            return False
        self.history.append({"role": "user", "parts": [{"functionResponse": results[cid]} for cid in pending]})
        return True

    def _prompt_tokens(self) -> tuple[int, int]:
        text = contents_tokens(self.history) + text_tokens(_text_of(self.system)) + tools_tokens(self.tools)
        return text, live_audio.audio_tokens(self.audio_in_ms)

    def _usage(self, prompt: tuple[int, int], out_text: int, out_audio_ms: int) -> dict[str, Any]:
        text_in, audio_in = prompt
        audio_out = live_audio.audio_tokens(out_audio_ms)
        details = [{"modality": "TEXT", "tokenCount": text_in}]
        if audio_in:
            details.append({"modality": "AUDIO", "tokenCount": audio_in})
        response = [{"modality": m, "tokenCount": n} for m, n in (("TEXT", out_text), ("AUDIO", audio_out)) if n]
        usage: dict[str, Any] = {
            "promptTokenCount": text_in + audio_in,
            "responseTokenCount": out_text + audio_out,
            "totalTokenCount": text_in + audio_in + out_text + audio_out,
            "promptTokensDetails": details,
        }
        if response:
            usage["responseTokensDetails"] = response
        return usage
