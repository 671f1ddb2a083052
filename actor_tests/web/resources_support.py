"""A developer server with real memory, artifact and context services, for the resource routes' tests (HTTP, CLI and
browser).

:func:`serve_resources` serves ``dev_app`` for the shared node on 127.0.0.1 with a :class:`ResourceWorld`: a
``FileArtifactService`` in a temp dir, a ``SqlMemoryService`` on a SQLite file, and the context cache when one is
given, handed to the server through a recording provider (so a test sees the exact scopes it was asked for).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from adk_actors.artifacts import ArtifactScope, FileArtifactService
from adk_actors.devapi.resources import DevResources
from adk_actors.memory import MemoryProvenance, MemoryScope, SqlMemoryService
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.web import DevToken, ServerThread, start_in_thread
from adk_actors.web.dev import dev_app

TOKEN = "dev-res-" + secrets.token_hex(16)
APP = "res_app"
USER = "user-1"
OTHER = "user-2"
SESSION = "artifact-session"
SECRET_BYTES = b"BYTES-" + secrets.token_hex(8).encode()
"""The content of every seeded artifact: it must never appear in an answer."""


@dataclass
class ResourceWorld:
    """The services behind one served developer server, and the scopes the provider was asked for."""

    artifacts: FileArtifactService
    memory: SqlMemoryService
    cache: Any = None
    cache_policy: dict[str, Any] = field(default_factory=lambda: {"purpose": "developer_inspection"})
    asked: list[tuple[str, str, str | None]] = field(default_factory=list)
    deny: set[tuple[str, str]] = field(default_factory=set)
    """(app, user) pairs the provider refuses."""

    def provide(self, app: str, user: str, session: str | None) -> DevResources | None:
        self.asked.append((app, user, session))
        if (app, user) in self.deny:
            return None
        return DevResources(
            artifacts=self.artifacts, memory=self.memory, context_cache=self.cache, cache_policy=self.cache_policy
        )

    def seed(self) -> None:
        """Artifacts in two sessions and memory entries for two users."""
        scope = ArtifactScope.session(APP, USER, SESSION)
        for name in ("reports/result.txt", "a.txt", "b.txt", "c.txt", "d.txt"):
            self.artifacts.put(scope, name, SECRET_BYTES, mime_type="text/plain", metadata={"stage": "draft"})
        self.artifacts.put(scope, "reports/result.txt", SECRET_BYTES + b"2", mime_type="text/plain",
                           metadata={"stage": "final", "api_key": "sk-" + "9" * 20})  # fmt: skip
        self.artifacts.put(ArtifactScope.session(APP, USER, "other-session"), "hidden.txt", SECRET_BYTES)
        self.artifacts.put(ArtifactScope.session(APP, OTHER, SESSION), "theirs.txt", SECRET_BYTES)
        mine = MemoryScope(APP, USER)
        self.memory.add(mine, "OTP supervision restarts failed children", metadata={"topic": "otp"},
                        provenance=MemoryProvenance(session_id="memory-session", author="user"))  # fmt: skip
        self.memory.add(mine, "supervision trees " + "x" * 3000, metadata={"password": "hunter2-secret"})
        self.memory.add(MemoryScope(APP, OTHER), "OTP supervision of another user", metadata={"topic": "otp"})


@dataclass
class ResourceServer:
    url: str
    server: ServerThread
    client: httpx.Client
    world: ResourceWorld
    system: ActorSystemHandle
    responses: list[httpx.Response]


def make_world(tmp: Path, cache: Any = None) -> ResourceWorld:
    world = ResourceWorld(FileArtifactService(tmp / "artifacts"), SqlMemoryService(f"sqlite:///{tmp / 'memory.db'}"))
    world.cache = cache
    return world


@contextlib.contextmanager
def serve_resources(
    system: ActorSystemHandle, world: ResourceWorld, *, resources: Any = "provider"
) -> Iterator[ResourceServer]:
    """``dev_app`` with ``world``'s provider (or ``resources`` as given) on 127.0.0.1; stopped on exit."""
    given = world.provide if resources == "provider" else resources
    server = start_in_thread(dev_app(system, token=DevToken(TOKEN), resources=given), "127.0.0.1", 0)
    responses: list[httpx.Response] = []

    def keep(response: httpx.Response) -> None:
        response.read()
        responses.append(response)

    client = httpx.Client(
        base_url=server.url,
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=30.0,
        trust_env=False,
        event_hooks={"response": [keep]},
    )
    try:
        yield ResourceServer(server.url, server, client, world, system, responses)
    finally:
        client.close()
        assert server.stop(), "the dev server thread outlived its test"
        world.memory.close()


def node_provider(app: str, user: str, session: str | None) -> DevResources | None:
    """The provider ``dev_resources`` names in the node-level test: a SQLite memory store at
    ``$ADK_TEST_RESOURCES_DB``, loaded in the dev server's own process."""
    import os

    return DevResources(memory=SqlMemoryService(f"sqlite:///{os.environ['ADK_TEST_RESOURCES_DB']}"))


NOT_A_PROVIDER = 42
"""A name ``dev_resources`` may import but must refuse."""
