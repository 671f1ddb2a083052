"""A small test issuer: real RSA and EC keys (``cryptography``), real RS256/ES256 tokens (PyJWT), and its JWKS
served over HTTP on 127.0.0.1 from a thread (``http.server``), with modes for a failing, slow, trickling or
oversized endpoint and a count of the requests it answered (the full OAuth/OIDC server for the code flow is
:mod:`adk_actors.devtools.oauth_issuer`). The agent and Runner fixtures (``emu``, ``spawn``, ``svc``,
``agent_factory``) are the ones of the Runner tests. The server and every handler thread end with the
test (handlers that hold a request open are released first)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from actor_tests.runner.conftest import agent_factory, emu, spawn, svc  # noqa: F401 - the Runner tests' fixtures
from adk_actors.auth import JwksCache, JwtPolicy

AUDIENCE = "https://agents.test"
SCOPES = "agent.run profile"


class Issuer:
    """Signs tokens and publishes the public half of its keys at :attr:`jwks_url`."""

    def __init__(self) -> None:
        self.private: dict[str, Any] = {}
        self.published: list[str] = []
        self.add_key("rsa-1", "rsa")
        self.add_key("ec-1", "ec")
        self.mode = "ok"
        """``ok``, ``delay`` (answers after ``delay_s``), ``error`` (500), ``slow`` (no answer until released),
        ``trickle`` (a byte every 50 ms), ``huge`` (a body past any sane bound)."""
        self.delay_s = 0.5
        self.body: bytes | None = None
        """When set, served instead of the key set (a misconfigured or hostile endpoint)."""
        self.requests = 0
        self._count = threading.Lock()
        self.release = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = False  # server_close() joins every handler thread
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.jwks_url = self.url + "/jwks"
        self._thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, name="test-issuer", daemon=True
        )
        self._thread.start()
        self.running = True

    def add_key(self, kid: str, kind: str = "rsa") -> None:
        """Create a key and publish it (a rotation: the next fetch shows it)."""
        self.private[kid] = (
            rsa.generate_private_key(public_exponent=65537, key_size=2048)
            if kind == "rsa"
            else ec.generate_private_key(ec.SECP256R1())
        )
        self.published.append(kid)

    def retire(self, kid: str) -> None:
        """Stop publishing ``kid`` (its tokens can still be signed, as by a leaked key)."""
        self.published.remove(kid)

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid in list(self.published):
            key = self.private[kid]
            algorithm = (
                jwt.algorithms.RSAAlgorithm if isinstance(key, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
            )
            jwk = algorithm.to_jwk(key.public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig"})
        return {"keys": keys}

    def claims(self, **overrides: Any) -> dict[str, Any]:
        now = int(time.time())
        claims: dict[str, Any] = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "user-1",
            "iat": now,
            "exp": now + 600,
            "scope": SCOPES,
        }
        claims.update(overrides)
        return {k: v for k, v in claims.items() if v is not None}

    def token(self, kid: str = "rsa-1", *, typ: str = "at+jwt", key: Any = None, **overrides: Any) -> str:
        """A token signed by ``kid``'s key (or ``key``), RS256 for RSA keys and ES256 for EC keys."""
        signer = key if key is not None else self.private[kid]
        alg = "RS256" if isinstance(signer, rsa.RSAPrivateKey) else "ES256"
        return jwt.encode(self.claims(**overrides), signer, algorithm=alg, headers={"kid": kid, "typ": typ})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with issuer._count:
                    issuer.requests += 1
                mode = issuer.mode
                if mode == "slow":
                    issuer.release.wait(10.0)
                    return
                if mode == "delay" and issuer.release.wait(issuer.delay_s):
                    return
                if mode == "error":
                    self.send_error(500)
                    return
                body = issuer.body if issuer.body is not None else json.dumps(issuer.jwks()).encode()
                if mode == "huge":
                    body = b'{"keys":[],"pad":"' + b"x" * (2 * 1024 * 1024) + b'"}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                if mode != "huge":  # no length: the client must bound the body as it reads
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    if mode == "trickle":
                        for byte in body:
                            if issuer.release.wait(0.05):
                                return
                            self.wfile.write(bytes([byte]))
                            self.wfile.flush()
                    else:
                        self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (its deadline or size bound): that is the point of these modes

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

    def stop(self) -> None:
        """Stop serving (the JWKS endpoint goes down) and join every thread."""
        if self.running:
            self.running = False
            self.release.set()
            self.server.shutdown()
            self.server.server_close()
            self._thread.join(10.0)


@pytest.fixture
def issuer() -> Iterator[Issuer]:
    made = Issuer()
    try:
        yield made
    finally:
        made.stop()
        assert not made._thread.is_alive()


class FakeClock:
    """A monotonic clock the test advances."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def make_policy(issuer: Issuer) -> Callable[..., JwtPolicy]:
    """A policy for ``issuer``: RS256 and ES256, audience :data:`AUDIENCE`, ``agent.run`` required."""

    def make(**overrides: Any) -> JwtPolicy:
        options: dict[str, Any] = {
            "issuer": issuer.url,
            "audience": AUDIENCE,
            "algorithms": ("RS256", "ES256"),
            "required_scopes": ("agent.run",),
            "allow_http_loopback": True,
            "max_lifetime_s": 3600,
            "leeway_s": 30,
        }
        if "jwks" not in overrides:
            options["jwks_url"] = issuer.jwks_url
        options.update(overrides)
        return JwtPolicy(**options)

    return make


@pytest.fixture
def cache_with_clock(issuer: Issuer) -> Callable[..., tuple[JwksCache, FakeClock]]:
    """A JWKS cache for ``issuer`` whose refresh decisions follow a :class:`FakeClock`."""

    def make(**overrides: Any) -> tuple[JwksCache, FakeClock]:
        clock = FakeClock()
        options: dict[str, Any] = {"allow_http_loopback": True, "min_refresh_interval_s": 30.0, "clock": clock}
        options.update(overrides)
        return JwksCache(issuer.jwks_url, **options), clock

    return make
