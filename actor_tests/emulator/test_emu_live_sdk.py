"""The official ``google-genai`` Live client against the emulator, over ``wss://`` trusting the emulator's CA.

The SDK always dials ``wss://`` (it rewrites the scheme), so these tests exercise the TLS listener; its trust store
is an ``ssl`` context built from :attr:`Emulator.live_ca_file`, passed as ``async_client_args["ssl"]``. Every frame
the emulator serves is validated with ``types.LiveServerMessage`` at teardown.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlsplit

import pytest
from google import genai
from google.genai import errors, types
from google.genai.live import AsyncSession

from adk_actors.emulator import Emulator

from .helpers import LIVE_MODEL, silence, tone

KEY = "test-key"
STORY = "Once upon a time a small robot learned to sing. " * 3
WEATHER = types.FunctionDeclaration(
    name="get_weather",
    description="Current weather for a city.",
    parameters=types.Schema(type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}),
)


pytestmark = pytest.mark.usefixtures("live_frames")  # every served Live frame must be valid (conftest)


@pytest.fixture
def make_emu() -> Iterator[Callable[..., Emulator]]:
    """Start emulators; all are stopped at teardown."""
    started: list[Emulator] = []

    def make(script: dict[str, Any] | None = None, **kwargs: Any) -> Emulator:
        emu = Emulator(script=script, **kwargs).start()
        started.append(emu)
        return emu

    yield make
    for emu in started:
        emu.stop()


@asynccontextmanager
async def live(emu: Emulator, key: str = KEY, model: str = LIVE_MODEL, **config: Any) -> AsyncIterator[AsyncSession]:
    """An SDK Live session on the emulator's wss:// listener (REST stays on ``base_url``)."""
    context = ssl.create_default_context(cafile=emu.live_ca_file)
    options = types.HttpOptions(base_url=emu.base_url, api_version="v1beta", async_client_args={"ssl": context})
    client = genai.Client(api_key=key, http_options=options)
    tls_base = "https://" + urlsplit(emu.live_tls_url).netloc
    cfg = types.LiveConnectConfig(**config, http_options=types.HttpOptions(base_url=tls_base))
    try:
        async with client.aio.live.connect(model=model, config=cfg) as session:
            yield session
    finally:
        await client.aio.aclose()


def run(coro: Awaitable[Any]) -> Any:
    """Run one async scenario to completion, bounded by a deadline."""

    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout=60)

    return asyncio.run(bounded())


async def turn(session: AsyncSession) -> list[types.LiveServerMessage]:
    """Every message up to and including ``turnComplete`` (the SDK's own stopping rule)."""
    return [msg async for msg in session.receive()]


async def next_message(session: AsyncSession) -> types.LiveServerMessage:
    """The next message, whatever it is (``receive()`` alone would wait for a ``turnComplete``)."""
    async for msg in session.receive():
        return msg
    raise AssertionError("the session yielded nothing")


def text_of(messages: list[types.LiveServerMessage]) -> str:
    return "".join(
        part.text or ""
        for m in messages
        if m.server_content and m.server_content.model_turn
        for part in m.server_content.model_turn.parts or []
    )


def audio_of(messages: list[types.LiveServerMessage]) -> bytes:
    out = b""
    for m in messages:
        if m.server_content and m.server_content.model_turn:
            for part in m.server_content.model_turn.parts or []:
                assert part.inline_data is not None and part.inline_data.mime_type == "audio/pcm;rate=24000"
                out += part.inline_data.data or b""
    return out


def content(messages: list[types.LiveServerMessage], name: str) -> list[Any]:
    return [getattr(m.server_content, name) for m in messages if m.server_content and getattr(m.server_content, name)]


async def send_pcm(session: AsyncSession, pcm: bytes, chunk: int = 640) -> None:
    for i in range(0, len(pcm), chunk):
        await session.send_realtime_input(audio=types.Blob(data=pcm[i : i + chunk], mime_type="audio/pcm;rate=16000"))


def ask(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


# ----------------------------------------------------------------------------------------------------------- turns
def test_sdk_text_turn_in_text_and_audio_modalities(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu()

    async def scenario() -> tuple[list[types.LiveServerMessage], list[types.LiveServerMessage]]:
        async with live(emu, response_modalities=["TEXT"]) as session:
            await session.send_client_content(turns=ask("hello sdk"), turn_complete=True)
            text_turn = await turn(session)
        async with live(emu, response_modalities=["AUDIO"], output_audio_transcription={}) as session:
            await session.send_client_content(turns=ask("hi"), turn_complete=True)
            audio_turn = await turn(session)
        return text_turn, audio_turn

    text_turn, audio_turn = run(scenario())
    assert text_of(text_turn) == "You said: hello sdk"
    assert content(text_turn, "generation_complete") == [True]
    usage = text_turn[-1].usage_metadata
    assert usage is not None and usage.total_token_count == usage.prompt_token_count + usage.response_token_count
    assert len(audio_of(audio_turn)) == 2 * 24_000 * 240 // 1000  # "You said: hi": 12 chars at 20 ms
    assert "".join(t.text for t in content(audio_turn, "output_transcription")) == "You said: hi"


def test_sdk_audio_turn_ended_by_vad_silence_and_by_audio_stream_end(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu()
    vad = types.RealtimeInputConfig(automatic_activity_detection=types.AutomaticActivityDetection(
        silence_duration_ms=300))  # fmt: skip

    async def scenario() -> tuple[list[types.LiveServerMessage], list[types.LiveServerMessage]]:
        async with live(emu, response_modalities=["TEXT"], realtime_input_config=vad,
                        input_audio_transcription=types.AudioTranscriptionConfig()) as session:  # fmt: skip
            await send_pcm(session, tone(400) + silence(300))
            by_silence = await turn(session)
            await send_pcm(session, tone(200))
            await session.send_realtime_input(audio_stream_end=True)
            by_stream_end = await turn(session)
        return by_silence, by_stream_end

    by_silence, by_stream_end = run(scenario())
    (heard,) = content(by_silence, "input_transcription")
    assert heard.text == "(audio 400 ms)" and heard.finished is True
    assert text_of(by_silence) == "You said: (audio 400 ms)"
    assert [t.text for t in content(by_stream_end, "input_transcription")] == ["(audio 200 ms)"]


def test_sdk_manual_activity_start_and_end(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu()
    manual = types.RealtimeInputConfig(automatic_activity_detection=types.AutomaticActivityDetection(disabled=True))

    async def scenario() -> list[types.LiveServerMessage]:
        async with live(emu, response_modalities=["TEXT"], realtime_input_config=manual,
                        input_audio_transcription={}) as session:  # fmt: skip
            await session.send_realtime_input(activity_start=types.ActivityStart())
            await send_pcm(session, silence(150) + tone(150))
            await session.send_realtime_input(activity_end=types.ActivityEnd())
            return await turn(session)

    messages = run(scenario())
    assert [t.text for t in content(messages, "input_transcription")] == ["(audio 300 ms)"]


def test_sdk_barge_in_interrupts_a_paced_audio_answer(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu({"rules": [{"when": {"user_text_contains": "story"}, "respond": {"text": STORY, "pace": 1.0}}]})

    async def scenario() -> list[types.LiveServerMessage]:
        async with live(emu, response_modalities=["AUDIO"]) as session:
            await session.send_realtime_input(text="tell me a story")
            messages = []
            async for msg in session.receive():
                messages.append(msg)
                if len(messages) == 1:
                    await send_pcm(session, tone(100))
            return messages

    messages = run(scenario())
    assert messages[-2].server_content is not None and messages[-2].server_content.interrupted is True
    assert messages[-1].server_content is not None and messages[-1].server_content.turn_complete is True
    assert not content(messages, "generation_complete")
    assert 0 < len(audio_of(messages)) < 2 * 24_000 * 2940 // 1000


def test_sdk_tool_call_round_trip(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu(
        {"rules": [
            {"when": {"tool_declared": "get_weather", "has_function_response": False},
             "respond": {"function_calls": [{"name": "get_weather", "args": {"city": "Oslo"}}]}},
            {"when": {"has_function_response": True},
             "respond": {"text": "In {args.city}: {response_text}."}},
        ]}
    )  # fmt: skip

    async def scenario() -> tuple[types.FunctionCall, list[types.LiveServerMessage]]:
        async with live(emu, response_modalities=["TEXT"], tools=[types.Tool(function_declarations=[WEATHER])]) as s:
            await s.send_client_content(turns=ask("weather?"), turn_complete=True)
            messages, call = [], None
            async for msg in s.receive():
                messages.append(msg)
                if msg.tool_call:
                    (call,) = msg.tool_call.function_calls or []
                    answer = types.FunctionResponse(id=call.id, name=call.name, response={"result": "snow"})
                    await s.send_tool_response(function_responses=[answer])
            assert call is not None
            return call, messages

    call, messages = run(scenario())
    assert call.name == "get_weather" and call.args == {"city": "Oslo"}
    assert call.id is not None and call.id.startswith("function-call-")
    assert text_of(messages) == "In Oslo: snow."


def test_sdk_session_resumption_continues_the_conversation(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu()

    async def scenario() -> tuple[int, int]:
        async with live(emu, response_modalities=["TEXT"], session_resumption=types.SessionResumptionConfig()) as s:
            await s.send_client_content(turns=ask("remember the number forty-two"), turn_complete=True)
            await turn(s)
            update = (await next_message(s)).session_resumption_update
        assert update is not None and update.resumable is True and update.new_handle
        resumption = types.SessionResumptionConfig(handle=update.new_handle)
        async with live(emu, response_modalities=["TEXT"], session_resumption=resumption) as s:
            await s.send_client_content(turns=ask("hi"), turn_complete=True)
            resumed = (await turn(s))[-1].usage_metadata
        async with live(emu, response_modalities=["TEXT"]) as s:
            await s.send_client_content(turns=ask("hi"), turn_complete=True)
            fresh = (await turn(s))[-1].usage_metadata
        assert resumed is not None and fresh is not None
        return resumed.prompt_token_count or 0, fresh.prompt_token_count or 0

    resumed, fresh = run(scenario())
    assert (resumed, fresh) == (1 + 8 + 10, 1)  # + the first question (29 chars) and its answer (39 chars)


def test_sdk_sees_go_away_then_close_1000(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu({"rules": [{"respond": {"text": "bye", "go_away_ms": 100}}]})

    async def scenario() -> tuple[types.LiveServerGoAway | None, errors.APIError]:
        async with live(emu, response_modalities=["TEXT"]) as session:
            await session.send_client_content(turns=ask("x"), turn_complete=True)
            await turn(session)
            go_away = (await next_message(session)).go_away
            with pytest.raises(errors.APIError) as info:
                await turn(session)
            return go_away, info.value

    go_away, closed = run(scenario())
    assert go_away is not None and go_away.time_left == "0.1s"
    assert closed.code == 1000


# ---------------------------------------------------------------------------------------------------------- faults
@pytest.mark.parametrize(
    ("fault", "error", "code"),
    [
        ({"kind": "drop", "after_chunks": 1}, errors.APIError, 1006),
        ({"kind": "close", "code": 1011, "reason": "Internal error encountered."}, errors.APIError, 1011),
        ({"kind": "malformed", "after_chunks": 1}, ValueError, None),
    ],
    ids=["drop", "close-1011", "malformed"],
)
def test_sdk_surfaces_faults(
    make_emu: Callable[..., Emulator], fault: dict[str, Any], error: type[Exception], code: int | None
) -> None:
    emu = make_emu({"rules": [{"respond": {"text": "x" * 30, "fault": fault}}]})

    async def scenario() -> tuple[list[types.LiveServerMessage], Exception]:
        async with live(emu, response_modalities=["TEXT"]) as session:
            await session.send_client_content(turns=ask("go"), turn_complete=True)
            got: list[types.LiveServerMessage] = []
            with pytest.raises(error) as info:
                async for msg in session.receive():
                    got.append(msg)
            return got, info.value

    got, exc = run(scenario())
    assert text_of(got) == "x" * 5  # one 100 ms chunk (5 characters at 20 ms) of the 600 ms answer
    if code is not None:
        assert isinstance(exc, errors.APIError) and exc.code == code


def test_sdk_slow_fault_delays_the_first_chunk(make_emu: Callable[..., Emulator]) -> None:
    emu = make_emu({"rules": [{"respond": {"text": "late", "fault": {"kind": "slow", "delay_ms": 250}}}]})

    async def scenario() -> float:
        async with live(emu, response_modalities=["TEXT"]) as session:
            loop = asyncio.get_running_loop()
            started = loop.time()
            await session.send_client_content(turns=ask("go"), turn_complete=True)
            assert text_of(await turn(session)) == "late"
            return loop.time() - started

    assert run(scenario()) >= 0.25


@pytest.mark.parametrize(
    ("key", "model", "reason"),
    [
        ("wrong", LIVE_MODEL, "API key not valid. Please pass a valid API key."),
        (KEY, "gemini-3.1-flash-lite", "models/gemini-3.1-flash-lite is not found for API version v1beta, or is not "
                                       "supported for bidiGenerateContent. Call ListMod"),  # cut at 123 bytes
    ],
    ids=["bad-key", "rest-model"],
)  # fmt: skip
def test_sdk_connect_fails_with_1008(make_emu: Callable[..., Emulator], key: str, model: str, reason: str) -> None:
    emu = make_emu(api_keys=[KEY])

    async def scenario() -> errors.APIError:
        with pytest.raises(errors.APIError) as info:
            async with live(emu, key=key, model=model, response_modalities=["TEXT"]):
                pass
        return info.value

    exc = run(scenario())
    assert exc.code == 1008 and str(exc).endswith(reason)
