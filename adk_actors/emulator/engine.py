"""Transport-independent core of the emulator: models, generateContent, countTokens, cachedContents.

The HTTP layer (:mod:`adk_actors.emulator.server`) parses requests and renders the :class:`Reply` objects returned here.
All methods run on the server's event-loop thread; the lock only guards state read from other threads.
"""

from __future__ import annotations

import datetime as _dt
import html
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote_plus

from . import schema, validate
from .script import Context, Scenario, render, render_value, template_vars
from .wire import (
    DEFAULT_MESSAGES,
    ApiError,
    b64decode_any,
    b64encode_std,
    cache_id,
    call_id,
    contents_tokens,
    format_timestamp,
    invalid_argument,
    new_signature,
    parse_duration,
    parse_timestamp,
    quota_error,
    response_id,
    text_tokens,
    tools_tokens,
    utcnow,
)

DEFAULT_MODEL = "gemini-3.1-flash-lite"
LIVE_MODEL = "gemini-3.1-flash-live-preview"
_REST_METHODS = ("generateContent", "streamGenerateContent", "countTokens", "createCachedContent")
_LIVE_METHODS = ("bidiGenerateContent", "countTokens")
DEFAULT_MODELS: dict[str, tuple[str, ...]] = {
    DEFAULT_MODEL: _REST_METHODS,
    LIVE_MODEL: _LIVE_METHODS,
    "gemini-3.1-pro-preview": _REST_METHODS,
    "gemini-3-flash-preview": _REST_METHODS,
    "gemini-3-pro-preview": _REST_METHODS,
    "gemini-2.5-flash": _REST_METHODS,
    "gemini-2.5-flash-lite": _REST_METHODS,
    "gemini-2.5-pro": _REST_METHODS,
    "gemini-flash-latest": _REST_METHODS,
    "gemini-flash-lite-latest": _REST_METHODS,
    "gemini-live-2.5-flash-preview": _LIVE_METHODS,
}
SKIP_SIGNATURES = (b"skip_thought_signature_validator", b"context_engineering_is_the_way_to_go")
_SKIP_DECODED = tuple(b64decode_any(s.decode()) for s in SKIP_SIGNATURES)
CACHE_NOT_FOUND = "CachedContent not found (or permission denied)"
_MAX_SIGNATURES = 100_000
_REDIRECT = "https://vertexaisearch.cloud.google.com/grounding-api-redirect/"


@dataclass
class Reply:
    """What to send back. ``kind``: ``json`` (status+body), ``stream`` (chunks), or ``drop`` (close the socket)."""

    kind: str = "json"
    status: int = 200
    body: Any = None
    chunks: list[dict[str, Any]] = field(default_factory=list)
    delay: float = 0.0
    fault: dict[str, Any] | None = None
    array_wrap: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    rule: str | None = None


def error_reply(err: ApiError, delay: float = 0.0) -> Reply:
    """A JSON error reply."""
    return Reply("json", err.code, err.body(), delay=delay)


@dataclass
class CacheEntry:
    """One stored cachedContents resource."""

    id: str
    model: str
    display_name: str
    create_time: _dt.datetime
    update_time: _dt.datetime
    expire_time: _dt.datetime
    contents: list[dict[str, Any]]
    system_instruction: dict[str, Any] | None
    tools: list[dict[str, Any]]
    tool_config: dict[str, Any] | None
    tokens: int

    def resource(self) -> dict[str, Any]:
        """The CachedContent JSON (never echoes contents/tools)."""
        return {
            "name": f"cachedContents/{self.id}",
            "model": self.model,
            "displayName": self.display_name,
            "createTime": format_timestamp(self.create_time),
            "updateTime": format_timestamp(self.update_time),
            "expireTime": format_timestamp(self.expire_time),
            "usageMetadata": {"totalTokenCount": self.tokens},
        }


def _expiry(body: dict[str, Any], now: _dt.datetime) -> _dt.datetime | None:
    if "expireTime" in body:
        return parse_timestamp(body["expireTime"])
    if "ttl" in body:
        return now + _dt.timedelta(seconds=parse_duration(body["ttl"]))
    return None


def _text_of(content: dict[str, Any] | None) -> str:
    if not content:
        return ""
    return "\n".join(p["text"] for p in content.get("parts") or [] if "text" in p and not p.get("thought"))


class Engine:
    """Scripted Gemini behaviour, caches and issued thought signatures."""

    def __init__(
        self,
        scenario: Scenario,
        strict_signatures: bool = True,
        min_cache_tokens: int = 1024,
        models: list[str] | None = None,
        strict: bool = False,
    ) -> None:
        self.scenario = scenario
        self.strict = strict
        self.strict_signatures = strict_signatures
        self.min_cache_tokens = min_cache_tokens
        self.extra_models = list(models or [])
        self._signatures: OrderedDict[bytes, None] = OrderedDict()
        self._caches: dict[str, CacheEntry] = {}
        self._lock = threading.Lock()

    # ----------------------------------------------------------------------------------------------------- models
    def model_methods(self, model: str) -> tuple[str, ...] | None:
        """Supported methods of a bare model id, or None if unknown."""
        if model in DEFAULT_MODELS:
            return DEFAULT_MODELS[model]
        if model in self.extra_models or model in self.scenario.models:
            return _REST_METHODS
        return None

    def check_model(self, model: str, method: str, api_version: str) -> None:
        """404 NOT_FOUND with the real message for unknown models / unsupported methods."""
        methods = self.model_methods(model)
        if methods is None or method not in methods:
            raise ApiError(
                404,
                f"models/{model} is not found for API version {api_version}, or is not supported for {method}. "
                "Call ListModels to see the list of available models and their supported methods.",
                "NOT_FOUND",
            )

    def model_resource(self, model: str) -> dict[str, Any]:
        """A Model resource for models.get/list."""
        methods = self.model_methods(model) or ()
        return {
            "name": f"models/{model}",
            "version": "001",
            "displayName": model,
            "description": "Emulated model.",
            "inputTokenLimit": 1048576,
            "outputTokenLimit": 65536,
            "supportedGenerationMethods": list(methods),
            "temperature": 1,
            "topP": 0.95,
            "topK": 64,
            "maxTemperature": 2,
            "thinking": True,
        }

    def list_models(self) -> dict[str, Any]:
        """models.list."""
        names = [*DEFAULT_MODELS, *self.extra_models, *self.scenario.models]
        return {"models": [self.model_resource(m) for m in dict.fromkeys(names)]}

    # ------------------------------------------------------------------------------------------------- signatures
    def issue_signature(self) -> str:
        """Mint and remember a signature; returns it base64 (standard alphabet)."""
        sig = new_signature()
        with self._lock:
            self._signatures[sig] = None
            while len(self._signatures) > _MAX_SIGNATURES:
                self._signatures.popitem(last=False)
        return b64encode_std(sig)

    def check_signatures(self, contents: list[dict[str, Any]]) -> None:
        """Gemini 3 rule: every model step of the current turn must carry a signature on its first call part."""
        start = -1
        for i, content in enumerate(contents):
            if content.get("role", "user") in ("", "user") and any(
                "functionResponse" not in p for p in content.get("parts") or []
            ):
                start = i
        for i in range(start + 1, len(contents)):
            content = contents[i]
            if content.get("role") != "model":
                continue
            first = next((p for p in content.get("parts") or [] if "functionCall" in p), None)
            if first is None:
                continue
            sig = first.get("thoughtSignature")
            if not sig:
                name = first["functionCall"].get("name", "")
                raise ApiError(
                    400,
                    f"Function call `{name}` in the `{i}.` content block is missing a `thought_signature`.",
                    "INVALID_ARGUMENT",
                )
            raw = b64decode_any(sig)
            with self._lock:
                known = raw in self._signatures
            if not known and raw not in _SKIP_DECODED:
                raise ApiError(400, "Corrupted thought signature.", "INVALID_ARGUMENT")

    # ------------------------------------------------------------------------------------------------------ caches
    def _get_cache(self, name: str) -> CacheEntry:
        cid = name.split("/", 1)[1] if name.startswith("cachedContents/") else name
        with self._lock:
            entry = self._caches.get(cid)
            if entry is not None and entry.expire_time <= utcnow():
                del self._caches[cid]
                entry = None
        if entry is None:
            raise ApiError(403, CACHE_NOT_FOUND, "PERMISSION_DENIED")
        return entry

    def cache_create(self, body: Any, api_version: str) -> Reply:
        """cachedContents.create."""
        req = schema.normalize(body, schema.CACHED_CONTENT)
        validate.check_cache_create(req)
        model = req["model"].split("/", 1)[1]
        self.check_model(model, "createCachedContent", api_version)
        now = utcnow()
        expire = _expiry(req, now) or now + _dt.timedelta(seconds=3600)
        tokens = (
            contents_tokens(req.get("contents"))
            + text_tokens(_text_of(req.get("systemInstruction")))
            + tools_tokens(req.get("tools"))
        )
        if tokens < self.min_cache_tokens:
            raise invalid_argument(
                f"Cached content is too small. total_token_count={tokens}, "
                f"min_total_token_count={self.min_cache_tokens}"
            )
        entry = CacheEntry(
            cache_id(), req["model"], req.get("displayName", ""), now, now, expire, req.get("contents") or [],
            req.get("systemInstruction"), req.get("tools") or [], req.get("toolConfig"), tokens,
        )  # fmt: skip
        with self._lock:
            self._caches[entry.id] = entry
        return Reply(body=entry.resource())

    def cache_get(self, cid: str) -> Reply:
        """cachedContents.get."""
        return Reply(body=self._get_cache(cid).resource())

    def cache_list(self, page_size: int, page_token: str) -> Reply:
        """cachedContents.list (empty list ⇒ ``{}``)."""
        now = utcnow()
        with self._lock:
            for cid in [c for c, e in self._caches.items() if e.expire_time <= now]:
                del self._caches[cid]
            entries = sorted(self._caches.values(), key=lambda e: e.create_time)
        start = int(page_token) if page_token.isdigit() else 0
        size = page_size if page_size > 0 else 1000
        page = entries[start : start + size]
        out: dict[str, Any] = {}
        if page:
            out["cachedContents"] = [e.resource() for e in page]
        if start + size < len(entries):
            out["nextPageToken"] = str(start + size)
        return Reply(body=out)

    def cache_patch(self, cid: str, body: Any, update_mask: str | None) -> Reply:
        """cachedContents.patch (ttl or expireTime; with or without updateMask)."""
        req = schema.normalize(body, schema.CACHED_CONTENT)
        entry = self._get_cache(cid)
        now = utcnow()
        if update_mask:
            allowed = {"ttl", "expire_time", "expireTime"}
            for path in update_mask.split(","):
                if path.strip() not in allowed:
                    raise invalid_argument(f"Invalid update_mask path: {path.strip()}", field="update_mask")
        expire = _expiry(req, now)
        if expire is None:
            raise invalid_argument(
                "* UpdateCachedContentRequest.cached_content.expiration: ttl or expire_time must be set\n"
            )
        with self._lock:
            entry.expire_time = expire
            entry.update_time = now
        return Reply(body=entry.resource())

    def cache_delete(self, cid: str) -> Reply:
        """cachedContents.delete ⇒ ``{}``."""
        entry = self._get_cache(cid)
        with self._lock:
            self._caches.pop(entry.id, None)
        return Reply(body={})

    # ------------------------------------------------------------------------------------------------ countTokens
    def count_tokens(self, model: str, body: Any, api_version: str) -> Reply:
        """models.countTokens with ``contents`` or ``generateContentRequest``."""
        self.check_model(model, "countTokens", api_version)
        req = schema.normalize(body, schema.COUNT_TOKENS_REQUEST)
        if "contents" in req and "generateContentRequest" in req:
            raise invalid_argument(
                "* CountTokensRequest: contents and generate_content_request are mutually exclusive.\n"
            )
        cached = 0
        if "generateContentRequest" in req:
            inner = req["generateContentRequest"]
            validate.check_generate_request(inner, "CountTokensRequest", "generate_content_request.")
            total, cached = self._prompt_tokens(inner)
        else:
            probs = validate.Problems("CountTokensRequest")
            validate.check_contents(req.get("contents") or [], probs, "")
            probs.raise_if_any()
            total = contents_tokens(req.get("contents"))
        out: dict[str, Any] = {"totalTokens": total}
        if cached:
            out["cachedContentTokenCount"] = cached
        out["promptTokensDetails"] = [{"modality": "TEXT", "tokenCount": total}]
        return Reply(body=out)

    def _prompt_tokens(self, req: dict[str, Any]) -> tuple[int, int]:
        cached = 0
        if req.get("cachedContent"):
            cached = self._get_cache(req["cachedContent"]).tokens
        total = (
            contents_tokens(req.get("contents"))
            + text_tokens(_text_of(req.get("systemInstruction")))
            + tools_tokens(req.get("tools"))
            + cached
        )
        return total, cached

    # -------------------------------------------------------------------------------------------- generateContent
    def generate(self, model: str, body: Any, api_version: str, stream: bool) -> Reply:
        """generateContent / streamGenerateContent: validation, rule matching and response building."""
        method = "streamGenerateContent" if stream else "generateContent"
        self.check_model(model, method, api_version)
        req = schema.normalize(body, schema.GENERATE_REQUEST)
        validate.check_generate_request(req)
        if self.strict:
            validate.check_unverified(req)
        cache: CacheEntry | None = None
        if req.get("cachedContent"):
            cache = self._get_cache(req["cachedContent"])
            if cache.model != f"models/{model}":
                raise invalid_argument(
                    f"Model used by GenerateContent request (models/{model}) and CachedContent ({cache.model}) "
                    "has to be the same."
                )
        contents = req["contents"]
        if self.strict_signatures:
            self.check_signatures(contents)
        history = (cache.contents if cache else []) + contents
        tools = (cache.tools if cache else []) + (req.get("tools") or [])
        system = cache.system_instruction if cache and cache.system_instruction else req.get("systemInstruction")
        ctx = self._context(model, stream, history, tools, system, req.get("generationConfig") or {})
        found = self.scenario.match(ctx)
        if found is None:
            respond: dict[str, Any] = {"text": "You said: {user_text}"}
            variables = template_vars(ctx, {})
            rule_key = None
        else:
            respond = found.rule.respond
            variables = template_vars(ctx, found.variables)
            rule_key = found.rule.key
        prompt, cached = self._prompt_tokens(req)
        reply = self._respond(respond, variables, ctx, prompt, cached)
        reply.rule = rule_key
        return reply

    def _context(
        self,
        model: str,
        stream: bool,
        history: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        system: dict[str, Any] | None,
        gen_cfg: dict[str, Any],
    ) -> Context:
        user_text = ""
        for content in reversed(history):
            if content.get("role", "user") in ("", "user"):
                text = _text_of(content)
                if text:
                    user_text = text
                    break
        last = history[-1] if history else {}
        frs: list[dict[str, Any]] = []
        if last.get("role", "user") in ("", "user"):
            frs = [p["functionResponse"] for p in last.get("parts") or [] if "functionResponse" in p]
        calls = [
            p["functionCall"]
            for c in history[:-1]
            if c.get("role") == "model"
            for p in c.get("parts") or []
            if "functionCall" in p
        ]
        call_args: list[dict[str, Any]] = []
        for fr in frs:
            match = None
            for fc in reversed(calls):
                if (fr.get("id") and fc.get("id") == fr.get("id")) or (
                    not fr.get("id") and fc.get("name") == fr.get("name")
                ):
                    match = fc
                    break
            call_args.append((match or {}).get("args", {}) or {})
        declared = [d.get("name", "") for t in tools for d in t.get("functionDeclarations") or []]
        return Context(
            model=model,
            stream=stream,
            user_text=user_text,
            system_text=_text_of(system),
            declared_tools=declared,
            google_search=any("googleSearch" in t or "googleSearchRetrieval" in t for t in tools),
            code_execution=any("codeExecution" in t for t in tools),
            json_mode=gen_cfg.get("responseMimeType") == "application/json",
            include_thoughts=bool((gen_cfg.get("thinkingConfig") or {}).get("includeThoughts")),
            function_responses=frs,
            call_args=call_args,
        )

    def _respond(
        self, respond: dict[str, Any], variables: dict[str, Any], ctx: Context, prompt: int, cached: int
    ) -> Reply:
        delay = float(respond.get("delay_ms", 0) or 0) / 1000.0
        fault = respond.get("fault")
        if fault and "kind" not in fault:
            return _fault_reply(fault, ctx.model, delay)
        if fault and not ctx.stream:
            if fault.get("kind") == "drop_connection":
                return Reply("drop", delay=delay)
            return _fault_reply({"status": fault.get("status_on_unary", 503), **fault}, ctx.model, delay)
        rid = response_id()
        usage_base: dict[str, Any] = {"promptTokenCount": prompt}
        if cached:
            usage_base["cachedContentTokenCount"] = cached

        body: dict[str, Any]
        if respond.get("block_reason"):
            body = {
                "promptFeedback": {"blockReason": respond["block_reason"]},
                "usageMetadata": {**usage_base, "totalTokenCount": prompt, **_details(prompt, cached)},
                "modelVersion": ctx.model,
                "responseId": rid,
            }
            return Reply("stream" if ctx.stream else "json", body=body, chunks=[body], delay=delay)

        thought = render(str(respond["thought"]), variables) if respond.get("thought") else ""
        calls = [self._call(fc, variables, respond) for fc in respond.get("function_calls") or []]
        text: str | None = None
        if "json" in respond and (ctx.json_mode or "text" not in respond):
            text = json.dumps(render_value(respond["json"], variables), ensure_ascii=False)
        elif "text" in respond:
            text = render(str(respond["text"]), variables)
        elif fault and not calls:
            text = render("You said: {user_text}", variables)  # something to interrupt
        elif not calls:
            text = ""
        grounding = None
        if respond.get("grounding") and ctx.google_search:
            g = respond["grounding"]
            grounding = render_value(g, variables) if isinstance(g, dict) else _grounding(text or "", ctx.user_text)

        candidates_tokens = text_tokens(text or "") + sum(
            text_tokens(c["name"] + json.dumps(c["args"], sort_keys=True)) for c in calls
        )
        thoughts_tokens = text_tokens(thought)
        final_usage = dict(usage_base)
        final_usage["candidatesTokenCount"] = candidates_tokens
        if thoughts_tokens:
            final_usage["thoughtsTokenCount"] = thoughts_tokens
        final_usage["totalTokenCount"] = prompt + candidates_tokens + thoughts_tokens
        final_usage.update(_details(prompt, cached))
        finish = respond.get("finish_reason", "STOP")

        thought_parts: list[dict[str, Any]] = (
            [{"text": thought, "thought": True}] if thought and ctx.include_thoughts else []
        )
        call_parts: list[dict[str, Any]] = [{"functionCall": c} for c in calls]
        if call_parts:
            call_parts[0]["thoughtSignature"] = self.issue_signature()
        text_pieces = _split(text, int(respond.get("chunks", 3) or 3), ctx.stream) if text is not None else []
        text_parts: list[dict[str, Any]] = [{"text": piece} for piece in text_pieces]
        if text_parts and text_parts[-1]["text"] == "" and text != "":
            text_parts.pop()
        code_parts: list[dict[str, Any]] = []
        code = respond.get("code_execution")
        if code and ctx.code_execution:
            code_parts = [
                {"executableCode": {"language": "PYTHON", "code": render(str(code.get("code", "")), variables)}},
                {
                    "codeExecutionResult": {
                        "outcome": code.get("outcome", "OUTCOME_OK"),
                        "output": render(str(code.get("output", "")), variables),
                    }
                },
            ]
            final_usage["candidatesTokenCount"] += sum(text_tokens(json.dumps(p, sort_keys=True)) for p in code_parts)
            final_usage["totalTokenCount"] = (
                prompt + final_usage["candidatesTokenCount"] + final_usage.get("thoughtsTokenCount", 0)
            )
        final_mode = respond.get("final_chunk")
        if final_mode == "empty_text" and not call_parts:
            text_parts.append({"text": ""})
        body_parts = thought_parts + call_parts + code_parts + text_parts
        if not call_parts and body_parts:
            body_parts[-1]["thoughtSignature"] = self.issue_signature()

        def candidate(parts: list[dict[str, Any]], last: bool, meta: dict[str, Any] | None) -> dict[str, Any]:
            cand: dict[str, Any] = {}
            if parts:
                cand["content"] = {"role": "model", "parts": parts}
            if last:
                cand["finishReason"] = finish
            if meta is not None:
                cand["groundingMetadata"] = meta
            cand["index"] = 0
            return cand

        if not ctx.stream:
            body = {
                "candidates": [candidate(body_parts, True, grounding)],
                "usageMetadata": final_usage,
                "modelVersion": ctx.model,
                "responseId": rid,
            }
            return Reply("json", body=body, delay=delay)

        groups: list[list[dict[str, Any]]] = [[p] for p in body_parts] or [[]]
        if final_mode == "finish_only" and body_parts:
            groups.append([])
        spread = max(1, int(respond.get("grounding_chunks", 1) or 1)) if grounding is not None else 1
        while len(groups) < spread:
            groups.insert(0, [])  # grounding-only frames lead when there are fewer frames than pieces
        pieces = _spread_grounding(grounding, spread) if grounding is not None else []
        first_grounded = len(groups) - spread
        chunks = []
        interim = {**usage_base, "totalTokenCount": prompt, **_details(prompt, cached)}
        for i, group in enumerate(groups):
            last = i == len(groups) - 1
            meta = pieces[i - first_grounded] if pieces and i >= first_grounded else None
            chunks.append(
                {
                    "candidates": [candidate(group, last, meta)],
                    "usageMetadata": final_usage if last else interim,
                    "modelVersion": ctx.model,
                    "responseId": rid,
                }
            )
        return Reply("stream", chunks=chunks, delay=delay, fault=fault)

    def _call(self, spec: dict[str, Any], variables: dict[str, Any], respond: dict[str, Any]) -> dict[str, Any]:
        call: dict[str, Any] = {}
        if respond.get("function_call_ids", True):
            call["id"] = str(spec.get("id") or call_id())
        call["name"] = render(str(spec["name"]), variables)
        call["args"] = render_value(spec.get("args", {}), variables)
        return call


def _details(prompt: int, cached: int) -> dict[str, Any]:
    out: dict[str, Any] = {"promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    if cached:
        out["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": cached}]
    return out


def _spread_grounding(grounding: dict[str, Any], n: int) -> list[dict[str, Any] | None]:
    """Split grounding metadata over ``n`` consecutive frames, as the real service streams it.

    Every list field (``webSearchQueries``, ``groundingChunks``, ``groundingSupports``...) is cut into ``n``
    contiguous, in-order slices, one per frame, so concatenating the frames' lists in arrival order gives back the
    original (chunk indices in ``groundingSupports`` stay valid). Other fields ride on the first frame. A frame whose
    share is empty carries no ``groundingMetadata``.
    """
    if n <= 1:
        return [grounding]
    pieces: list[dict[str, Any]] = [{} for _ in range(n)]
    for key, value in grounding.items():
        if not isinstance(value, list):
            pieces[0][key] = value
            continue
        bounds = [round(len(value) * k / n) for k in range(n + 1)]
        for k in range(n):
            if bounds[k] < bounds[k + 1]:
                pieces[k][key] = value[bounds[k] : bounds[k + 1]]
    return [p or None for p in pieces]


def _split(text: str, n: int, stream: bool) -> list[str]:
    """Split ``text`` into ``n`` (≥3 when streaming) roughly equal pieces, mid-word."""
    if not stream or not text:
        return [text]
    n = max(3, n)
    n = min(n, len(text))
    bounds = [round(len(text) * k / n) for k in range(n + 1)]
    return [text[bounds[k] : bounds[k + 1]] for k in range(n) if bounds[k] < bounds[k + 1]]


def _fault_reply(fault: dict[str, Any], model: str, delay: float) -> Reply:
    status = int(fault.get("status", 503))
    if status == 429:
        err = quota_error(model, str(fault.get("retry_delay", "1.5s")), bool(fault.get("per_day")))
    else:
        err = ApiError(status, str(fault.get("message") or DEFAULT_MESSAGES.get(status, "Error.")))
    reply = error_reply(err, delay)
    reply.array_wrap = bool(fault.get("array_wrapped"))
    if status == 429 and fault.get("retry_after_header"):
        reply.headers["Retry-After"] = str(max(1, round(parse_duration(str(fault.get("retry_delay", "1.5s"))))))
    return reply


def _grounding(text: str, query: str) -> dict[str, Any]:
    """Plausible Google Search grounding metadata for ``text`` (UTF-8 byte offsets)."""
    raw = text.encode("utf-8")
    supports = []
    start = 0
    sentences = [s for s in text.replace("! ", ". ").replace("? ", ". ").split(". ") if s]
    pos = 0
    for i, sentence in enumerate(sentences):
        idx = text.find(sentence, pos)
        if idx < 0:
            continue
        pos = idx + len(sentence)
        start = len(text[:idx].encode("utf-8"))
        end = start + len(sentence.encode("utf-8"))
        if end > len(raw):
            end = len(raw)
        supports.append(
            {
                "segment": {"startIndex": start, "endIndex": end, "text": sentence},
                "groundingChunkIndices": [i % 2],
                "confidenceScores": [0.9],
            }
        )
    q = query or text[:60]
    return {
        "webSearchQueries": [q],
        "searchEntryPoint": {
            "renderedContent": '<style>.container{display:flex}</style><div class="container">'
            f'<a class="chip" href="https://www.google.com/search?q={quote_plus(q)}">{html.escape(q)}</a></div>'
        },
        "groundingChunks": [
            {"web": {"uri": f"{_REDIRECT}emulator-1", "title": "example.com"}},
            {"web": {"uri": f"{_REDIRECT}emulator-2", "title": "example.org"}},
        ],
        "groundingSupports": supports,
    }
