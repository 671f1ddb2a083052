"""Our A2A 1.0 server against the official ``a2a-sdk`` client, over real HTTP on 127.0.0.1: card discovery, blocking
and streaming sends, get, list, cancel, subscribe and resubscribe, a multi-turn ``input-required`` exchange (a
confirmation pause), work that outlives a dropped client, the task deadline, the store's bounds, bearer auth with
cross-principal isolation, and bad input (0.3 forms, versions, methods, hypothesis over JSON-RPC bodies) that always
gets the protocol's error code with our reason and changes nothing."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from a2a.client import ClientConfig, create_client
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actor_tests.agents.conftest import Spawner, config_for
from adk_actors import FunctionTool, Runner
from adk_actors.emulator import Emulator
from adk_actors.errors import ConfigError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.web import start_in_thread
from adk_actors.web.a2a_server import A2A_PATH, A2aApp, A2aLimits, a2a_app, agent_card

pytestmark = pytest.mark.timeout(90)

SLOW_MS = 60_000
SCRIPT = {
    "rules": [
        {"when": {"user_text_contains": "slow"}, "respond": {"text": "finally", "delay_ms": SLOW_MS}},
        {"when": {"user_text_contains": "pause", "has_function_response": False},
         "respond": {"function_calls": [{"name": "publish", "args": {"target": "prod"}}]}},
        {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}},
        {"when": {}, "respond": {"text": "echo: {user_text}"}},
    ]
}  # fmt: skip


def publish(target: str) -> dict[str, Any]:
    """Publish to a target (needs approval)."""
    return {"published": target}


class Served:
    def __init__(self, app: A2aApp, url: str, system: ActorSystemHandle) -> None:
        self.app = app
        self.system = system
        self.url = url
        self.rpc = url + A2A_PATH

    def call(self, method: str, params: Any, *, headers: dict[str, str] | None = None, rid: Any = 1) -> Any:
        body = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        sent = {"A2A-Version": "1.0", **(headers or {})}
        return requests.post(self.rpc, json=body, headers=sent, timeout=30)


def message(text: str, **extra: Any) -> dict[str, Any]:
    return {"messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": text}], **extra}


def sdk_message(text: str, **extra: Any) -> Message:
    return Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)], **extra)


@pytest.fixture
def serve(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, svc: ActorSessionService
) -> Iterator[Callable[..., Served]]:
    emu.set_script(SCRIPT)
    started: list[Any] = []

    def make(limits: A2aLimits | None = None, auth: Any = None, card: dict[str, Any] | None = None) -> Served:
        name = f"A2a_{uuid.uuid4().hex[:8]}"
        spawn(name, config_for(emu), [FunctionTool(publish, requires_confirmation=True)])
        runner = Runner(name, "a2a_tests", svc, system=system)
        app = a2a_app(system, runner=runner, card=None, limits=limits, auth=auth)
        server = start_in_thread(app)
        started.append(server)
        app.set_card(card or agent_card(name="Echo", description="Echoes text", url=server.url + A2A_PATH))
        return Served(app, server.url, system)

    yield make
    for server in started:
        server.stop()


def until(condition: Callable[[], Any], what: str, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


# ---- the official client ---------------------------------------------------------------------------------------


async def roundtrip(url: str, streaming: bool) -> list[str]:
    client = await create_client(url, client_config=ClientConfig(streaming=streaming))
    async with client:
        kinds, last = [], None
        async for event in client.send_message(SendMessageRequest(message=sdk_message("hello"))):
            kind = event.WhichOneof("payload")
            kinds.append(kind)
            last = getattr(event, kind)
        task_id = last.id if kinds[-1] == "task" else last.task_id
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "echo: hello"
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="does-not-exist"))
        listed = await client.list_tasks(ListTasksRequest())
        assert task_id in [t.id for t in listed.tasks]
        return kinds


@pytest.mark.anyio
async def test_the_official_client_streams_and_blocks_against_our_server(serve: Callable[..., Served]) -> None:
    served = serve()
    kinds = await roundtrip(served.url, streaming=True)
    assert kinds == ["task", "status_update", "artifact_update", "status_update"]
    assert await roundtrip(served.url, streaming=False) == ["task"]


@pytest.mark.anyio
async def test_the_official_client_subscribes_to_a_running_task_and_cancels_it(serve: Callable[..., Served]) -> None:
    served = serve()
    client = await create_client(served.url, client_config=ClientConfig(streaming=False))
    async with client:
        request = SendMessageRequest(
            message=sdk_message("a slow one"), configuration=SendMessageConfiguration(return_immediately=True)
        )
        [event] = [e async for e in client.send_message(request)]
        task_id = event.task.id
        assert event.task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
    streaming = await create_client(served.url)
    async with streaming:
        seen: list[str] = []
        async for item in streaming.subscribe(SubscribeToTaskRequest(id=task_id)):
            seen.append(item.WhichOneof("payload"))
            if len(seen) == 1:  # the snapshot arrived: cancel from another connection while subscribed
                cancelled = served.call("CancelTask", {"id": task_id}).json()["result"]
                assert cancelled["status"]["state"] == "TASK_STATE_CANCELED"
        assert seen == ["task", "status_update"]
        task = await streaming.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await streaming.cancel_task(CancelTaskRequest(id=task_id))
    run_id = served.app.store.tasks[task_id].run_id
    from adk_actors import runs

    assert type(runs.wait(run_id, 20, system=served.system)).__name__ == "Cancelled"  # the node's run too


@pytest.mark.anyio
async def test_a_multi_turn_input_required_exchange_resumes_the_paused_run(serve: Callable[..., Served]) -> None:
    served = serve()
    client = await create_client(served.url, client_config=ClientConfig(streaming=False))
    async with client:
        [first] = [e async for e in client.send_message(SendMessageRequest(message=sdk_message("pause please")))]
        task = first.task
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        question = task.status.message
        assert "publish needs your approval" in question.parts[0].text
        pause = question.parts[1].data.struct_value["pause"]
        assert pause["reason"] == "tool_confirmation" and pause["details"]["function_name"] == "publish"
        answer = sdk_message("yes", task_id=task.id, context_id=task.context_id)
        [second] = [e async for e in client.send_message(SendMessageRequest(message=answer))]
        assert second.task.status.state == TaskState.TASK_STATE_COMPLETED
        assert second.task.artifacts[0].parts[0].text == "Tool said: prod"
    refused = served.call("SendMessage", {"message": message("again", taskId=task.id)}).json()["error"]
    assert refused["code"] == -32004 and refused["data"][0]["metadata"]["reason"] == "task_terminal"


# ---- lifecycle ---------------------------------------------------------------------------------------------------


def test_a_client_that_disconnects_neither_owns_nor_cancels_its_task(serve: Callable[..., Served]) -> None:
    served = serve(A2aLimits(task_timeout_s=30))
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendStreamingMessage", "params": {"message": message("hi there")}}
    with requests.post(served.rpc, json=body, headers={"A2A-Version": "1.0"}, stream=True, timeout=30) as stream:
        first = next(stream.iter_lines())
    assert first.startswith(b"id: 0")
    task_id = next(iter(served.app.store.tasks))
    done = until(lambda: served.call("GetTask", {"id": task_id}).json()["result"], "the task")
    done = until(
        lambda: (
            (r := served.call("GetTask", {"id": task_id}).json()["result"])["status"]["state"] == "TASK_STATE_COMPLETED"
            and r
        ),
        "the task to complete after the client left",
    )
    assert done["artifacts"][0]["parts"][0]["text"] == "echo: hi there"


def test_a_task_past_its_deadline_is_failed_and_its_run_cancelled(serve: Callable[..., Served]) -> None:
    served = serve(A2aLimits(task_timeout_s=0.5))
    result = served.call("SendMessage", {"message": message("slow please")}).json()["result"]["task"]
    assert result["status"]["state"] == "TASK_STATE_FAILED"
    assert result["status"]["message"]["parts"][1]["data"] == {"reason": "task_timeout"}
    from adk_actors import runs

    run_id = served.app.store.tasks[result["id"]].run_id
    assert type(runs.wait(run_id, 20, system=served.system)).__name__ == "Cancelled"


def test_store_bounds_refuse_with_reasons_and_keep_what_exists(serve: Callable[..., Served]) -> None:
    served = serve(A2aLimits(max_active=1, max_subscribers_per_task=1))
    slow = served.call("SendMessage", {"message": message("slow"), "configuration": {"returnImmediately": True}})
    task_id = slow.json()["result"]["task"]["id"]
    busy = served.call("SendMessage", {"message": message("another")}).json()["error"]
    assert busy["code"] == -32603 and busy["data"][0]["metadata"]["reason"] == "too_many_active_tasks"
    with requests.post(
        served.rpc,
        json={"jsonrpc": "2.0", "id": 2, "method": "SubscribeToTask", "params": {"id": task_id}},
        headers={"A2A-Version": "1.0"},
        stream=True,
        timeout=30,
    ) as held:
        lines = held.iter_lines()  # kept: dropping the generator would close the connection
        assert next(lines).startswith(b"id: ")
        second = served.call("SubscribeToTask", {"id": task_id}).json()["error"]
        assert second["data"][0]["metadata"]["reason"] == "too_many_subscribers"
    assert served.call("CancelTask", {"id": task_id}).json()["result"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert len(served.app.store.tasks) == 1


def test_list_tasks_pages_newest_first_and_filters(serve: Callable[..., Served]) -> None:
    served = serve()
    ids = [served.call("SendMessage", {"message": message(f"n{i}")}).json()["result"]["task"]["id"] for i in range(3)]
    page = served.call("ListTasks", {"pageSize": 2}).json()["result"]
    assert [t["id"] for t in page["tasks"]] == ids[::-1][:2] and page["totalSize"] == 3
    assert "artifacts" not in page["tasks"][0]
    rest = served.call("ListTasks", {"pageSize": 2, "pageToken": page["nextPageToken"]}).json()["result"]
    assert [t["id"] for t in rest["tasks"]] == [ids[0]] and rest["nextPageToken"] == ""
    done = served.call("ListTasks", {"status": "TASK_STATE_COMPLETED", "includeArtifacts": True}).json()["result"]
    assert done["totalSize"] == 3 and done["tasks"][0]["artifacts"][0]["parts"][0]["text"] == "echo: n2"


# ---- bad input ---------------------------------------------------------------------------------------------------


def error_of(response: requests.Response) -> tuple[int, str]:
    assert response.status_code == 200, response.text
    error = response.json()["error"]
    return error["code"], error["data"][0]["metadata"]["reason"]


def test_0_3_forms_versions_methods_and_ids_are_refused_with_the_protocols_codes(serve: Callable[..., Served]) -> None:
    served = serve()
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message("hi")}}
    missing = requests.post(served.rpc, json=body, timeout=10)
    assert error_of(missing) == (-32009, "version_not_supported") and missing.json()["id"] == 1
    assert error_of(served.call("SendMessage", body["params"], headers={"A2A-Version": "0.3"})) == (
        -32009,
        "version_not_supported",
    )
    assert error_of(served.call("message/send", body["params"])) == (-32601, "pre_1_0_method")
    assert error_of(served.call("Nope", {})) == (-32601, "method_not_found")
    kind = {"message": {**message("x"), "parts": [{"kind": "text", "text": "hi"}]}}
    assert error_of(served.call("SendMessage", kind)) == (-32602, "pre_1_0_part")
    role = {"message": {**message("x"), "role": "user"}}
    assert error_of(served.call("SendMessage", role)) == (-32602, "pre_1_0_role")
    assert error_of(served.call("ListTasks", {"status": "completed"})) == (-32602, "pre_1_0_state")
    huge = {"message": message("x" * (600 * 1024))}
    assert error_of(served.call("SendMessage", huge)) == (-32602, "message_too_large")
    assert error_of(served.call("GetTask", {"id": "nope"})) == (-32001, "task_not_found")
    assert error_of(served.call("CancelTask", {"id": "nope"})) == (-32001, "task_not_found")
    assert error_of(served.call("CreateTaskPushNotificationConfig", {})) == (-32003, "push_not_supported")
    other = {"message": message("x", taskId="nope")}
    assert error_of(served.call("SendMessage", other)) == (-32001, "task_not_found")
    assert served.app.store.tasks == {}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
        max_leaves=12,
    ),
    method=st.sampled_from(["SendMessage", "GetTask", "ListTasks", "CancelTask", "SubscribeToTask", "x"]),
)
def test_any_json_rpc_body_gets_a_protocol_answer_never_a_crash_and_creates_nothing(
    hypothesis_served: Served, body: Any, method: str
) -> None:
    for sent in (body, {"jsonrpc": "2.0", "id": 1, "method": method, "params": body}):
        answer = requests.post(hypothesis_served.rpc, json=sent, headers={"A2A-Version": "1.0"}, timeout=10)
        assert answer.status_code == 200
        reply = answer.json()
        if "result" in reply:  # a well-formed read (ListTasks with empty or ignorable params)
            assert method == "ListTasks" and reply["result"]["tasks"] == []
            continue
        error = reply["error"]
        assert error["code"] in (-32600, -32601, -32602, -32001) and error["data"][0]["metadata"]["reason"]
    assert hypothesis_served.app.store.tasks == {}


@pytest.fixture
def hypothesis_served(serve: Callable[..., Served]) -> Served:
    return serve()


# ---- auth ----------------------------------------------------------------------------------------------------------


def test_bearer_auth_isolates_principals_and_refuses_forged_tokens(serve: Callable[..., Served]) -> None:
    from adk_actors.auth import JwtPolicy
    from adk_actors.devtools.oauth_issuer import IssuerClient, OAuthIssuer

    clients = {
        name: IssuerClient(client_id=name, client_secret="s" * 24, grants=("client_credentials",))
        for name in ("alice", "bob")
    }
    with OAuthIssuer(clients=clients, audience="https://a2a.test") as issuer:
        policy = JwtPolicy(issuer=issuer.url, audience="https://a2a.test", jwks_url=issuer.jwks_uri,
                           allow_http_loopback=True)  # fmt: skip

        def token(client_id: str) -> str:
            answer = requests.post(issuer.token_endpoint, data={"grant_type": "client_credentials",
                                   "client_id": client_id, "client_secret": "s" * 24}, timeout=10)  # fmt: skip
            return str(answer.json()["access_token"])

        card = agent_card(
            name="Secure",
            description="needs a token",
            url="http://127.0.0.1:1" + A2A_PATH,
            security_schemes={"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
            security_requirements=[{"schemes": {"bearer": {"list": []}}}],
        )
        served = serve(auth=policy, card=card)
        alice = {"Authorization": "Bearer " + token("alice")}
        bob = {"Authorization": "Bearer " + token("bob")}
        created = served.call("SendMessage", {"message": message("mine")}, headers=alice).json()["result"]["task"]
        # Bob sees Alice's task exactly as an unknown one, whatever he tries.
        for method in ("GetTask", "CancelTask", "SubscribeToTask"):
            assert error_of(served.call(method, {"id": created["id"]}, headers=bob)) == (-32001, "task_not_found")
        assert served.call("ListTasks", {}, headers=bob).json()["result"]["tasks"] == []
        resumed = {"message": message("again", taskId=created["id"])}
        assert error_of(served.call("SendMessage", resumed, headers=bob)) == (-32001, "task_not_found")
        assert requests.post(served.rpc, json={}, headers={"A2A-Version": "1.0"}, timeout=10).status_code == 401
        forged = {"Authorization": "Bearer " + "e30." * 2 + "x"}
        assert served.call("GetTask", {"id": created["id"]}, headers=forged).status_code == 401
        assert served.call("GetTask", {"id": created["id"]}, headers=alice).json()["result"]["id"] == created["id"]
        stored = served.app.store.tasks[created["id"]]
        assert len(stored.scope) == 64 and "alice" not in json.dumps(served.app.tasks())


# ---- resubscribe and serving ------------------------------------------------------------------------------------


def sse_events(response: requests.Response) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(id, result)`` of each SSE event of an A2A stream."""
    ident = -1
    for line in response.iter_lines():
        if line.startswith(b"id: "):
            ident = int(line[4:])
        elif line.startswith(b"data: "):
            yield ident, json.loads(line[6:])["result"]


def test_a_resubscribe_with_last_event_id_replays_only_what_followed(serve: Callable[..., Served]) -> None:
    served = serve()
    paused = served.call("SendMessage", {"message": message("pause now")}).json()["result"]["task"]
    assert paused["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"  # events 1 (working) and 2 (input-required)
    task = served.app.store.tasks[paused["id"]]
    answer = {"message": message("yes", taskId=paused["id"])}
    assert served.call("SendMessage", answer).json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    seqs = [seq for seq, _ in task.events]
    assert seqs == [1, 2, 3, 4, 5]  # working, input-required, working, artifact, completed
    # The task has ended: a subscription is refused; before it ended, a reconnect after event 2 got 3.. only.
    assert error_of(served.call("SubscribeToTask", {"id": paused["id"]})) == (-32004, "task_terminal")
    replayed, sub = served.app.store.subscribe(task, after_seq=2)
    assert [seq for seq, _ in replayed] == [3, 4, 5]
    served.app.store.unsubscribe(task, sub)


def test_subscribing_to_a_working_task_with_last_event_id_resumes_after_it(serve: Callable[..., Served]) -> None:
    served = serve()
    started = served.call("SendMessage", {"message": message("slow"), "configuration": {"returnImmediately": True}})
    task_id = started.json()["result"]["task"]["id"]
    body = {"jsonrpc": "2.0", "id": 5, "method": "SubscribeToTask", "params": {"id": task_id}}
    headers = {"A2A-Version": "1.0", "Last-Event-ID": "0"}
    with requests.post(served.rpc, json=body, headers=headers, stream=True, timeout=30) as stream:
        events = sse_events(stream)
        first = next(events)
        assert first[1]["task"]["status"]["state"] == "TASK_STATE_WORKING"  # the snapshot
        replayed = next(events)  # the WORKING update (event 1), replayed from the retained window
        assert replayed[0] == 1 and replayed[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_WORKING"
        served.call("CancelTask", {"id": task_id})
        last = next(events)
        assert last[0] == 2 and last[1]["statusUpdate"]["status"]["state"] == "TASK_STATE_CANCELED"
        assert next(events, None) is None  # the stream closed at the terminal state
    bad = served.call("SubscribeToTask", {"id": task_id}, headers={"Last-Event-ID": "x"})
    assert error_of(bad)[0] in (-32004, -32602)


def test_a_public_listener_needs_an_opt_in_auth_and_tls(
    serve: Callable[..., Served], tmp_path: Any, system: ActorSystemHandle
) -> None:
    from actor_tests.openapi.petstore_api import self_signed
    from adk_actors.web.a2a_server import check_public_serving, serve_a2a

    served = serve()
    cert, key = self_signed(tmp_path)
    with pytest.raises(ConfigError) as opt_in:
        check_public_serving(served.app, "0.0.0.0", allow_public=False, tls=None, trusted_tls_proxy=False)
    assert opt_in.value.reason == "a2a_public_bind_not_allowed"
    with pytest.raises(ConfigError) as no_auth:
        check_public_serving(
            served.app, "10.0.0.5", allow_public=True, tls=(str(cert), str(key)), trusted_tls_proxy=False
        )
    assert no_auth.value.reason == "a2a_public_requires_auth"
    from adk_actors.auth import JwtPolicy

    policy = JwtPolicy(issuer="https://idp.example", audience="a2a", jwks_url="https://idp.example/jwks")
    secured = a2a_app(system, runner=served.app.runner, card=None, auth=policy)  # nothing is fetched here
    with pytest.raises(ConfigError) as no_tls:
        check_public_serving(secured, "10.0.0.5", allow_public=True, tls=None, trusted_tls_proxy=False)
    assert no_tls.value.reason == "a2a_public_requires_tls"
    check_public_serving(secured, "10.0.0.5", allow_public=True, tls=None, trusted_tls_proxy=True)
    with pytest.raises(ConfigError) as unreadable:
        serve_a2a(served.app, tls=(str(tmp_path / "nope.pem"), str(key)))
    assert unreadable.value.reason == "tls_unreadable"
    # Direct TLS on loopback: the card over https, verified against the self-signed certificate.
    server = serve_a2a(served.app, tls=(str(cert), str(key)))
    try:
        assert server.url.startswith("https://127.0.0.1:")
        card = requests.get(server.url + "/.well-known/agent-card.json", verify=str(cert), timeout=10)
        assert card.status_code == 200 and card.json()["name"] == "Echo"
        with pytest.raises(requests.exceptions.SSLError):
            requests.get(server.url + "/.well-known/agent-card.json", timeout=10)  # unverified: refused
    finally:
        server.stop()
