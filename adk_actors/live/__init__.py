"""Gemini Live: server-owned bidirectional sessions (audio, video, text) over the BidiGenerateContent WebSocket,
and the owner-bound voice bridge. See docs/LIVE.md and docs/VOICE_BRIDGE.md."""

from adk_actors.live.api import (
    LiveSessionRef,
    LiveSubscription,
    close_live_session,
    live_activity_end,
    live_activity_start,
    live_audio_stream_end,
    live_send_audio,
    live_send_text,
    live_send_tool_response,
    live_send_video_frame,
    live_sessions,
    live_status,
    live_subscribe,
    start_live_session,
)
from adk_actors.live.config import LiveConfig, live_config
from adk_actors.live.fanout import LiveEvent
from adk_actors.live.media import AudioChunk, VideoFrame, audio_pcm, video_frame
from adk_actors.live.voice import VoiceBridge, start_live_voice_bridge

__all__ = [
    "AudioChunk",
    "LiveConfig",
    "LiveEvent",
    "LiveSessionRef",
    "LiveSubscription",
    "VideoFrame",
    "VoiceBridge",
    "audio_pcm",
    "close_live_session",
    "live_activity_end",
    "live_activity_start",
    "live_audio_stream_end",
    "live_config",
    "live_send_audio",
    "live_send_text",
    "live_send_tool_response",
    "live_send_video_frame",
    "live_sessions",
    "live_status",
    "live_subscribe",
    "start_live_session",
    "start_live_voice_bridge",
    "video_frame",
]
