"""cachedContents lifecycle and countTokens over REST."""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

import requests

from adk_actors.emulator import Emulator

from .helpers import COUNT, GEN, KEY, WEATHER_TOOL, post, user

CACHES = "/v1beta/cachedContents"
BIG = "lorem ipsum " * 500  # 6000 chars = 1500 fake tokens
H = {"x-goog-api-key": KEY}


def _ts(value: str) -> dt.datetime:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", value), value
    return dt.datetime.strptime(value, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


def _create(emu: Emulator, **extra: Any) -> requests.Response:
    body = {"model": "models/gemini-3.1-flash-lite", "contents": [user(BIG)], **extra}
    return post(emu.base_url, CACHES, body)


def test_cache_lifecycle(emu: Emulator) -> None:
    assert requests.get(emu.base_url + CACHES, headers=H, timeout=10).json() == {}
    resp = _create(emu, displayName="doc", systemInstruction={"parts": [{"text": "sys"}]}, tools=[WEATHER_TOOL])
    assert resp.status_code == 200, resp.text
    cache = resp.json()
    assert set(cache) == {"name", "model", "displayName", "createTime", "updateTime", "expireTime", "usageMetadata"}
    assert re.fullmatch(r"cachedContents/[a-z0-9]+", cache["name"])
    assert cache["model"] == "models/gemini-3.1-flash-lite" and cache["displayName"] == "doc"
    created = _ts(cache["createTime"])
    assert abs((_ts(cache["expireTime"]) - created).total_seconds() - 3600) < 1
    tokens = cache["usageMetadata"]["totalTokenCount"]
    assert tokens > 1500

    got = requests.get(f"{emu.base_url}/v1beta/{cache['name']}", headers=H, timeout=10).json()
    assert got == cache

    patched = requests.patch(f"{emu.base_url}/v1beta/{cache['name']}", json={"ttl": "600s"}, headers=H, timeout=10)
    assert patched.status_code == 200
    assert abs((_ts(patched.json()["expireTime"]) - _ts(patched.json()["updateTime"])).total_seconds() - 600) < 1
    masked = requests.patch(
        f"{emu.base_url}/v1beta/{cache['name']}", params={"updateMask": "expireTime"},
        json={"expireTime": "2099-01-01T00:00:00+00:00"}, headers=H, timeout=10,
    )  # fmt: skip
    assert masked.json()["expireTime"] == "2099-01-01T00:00:00.000000Z"

    second = _create(emu).json()
    page = requests.get(emu.base_url + CACHES, params={"pageSize": 1}, headers=H, timeout=10).json()
    assert [c["name"] for c in page["cachedContents"]] == [cache["name"]]
    page2 = requests.get(emu.base_url + CACHES, params={"pageSize": 1, "pageToken": page["nextPageToken"]},
                         headers=H, timeout=10).json()  # fmt: skip
    assert [c["name"] for c in page2["cachedContents"]] == [second["name"]] and "nextPageToken" not in page2

    # generateContent with the cache: tools come from the cache; cached tokens are part of the prompt.
    body = {"contents": [user("What is the weather in Paris?")], "cachedContent": cache["name"]}
    gen = post(emu.base_url, GEN, body).json()
    assert gen["candidates"][0]["content"]["parts"][0]["functionCall"]["args"] == {"city": "Paris"}
    usage = gen["usageMetadata"]
    assert usage["cachedContentTokenCount"] == tokens
    assert usage["promptTokenCount"] == tokens + math.ceil(len("What is the weather in Paris?") / 4)
    assert usage["cacheTokensDetails"] == [{"modality": "TEXT", "tokenCount": tokens}]

    other_model = post(emu.base_url, "/v1beta/models/gemini-2.5-flash:generateContent", body)
    assert other_model.status_code == 400
    assert other_model.json()["error"]["message"] == (
        "Model used by GenerateContent request (models/gemini-2.5-flash) and CachedContent "
        "(models/gemini-3.1-flash-lite) has to be the same."
    )

    deleted = requests.delete(f"{emu.base_url}/v1beta/{cache['name']}", headers=H, timeout=10)
    assert deleted.status_code == 200 and deleted.json() == {}
    gone = requests.get(f"{emu.base_url}/v1beta/{cache['name']}", headers=H, timeout=10)
    assert gone.status_code == 403
    assert gone.json() == {"error": {"code": 403, "message": "CachedContent not found (or permission denied)",
                                     "status": "PERMISSION_DENIED"}}  # fmt: skip
    assert post(emu.base_url, GEN, body).status_code == 403
    assert requests.delete(f"{emu.base_url}/v1beta/{cache['name']}", headers=H, timeout=10).status_code == 403


def test_expired_cache_disappears(emu: Emulator) -> None:
    cache = _create(emu, ttl="3600s").json()
    url = f"{emu.base_url}/v1beta/{cache['name']}"
    past = requests.patch(url, json={"expireTime": "2020-01-01T00:00:00Z"}, headers=H, timeout=10)
    assert past.status_code == 200
    assert requests.get(url, headers=H, timeout=10).status_code == 403
    assert requests.get(emu.base_url + CACHES, headers=H, timeout=10).json() == {}


def test_cache_min_size_configurable() -> None:
    with Emulator(min_cache_tokens=1) as emu:
        resp = post(emu.base_url, CACHES, {"model": "models/gemini-3.1-flash-lite", "contents": [user("tiny")]})
        assert resp.status_code == 200


def test_count_tokens(emu: Emulator) -> None:
    resp = post(emu.base_url, COUNT, {"contents": [user("12345678"), {"role": "model", "parts": [{"text": "abc"}]}]})
    assert resp.json() == {"totalTokens": 3, "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 3}]}
    inner = {
        "model": "models/gemini-3.1-flash-lite",
        "contents": [user("What is the weather in Oslo?")],
        "systemInstruction": {"parts": [{"text": "You are terse."}]},
        "tools": [WEATHER_TOOL],
    }
    counted = post(emu.base_url, COUNT, {"generateContentRequest": inner}).json()["totalTokens"]
    inner.pop("model")
    generated = post(emu.base_url, GEN, inner).json()["usageMetadata"]["promptTokenCount"]
    assert counted == generated
    assert counted > math.ceil(len("What is the weather in Oslo?") / 4)
