"""Our A2A 1.0 client against a server built with the official ``a2a-sdk`` (``official_server.py``) on 127.0.0.1:
discovery and its refusals, every JSON-RPC method, streams and their bounds, a multi-turn ``input-required``
exchange, just-in-time auth that never leaks, fail-closed schemes, redirects, deadlines and cancellation."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from actor_tests.a2a.official_server import OfficialA2aServer
from adk_actors.a2a import client as a2a
from adk_actors.a2a.client import A2aClient, AgentCard, discover
from adk_actors.errors import A2aError
from adk_actors.runtime.cancel import CancelToken

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def server() -> Iterator[OfficialA2aServer]:
    with OfficialA2aServer() as running:
        yield running


@pytest.fixture
def client(server: OfficialA2aServer) -> Iterator[A2aClient]:
    with A2aClient(discover(server.url, allow_http_loopback=True), allow_http_loopback=True) as made:
        yield made


def refused(reason: str, call: Any, *args: Any, **kwargs: Any) -> A2aError:
    with pytest.raises(A2aError) as caught:
        call(*args, **kwargs)
    assert caught.value.reason == reason, caught.value
    return caught.value


def poll_state(client: A2aClient, task_id: str, state: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        task = client.get(task_id)
        if task["status"]["state"] == state or time.monotonic() > deadline:
            return task
        time.sleep(0.02)


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [next(iter(e)) for e in events]


# -- discovery ---------------------------------------------------------------------------------------------------


def test_discover_reads_the_card_and_picks_the_jsonrpc_interface(server: OfficialA2aServer) -> None:
    card = discover(server.url, allow_http_loopback=True)
    assert (card.name, card.origin, card.rpc_url, card.streaming) == (
        "official-echo",
        server.url,
        server.url + "/",
        True,
    )
    assert card.raw["version"] == "1.0.0" and card.skills[0]["id"] == "echo"
    assert card.security_schemes == {} and card.security_requirements == []
    assert discover(server.url + "/.well-known/agent-card.json", allow_http_loopback=True) == card
    assert server.seen[-1].path == "/.well-known/agent-card.json"


def test_discover_refuses_a_cross_origin_interface_unless_its_origin_is_allowed() -> None:
    with OfficialA2aServer(interface_url="http://127.0.0.2:9/rpc") as other:
        err = refused("cross_origin_interface", discover, other.url, allow_http_loopback=True)
        assert err.details["origin"] == "http://127.0.0.2:9"
        card = discover(other.url, allow_http_loopback=True, allowed_interface_origins=["http://127.0.0.2:9"])
        assert card.rpc_url == "http://127.0.0.2:9/rpc"


def test_discover_refuses_clear_http_unless_loopback_and_allowed(server: OfficialA2aServer) -> None:
    refused("insecure_url", discover, server.url)  # loopback, but no opt-in
    refused("insecure_url", discover, "http://example.com", allow_http_loopback=True)
    refused("insecure_url", discover, "http://10.0.0.1:8080", allow_http_loopback=True)
    refused("invalid_url", discover, "ftp://127.0.0.1/", allow_http_loopback=True)
    refused("invalid_url", discover, "https://user:pw@example.com")
    refused("invalid_url", discover, server.url + "/some/path", allow_http_loopback=True)
    assert server.seen == []


def test_discover_refuses_an_oversized_card(server: OfficialA2aServer) -> None:
    err = refused("a2a_response_too_large", discover, server.url, allow_http_loopback=True, max_card_bytes=200)
    assert err.details["limit"] == 200


def test_a_card_without_a_jsonrpc_1_0_interface_or_a_name_is_refused() -> None:
    raw: dict[str, Any] = {
        "name": "x",
        "supportedInterfaces": [{"url": "https://a.example/", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
    }
    refused("no_jsonrpc_interface", a2a.parse_card, raw, origin="https://a.example")
    raw["supportedInterfaces"][0].update(protocolBinding="JSONRPC", protocolVersion="0.3")
    refused("no_jsonrpc_interface", a2a.parse_card, raw, origin="https://a.example")
    raw["supportedInterfaces"][0]["protocolVersion"] = "1.0"
    assert a2a.parse_card(raw, origin="https://a.example").rpc_url == "https://a.example/"
    err = refused("invalid_agent_card", a2a.parse_card, {**raw, "name": ""}, origin="https://a.example")
    assert err.details["field"] == "name"


# -- the methods -------------------------------------------------------------------------------------------------


def test_send_blocks_until_the_task_completes(client: A2aClient) -> None:
    task = client.send("hello")["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"] == [{"text": "echo: hello"}]


def test_send_return_immediately_then_get_polls_the_task_to_completion(
    server: OfficialA2aServer, client: A2aClient
) -> None:
    task = client.send("slow", return_immediately=True)["task"]
    assert task["status"]["state"] in ("TASK_STATE_SUBMITTED", "TASK_STATE_WORKING")
    server.release()
    done = poll_state(client, task["id"], "TASK_STATE_COMPLETED")
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    assert done["artifacts"][0]["parts"][0]["text"] == "echo: slow"
    assert len(client.get(task["id"], history_length=0).get("history", [])) == 0


def test_stream_yields_the_task_then_its_updates_and_ends_at_completed(client: A2aClient) -> None:
    with client.stream("hi") as events:
        seen = list(events)
    assert kinds(seen) == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]
    assert seen[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert seen[2]["artifactUpdate"]["artifact"]["parts"] == [{"text": "echo: hi"}]
    assert seen[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"


def test_subscribe_to_a_running_task_follows_it_to_completion(server: OfficialA2aServer, client: A2aClient) -> None:
    task = client.send("slow", return_immediately=True)["task"]
    with client.subscribe(task["id"]) as events:
        first = next(events)
        assert first["task"]["id"] == task["id"]
        assert first["task"]["status"]["state"] == "TASK_STATE_WORKING"
        server.release()
        rest = list(events)
    assert kinds(rest) == ["artifactUpdate", "statusUpdate"]
    assert rest[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
    refused("unsupported_operation", client.subscribe, task["id"])  # a terminal task has nothing to follow


def test_list_returns_the_tasks_and_refuses_unknown_filters(client: A2aClient) -> None:
    ids = {client.send(text)["task"]["id"] for text in ("one", "two")}
    listed = client.list()
    assert ids <= {t["id"] for t in listed["tasks"]} and listed["totalSize"] >= 2
    completed = client.list(status="TASK_STATE_COMPLETED", page_size=1)
    assert len(completed["tasks"]) == 1 and completed["nextPageToken"]
    refused("invalid_filter", client.list, state="TASK_STATE_COMPLETED")
    refused("invalid_filter", client.list, status="completed")  # the 0.3 spelling


def test_cancel_a_running_task_then_again_is_task_not_cancelable(client: A2aClient) -> None:
    task = client.send("slow", return_immediately=True)["task"]
    assert client.cancel(task["id"])["status"]["state"] == "TASK_STATE_CANCELED"
    assert client.get(task["id"])["status"]["state"] == "TASK_STATE_CANCELED"
    err = refused("task_not_cancelable", client.cancel, task["id"])
    assert err.details["code"] == -32002


def test_an_unknown_task_is_task_not_found_everywhere(client: A2aClient) -> None:
    for call in (client.get, client.cancel, client.subscribe):
        assert refused("task_not_found", call, "no-such-task").details["code"] == -32001
    refused("task_not_found", client.send, "hi", task_id="no-such-task")
    refused("invalid_id", client.get, "")


def test_a_multi_turn_input_required_exchange(client: A2aClient) -> None:
    asked = client.send("ask")["task"]
    assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert asked["status"]["message"]["parts"] == [{"text": "what is your name?"}]
    done = client.send("Ada", task_id=asked["id"], context_id=asked["contextId"])["task"]
    assert (done["id"], done["status"]["state"]) == (asked["id"], "TASK_STATE_COMPLETED")
    assert done["artifacts"][0]["parts"] == [{"text": "hello, Ada"}]
    with client.stream("ask") as events:  # a stream ends at the interruption
        seen = list(events)
    assert seen[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"


def test_a_message_dict_is_validated_before_sending(server: OfficialA2aServer, client: A2aClient) -> None:
    message = {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "dict"}]}
    assert client.send(message)["task"]["artifacts"][0]["parts"][0]["text"] == "echo: dict"
    calls = len(server.rpc_calls)
    refused("pre_1_0_role", client.send, {**message, "role": "user"})
    refused("pre_1_0_part", client.send, {**message, "parts": [{"kind": "text", "text": "x"}]})
    refused("invalid_message", client.send, {**message, "contextId": "a"}, context_id="b")
    assert len(server.rpc_calls) == calls


def test_the_module_functions_discover_then_call(server: OfficialA2aServer) -> None:
    result = a2a.send(server.url, "direct", allow_http_loopback=True, timeout_s=10)
    task_id = result["task"]["id"]
    assert a2a.get(server.url, task_id, allow_http_loopback=True)["status"]["state"] == "TASK_STATE_COMPLETED"
    with a2a.stream(server.url, "streamed", allow_http_loopback=True) as events:
        assert kinds(list(events))[-1] == "statusUpdate"
    refused("task_not_cancelable", a2a.cancel, server.url, task_id, allow_http_loopback=True)


def test_a_card_without_streaming_refuses_streaming_calls_before_sending() -> None:
    with OfficialA2aServer(streaming=False) as plain:
        with A2aClient(discover(plain.url, allow_http_loopback=True), allow_http_loopback=True) as made:
            refused("streaming_not_supported", made.stream, "hi")
            refused("streaming_not_supported", made.subscribe, "t-1")
            assert plain.rpc_calls == []


# -- auth ----------------------------------------------------------------------------------------------------------


def test_auth_is_called_for_every_request_and_its_tokens_never_leak(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    numbers = itertools.count(1)
    issued: list[str] = []

    def rotating() -> dict[str, str]:
        token = f"secret-token-{next(numbers)}"
        issued.append(token)
        return {"Authorization": f"Bearer {token}"}

    with OfficialA2aServer(bearer={f"secret-token-{i}" for i in range(1, 6)}) as secured:
        card = discover(secured.url, allow_http_loopback=True)
        assert card.security_schemes == {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}}
        assert card.security_requirements == [{"schemes": {"bearer": {}}}]
        with A2aClient(card, auth=rotating, auth_scheme="bearer", allow_http_loopback=True) as made:
            task_id = made.send("hi")["task"]["id"]
            made.get(task_id)
            not_found = refused("task_not_found", made.get, "no-such-task")
            assert issued == ["secret-token-1", "secret-token-2", "secret-token-3"]
            assert [s.authorization for s in secured.rpc_calls] == [f"Bearer {t}" for t in issued]
            assert secured.seen[0].path.startswith("/.well-known/") and secured.seen[0].authorization is None
            for _ in range(2):
                made.get(task_id)  # tokens 4 and 5
            rejected = refused("a2a_http_error", made.get, task_id)  # token 6 is not accepted
            assert rejected.details["status"] == 401 and len(issued) == 6
    for err in (not_found, rejected):
        shown = f"{err!r} {err} {err.details} {err.to_dict()}"
        assert "secret-token" not in shown and "Bearer" not in shown
    # The client side's records (ours, requests, urllib3); the in-process peer's own (``a2a.*``) log its headers.
    client_side = [r.getMessage() for r in caplog.records if not r.name.startswith("a2a.")]
    assert any("urllib3" in r.name for r in caplog.records) and not any("secret-token" in m for m in client_side)


def test_a_secured_card_fails_closed_without_a_declared_scheme() -> None:
    def headers() -> dict[str, str]:
        return {"Authorization": "Bearer secret-token-1"}

    with OfficialA2aServer(bearer={"secret-token-1"}) as secured:
        card = discover(secured.url, allow_http_loopback=True)
        opts: dict[str, Any] = {"allow_http_loopback": True}
        refused("undeclared_auth_scheme", A2aClient, card, auth=headers, auth_scheme="oidc", **opts)
        refused("undeclared_auth_scheme", A2aClient, card, auth=headers, **opts)
        refused("undeclared_auth_scheme", A2aClient, card, **opts)
        refused("missing_auth", A2aClient, card, auth_scheme="bearer", **opts)
        with A2aClient(card, auth=lambda: {"X-Api-Key": "k"}, auth_scheme="bearer", **opts) as wrong_header:
            refused("invalid_auth_headers", wrong_header.send, "hi")
        with A2aClient(card, auth=lambda: {"A2A-Version": "0.3"}, auth_scheme="bearer", **opts) as reserved:
            refused("invalid_auth_headers", reserved.send, "hi")

        def broken() -> dict[str, str]:
            raise RuntimeError("vault said: secret-token-1 expired")

        with A2aClient(card, auth=broken, auth_scheme="bearer", **opts) as failing:
            err = refused("auth_failed", failing.send, "hi")
            assert "secret-token" not in f"{err} {err.details}" and err.__cause__ is None
        assert secured.rpc_calls == []
    with OfficialA2aServer() as open_server:  # credentials are not sent to an agent that declares no scheme
        card = discover(open_server.url, allow_http_loopback=True)
        refused("undeclared_auth_scheme", A2aClient, card, auth=headers, allow_http_loopback=True)


# -- transport bounds ----------------------------------------------------------------------------------------------


def test_a_redirecting_endpoint_is_not_followed() -> None:
    with OfficialA2aServer(redirect_rpc=True) as moved:
        card = discover(moved.url, allow_http_loopback=True)
        assert card.rpc_url == moved.url + "/moved"
        with A2aClient(card, allow_http_loopback=True) as made:
            err = refused("a2a_http_error", made.send, "hi")
        assert err.details["status"] == 307
        assert [s.path for s in moved.rpc_calls] == ["/moved"]


def test_oversized_responses_and_streams_are_bounded(server: OfficialA2aServer) -> None:
    card = discover(server.url, allow_http_loopback=True)
    with A2aClient(card, allow_http_loopback=True, max_response_bytes=4096) as small:
        assert refused("a2a_response_too_large", small.send, "big 8000").details["limit"] == 4096
        with small.stream("big 8000") as events:
            assert kinds([next(events), next(events)]) == ["task", "statusUpdate"]
            refused("a2a_response_too_large", next, events)
        assert small.send("big 1000")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    with A2aClient(card, allow_http_loopback=True, max_events=2) as few:
        with few.stream("hi") as events:
            assert len([next(events), next(events)]) == 2
            assert refused("a2a_too_many_events", next, events).details["limit"] == 2


def test_a_call_past_its_deadline_fails_with_a2a_timeout(server: OfficialA2aServer, client: A2aClient) -> None:
    started = time.monotonic()
    refused("a2a_timeout", client.send, "slow", timeout_s=0.3)
    assert time.monotonic() - started < 5
    server.release()
    assert client.send("after")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"  # the client is still usable


def test_a_cancel_token_aborts_the_request_in_flight(server: OfficialA2aServer, client: A2aClient) -> None:
    token = CancelToken()
    outcome: list[BaseException] = []

    def blocking_send() -> None:
        try:
            client.send("slow", cancel=token)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=blocking_send)
    worker.start()
    assert server.wait_slow_started()
    started = time.monotonic()
    token.cancel()
    worker.join(10)
    assert not worker.is_alive() and time.monotonic() - started < 5
    assert isinstance(outcome[0], A2aError) and outcome[0].reason == "cancelled"
    refused("cancelled", client.send, "hi", cancel=token)  # an already cancelled token sends nothing


def test_an_agent_card_pickles_and_compares_by_value(server: OfficialA2aServer) -> None:
    import pickle

    card = discover(server.url, allow_http_loopback=True)
    assert pickle.loads(pickle.dumps(card)) == card
    assert isinstance(card, AgentCard)
