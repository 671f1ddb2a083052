"""The browser voice bridge on the developer server: the page ``/dev/voice?session=<id>`` and its WebSocket
``/dev/v1/live/sessions/{session_id}/voice`` (docs/VOICE_BRIDGE.md).

One WebSocket is one :class:`~adk_actors.live.VoiceBridge` of one active Live session, owned by the developer
server's process and acting as the configured developer Live principal (:class:`~adk_actors.devapi.live.LiveOps`):
binary messages from the browser are the bridge's v1 client frames (:mod:`adk_actors.live.voice_protocol`), binary
messages to it are its server frames (129 audio, 130 transcription, 131 lifecycle). At most
:data:`MAX_INBOUND_FRAMES` client frames wait for the bridge; past that the socket is not read until the session
has taken one (TCP backpressure to the sender). ACK frames are fed to the bridge before waiting audio: they return
the credit that lets the answer flow.

**Authentication.** A browser cannot set headers on a WebSocket, so the developer token travels in the
``Sec-WebSocket-Protocol`` header: the client offers two subprotocols, :data:`SUBPROTOCOL` and
:data:`BEARER_PREFIX` followed by the token encoded as unpadded base64url (so any token fits the header's token
grammar). The server selects :data:`SUBPROTOCOL` only — the token is never echoed — and compares the token like
the ``Authorization`` header (:class:`~adk_actors.web.edge.DevToken`). A client that can set headers may send
``Authorization: Bearer <token>`` instead. Never in the URL: the edge refuses credentials in a query string. A
handshake without a valid token, without :data:`SUBPROTOCOL`, or from another origin is refused (HTTP 403).

**Per connection.** The bridge is started, fed and stopped on one thread of the edge's :class:`Offload` (a bridge
is blocking and its endpoint belongs to one thread): it takes the browser's frames in order — each answered by the
session before the next (synchronous ingress backpressure) — and forwards the bridge's frames as they come. A frame
the bridge refuses without ending (``invalid_voice_frame``, ``ingress_full``) is answered with a lifecycle ``error``
frame (code 8) whose sequence is 0 (never ACKed) and whose reason is the tag (``invalid_voice_frame:<why>``).
The socket is closed with:

====  ===============================================================================================
code  when (the close reason is the tag)
====  ===============================================================================================
1000  the bridge ended normally: ``closed`` (the Live session ended), ``stopped``
1003  a text message (``binary_frames_only``)
1008  the bridge could not start: ``live_unavailable``, ``live_session_not_found``, ``live_not_active``,
      ``voice_bridge_exists``, ``invalid_session_id``
1009  a message over the frame bound (``voice_frame_too_large``)
1011  ``live_voice_outcome_unknown`` (do not resend), or another failure
1013  ``live_voice_reconnect_required`` (the session is resuming: connect again once it is active),
      ``edge_busy``
====  ===============================================================================================

Closing the socket stops the bridge (it unsubscribes; the Live session goes on).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import queue
import time
from collections.abc import Callable, Iterator
from importlib import resources
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.websockets import WebSocket

from adk_actors.devapi.live import LiveOps
from adk_actors.errors import AdkError, LiveError
from adk_actors.live import voice_protocol as vp
from adk_actors.logs import log_crash
from adk_actors.web.edge import DevToken
from adk_actors.web.offload import BlockingIterator, Offload

__all__ = [
    "BEARER_PREFIX",
    "MAX_INBOUND_FRAMES",
    "SUBPROTOCOL",
    "VOICE_CSP",
    "VOICE_PAGE",
    "VOICE_PATH",
    "VoiceSocket",
    "bearer_subprotocol",
    "voice_page",
]

VOICE_PAGE = "/dev/voice"
VOICE_PATH = "/dev/v1/live/sessions/{session_id}/voice"
SUBPROTOCOL = "adk.voice.v1"
"""The subprotocol the server selects (the frame format of :mod:`adk_actors.live.voice_protocol`, v1)."""
BEARER_PREFIX = "adk.bearer."
"""Prefix of the offered subprotocol that carries the developer token (unpadded base64url after it)."""
MAX_INBOUND_FRAMES = 64
"""Client frames (and, apart, ACKs) waiting for the bridge (about 1.3 s of 20 ms audio) before the socket is no
longer read."""
VOICE_CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: its script, its AudioWorklet module and its WebSocket are same-origin."""
_FRAME_SLACK = 64
"""Bytes a client frame may have beyond its PCM (the audio header is 15)."""
_SLICE_S = 0.02
"""How long the pump waits for a bridge frame before it looks at the browser's frames again."""
_IDLE_S = 0.25
"""Longest time the pump keeps its thread without yielding (so a stop request is honoured)."""
_BATCH = 32
_FRAMES_PER_ROUND = 4
"""Client frames (audio, activity) fed per round: between rounds, ACKs and the bridge's output go first."""
_RECOVERABLE = frozenset({"invalid_voice_frame", "ingress_full"})
_BRIDGE_CLOSE: dict[str, int] = {
    "closed": 1000,
    "stopped": 1000,
    "live_voice_reconnect_required": 1013,
    "live_voice_outcome_unknown": 1011,
}


def bearer_subprotocol(token: str) -> str:
    """The subprotocol that carries ``token`` (for clients and tests)."""
    encoded = base64.urlsafe_b64encode(token.encode("utf-8")).decode("ascii").rstrip("=")
    return BEARER_PREFIX + encoded


def _offered_token(subprotocols: list[str]) -> str | None:
    found = [p for p in subprotocols if p.startswith(BEARER_PREFIX)]
    if len(found) != 1:
        return None
    raw = found[0][len(BEARER_PREFIX) :]
    try:
        return base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).decode("ascii")
    except (binascii.Error, ValueError):
        return None


def _close_code(reason: str) -> int:
    return _BRIDGE_CLOSE.get(reason, 1011)


def _refusal_frame(err: AdkError) -> bytes:
    why = err.details.get("why") if isinstance(err.details, dict) else None
    tag = f"{err.reason}:{why}" if isinstance(why, str) else err.reason
    return vp.lifecycle_frame(0, "error", tag)


_Item = tuple[Any, ...] | None


def _is_ack(data: bytes) -> bool:
    return len(data) == 10 and data[0] == vp.VERSION and data[1] == vp.ACK


class _Inbox:
    """The browser's frames on their way to the pump thread. ACKs wait in a queue of their own, taken first: they
    return the bridge's credit and must never wait behind audio. Both queues are bounded; the reader waits for room
    (so a full inbox stops reading the socket), woken by the pump when it took something."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self.acks: queue.Queue[bytes] = queue.Queue(maxsize=size)
        self.frames: queue.Queue[bytes] = queue.Queue(maxsize=size)
        self._loop = loop
        self._space = asyncio.Event()

    def empty(self) -> bool:
        return self.acks.empty() and self.frames.empty()

    def taken(self) -> None:
        """Called by the pump thread after it took frames."""
        try:
            self._loop.call_soon_threadsafe(self._space.set)
        except RuntimeError:  # the loop is closed: nobody waits any more
            return

    async def put(self, data: bytes) -> None:
        """Queue one frame (on the event loop), waiting while its queue is full."""
        target = self.acks if _is_ack(data) else self.frames
        while True:
            try:
                target.put_nowait(data)
                return
            except queue.Full:
                self._space.clear()
                if target.full():  # still full after the clear: the pump's next take sets it again
                    await self._space.wait()


def _pump(
    open_bridge: Callable[[], Any], inbox: _Inbox, clock: Callable[[], float] = time.monotonic
) -> Iterator[_Item]:
    """The thread side of one connection: ``("open",)`` once the bridge is attached, then ``("frame", bytes)`` to
    send, ``("close", code, reason)`` as the last item, and ``None`` while idle. Each round feeds the bridge every
    waiting ACK and a few other frames, then forwards the bridge's frames that are already here. Closing it stops
    the bridge."""
    bridge = open_bridge()
    try:
        yield ("open",)
        last = clock()
        while True:
            took = 0
            for source, limit in ((inbox.acks, _BATCH), (inbox.frames, _FRAMES_PER_ROUND)):
                for _ in range(limit):
                    try:
                        data = source.get_nowait()
                    except queue.Empty:
                        break
                    took += 1
                    try:
                        if source is inbox.acks:
                            bridge.ack(data)  # a cast: credit returns without a round trip per ACK
                            continue
                        bridge.frame(data)
                    except LiveError as err:
                        if err.reason not in _RECOVERABLE:
                            yield ("close", _close_code(err.reason), err.reason)
                            return
                        yield ("frame", _refusal_frame(err))
                        last = clock()
            if took:
                inbox.taken()
            frame = bridge.receive(_SLICE_S if not took and inbox.empty() else 0.0)
            for _ in range(_BATCH):
                if frame is None:
                    break
                yield ("frame", frame)
                last = clock()
                frame = bridge.receive(0.0)
            if frame is not None:
                yield ("frame", frame)
            if bridge.closed_reason is not None:
                yield ("close", _close_code(bridge.closed_reason), bridge.closed_reason)
                return
            if clock() - last >= _IDLE_S:
                yield None
                last = clock()
    finally:
        bridge.stop()


class VoiceSocket:
    """The WebSocket endpoint of the voice bridge (see the module docstring).

    Args:
        live: the Live operations (principal included) the bridge is started with.
        token: the developer token; ``None`` refuses every connection.
        offload: where each connection's pump thread runs (:meth:`Offload.iterate`).
        max_audio_frame_bytes: the bridge's PCM bound per audio frame.
    """

    def __init__(self, live: LiveOps, token: DevToken | None, offload: Offload, max_audio_frame_bytes: int = 64_000):
        self.live = live
        self.token = token
        self.offload = offload
        self.max_audio_frame_bytes = max_audio_frame_bytes

    def _authorized(self, websocket: WebSocket) -> bool:
        if self.token is None:
            return False
        header = websocket.headers.getlist("authorization")
        if header:
            return len(header) == 1 and self.token.check(header[0])
        offered = _offered_token(list(websocket.scope.get("subprotocols") or []))
        return offered is not None and self.token.check(f"Bearer {offered}")

    async def endpoint(self, websocket: WebSocket) -> None:
        """The Starlette WebSocket endpoint (``WebSocketRoute(VOICE_PATH, socket.endpoint)``)."""
        if SUBPROTOCOL not in (websocket.scope.get("subprotocols") or []) or not self._authorized(websocket):
            await websocket.close(code=1008)  # before accept: the handshake is answered 403
            return
        session_id = websocket.path_params["session_id"]
        await websocket.accept(subprotocol=SUBPROTOCOL)
        inbox = _Inbox(asyncio.get_running_loop(), MAX_INBOUND_FRAMES)

        def open_bridge() -> Any:
            return self.live.open_voice(session_id, max_audio_frame_bytes=self.max_audio_frame_bytes)

        try:
            pump: BlockingIterator[_Item] = self.offload.iterate(_pump, open_bridge, inbox)
        except AdkError as err:
            await _close(websocket, 1013, err.reason)
            return
        try:
            await anext(pump)
        except AdkError as err:
            await pump.aclose()
            await _close(websocket, 1008, err.reason)
            return
        except StopAsyncIteration:  # pragma: no cover - the pump always opens or raises
            await _close(websocket, 1011, "internal")
            return
        await self._serve(websocket, pump, inbox)

    async def _serve(self, websocket: WebSocket, pump: BlockingIterator[_Item], inbox: _Inbox) -> None:
        reader = asyncio.ensure_future(self._read(websocket, inbox))
        pending: asyncio.Future[_Item] | None = None
        try:
            while True:
                if pending is None:
                    pending = asyncio.ensure_future(anext(pump))
                done, _ = await asyncio.wait({pending, reader}, return_when=asyncio.FIRST_COMPLETED)
                if pending in done:
                    finished, pending = pending, None
                    try:
                        item = finished.result()
                    except StopAsyncIteration:
                        await _close(websocket, 1000, "closed")
                        return
                    except AdkError as err:
                        await _close(websocket, 1011, err.reason)
                        return
                    except Exception as exc:  # a bug: logged by type, the browser gets a bare reason
                        log_crash("adk_actors.web", "voice_pump_failed", exc)
                        await _close(websocket, 1011, "internal")
                        return
                    if item is None:
                        continue
                    if item[0] == "close":
                        await _close(websocket, item[1], item[2])
                        return
                    if not await _send(websocket, item[1]):
                        return
                    continue
                ended = reader.result()
                if ended is not None:
                    await _close(websocket, *ended)
                return
        finally:
            if pending is not None and not pending.done():
                pending.cancel()
                await asyncio.wait({pending})
            await pump.aclose()
            if not reader.done():
                reader.cancel()
                await asyncio.wait({reader})

    async def _read(self, websocket: WebSocket, inbox: _Inbox) -> tuple[int, str] | None:
        """Queue the browser's frames (waiting while the queue is full); ``None`` when it went away, else the
        ``(code, reason)`` to close with."""
        bound = self.max_audio_frame_bytes + _FRAME_SLACK
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                return None
            data = message.get("bytes")
            if data is None:
                return 1003, "binary_frames_only"
            if len(data) > bound:
                return 1009, "voice_frame_too_large"
            await inbox.put(data)


async def _send(websocket: WebSocket, data: bytes) -> bool:
    try:
        await websocket.send_bytes(data)
        return True
    except Exception:  # the browser went away while we wrote (WebSocketDisconnect, OSError, RuntimeError)
        return False


async def _close(websocket: WebSocket, code: int, reason: str) -> None:
    try:
        await websocket.close(code=code, reason=reason[:120])
    except Exception:  # already closed by the browser
        return


def _page_bytes() -> bytes:
    return resources.files("adk_actors.web").joinpath("static", "voice.html").read_bytes()


async def voice_page(request: Request) -> Response:
    """``GET /dev/voice``: the voice page (public, like the console page; it asks for the token itself)."""
    return Response(
        _page_bytes(),
        media_type="text/html; charset=utf-8",
        headers={"content-security-policy": VOICE_CSP, "cache-control": "no-store", "referrer-policy": "no-referrer"},
    )
