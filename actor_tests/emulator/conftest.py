"""Fixtures for the emulator tests.

Every test here also runs under :func:`_sdk_types_accept_every_served_body`: each 200 body (and each stream chunk) any
emulator served during the test is validated with the official ``google-genai`` pydantic types, exactly as served.
"""

from __future__ import annotations

import re
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from actor_tests.emulator.helpers import validate_live_frames
from adk_actors.emulator import Emulator
from adk_actors.emulator.server import add_served_hook, remove_served_hook


@pytest.fixture
def emu() -> Iterator[Emulator]:
    """A started emulator with the built-in default script."""
    with Emulator() as e:
        yield e


@pytest.fixture(autouse=True)
def _no_leftover_emulator_threads() -> Iterator[None]:
    """Every emulator a test starts must be stopped (thread joined) by the end of that test."""
    yield
    leftovers = [t for t in threading.enumerate() if t.name == "gemini-emulator"]
    assert leftovers == [], "emulator thread outlived its test"


@dataclass(frozen=True)
class Served:
    """One JSON document an emulator served: a whole body or one stream chunk."""

    method: str
    path: str
    status: int
    body: bytes


_VERSION = r"/v1(?:beta|alpha)?"
_GENERATE = re.compile(rf"^{_VERSION}/models/[^/:]+:(?:generateContent|streamGenerateContent)$")
_COUNT = re.compile(rf"^{_VERSION}/models/[^/:]+:countTokens$")
_CACHES = re.compile(rf"^{_VERSION}/cachedContents$")
_CACHE = re.compile(rf"^{_VERSION}/cachedContents/[^/]+$")


def sdk_type_for(item: Served) -> str | None:
    """Which SDK type validates ``item`` (``None``: a route the SDK reads through a converter, e.g. models.get)."""
    if _GENERATE.match(item.path):
        return "GenerateContentResponse"
    if _COUNT.match(item.path):
        return "CountTokensResponse"
    if _CACHES.match(item.path):
        return "CachedContent" if item.method == "POST" else "ListCachedContentsResponse"
    if _CACHE.match(item.path):
        return "DeleteCachedContentResponse" if item.method == "DELETE" else "CachedContent"
    return None


class UnknownEnumValue(ValueError):
    """The SDK accepted the body but warned that an enum value is not one it knows (it would pass it through)."""


def validate_with_sdk(item: Served) -> str | None:
    """Validate one served 200 document with its SDK type; returns the type name used (``None``: not validated).

    Raises:
        pydantic.ValidationError: the SDK type rejects the body (unknown fields included: the types forbid extras).
        UnknownEnumValue: an enum value the SDK does not know (the SDK only warns about those).
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        name = _validate(item)
    unknown = [str(w.message) for w in caught if "is not a valid" in str(w.message)]
    if unknown:
        raise UnknownEnumValue("; ".join(unknown))
    return name


def _validate(item: Served) -> str | None:
    import json

    from google.genai import types
    from pydantic import TypeAdapter

    name = sdk_type_for(item)
    if name is None or item.status != 200:
        return None
    if name == "CountTokensResponse":
        # The SDK type has no promptTokensDetails field (its converter drops what the real API sends): validate that
        # field as list[ModalityTokenCount] and everything else with the type, so no byte of the body goes unchecked.
        body = json.loads(item.body)
        details = body.pop("promptTokensDetails", None)
        if details is not None:
            TypeAdapter(list[types.ModalityTokenCount]).validate_json(json.dumps(details))
        types.CountTokensResponse.model_validate_json(json.dumps(body))
        return name
    getattr(types, name).model_validate_json(item.body)
    return name


@pytest.fixture(autouse=True)
def served_bodies() -> Iterator[list[Served]]:
    """Collect every document emulators serve during the test, then validate the 200 ones with the SDK types.

    A test may take this fixture to assert that a shape it cares about was really served (and so validated).
    """
    pytest.importorskip("google.genai")
    served: list[Served] = []
    lock = threading.Lock()

    def hook(method: str, path: str, status: int, body: bytes) -> None:
        with lock:
            served.append(Served(method, path, status, body))

    add_served_hook(hook)
    try:
        yield served
    finally:
        remove_served_hook(hook)
    failures = []
    with lock:
        items = list(served)
    for item in items:
        try:
            validate_with_sdk(item)
        except Exception as exc:  # pydantic.ValidationError or malformed JSON: either fails the test
            failures.append(f"{item.method} {item.path}: {type(exc).__name__}: {str(exc)[:600]}")
    if failures:
        pytest.fail(
            "google-genai types rejected bodies the emulator served:\n" + "\n".join(failures[:5]), pytrace=False
        )


@pytest.fixture
def live_frames() -> Iterator[list[bytes]]:
    """Collect every Live frame served during the test; all must be valid ``LiveServerMessage`` JSON."""
    frames: list[bytes] = []
    lock = threading.Lock()

    def hook(method: str, path: str, status: int, body: bytes) -> None:
        if method == "WS":
            with lock:
                frames.append(body)

    add_served_hook(hook)
    try:
        yield frames
    finally:
        remove_served_hook(hook)
    with lock:
        validate_live_frames(list(frames))
