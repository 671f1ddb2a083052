"""Node-wide settings: ``config/adk.toml``, then ``ADK_*`` environment variables, then arguments.

Every setting has a documented default (``config/adk.toml`` in the repository lists them all with comments, and
``docs/CONFIGURATION.md`` explains them). Validation is strict: an unknown key in the file, an unknown ``ADK_*``
variable, or a value of the wrong type or range raises :class:`~adk_actors.errors.ConfigError` with reason
``unknown_key`` or ``invalid_value`` and ``details["key"]`` naming it. Secrets are held as
:class:`~adk_actors.secrets.Secret`.

Units follow the reference: ``*_ms`` settings are milliseconds, ``*_s`` settings seconds.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import json
import math
import os
import re
import tomllib
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args, get_type_hints

from adk_actors.errors import ConfigError
from adk_actors.secrets import Secret

_AGENT_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_IMPORTABLE = re.compile(
    r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*:[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*"
)
"""An agent name (the rule of ``adk_actors.agents.spec.check_agent_name``)."""
__all__ = ["ENV_PREFIX", "INTERNAL_ENV", "Settings", "check_otel_endpoint", "is_loopback_host", "load_settings"]

ENV_PREFIX = "ADK_"
# Variables adk_actors sets for its own processes, and secrets read where they are used (the developer token and the
# credential-store keys: never settings, so they never reach settings dumps); not settings, so the strict check
# skips them.
INTERNAL_ENV = frozenset(
    {
        "ADK_CONFIG",
        "ADK_SYSTEM_PORT",
        "ADK_STRICT_PICKLE_TESTS",
        "ADK_SCREENSHOTS",
        "ADK_DEV_TOKEN",
        "ADK_CREDENTIAL_KEYS",
        "ADK_CREDENTIAL_KEY_FILE",
    }
)

Infinity = Literal["infinity"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """Validated node-wide settings. Build with :func:`load_settings`; fields are documented in adk.toml."""

    admin_port: int = 19500
    """Thespian admin TCP port of this node's actor system."""
    bind_ip: str = "127.0.0.1"
    """Address the actor system advertises and binds (THESPIAN_BASE_IPADDR). Loopback by default."""
    allow_remote_bind: bool = False
    """Opt-in for a non-loopback ``bind_ip``: Thespian's ports unpickle what they receive (docs/SECURITY.md)."""
    data_dir: str = "var/adk"
    """Directory for logs, the default SQLite stores and run files. Relative paths resolve against the cwd."""
    log_format: Literal["console", "json"] = "console"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    library_log_level: Literal["debug", "info", "warning", "error"] = "warning"
    """Level of third-party loggers (sqlalchemy, urllib3, thespian...) in the node; records still pass log_level."""
    owned: bool = True
    """Owned mode: the system shuts itself down when the process that called start() dies."""
    start_timeout_s: float = 30.0
    ask_timeout_s: float = 10.0
    """Default deadline of a facade call that is not given a timeout."""
    facade_endpoints: Literal["per_call", "per_thread"] = "per_thread"
    """Facade asks use a fresh external endpoint per call, or one long-lived endpoint per thread."""
    local_lanes: bool = True
    """Messages between this node's processes travel over Unix-socket lanes instead of Thespian's TCP transport."""
    hosts: int = 2
    """Number of tier-1 host processes that run tier-2 actors (about one per core)."""
    host_io_threads: int = 16
    """Provider I/O threads per host."""
    workers: int = 2
    """Pre-forked worker processes for user code (tools, callbacks, workflow actions)."""
    worker_rlimit_as_mb: int = 0
    """Address-space limit per worker job in MiB; 0 disables it."""
    supervisor_intensity: int = 3
    """Restarts of its tier-1 children (registry, router, host supervisor, workers, ...) the root allows within
    ``supervisor_period_s``; one more and the root gives up and the node stops. The host supervisor
    (max(10, 5 x hosts)), each host and each inner actor (OTP's 1 per 5 s) keep their own windows."""
    supervisor_period_s: float = 5.0
    """The window of ``supervisor_intensity``, in seconds."""
    strict_pickle: bool = False
    """Pickle every message that crosses a host (test mode)."""
    session_backend: Literal["memory", "sql"] = "memory"
    session_url: str = ""
    """SQLAlchemy URL for session_backend = "sql"; empty means a SQLite file under data_dir."""
    gemini_api_key: Secret | None = None
    gemini_base_url: str = ""
    """Base URL of the Gemini API (empty: the public endpoint); point it at the emulator for offline use."""
    default_model: str = "gemini-3.1-flash-lite"
    agent_call_timeout_ms: int | Infinity = 60000
    agent_turn_timeout_ms: int | Infinity = 60000
    max_concurrent_invocations: int = 32
    global_limit: int = 256
    """Admission control: runs admitted at once on this node."""
    default_agent_limit: int = 16
    """Admission control: runs of one agent admitted at once, unless agent_limits says otherwise."""
    agent_limits: Mapping[str, int] = field(default_factory=dict)
    """Admission control: per-agent limits by agent name."""
    overflow: Literal["reject", "queue"] = "reject"
    """Admission control: refuse at once (busy) or wait in a bounded FIFO queue."""
    max_queue: int = 1024
    default_queue_timeout: int = 30000
    """Admission control: milliseconds a queued request waits before admission_timeout."""
    otel_endpoint: str = ""
    """Observability: base URL of an OTLP/HTTP collector (``http://127.0.0.1:4318``; ``/v1/traces`` is added);
    empty (or ``None``) turns span export off. ``http`` only to a loopback host, else ``https``; no credentials in
    the URL (see :func:`check_otel_endpoint`)."""
    otel_service_name: str = "adk_actors"
    """Observability: the ``service.name`` resource attribute of the node's spans."""
    otel_resource_attributes: Mapping[str, str | int | float | bool] = field(default_factory=dict)
    """Observability: more resource attributes (``deployment.environment.name``, ...); ``service.name`` is
    ``otel_service_name``'s."""
    otel_sample_ratio: float = 1.0
    """Observability: fraction of new traces exported, 0..1, decided on the trace id (a caller's unsampled trace
    stays unsampled)."""
    otel_max_queue: int = 2048
    """Observability: spans a process holds for export at most; past it new spans are dropped and counted."""
    dev_server: bool = False
    """Developer tooling: run the ``/dev/v1`` API and console (``adk serve``) in a supervised child process of the
    node. Off by default; it needs the ``web`` extra and ``ADK_DEV_TOKEN`` (at least 16 bytes) in the node's
    environment (docs/DEV_CONSOLE.md)."""
    dev_port: int = 8765
    """Developer tooling: the port of the ``/dev/v1`` server (1024..65535)."""
    dev_bind_ip: str = "127.0.0.1"
    """Developer tooling: the address the ``/dev/v1`` server binds; loopback unless ``dev_allow_remote_bind``."""
    dev_allow_remote_bind: bool = False
    """Developer tooling: opt-in for a non-loopback ``dev_bind_ip`` (the start fails closed without it)."""
    dev_mcp: str = ""
    """Developer tooling: comma-separated registered agent names the dev server also exposes as MCP tools at
    ``/mcp`` (``adk serve --mcp``; same token, needs the ``mcp`` extra); empty: no MCP endpoint."""
    dev_a2a: str = ""
    """Developer tooling: one registered agent name the dev server also serves over A2A 1.0 (its Agent Card at
    ``/.well-known/agent-card.json``, JSON-RPC at ``/a2a/v1``; ``adk serve --a2a``); loopback only, no auth.
    Empty: no A2A endpoint."""
    dev_legacy_a2a: bool = False
    """Developer tooling: also serve the legacy ``POST /a2a/prompt`` endpoint (``adk serve --legacy-a2a``); the
    server must bind loopback."""
    dev_resources: str = ""
    """Developer tooling: the importable name (``"pkg.module:name"``) of the application's resource provider for the
    ``/dev/v1`` memory, artifact and context routes (``adk serve --resources``): a
    :data:`~adk_actors.devapi.resources.ResourceProvider` callable or one
    :class:`~adk_actors.devapi.resources.DevResources`, loaded in the dev server's process. Empty: those routes
    answer 503 ``<kind>_unavailable``."""
    live_session_limit: int = 1024
    """Live: server-owned Live sessions the node runs at once (1..16384); one more start is ``live_session_limit``."""
    dev_live_principal: Secret | None = None
    """Developer tooling: the exact principal the ``/dev/v1`` Live routes and ``adk live`` act as (it must equal the
    principal a Live session was started with); unset: those routes answer 503 ``live_unavailable``."""
    observability_bus: Mapping[str, Any] = field(default_factory=dict)
    """Observability: the node's envelope bus, as the keyword arguments of
    :func:`adk_actors.observability.bus.configure_bus` (``exporters`` as importable names); empty means no bus.
    Checked fully when the node starts (docs/OBSERVABILITY.md, "The bus")."""
    extra: Mapping[str, Any] = field(default_factory=dict)
    """Reserved for later issues' sections; must be empty today."""

    def __post_init__(self) -> None:
        # Direct construction is validated exactly like every other source.
        for name in _FIELD_NAMES:
            object.__setattr__(self, name, _coerce(name, getattr(self, name), "argument"))

    def data_path(self, *parts: str) -> Path:
        """A path under ``data_dir`` (absolute)."""
        return Path(self.data_dir).expanduser().resolve().joinpath(*parts)

    def replace(self, **changes: Any) -> Settings:
        """A validated copy with ``changes`` applied."""
        return _build({**_as_dict(self), **changes}, source="argument")

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe settings without the API key (passed separately, through the environment)."""
        out = _as_dict(self)
        out.pop("gemini_api_key")
        out.pop("dev_live_principal")
        out["extra"] = dict(self.extra)
        out["agent_limits"] = dict(self.agent_limits)
        out["otel_resource_attributes"] = dict(self.otel_resource_attributes)
        out["observability_bus"] = json.loads(json.dumps(self.observability_bus))
        return out

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "argument") -> Settings:
        """Validate a mapping of settings (as produced by :meth:`to_dict`) into ``Settings``.

        Raises:
            ConfigError: ``unknown_key`` or ``invalid_value``.
        """
        return _build(values, source=source)

    def public_dict(self) -> dict[str, Any]:
        """JSON-safe view for status and doctor output; secrets appear only as a presence flag."""
        out = _as_dict(self)
        out["gemini_api_key"] = "set" if self.gemini_api_key else "unset"
        out["dev_live_principal"] = "set" if self.dev_live_principal else "unset"
        out["extra"] = dict(self.extra)
        out["agent_limits"] = dict(self.agent_limits)
        out["otel_resource_attributes"] = dict(self.otel_resource_attributes)
        out["observability_bus"] = json.loads(json.dumps(self.observability_bus))
        return out


_FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
_FIELD_NAMES = tuple(_FIELDS)
_HINTS = get_type_hints(Settings)


def _as_dict(s: Settings) -> dict[str, Any]:
    return {name: getattr(s, name) for name in _FIELDS}


MAX_ENDPOINT_CHARS = 2048
MAX_OTEL_QUEUE = 65536
MAX_RESOURCE_ATTRIBUTES = 64
MAX_RESOURCE_KEY = 128
MAX_RESOURCE_VALUE = 256
MAX_BUS_SETTING_BYTES = 16 * 1024 * 1024


def is_loopback_host(host: str) -> bool:
    """Whether ``host`` (a URL's host name) is ``localhost`` or a loopback address (``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_otel_endpoint(url: str) -> str:
    """Validate an OTLP/HTTP collector URL and return it.

    ``https`` anywhere; plain ``http`` only to a loopback host (``localhost``, 127.0.0.0/8, ``[::1]``), because
    spans would otherwise cross a network unencrypted. No user or password in the URL (send credentials with the
    standard ``OTEL_EXPORTER_OTLP_HEADERS`` environment variable), no query or fragment.

    Raises:
        ConfigError: ``invalid_value`` with ``details["key"] == "otel_endpoint"``.
    """

    def bad(why: str) -> ConfigError:
        return ConfigError(f"setting 'otel_endpoint': {why}", reason="invalid_value", details={"key": "otel_endpoint"})

    if not isinstance(url, str) or not url or len(url) > MAX_ENDPOINT_CHARS or url != url.strip():
        raise bad(f"expected a URL of at most {MAX_ENDPOINT_CHARS} characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError:
        raise bad("not a valid URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise bad("expected an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise bad("credentials do not belong in the URL (use OTEL_EXPORTER_OTLP_HEADERS)")
    if parts.query or parts.fragment:
        raise bad("no query or fragment allowed")
    if port == 0:
        raise bad("port 0")
    if parts.scheme == "http" and not is_loopback_host(parts.hostname):
        raise bad("plain http is allowed only to a loopback collector; use https for a remote one")
    return url


def _coerce(key: str, value: Any, source: str) -> Any:
    hint = _HINTS[key]

    def bad(why: str) -> ConfigError:
        return ConfigError(
            f"setting {key!r} from {source}: {why}", reason="invalid_value", details={"key": key, "source": source}
        )

    from_env = source == "environment"
    if key in ("gemini_api_key", "dev_live_principal"):
        if value is None or isinstance(value, Secret):
            return value
        if isinstance(value, str):
            return Secret(value) if value else None
        raise bad("expected a string")
    if key == "agent_limits":
        if from_env and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise bad("expected a JSON object of agent name to limit") from None
        if not isinstance(value, Mapping) or not all(
            isinstance(k, str) and not isinstance(v, bool) and isinstance(v, int) and v >= 1 for k, v in value.items()
        ):
            raise bad("expected a mapping of agent name to a positive integer")
        return dict(value)
    if key == "otel_endpoint":
        if value is None or value == "":
            return ""
        return check_otel_endpoint(value)
    if key == "otel_service_name":
        if not isinstance(value, str) or not value.strip() or len(value) > MAX_RESOURCE_VALUE:
            raise bad(f"expected a non-empty string of at most {MAX_RESOURCE_VALUE} characters")
        return value
    if key == "otel_resource_attributes":
        if from_env and isinstance(value, str):
            try:
                value = json.loads(value)
            except ValueError:
                raise bad("expected a JSON object of attribute name to value") from None
        if not isinstance(value, Mapping) or len(value) > MAX_RESOURCE_ATTRIBUTES:
            raise bad(f"expected a mapping of at most {MAX_RESOURCE_ATTRIBUTES} attributes")
        for k, v in value.items():
            if not isinstance(k, str) or not k or len(k) > MAX_RESOURCE_KEY or k == "service.name":
                raise bad(f"attribute names are 1..{MAX_RESOURCE_KEY} characters; service.name is otel_service_name")
            if not isinstance(v, str | int | float | bool) or (isinstance(v, str) and len(v) > MAX_RESOURCE_VALUE):
                raise bad(f"attribute values are strings of at most {MAX_RESOURCE_VALUE} characters or numbers")
            if isinstance(v, float) and not math.isfinite(v):
                raise bad("attribute values must be finite")
        return dict(value)
    if key == "otel_sample_ratio":
        if from_env and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad("expected a number") from None
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0.0 <= value <= 1.0:
            raise bad("expected a number from 0 to 1")
        return float(value)
    if key == "otel_max_queue":
        if from_env and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise bad("expected an integer") from None
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_OTEL_QUEUE:
            raise bad(f"expected an integer from 1 to {MAX_OTEL_QUEUE}")
        return value
    if key == "observability_bus":
        if from_env and isinstance(value, str):
            try:
                value = json.loads(value) if value else {}
            except ValueError:
                raise bad("expected a JSON object of configure_bus arguments") from None
        if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
            raise bad("expected a mapping of configure_bus arguments")
        try:
            encoded = json.dumps(value, allow_nan=False)
        except (TypeError, ValueError):
            raise bad("expected JSON values (exporters as importable names)") from None
        if len(encoded) > MAX_BUS_SETTING_BYTES:
            raise bad(f"at most {MAX_BUS_SETTING_BYTES} bytes as JSON")
        return json.loads(encoded)
    if key == "dev_mcp":
        if not isinstance(value, str) or len(value) > 4096:
            raise bad("expected comma-separated agent names (at most 4096 characters)")
        names = [n.strip() for n in value.split(",") if n.strip()]
        if not all(_AGENT_NAME.fullmatch(n) for n in names):
            raise bad("expected comma-separated agent names")
        return ",".join(names)
    if key == "dev_a2a":
        if not isinstance(value, str) or (value and not _AGENT_NAME.fullmatch(value)):
            raise bad("expected one agent name")
        return value
    if key == "dev_resources":
        if not isinstance(value, str) or (value and not _IMPORTABLE.fullmatch(value)):
            raise bad('expected an importable name "pkg.module:name"')
        return value
    if key == "extra":
        if not isinstance(value, Mapping) or value:
            raise bad("no extra settings are defined yet")
        return dict(value)
    args = get_args(hint)
    if hint is bool:
        if isinstance(value, bool):
            return value
        if (
            from_env
            and isinstance(value, str)
            and value.lower() in {"1", "true", "yes", "on", "0", "false", "no", "off"}
        ):
            return value.lower() in {"1", "true", "yes", "on"}
        raise bad("expected a boolean")
    if hint is int or (args and int in args):
        if isinstance(value, str) and value == "infinity" and "infinity" in str(hint):
            return value
        if from_env and isinstance(value, str):
            try:
                value = int(value)
            except ValueError:
                raise bad("expected an integer") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("expected an integer")
        if value < 0:
            raise bad("must be >= 0")
        if key in {"admin_port", "dev_port"} and not 1024 <= value <= 65535:
            raise bad("port out of range 1024..65535")
        if key == "live_session_limit" and not 1 <= value <= 16384:
            raise bad("expected an integer from 1 to 16384")
        if (
            key
            in {
                "hosts",
                "workers",
                "host_io_threads",
                "max_concurrent_invocations",
                "supervisor_intensity",
                "global_limit",
                "default_agent_limit",
                "default_queue_timeout",
            }
            and value < 1
        ):
            raise bad("must be >= 1")
        return value
    if hint is float:
        if from_env and isinstance(value, str):
            try:
                value = float(value)
            except ValueError:
                raise bad("expected a number") from None
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise bad("expected a positive finite number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise bad("expected a string")
        return value
    if args and all(isinstance(a, str) for a in args):  # Literal
        if value not in args:
            raise ConfigError(
                f"setting {key!r}: must be one of {list(args)}",
                reason="invalid_value",
                details={"key": key, "allowed": list(args), "source": source},
            )
        return value
    raise bad("unsupported type")  # pragma: no cover - every field is handled above


def _build(values: Mapping[str, Any], source: str) -> Settings:
    clean: dict[str, Any] = {}
    for key, value in values.items():
        if key not in _FIELDS:
            raise ConfigError(
                f"unknown setting {key!r} ({source})", reason="unknown_key", details={"key": key, "source": source}
            )
        clean[key] = _coerce(key, value, source)
    return Settings(**clean)


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(
            "configuration file not found", reason="config_not_found", details={"path": str(path)}
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"configuration file is not valid TOML: {exc}", reason="invalid_toml", details={"path": str(path)}
        ) from None
    # The file groups settings in tables for readability; keys are unique across tables.
    flat: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict) and key in {
            "system",
            "runtime",
            "logging",
            "sessions",
            "gemini",
            "agents",
            "admission",
            "observability",
            "live",
            "dev",
        }:
            for inner, inner_value in value.items():
                if inner in flat:
                    raise ConfigError("setting given twice", reason="duplicate_key", details={"key": inner})
                flat[inner] = inner_value
        else:
            flat[key] = value
    for key in flat:
        if key not in _FIELDS:
            raise ConfigError(
                f"unknown setting {key!r} in {path}", reason="unknown_key", details={"key": key, "source": str(path)}
            )
    return flat


def _from_env(env: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in env.items():
        if not name.startswith(ENV_PREFIX) or name in INTERNAL_ENV:
            continue
        key = name[len(ENV_PREFIX) :].lower()
        if key not in _FIELDS or key == "extra":
            raise ConfigError(
                f"unknown environment setting {name}",
                reason="unknown_key",
                details={"key": name, "source": "environment"},
            )
        out[key] = value
    if "gemini_api_key" not in out and env.get("GEMINI_API_KEY"):
        out["gemini_api_key"] = env["GEMINI_API_KEY"]
    if "gemini_base_url" not in out and env.get("GEMINI_BASE_URL"):
        out["gemini_base_url"] = env["GEMINI_BASE_URL"]
    return out


def load_settings(
    config_file: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    use_env: bool = True,
    **overrides: Any,
) -> Settings:
    """Load settings: defaults < config file < ``ADK_*`` environment < keyword overrides.

    The file is ``config_file`` if given, else ``$ADK_CONFIG``, else ``config/adk.toml`` in the current directory
    if it exists, else none (defaults only).

    Raises:
        ConfigError: ``unknown_key``, ``invalid_value``, ``invalid_toml`` or ``config_not_found``.
    """
    environ = os.environ if env is None else env
    values: dict[str, Any] = {}
    path: Path | None = None
    if config_file is not None:
        path = Path(config_file)
    elif use_env and environ.get("ADK_CONFIG"):
        path = Path(environ["ADK_CONFIG"])
    elif Path("config/adk.toml").is_file():
        path = Path("config/adk.toml")
    if path is not None:
        values = _read_file(path)
    merged = _as_dict(_build(values, source=str(path) if path else "defaults"))
    if use_env:
        merged.update(_as_dict(_build({**merged, **_from_env(environ)}, source="environment")))
    if overrides:
        merged.update(_as_dict(_build({**merged, **overrides}, source="argument")))
    return _build(merged, source="argument")
