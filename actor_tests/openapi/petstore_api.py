"""A real HTTP API for the OpenAPI toolset tests: the Swagger Petstore subset, the 3.1 lending library of
``specs/library31.json``, and test endpoints (an echo of what arrived, a redirect to another origin, a huge body,
a slow answer, a trickle, text, binary and broken JSON).

It is a Starlette app served by uvicorn on 127.0.0.1 on a free port from a thread (:class:`ApiServer`), optionally
over TLS with a self-signed certificate made here (``cryptography``). Each app has its own state: pets, books and
the credentials it accepts (an API key for the ``api_key`` scheme, a bearer token for ``petstore_auth`` and the
library's ``bearer``, a cookie key for ``libraryKey``).

Base paths: ``/api/v3`` (Petstore), ``/api/v2`` (library), ``/test`` (test endpoints).
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import secrets
import socket
import ssl
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route

PETSTORE = "/api/v3"
LIBRARY = "/api/v2"


def new_secret(prefix: str) -> str:
    """A fresh credential value, long enough for the log scrubber to know it."""
    return f"{prefix}-{secrets.token_hex(12)}"


class ApiState:
    """What one app holds: its data, the credentials it accepts, and a release for its slow endpoints."""

    def __init__(self) -> None:
        self.api_key = new_secret("pk")
        self.bearer = new_secret("bt")
        self.library_key = new_secret("lk")
        self.client_secret = new_secret("cs")
        self.token_requests = 0
        self.bearer_check: Any = None
        """When set, ``bearer_check(token) -> bool`` decides bearer tokens (an OAuth issuer's, say) instead of
        :attr:`bearer`."""
        self.release = threading.Event()
        self.hits = 0
        self.pets: dict[int, dict[str, Any]] = {
            1: {
                "id": 1,
                "name": "doggie",
                "photoUrls": [],
                "status": "available",
                "category": {"id": 1, "name": "Dogs"},
            },
            2: {"id": 2, "name": "kitty", "photoUrls": [], "status": "pending"},
            3: {"id": 3, "name": "rex", "photoUrls": [], "status": "available"},
        }
        self.books: dict[str, dict[str, Any]] = {
            "9780134685991": {"isbn": "9780134685991", "title": "Effective Java", "year": 2018},
            "9781593279509": {"isbn": "9781593279509", "title": "Eloquent JavaScript", "year": 2018},
        }
        self.loans: dict[int, list[dict[str, Any]]] = {}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status)


def _bearer_ok(request: Request, state: ApiState) -> bool:
    header = request.headers.get("authorization", "")
    if state.bearer_check is not None:
        return header.startswith("Bearer ") and bool(state.bearer_check(header[len("Bearer ") :]))
    return header == f"Bearer {state.bearer}"


def _key_ok(request: Request, state: ApiState) -> bool:
    return request.headers.get("api_key") == state.api_key


async def _json(request: Request) -> Any:
    try:
        return await request.json()
    except ValueError:
        return None


def petstore_routes(state: ApiState) -> list[Route]:
    async def pet_by_id(request: Request) -> Response:
        raw = request.path_params["petId"]
        if request.method == "DELETE":
            if not _bearer_ok(request, state):
                return _error(401, "unauthorized")
        elif not (_key_ok(request, state) or _bearer_ok(request, state)):
            return _error(401, "unauthorized")
        try:
            pet_id = int(raw)
        except ValueError:
            return _error(400, "Invalid ID supplied")
        if pet_id not in state.pets:
            return _error(404, "Pet not found")
        if request.method == "DELETE":
            del state.pets[pet_id]
            return Response(status_code=200)
        return JSONResponse(state.pets[pet_id])

    async def find_by_status(request: Request) -> Response:
        if not _bearer_ok(request, state):
            return _error(401, "unauthorized")
        status = request.query_params.get("status", "available")
        if status not in ("available", "pending", "sold"):
            return _error(400, "Invalid status value")
        return JSONResponse([p for p in state.pets.values() if p.get("status") == status])

    async def pet(request: Request) -> Response:
        if not _bearer_ok(request, state):
            return _error(401, "unauthorized")
        body = await _json(request)
        if not isinstance(body, dict) or not isinstance(body.get("name"), str):
            return _error(422, "Validation exception")
        if request.method == "POST":
            given = body.get("id")
            new_id = given if isinstance(given, int) else max(state.pets, default=0) + 1
            state.pets[new_id] = {**body, "id": new_id}
            return JSONResponse(state.pets[new_id])
        if body.get("id") not in state.pets:
            return _error(404, "Pet not found")
        state.pets[body["id"]] = {**state.pets[body["id"]], **body}
        return JSONResponse(state.pets[body["id"]])

    async def inventory(request: Request) -> Response:
        if not _key_ok(request, state):
            return _error(401, "unauthorized")
        counts: dict[str, int] = {}
        for p in state.pets.values():
            counts[p.get("status", "available")] = counts.get(p.get("status", "available"), 0) + 1
        return JSONResponse(counts)

    async def token(request: Request) -> Response:
        # The OAuth 2.0 token endpoint of the pet store: client credentials for the client "pets".
        state.token_requests += 1
        form = await request.form()
        if form.get("grant_type") != "client_credentials":
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        if form.get("client_id") != "pets" or form.get("client_secret") != state.client_secret:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        return JSONResponse({"access_token": state.bearer, "token_type": "Bearer", "expires_in": 3600})

    return [
        Route("/oauth/token", token, methods=["POST"]),
        Route(PETSTORE + "/pet", pet, methods=["POST", "PUT"]),
        Route(PETSTORE + "/pet/findByStatus", find_by_status, methods=["GET"]),
        Route(PETSTORE + "/pet/{petId}", pet_by_id, methods=["GET", "DELETE"]),
        Route(PETSTORE + "/store/inventory", inventory, methods=["GET"]),
    ]


def library_routes(state: ApiState) -> list[Route]:
    async def books(request: Request) -> Response:
        if request.method == "POST":
            cookie_ok = request.cookies.get("library_key") == state.library_key
            if not (_bearer_ok(request, state) or cookie_ok):
                return _error(401, "unauthorized")
            body = await _json(request)
            if not isinstance(body, dict) or "isbn" not in body or "title" not in body:
                return _error(422, "a book needs isbn and title")
            state.books[body["isbn"]] = body
            return JSONResponse(body, status_code=201)
        if not _bearer_ok(request, state):
            return _error(401, "unauthorized")
        found = list(state.books.values())
        author = request.query_params.get("filter[author]")
        year = request.query_params.get("filter[year]")
        if author is not None:
            found = [b for b in found if b.get("author") == author]
        if year is not None:
            found = [b for b in found if str(b.get("year")) == year]
        size = int(request.query_params.get("pageSize", "20"))
        return JSONResponse(
            found[:size],
            headers={"X-Request-Id": request.headers.get("x-request-id", "")},
        )

    async def book(request: Request) -> Response:
        isbn = request.path_params["isbn"]
        if request.method == "PATCH":
            if not _bearer_ok(request, state):
                return _error(401, "unauthorized")
            if request.headers.get("content-type") != "application/merge-patch+json":
                return _error(415, "merge-patch+json only")
            if isbn not in state.books:
                return _error(404, "no such book")
            patch = await _json(request)
            state.books[isbn] = {k: v for k, v in {**state.books[isbn], **patch}.items() if v is not None}
            return JSONResponse(state.books[isbn])
        if isbn not in state.books:
            return _error(404, "no such book")
        return JSONResponse(state.books[isbn])

    async def loans(request: Request) -> Response:
        if not _bearer_ok(request, state):
            return _error(401, "unauthorized")
        member = int(request.path_params["memberId"])
        if request.method == "POST":
            body = await _json(request)
            loan = {"isbn": body["isbn"], "days": body.get("days", 14), "status": "open"}
            state.loans.setdefault(member, []).append(loan)
            return JSONResponse(loan, status_code=201)
        wanted = request.query_params.get("status")
        statuses = wanted.split("|") if wanted else None
        items = [x for x in state.loans.get(member, []) if statuses is None or x["status"] in statuses]
        return JSONResponse(
            {"member": member, "session": request.cookies.get("session"), "statuses": statuses, "loans": items}
        )

    return [
        Route(LIBRARY + "/books", books, methods=["GET", "POST"]),
        Route(LIBRARY + "/books/{isbn}", book, methods=["GET", "PATCH"]),
        Route(LIBRARY + "/members/{memberId}/loans", loans, methods=["GET", "POST"]),
    ]


def probe_routes(state: ApiState, other_origin: str) -> list[Route]:
    async def echo(request: Request) -> Response:
        body = await request.body()
        return JSONResponse(
            {
                "method": request.method,
                "path": request.url.path,
                "raw_path": request.scope["raw_path"].decode("latin-1"),
                "query_string": request.scope["query_string"].decode("latin-1"),
                "query": [[k, v] for k, v in request.query_params.multi_items()],
                "headers": [[k.decode("latin-1"), v.decode("latin-1")] for k, v in request.scope["headers"]],
                "cookies": dict(request.cookies),
                "body": body.decode("utf-8", "replace"),
            }
        )

    async def redirect(request: Request) -> Response:
        return RedirectResponse(other_origin + "/stolen", status_code=302)

    async def huge(request: Request) -> Response:
        size = int(request.query_params.get("bytes", str(8 * 1024 * 1024)))

        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"pad":"'
            left = size
            while left > 0:
                piece = min(left, 64 * 1024)
                left -= piece
                yield b"x" * piece
            yield b'"}'

        return StreamingResponse(chunks(), media_type="application/json")

    async def slow(request: Request) -> Response:
        # Holds the request open until the test's release (or 10 s), as a server that never answers would.
        deadline = time.monotonic() + 10.0
        while not state.release.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        return JSONResponse({"late": True})

    async def trickle(request: Request) -> Response:
        async def drip() -> AsyncIterator[bytes]:
            yield b'{"drip":"'
            deadline = time.monotonic() + 10.0
            while not state.release.is_set() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
                yield b"."
            yield b'"}'

        return StreamingResponse(drip(), media_type="application/json")

    async def text(request: Request) -> Response:
        return PlainTextResponse("plain words\n")

    async def binary(request: Request) -> Response:
        return Response(b"\x89PNG\r\n\x1a\n" + bytes(range(256)), media_type="image/png")

    async def bad_json(request: Request) -> Response:
        return Response(b'{"not": json', media_type="application/json")

    async def teapot(request: Request) -> Response:
        return JSONResponse({"message": "short and stout"}, status_code=418)

    return [
        Route("/test/echo/{rest:path}", echo, methods=["GET", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/test/redirect", redirect),
        Route("/test/huge", huge),
        Route("/test/slow", slow),
        Route("/test/trickle", trickle),
        Route("/test/text", text),
        Route("/test/binary", binary),
        Route("/test/badjson", bad_json),
        Route("/test/teapot", teapot),
    ]


def make_app(state: ApiState, *, other_origin: str = "https://evil.example") -> Any:
    """The whole API over ``state`` (``state.hits`` counts the HTTP requests that reached it)."""
    app = Starlette(routes=[*petstore_routes(state), *library_routes(state), *probe_routes(state, other_origin)])

    async def counted(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            state.hits += 1
        await app(scope, receive, send)

    return counted


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate and key for 127.0.0.1 signed by itself (``cert.pem``, ``key.pem`` in ``directory``)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class ApiServer:
    """``app`` served by uvicorn on 127.0.0.1 (a free port) from a thread; :meth:`stop` ends it and its thread."""

    def __init__(self, app: Any, state: ApiState, *, tls: tuple[Path, Path] | None = None) -> None:
        self.state = state
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self._socket.listen(64)
        self.port: int = self._socket.getsockname()[1]
        scheme = "https" if tls else "http"
        self.origin = f"{scheme}://127.0.0.1:{self.port}"
        options: dict[str, Any] = {}
        if tls is not None:
            options = {"ssl_certfile": str(tls[0]), "ssl_keyfile": str(tls[1]), "ssl_version": ssl.PROTOCOL_TLS_SERVER}
        config = uvicorn.Config(
            app,
            http="h11",
            ws="none",
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            timeout_graceful_shutdown=1,
            **options,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name=f"test-api-{self.port}", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10.0
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("the test API did not start")
            self._thread.join(0.01)

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._socket]))
        finally:
            self._socket.close()

    def stop(self) -> None:
        """Release held requests, stop serving and join the thread."""
        self.state.release.set()
        self._server.should_exit = True
        self._thread.join(10.0)
        if self._thread.is_alive():
            self._server.force_exit = True
            self._thread.join(10.0)
        assert not self._thread.is_alive(), "the test API thread outlived stop()"
