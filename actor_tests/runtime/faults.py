"""Fault injectors for the recovery tests (module level, so host processes import them by name)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from adk_actors.models.results import ModelResponse


class _Trapped(ModelResponse):
    """A model response that is valid on the host's I/O threads and raises when the agent reads it: a genuine
    (non-``AdkError``) crash inside the agent's I/O completion handler."""

    __slots__ = ()

    def __getattribute__(self, name: str) -> Any:
        if name == "content" and not threading.current_thread().name.startswith("adk-io-"):
            raise RuntimeError("injected fault in the completion handler")
        return super().__getattribute__(name)


class CrashOnceProvider:
    """A custom model provider answering ``"fine"``; while the file ``flag`` exists, its next answer (which deletes
    the flag) crashes the agent that receives it."""

    def __init__(self, flag: str) -> None:
        self.flag = flag

    def capabilities(self) -> dict[str, Any]:
        return {}

    def generate(
        self, config: Mapping[str, Any], history: Sequence[Any], tools: Sequence[Any] = (), *, cancel: Any = None
    ) -> Any:
        try:
            os.unlink(self.flag)
        except FileNotFoundError:
            return "fine"
        return _Trapped(content={"schema_version": 1, "parts": [{"type": "text", "text": "boom"}]}, text="boom")

    def stream(
        self,
        config: Mapping[str, Any],
        history: Sequence[Any],
        tools: Sequence[Any],
        on_delta: Callable[[str], None],
        *,
        cancel: Any = None,
    ) -> Any:
        return self.generate(config, history, tools, cancel=cancel)
