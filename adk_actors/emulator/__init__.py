"""A local, scriptable Gemini Developer API (v1beta) emulator.

It speaks the real wire protocol over HTTP/1.1 on 127.0.0.1 — ``generateContent``, ``streamGenerateContent`` (SSE
with ``alt=sse``, otherwise a streamed JSON array), ``countTokens``, ``cachedContents`` (create/get/list/patch/delete)
and ``models`` (get/list) — and the Live API (``BidiGenerateContent`` over WebSocket: ``ws://`` and self-signed
``wss://``), validates requests like the real service (unknown fields, oneofs, roles, thought signatures, API keys)
and answers from a JSON scenario script. The official ``google-genai`` SDK works against it::

    from adk_actors.emulator import Emulator

    with Emulator(script=None, latency_ms=0) as emu:      # script=None: the built-in demo scenario
        url = emu.base_url                                 # "http://127.0.0.1:PORT"; append /v1beta/models/...
        ...
        emu.requests                                       # request log (API key redacted)
        emu.live_url, emu.live_tls_url, emu.live_ca_file   # Live: ws://, wss:// and the PEM to trust for wss
        emu.live_connections(), emu.live_log               # Live test hooks (also live_go_away(ms), live_drop_all())

Command line: ``python -m adk_actors.emulator --port 8765 [--script FILE] [--latency-ms N]
[--record FILE --upstream URL] [--replay FILE] [--api-key KEY ...] [--lax-signatures]``. Out of process, the
``/_emulator/script`` (PUT), ``/_emulator/requests`` (GET/DELETE) and ``/_emulator/hits`` (GET) endpoints replace
the script and read the log. Full reference: ``docs/EMULATOR.md``.

Script format
-------------
``{"rules": [RULE, ...], "latency_ms": 0, "models": ["extra-model-id"]}``. The first rule whose ``when`` matches the
request wins; when none matches the answer is ``"You said: {user_text}"``. ``RULE`` is
``{"id": "optional-name", "when": {...}, "respond": {...}, "times": N}`` (``times`` may also sit inside
``respond``): after ``N`` matches the rule is skipped (use it for faults that must clear so retries succeed).

``when`` (all given conditions must hold; ``{}`` matches everything):

* ``user_text_contains``: string or list of strings — case-insensitive substring of the latest user text (any of a
  list). The latest user text is the text of the most recent ``user`` content that has text parts (so it still refers
  to the question while function responses are being sent back).
* ``user_text_equals``: exact match (surrounding whitespace ignored).
* ``user_text_regex``: ``re.search`` pattern; groups are exposed to templates as ``{match.0}``, ``{match.1}``,
  ``{match.NAME}``.
* ``has_function_response``: bool — the last content is a user content carrying ``functionResponse`` parts.
* ``function_response_name``: glob (``fnmatch``) on the name of one of those function responses.
* ``tool_declared``: glob or list of globs; each must match a declared function name (the first match is exposed as
  ``{tool}``; the i-th pattern's match as ``{tool0}``, ``{tool1}``…). A pattern may template regex captures
  (``"{match.tool}"``).
* ``google_search`` / ``json_mode`` / ``stream`` / ``include_thoughts`` / ``code_execution``: bools —
  ``googleSearch`` tool declared; ``responseMimeType == application/json``; ``streamGenerateContent``;
  ``thinkingConfig.includeThoughts``; ``codeExecution`` tool declared.
* ``model``: glob on the model id; ``system_text_contains``: substring of the system instruction.

``respond``:

* ``text``: template string of the answer. ``json``: an object (templated) answered as JSON text when the request
  asks for ``application/json`` (or when there is no ``text``).
* ``function_calls``: ``[{"name": "...", "args": {...}, "id"?: "..."}]`` (name and args templated). Each call gets a
  random ``id`` (disable with ``"function_call_ids": false`` for Gemini-2.5 style) and the first call part carries a
  fresh opaque ``thoughtSignature``; answers without calls carry it on their last part.
* ``thought``: thought-summary text, emitted as a ``{"thought": true}`` part only when ``includeThoughts`` is set
  (always counted in ``thoughtsTokenCount``).
* ``grounding``: ``true`` (generated ``groundingMetadata`` with webSearchQueries, groundingChunks, groundingSupports
  with UTF-8 byte offsets, searchEntryPoint) or an explicit metadata object; only when ``googleSearch`` is declared.
  ``grounding_chunks``: N ⇒ streams spread the list fields over the last N chunks in order.
* ``finish_reason`` (default ``STOP``), ``block_reason`` (prompt blocked: no candidates, ``promptFeedback``),
  ``chunks`` (number of SSE text pieces, minimum 3), ``delay_ms`` (extra delay before the first byte).
* ``code_execution``: ``{"code": ..., "output": ..., "outcome": "OUTCOME_OK"}`` ⇒ ``executableCode`` +
  ``codeExecutionResult`` parts (only when ``codeExecution`` is declared).
* ``final_chunk``: ``"empty_text"`` (a trailing ``{"text": "", "thoughtSignature": ...}`` part / chunk) or
  ``"finish_only"`` (streams end with a content-less candidate carrying only ``finishReason``).
* ``fault``: ``{"status": 429|500|503|504|400|..., "retry_delay": "1.5s", "per_day": false, "message": "...",
  "retry_after_header": false, "array_wrapped": false}`` answers an HTTP error (429 carries QuotaFailure + Help +
  RetryInfo and ``Please retry in Xs.``, no ``Retry-After`` header unless asked); or
  ``{"kind": "truncate_sse"|"drop_connection"|"midstream_error", "after_chunks": 1, "status": 503}`` which sends
  ``after_chunks`` stream chunks and then ends the body without a finishing chunk / aborts the TCP connection /
  sends ``data: {"error": {...}}`` and ends. On a non-streaming request ``drop_connection`` closes the socket and the
  other kinds answer the HTTP error ``status_on_unary`` (default 503).

Live turns use the same rules (an audio turn's user text is ``(audio N ms)``); REST-only keys are ignored there and
these Live-only keys are taken out before the REST rules compile (REST ignores them):

* script level ``"text_frames": true``: send text frames instead of the real service's binary frames.
* ``input_transcription``: template of what was "heard" on an audio turn (default ``(audio {audio_ms} ms)``); it
  becomes the user text of the history and of the answer's templates.
* ``audio_ms_per_char`` (default 20, capped at 60 s an answer), ``chunk_ms`` (default 100): the synthetic voice's
  length and chunking (24 kHz s16le PCM, a tone whose pitch follows the text; TEXT modality: as many text pieces).
* ``pace``: 0 = send as fast as possible (default), 1.0 = real time (barge-in needs > 0).
* ``go_away_ms``: after this turn send ``goAway{timeLeft}``, then close 1000 after that many ms.
* ``fault``: ``{"kind": "drop"|"malformed", "after_chunks": 1}`` (abort the TCP connection / send one non-JSON
  binary frame and go on), ``{"kind": "slow", "delay_ms": N}`` (before the first chunk), ``{"kind": "close",
  "code": 1011, "reason": "...", "after_chunks": 1}``. A REST ``fault`` on a Live turn closes 1011.

Templates: ``{name}`` placeholders with dotted paths, ``{{``/``}}`` for literal braces, unknown names left as written.
Variables: ``user_text``, ``system_text``, ``model``, ``tool``, ``match.*``, ``name`` (function name of the first
function response), ``args.*`` (arguments of the call it answers), ``response.*`` (its ``response`` object; a path
also looks inside a single wrapper key such as ``{"result": {...}}``), ``response`` (JSON), ``response_text`` (a
flattened human-readable rendering), ``responses`` (all responses), ``tools`` (declared names). A string that is
exactly one placeholder keeps the value's JSON type inside ``args``/``json``.

Usage metadata uses a stable fake tokenizer: ``ceil(len(text) / 4)`` per text, 258 per media part, the compact JSON of
calls/responses/tool declarations; ``totalTokenCount = prompt + candidates + thoughts``; cached tokens are part of
``promptTokenCount``.
"""

from __future__ import annotations

from .engine import DEFAULT_MODEL, LIVE_MODEL
from .script import ScriptError
from .server import Emulator

__all__ = ["DEFAULT_MODEL", "LIVE_MODEL", "Emulator", "ScriptError"]
