"""Protocol pieces of the emulator's Live endpoint: the client-message schema, close reasons, the script's Live keys,
function call ids and the self-signed TLS certificate. The server and sessions live in :mod:`.live`.
"""

from __future__ import annotations

import datetime as _dt
import ipaddress
import logging
import re
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import schema
from .script import ScriptError, load_script
from .wire import DEFAULT_MESSAGES

LIVE_PATH_TEMPLATE = "/ws/google.ai.generativelanguage.{version}.GenerativeService.BidiGenerateContent"
PATH_RE = re.compile(
    r"^/ws/google\.ai\.generativelanguage\.(v1beta|v1alpha|v1)\.GenerativeService\.BidiGenerateContent$"
)
"""The Live route; group 1 is the API version."""
INVALID = "Request contains an invalid argument."
PRECONDITION = "Precondition check failed."
INTERNAL = "Internal error encountered."
KEY_INVALID = "API key not valid. Please pass a valid API key."
KEY_MISSING = (
    "Method doesn't allow unregistered callers (callers without established identity). "
    "Please use API Key or other form of API consumer identity to call this API."
)
BAD_HANDLE = "Session resumption handle is invalid or has expired."
MAX_REASON_BYTES = 123
CLOSE_TIMEOUT_S = 2.0
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MAX_HANDLES = 10_000
AUDIO_CAP_MS = 60_000
DEFAULT_MS_PER_CHAR = 20.0
DEFAULT_CHUNK_MS = 100
DEFAULT_SILENCE_MS = 500
DEFAULT_HEARD = "(audio {audio_ms} ms)"

LIVE_RESPOND_KEYS = frozenset({"input_transcription", "audio_ms_per_char", "chunk_ms", "pace", "go_away_ms"})
LIVE_FAULT_KINDS = frozenset({"drop", "slow", "malformed", "close"})
_CLOSE_CODES = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014})
LOG = logging.getLogger("adk_actors.emulator.live")
WS_LOG = logging.getLogger("adk_actors.emulator.live.websockets")
"""The ``websockets`` server's logger. Held at INFO: at DEBUG the library logs every frame's payload (prompts,
audio) and the handshake request line, whose ``?key=`` query is an API key."""
WS_LOG.setLevel(logging.INFO)

# ------------------------------------------------------------------------------------------- client message schema
_S = schema
_AAD = _S.Message(
    "AutomaticActivityDetection",
    {
        "disabled": _S.BOOL, "prefixPaddingMs": _S.INT32, "silenceDurationMs": _S.INT32,
        "startOfSpeechSensitivity": _S.Enum("StartSensitivity", (
            "START_SENSITIVITY_UNSPECIFIED", "START_SENSITIVITY_HIGH", "START_SENSITIVITY_LOW")),
        "endOfSpeechSensitivity": _S.Enum("EndSensitivity", (
            "END_SENSITIVITY_UNSPECIFIED", "END_SENSITIVITY_HIGH", "END_SENSITIVITY_LOW")),
    },
).finish()  # fmt: skip
_REALTIME_INPUT_CONFIG = _S.Message(
    "RealtimeInputConfig",
    {
        "automaticActivityDetection": _AAD, "interimTranscriptTimestampEnabled": _S.BOOL,
        "activityHandling": _S.Enum("ActivityHandling", (
            "ACTIVITY_HANDLING_UNSPECIFIED", "START_OF_ACTIVITY_INTERRUPTS", "NO_INTERRUPTION")),
        "turnCoverage": _S.Enum("TurnCoverage", (
            "TURN_COVERAGE_UNSPECIFIED", "TURN_INCLUDES_ONLY_ACTIVITY", "TURN_INCLUDES_ALL_INPUT",
            "TURN_INCLUDES_AUDIO_ACTIVITY_AND_ALL_VIDEO")),
    },
).finish()  # fmt: skip
_TRANSCRIPTION = _S.Message(
    "AudioTranscriptionConfig",
    {
        "languageCodes": _S.Repeated(_S.STRING), "customVocabulary": _S.Repeated(_S.STRING),
        "adaptationPhrases": _S.Repeated(_S.STRING), "wordTimestamp": _S.BOOL, "diarization": _S.BOOL,
        "mode": _S.ANY, "languageAuto": _S.ANY, "languageHints": _S.ANY, "sourceText": _S.STRING,
    },
).finish()  # fmt: skip
_LIVE_GENERATION_CONFIG = _S.Message(
    "GenerationConfig",
    {**_S.GENERATION_CONFIG.fields, "enableAffectiveDialog": _S.BOOL, "translationConfig": _S.ANY},
).finish()
_SETUP = _S.Message(
    "BidiGenerateContentSetup",
    {
        "model": _S.STRING, "generationConfig": _LIVE_GENERATION_CONFIG, "systemInstruction": _S.CONTENT,
        "tools": _S.Repeated(_S.TOOL), "realtimeInputConfig": _REALTIME_INPUT_CONFIG,
        "sessionResumption": _S.Message("SessionResumptionConfig", {"handle": _S.STRING, "transparent": _S.BOOL})
        .finish(),
        "contextWindowCompression": _S.Message("ContextWindowCompressionConfig", {
            "triggerTokens": _S.INT64,
            "slidingWindow": _S.Message("SlidingWindow", {"targetTokens": _S.INT64}).finish()}).finish(),
        "inputAudioTranscription": _TRANSCRIPTION, "outputAudioTranscription": _TRANSCRIPTION,
        "proactivity": _S.Message("ProactivityConfig", {"proactiveAudio": _S.BOOL, "proactiveVideo": _S.BOOL})
        .finish(),
        "historyConfig": _S.Message("HistoryConfig", {"initialHistoryInClientContent": _S.BOOL}).finish(),
        "avatarConfig": _S.ANY, "safetySettings": _S.Repeated(_S.SAFETY_SETTING), "labels": _S.MapOf(_S.STRING),
    },
).finish()  # fmt: skip
CLIENT_MESSAGE = _S.Message(
    "BidiGenerateContentClientMessage",
    {
        "setup": _SETUP,
        "clientContent": _S.Message("BidiGenerateContentClientContent",
                                    {"turns": _S.Repeated(_S.CONTENT), "turnComplete": _S.BOOL}).finish(),
        "realtimeInput": _S.Message("BidiGenerateContentRealtimeInput", {
            "mediaChunks": _S.Repeated(_S.BLOB), "audio": _S.BLOB, "video": _S.BLOB, "text": _S.STRING,
            "activityStart": _S.EMPTY, "activityEnd": _S.EMPTY, "audioStreamEnd": _S.BOOL}).finish(),
        "toolResponse": _S.Message("BidiGenerateContentToolResponse",
                                   {"functionResponses": _S.Repeated(_S.FUNCTION_RESPONSE)}).finish(),
        "contextUpdate": _S.Message("BidiGenerateContentContextUpdate", {
            "systemInstruction": _S.CONTENT,
            "tools": _S.Message("Tools", {"tools": _S.Repeated(_S.TOOL)}).finish()}).finish(),
    },
).finish()  # fmt: skip
"""One client message; each has exactly one of these members (camelCase or snake_case)."""


# --------------------------------------------------------------------------------------------------------- scripts
@dataclass(frozen=True)
class LiveScript:
    """The Live-only part of a script: the ``text_frames`` flag and each rule's Live ``respond`` keys by index."""

    text_frames: bool = False
    extras: dict[int, dict[str, Any]] = field(default_factory=dict)


def split_script(script: dict[str, Any] | str | Path | None) -> tuple[dict[str, Any], LiveScript]:
    """Load a script and take its Live-only keys out; returns (the REST script, the Live part).

    Raises:
        ScriptError: the script cannot be loaded or a Live key has a bad value.
    """
    data = load_script(script)
    if not isinstance(data, dict):
        raise ScriptError("a script must be a JSON object")
    text_frames = data.pop("text_frames", False)
    if not isinstance(text_frames, bool):
        raise ScriptError("'text_frames' must be a boolean")
    extras: dict[int, dict[str, Any]] = {}
    rules = data.get("rules")
    for i, rule in enumerate(rules if isinstance(rules, list) else []):
        respond = rule.get("respond") if isinstance(rule, dict) else None
        if not isinstance(respond, dict):
            continue  # compile_rules reports it
        extra = {key: respond.pop(key) for key in sorted(LIVE_RESPOND_KEYS & respond.keys())}
        fault = respond.get("fault")
        if isinstance(fault, dict) and fault.get("kind") in LIVE_FAULT_KINDS:
            extra["fault"] = respond.pop("fault")
        if extra:
            _check_extra(i, extra)
            extras[i] = extra
    return data, LiveScript(text_frames, extras)


def _number(value: Any, low: float, high: float | None = None, integer: bool = False) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float) or (integer and not isinstance(value, int)):
        return False
    return value >= low and (high is None or value <= high)


def _check_extra(i: int, extra: dict[str, Any]) -> None:
    checks = {
        "input_transcription": (lambda v: isinstance(v, str), "a string"),
        "audio_ms_per_char": (lambda v: _number(v, 0, 10_000), "a number of milliseconds >= 0"),
        "chunk_ms": (lambda v: _number(v, 10, 60_000, True), "an integer from 10 to 60000"),
        "pace": (lambda v: _number(v, 0, 100), "a number from 0 to 100"),
        "go_away_ms": (lambda v: _number(v, 0, 3_600_000, True), "an integer of milliseconds >= 0"),
    }
    for key, (ok, wanted) in checks.items():
        if key in extra and not ok(extra[key]):
            raise ScriptError(f"rule {i}: '{key}' must be {wanted}")
    fault = extra.get("fault")
    if fault is None:
        return
    allowed = {"drop": {"after_chunks"}, "malformed": {"after_chunks"}, "slow": {"delay_ms"},
               "close": {"code", "reason", "after_chunks"}}[fault["kind"]]  # fmt: skip
    unknown = set(fault) - allowed - {"kind"}
    if unknown:
        raise ScriptError(f"rule {i}: unknown keys {sorted(unknown)} in a Live '{fault['kind']}' fault")
    if "after_chunks" in fault and not _number(fault["after_chunks"], 0, None, True):
        raise ScriptError(f"rule {i}: fault 'after_chunks' must be an integer >= 0")
    if "delay_ms" in fault and not _number(fault["delay_ms"], 0, 3_600_000, True):
        raise ScriptError(f"rule {i}: fault 'delay_ms' must be an integer of milliseconds >= 0")
    code = fault.get("code", 1011)
    if fault["kind"] == "close" and not (code in _CLOSE_CODES or _number(code, 3000, 4999, True)):
        raise ScriptError(f"rule {i}: close code {code!r} cannot be sent (use 1000-1003, 1007-1014 or 3000-4999)")
    if not isinstance(fault.get("reason", ""), str):
        raise ScriptError(f"rule {i}: fault 'reason' must be a string")


def live_fault(respond: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any] | None:
    """The fault of a turn as a Live fault; REST faults map to a close 1011 (or a drop for ``drop_connection``)."""
    if "fault" in extra:
        return dict(extra["fault"])
    fault = respond.get("fault")
    if not fault:
        return None
    if fault.get("kind") == "drop_connection":
        return {"kind": "drop", "after_chunks": fault.get("after_chunks", 1)}
    status = int(fault.get("status", 503))
    message = str(fault.get("message") or DEFAULT_MESSAGES.get(status, INTERNAL))
    return {"kind": "close", "code": 1011, "reason": message, "after_chunks": fault.get("after_chunks", 0)}


def truncate_reason(reason: str) -> str:
    """A close reason cut to the 123 bytes a WebSocket close frame can carry (on a UTF-8 boundary)."""
    raw = reason.encode("utf-8")[:MAX_REASON_BYTES]
    return raw.decode("utf-8", "ignore")


def live_call_id() -> str:
    """A Live function call id as the real service mints them: ``function-call-<digits>``."""
    return f"function-call-{secrets.randbelow(9 * 10**18) + 10**18}"


class CloseConnection(Exception):
    def __init__(self, code: int, reason: str) -> None:
        super().__init__(code, reason)
        self.code, self.reason = code, reason


class Dropped(Exception):
    """The connection was aborted on purpose (fault or test hook)."""


# ------------------------------------------------------------------------------------------------------------- TLS
def make_tls_files(directory: Path, hosts: list[str]) -> tuple[Path, Path]:
    """A self-signed certificate (its own CA) for ``hosts`` plus its key; returns (cert PEM, key PEM).

    Raises:
        ImportError: ``cryptography`` is not installed.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "adk-actors Gemini emulator")])
    names: list[x509.GeneralName] = [x509.DNSName("localhost")]
    for host in dict.fromkeys(["127.0.0.1", *hosts]):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if host != "localhost":
                names.append(x509.DNSName(host))
    now = _dt.datetime.now(_dt.UTC)
    public = key.public_key()
    usage = x509.KeyUsage(
        digital_signature=True,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=7))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "emulator-ca.pem", directory / "emulator-key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.touch(mode=0o600)
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path
