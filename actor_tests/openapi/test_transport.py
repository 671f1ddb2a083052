"""The OpenAPI HTTP transport against a real API on 127.0.0.1 (``petstore_api.py``): URL building for every
parameter style; every refusal (host escape through path arguments or server URLs, header and cookie injection,
oversized requests and responses, redirects, timeouts, TLS failures, unreachable servers, unsupported content);
credentials injected by the auth broker in header, query, cookie and bearer form; and, by hypothesis, that no
argument string moves a request off its origin or puts a line break into a header."""

from __future__ import annotations

import logging
import socket
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.openapi.conftest import context, echoed, probe_document
from actor_tests.openapi.petstore_api import ApiServer, new_secret
from adk_actors.errors import ConfigError, ToolError
from adk_actors.openapi import (
    AuthBroker,
    HttpTransport,
    OpenApiCatalog,
    SecurityScheme,
    compile_openapi,
)
from adk_actors.openapi.transport import normalize_origin
from adk_actors.secrets import Secret

pytestmark = pytest.mark.timeout(60)


class Fixed:
    """A credential source that always answers ``value`` (a Secret or a dict)."""

    def __init__(self, value: Any) -> None:
        self.value = value
        self.asked: list[str] = []

    def credential(self, scheme: SecurityScheme, context: Any) -> Any:
        self.asked.append(scheme.name)
        return self.value


def catalog_for(origin: str) -> OpenApiCatalog:
    return compile_openapi(probe_document(origin))


@pytest.fixture
def probe(api: ApiServer, transports: list[HttpTransport]) -> tuple[OpenApiCatalog, HttpTransport]:
    """The probe document's catalog and a transport allowed to reach the test API over loopback HTTP."""
    transport = HttpTransport([api.origin], allow_http_loopback=True)
    transports.append(transport)
    return catalog_for(api.origin), transport


def send(
    probe: tuple[OpenApiCatalog, HttpTransport], name: str, args: dict[str, Any], broker: Any = None, **ctx: Any
) -> Any:
    catalog, transport = probe
    return transport.send(catalog.get(name), args, broker, context(**ctx))


def refused(reason: str, fn: Any, *args: Any, **kwargs: Any) -> ToolError:
    with pytest.raises(ToolError) as caught:
        fn(*args, **kwargs)
    assert caught.value.reason == reason, caught.value
    return caught.value


# ---- allowed hosts -----------------------------------------------------------------------------------------------


def test_allowed_hosts_are_normalized_exact_origins() -> None:
    assert normalize_origin("HTTPS://Api.Example.COM:443") == "https://api.example.com"
    assert normalize_origin("https://api.example.com:8443/") == "https://api.example.com:8443"
    assert normalize_origin("http://[::1]:80") == "http://[::1]"
    for bad in (
        "*.example.com",
        "https://*.example.com",
        "https://h/api",
        "https://u:p@h",
        "ftp://h",
        "https://h:99999",
        "https://h?x",
        "https://h#f",
        "https:// h",
        "",
        "h",
    ):
        with pytest.raises(ConfigError) as caught:
            HttpTransport([bad])
        assert caught.value.reason == "invalid_allowed_host", bad
    with pytest.raises(ConfigError) as insecure:
        HttpTransport(["http://api.example.com"], allow_http_loopback=True)
    assert insecure.value.reason == "insecure_allowed_host"
    with pytest.raises(ConfigError) as loopback:
        HttpTransport(["http://127.0.0.1:8080"])
    assert loopback.value.reason == "insecure_allowed_host"
    with pytest.raises(ConfigError) as server:
        HttpTransport(["https://h"], server_url="https://u@h/api")
    assert server.value.reason == "invalid_server_url"


def test_a_server_url_off_the_allow_list_is_refused_before_anything_is_sent(
    api: ApiServer, transports: list[HttpTransport]
) -> None:
    catalog = catalog_for(api.origin)
    op = catalog.get("echoOpen")
    other_port = api.origin.rsplit(":", 1)[0] + ":1"
    for server_url in (
        "https://evil.example",
        other_port,
        "https://127.0.0.1:" + str(api.port),
        "http://localhost:" + str(api.port),
    ):
        transport = HttpTransport([api.origin], server_url=server_url, allow_http_loopback=True)
        transports.append(transport)
        error = refused("host_not_allowed", transport.send, op, {}, None, context())
        assert set(error.details) == {"operation", "origin"}
    # The document's own server is checked the same way when no server_url overrides it.
    evil = compile_openapi(probe_document("https://evil.example"))
    transport = HttpTransport([api.origin], allow_http_loopback=True)
    transports.append(transport)
    refused("host_not_allowed", transport.send, evil.get("echoOpen"), {}, None, context())
    assert api.state.hits == 0


# ---- path, query, header and cookie arguments --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "raw"),
    [
        ("../../api/v3/store/inventory", "%2E%2E%2F%2E%2E%2Fapi%2Fv3%2Fstore%2Finventory"),
        ("//evil.example/x", "%2F%2Fevil%2Eexample%2Fx"),
        ("..", "%2E%2E"),
        ("a?b=1#frag", "a%3Fb%3D1%23frag"),
        ("https://evil.example", "https%3A%2F%2Fevil%2Eexample"),
        ("@evil.example", "%40evil%2Eexample"),
        ("sp ace&é", "sp%20ace%26%C3%A9"),
    ],
)
def test_a_path_argument_stays_inside_its_segment(
    probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer, value: str, raw: str
) -> None:
    got = echoed(send(probe, "echoPath", {"value": value}))
    assert got["raw_path"] == "/test/echo/p/" + raw
    assert got["query_string"] == ""
    built = probe[1].build(probe[0].get("echoPath"), {"value": value})
    assert built.origin == api.origin and built.url == api.origin + "/test/echo/p/" + raw


def test_an_empty_path_argument_is_refused(probe: tuple[OpenApiCatalog, HttpTransport]) -> None:
    refused("invalid_argument", send, probe, "echoPath", {"value": ""})
    refused("missing_argument", send, probe, "echoPath", {})
    refused("unknown_argument", send, probe, "echoPath", {"value": "x", "other": 1})


def test_path_styles_label_matrix_and_simple(probe: tuple[OpenApiCatalog, HttpTransport]) -> None:
    assert echoed(send(probe, "echoLabel", {"value": ["a", "b/c"]}))["raw_path"] == "/test/echo/label/.a,b%2Fc"
    matrix = echoed(send(probe, "echoMatrix", {"value": {"k": "v", "x": "y;z"}}))
    assert matrix["raw_path"] == "/test/echo/matrix/;k=v;x=y%3Bz"
    simple = echoed(send(probe, "echoSimpleObject", {"value": {"k": "v", "x": "1,2"}}))
    assert simple["raw_path"] == "/test/echo/simple/k,v,x,1%2C2"
    assert echoed(send(probe, "echoNumber", {"value": 42}))["raw_path"] == "/test/echo/n/42"


def test_query_styles_form_space_pipe_deep_object_and_reserved(probe: tuple[OpenApiCatalog, HttpTransport]) -> None:
    args = {
        "plain": "a&b=c#d",
        "list": ["x", "y z"],
        "csv": ["1", "2"],
        "spaced": ["s", "t"],
        "piped": ["p", "q"],
        "obj": {"ok": "1"},
        "flat": {"f": "g"},
        "deep": {"author": "Le Guin", "year": "1969"},
        "reserved": "a/b:c?d&e=f#g[h]",
        "flag": True,
    }
    got = echoed(send(probe, "echoQuery", args))
    assert got["query_string"] == (
        "plain=a%26b%3Dc%23d&list=x&list=y%20z&csv=1,2&spaced=s%20t&piped=p%7Cq&ok=1&flat=f,g"
        "&deep%5Bauthor%5D=Le%20Guin&deep%5Byear%5D=1969&reserved=a/b:c?d%26e%3Df%23g%5Bh%5D&flag=true"
    )
    assert urlsplit(probe[1].build(probe[0].get("echoQuery"), args).url).query == got["query_string"]  # sent as built
    assert ["plain", "a&b=c#d"] in got["query"] and ["deep[author]", "Le Guin"] in got["query"]
    assert ["spaced", "s t"] in got["query"] and ["piped", "p|q"] in got["query"]
    for name, value in (("csv", ["1", "2,3"]), ("spaced", ["s t"]), ("piped", ["q|r"])):
        refused("ambiguous_parameter_value", send, probe, "echoQuery", {name: value})


def test_a_header_argument_cannot_add_or_split_a_header(
    probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer
) -> None:
    got = echoed(send(probe, "echoHeader", {"X-Note": "hello world", "X-List": ["a", "b"]}))
    assert got["headers"]["x-note"] == "hello world" and got["headers"]["x-list"] == "a,b"
    hits = api.state.hits
    for bad in ("a\r\nX-Evil: 1", "a\nX-Evil: 1", "a\rb", "nul\x00", "tab\there", "caf\u00e9", "\u2028"):
        error = refused("invalid_header_value", send, probe, "echoHeader", {"X-Note": bad})
        assert error.details == {"operation": "echoHeader", "argument": "X-Note"}
    refused("invalid_header_value", send, probe, "echoHeader", {"X-List": ["ok", "x\r\ny"]})
    assert api.state.hits == hits  # nothing was sent


def test_a_header_argument_may_not_name_a_header_the_transport_owns(
    api: ApiServer, transports: list[HttpTransport]
) -> None:
    for header in ("Cookie", "Host", "Proxy-Authorization", "Transfer-Encoding", "Content-Length", "traceparent"):
        doc = {
            "openapi": "3.0.3",
            "info": {"title": "t", "version": "1"},
            "servers": [{"url": api.origin}],
            "paths": {
                "/test/echo/x": {
                    "get": {
                        "operationId": "sneaky",
                        "parameters": [{"name": header, "in": "header", "schema": {"type": "string"}}],
                        "responses": {"200": {"description": "ok"}},
                    }
                }
            },
        }
        transport = HttpTransport([api.origin], allow_http_loopback=True)
        transports.append(transport)
        refused("forbidden_header", transport.send, compile_openapi(doc).get("sneaky"), {header: "x"}, None, context())
    assert api.state.hits == 0


def test_a_cookie_argument_cannot_add_a_cookie(probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer) -> None:
    got = echoed(send(probe, "echoCookie", {"session": "abc123", "prefs": ["dark", "compact"]}))
    assert got["cookies"] == {"session": "abc123", "prefs": "dark,compact"}
    hits = api.state.hits
    for bad in ("a; admin=1", "a,admin=1", "a\r\nX-Evil: 1", "with space", 'q"uote', "back\\slash", "caf\u00e9"):
        refused("invalid_cookie_value", send, probe, "echoCookie", {"session": bad})
    refused("invalid_cookie_value", send, probe, "echoCookie", {"prefs": ["a", "b,c"]})
    assert api.state.hits == hits


def test_a_json_body_is_sent_canonically_and_bounded(
    probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer, transports: list[HttpTransport]
) -> None:
    got = echoed(send(probe, "echoBody", {"body": {"b": "ü", "a": [1, 2.5, None]}}))
    assert got["body"] == '{"a":[1,2.5,null],"b":"ü"}'
    assert got["headers"]["content-type"] == "application/json"
    small = HttpTransport([api.origin], allow_http_loopback=True, max_request_bytes=1024)
    transports.append(small)
    hits = api.state.hits
    error = refused(
        "request_too_large", small.send, probe[0].get("echoBody"), {"body": {"x": "y" * 2000}}, None, context()
    )
    assert error.details == {"operation": "echoBody", "field": "body", "max_bytes": 1024}
    refused(
        "invalid_request_body", small.send, probe[0].get("echoBody"), {"body": {"x": float("nan")}}, None, context()
    )
    assert api.state.hits == hits


# ---- responses -----------------------------------------------------------------------------------------------------


def test_a_redirect_is_returned_as_its_status_and_never_followed(
    probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer
) -> None:
    result = send(probe, "redirect", {})
    assert result["status"] == 302 and result["body"] is None
    assert api.state.hits == 1  # the redirect only; nothing went to its Location


def test_a_response_over_the_bound_is_refused(api: ApiServer, transports: list[HttpTransport]) -> None:
    transport = HttpTransport([api.origin], allow_http_loopback=True, max_response_bytes=64 * 1024)
    transports.append(transport)
    op = catalog_for(api.origin).get("huge")
    assert transport.send(op, {"bytes": 1000}, None, context())["body"] == {"pad": "x" * 1000}
    started = time.monotonic()
    error = refused("response_too_large", transport.send, op, {"bytes": 50 * 1024 * 1024}, None, context())
    assert error.details == {"operation": "huge", "origin": api.origin, "max_bytes": 64 * 1024}
    assert time.monotonic() - started < 5  # stopped reading at the bound, not after 50 MiB


def test_a_slow_or_trickling_server_times_out_within_the_bound(api: ApiServer, transports: list[HttpTransport]) -> None:
    transport = HttpTransport([api.origin], allow_http_loopback=True, timeout_s=0.5)
    transports.append(transport)
    catalog = catalog_for(api.origin)
    for name in ("slow", "trickle"):
        started = time.monotonic()
        error = refused("http_timeout", transport.send, catalog.get(name), {}, None, context())
        assert time.monotonic() - started < 2.0, name
        assert error.details == {"operation": name, "origin": api.origin}


def test_text_binary_broken_json_and_error_statuses(probe: tuple[OpenApiCatalog, HttpTransport]) -> None:
    assert send(probe, "text", {}) == {
        "status": 200,
        "content_type": "text/plain; charset=utf-8",
        "body": "plain words\n",
    }
    assert send(probe, "binary", {}) == {
        "status": 200,
        "content_type": "image/png",
        "bytes": 264,
        "body_omitted": "unsupported_response_type",
    }
    refused("invalid_response_body", send, probe, "badJson", {})
    assert send(probe, "teapot", {}) == {
        "status": 418,
        "content_type": "application/json",
        "body": {"message": "short and stout"},
    }


@pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")
def test_tls_is_verified_and_a_failure_is_tls_error(tls_api: ApiServer, transports: list[HttpTransport]) -> None:
    catalog = catalog_for(tls_api.origin)
    strict = HttpTransport([tls_api.origin])
    lax = HttpTransport([tls_api.origin], verify_tls=False)
    transports.extend([strict, lax])
    error = refused("tls_error", strict.send, catalog.get("teapot"), {}, None, context())
    assert error.details == {"operation": "teapot", "origin": tls_api.origin}
    assert lax.send(catalog.get("teapot"), {}, None, context())["status"] == 418


def test_an_unreachable_server_fails_without_the_url_or_headers(transports: list[HttpTransport]) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        origin = f"http://127.0.0.1:{sock.getsockname()[1]}"
    transport = HttpTransport([origin], allow_http_loopback=True)
    transports.append(transport)
    error = refused(
        "http_unreachable",
        transport.send,
        catalog_for(origin).get("echoQuery"),
        {"plain": "private-value"},
        None,
        context(),
    )
    assert error.details == {"operation": "echoQuery", "origin": origin}
    assert "private-value" not in str(error) and "?" not in str(error)


def test_the_call_traceparent_is_sent(probe: tuple[OpenApiCatalog, HttpTransport]) -> None:
    traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    got = echoed(send(probe, "echoOpen", {}, traceparent=traceparent))
    assert got["headers"]["traceparent"] == traceparent
    assert "traceparent" not in echoed(send(probe, "echoOpen", {}))["headers"]


# ---- credentials ---------------------------------------------------------------------------------------------------


def bound(catalog: OpenApiCatalog, **sources: Any) -> AuthBroker:
    return AuthBroker(sources).bind(catalog.security_schemes)


def test_api_keys_go_into_their_header_query_and_cookie_and_win_over_arguments(
    probe: tuple[OpenApiCatalog, HttpTransport],
) -> None:
    header, query, cookie = new_secret("hk"), new_secret("qk"), new_secret("ck")
    broker = bound(probe[0], headerKey=Fixed(Secret(header)), queryKey=Fixed(Secret(query)))
    got = echoed(send(probe, "echoKeyed", {"X-Api-Key": "from-the-model"}, broker))
    assert got["headers"]["x-api-key"] == header
    assert [k for k, _ in got["headers"].items() if k == "x-api-key"] == ["x-api-key"]
    assert got["query"] == [["key", query]]
    got = echoed(send(probe, "echoKeyed", {}, bound(probe[0], cookieKey=Fixed(Secret(cookie)))))
    assert got["cookies"] == {"ck": cookie} and "x-api-key" not in got["headers"]


def test_bearer_and_openid_connect_send_an_authorization_header(probe: tuple[OpenApiCatalog, HttpTransport]) -> None:
    token = new_secret("tok")
    got = echoed(
        send(probe, "echoKeyed", {}, bound(probe[0], bearer=Fixed(Secret(token)), cookieKey=Fixed(Secret("c1"))))
    )
    assert got["headers"]["authorization"] == f"Bearer {token}" and got["cookies"] == {}  # the first alternative
    got = echoed(send(probe, "echoOidc", {}, bound(probe[0], oidc=Fixed(Secret(token)))))
    assert got["headers"]["authorization"] == f"Bearer {token}"


def test_an_operation_without_a_usable_credential_fails_before_sending(
    probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer
) -> None:
    error = refused(
        "no_credential_for_operation", send, probe, "echoKeyed", {}, bound(probe[0], queryKey=Fixed(Secret("q1x2y3")))
    )
    assert error.details == {"operation": "echoKeyed", "schemes": ["bearer", "cookieKey", "headerKey", "queryKey"]}
    refused("no_credential_for_operation", send, probe, "echoKeyed", {}, None)
    assert api.state.hits == 0
    # An empty alternative allows anonymous access; the first alternative that can be served wins.
    assert "x-api-key" not in echoed(send(probe, "echoOpen", {}, None))["headers"]
    key = new_secret("hk")
    assert (
        echoed(send(probe, "echoOpen", {}, bound(probe[0], headerKey=Fixed(Secret(key)))))["headers"]["x-api-key"]
        == key
    )


def test_a_source_answering_a_dict_returns_it_without_sending(
    probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer
) -> None:
    pause = {"status": "credential_required", "scheme": "bearer"}
    assert send(probe, "echoKeyed", {}, bound(probe[0], bearer=Fixed(pause))) == pause
    assert api.state.hits == 0


def test_an_unbound_broker_says_so(probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer) -> None:
    broker = AuthBroker({"headerKey": Fixed(Secret("hk-123456"))})
    refused("auth_broker_not_bound", send, probe, "echoKeyed", {}, broker)
    assert api.state.hits == 0


def test_broker_refuses_unknown_and_unsupported_schemes_at_bind(probe: tuple[OpenApiCatalog, HttpTransport]) -> None:
    with pytest.raises(ConfigError) as unknown:
        bound(probe[0], petstore_auth=Fixed(Secret("tok123")))
    assert unknown.value.reason == "unknown_security_scheme"
    assert unknown.value.details["schemes"] == ["petstore_auth"]
    with pytest.raises(ConfigError) as basic:
        bound(probe[0], basic=Fixed(Secret("user:pass")))
    assert basic.value.reason == "unsupported_security_scheme" and basic.value.details["scheme"] == "basic"


def test_a_credential_that_cannot_be_sent_is_refused_without_showing_it(
    probe: tuple[OpenApiCatalog, HttpTransport], api: ApiServer
) -> None:
    bad = "line1-secret\r\nX-Evil: 1"
    for scheme in ("headerKey", "bearer"):
        sources = {scheme: Fixed(Secret(bad)), "queryKey": Fixed(Secret("q1x2y3"))}
        error = refused("invalid_credential", send, probe, "echoKeyed", {}, bound(probe[0], **sources))
        assert "line1-secret" not in repr(error) and "line1-secret" not in str(error.details)
    refused("invalid_credential", send, probe, "echoKeyed", {}, bound(probe[0], cookieKey=Fixed(Secret("a;b=c"))))
    assert api.state.hits == 0


def test_no_secret_reaches_the_log_even_at_debug(
    probe: tuple[OpenApiCatalog, HttpTransport], caplog: pytest.LogCaptureFixture
) -> None:
    header, token = new_secret("hk"), new_secret("tok")
    with caplog.at_level(logging.DEBUG):
        send(probe, "echoOpen", {}, bound(probe[0], headerKey=Fixed(Secret(header))))
        send(probe, "echoOidc", {}, bound(probe[0], oidc=Fixed(Secret(token))))
        with pytest.raises(ToolError):
            send(probe, "echoKeyed", {}, bound(probe[0], bearer=Fixed(Secret(token + "\n"))))
    assert caplog.records  # urllib3 did log the requests
    assert header not in caplog.text and token not in caplog.text


# ---- hypothesis: no argument moves the request or splits a header ------------------------------------------------

ORIGIN = "https://api.example.com:8443"
HYPO = catalog_for(ORIGIN)
HYPO_TRANSPORT = HttpTransport([ORIGIN], server_url=ORIGIN + "/base")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(path=st.text(min_size=1), query=st.text(), listed=st.lists(st.text(), max_size=3), header=st.text())
def test_no_argument_string_changes_the_origin_path_or_headers(
    path: str, query: str, listed: list[str], header: str
) -> None:
    built = HYPO_TRANSPORT.build(HYPO.get("echoPath"), {"value": path})
    parts = urlsplit(built.url)
    assert built.origin == ORIGIN and HYPO_TRANSPORT.check_origin(HYPO.get("echoPath"), built.url) == ORIGIN
    assert parts.path.startswith("/base/test/echo/p/") and "/" not in parts.path.removeprefix("/base/test/echo/p/")
    assert not parts.query and not parts.fragment
    segment = parts.path.removeprefix("/base/test/echo/p/")
    assert segment not in (".", "..") and all(c.isascii() and c.isprintable() and c != " " for c in segment)

    built = HYPO_TRANSPORT.build(HYPO.get("echoQuery"), {"plain": query, "list": listed})
    parts = urlsplit(built.url)
    assert built.origin == ORIGIN and parts.path == "/base/test/echo/q" and not parts.fragment
    assert len(parts.query.split("&")) == 1 + len(listed)

    try:
        built = HYPO_TRANSPORT.build(HYPO.get("echoHeader"), {"X-Note": header, "X-List": listed})
    except ToolError as exc:
        assert exc.reason == "invalid_header_value"
        assert any(not (" " <= c <= "~") for c in header + "".join(listed))
    else:
        for _name, value in built.headers:
            assert not set(value) & {"\r", "\n", "\x00"} and value.isascii() and value.isprintable()
