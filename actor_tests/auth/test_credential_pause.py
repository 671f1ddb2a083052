"""Credential pauses end to end, against a real OAuth 2.0 / OIDC server on 127.0.0.1: a tool in a worker process
begins an authorization-code + PKCE flow through the node's flow manager and suspends; the Runner pauses with no
secret in the pause; the application completes the flow at its callback (code exchange with the verifier, id_token
signature, audience and nonce checked) and resumes; the tool runs again and calls the API with a token from the
node's token service. Single use, wrong state, cancellation, expiry, mixed-up flows and the off-Runner path fail
closed; the token service is single flight node-wide and a crash of it loses no stored credential."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
import requests

from actor_tests.runner.conftest import read_events, unique
from adk_actors import FunctionTool, Runner, prompt, request_credential, runs
from adk_actors.auth import (
    AuthCodeProvider,
    AuthorizationFlows,
    CredentialScope,
    OAuthClient,
    SqlCredentialStore,
    TokenService,
)
from adk_actors.auth.flow import refresh_credential_name
from adk_actors.devtools.oauth_issuer import IssuerClient, OAuthIssuer, follow_authorize
from adk_actors.errors import ActorCrashed, AdkError, AuthError, RunError, ToolError, ValidationError
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import ToolContext

pytestmark = pytest.mark.timeout(90)

APP = "credential_pause_tests"
USER = "u1"
CLIENT_SECRET = "crm-client-secret-7f3a9c"
REDIRECT = "http://127.0.0.1:9/callback"
CALENDAR = {
    "when": {"user_text_contains": "calendar", "has_function_response": False},
    "respond": {"function_calls": [{"name": "read_calendar", "args": {"day": "monday"}}]},
}
AFTER_TOOL = {"when": {"has_function_response": True}, "respond": {"text": "Tool said: {response_text}"}}
SCRIPT = {"rules": [CALENDAR, AFTER_TOOL]}


@pytest.fixture
def issuer() -> Iterator[OAuthIssuer]:
    clients = {
        "crm": IssuerClient(
            client_id="crm",
            client_secret=CLIENT_SECRET,
            redirect_uris=(REDIRECT,),
            grants=("authorization_code", "refresh_token", "client_credentials"),
        )
    }
    with OAuthIssuer(clients=clients, users=("alice", "bob")) as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> SqlCredentialStore:
    return SqlCredentialStore(f"sqlite:///{tmp_path / 'credentials.db'}")


@pytest.fixture
def provider(issuer: OAuthIssuer, store: SqlCredentialStore) -> AuthCodeProvider:
    secret = store.put(CredentialScope(app=APP), "crm-client-secret", CLIENT_SECRET)
    return AuthCodeProvider(
        name=unique("calendar"),
        authorization_url=issuer.authorization_endpoint,
        token_url=issuer.token_endpoint,
        client_id="crm",
        client_secret=secret,
        redirect_uri=REDIRECT,
        allowed_scopes=("openid", "calendar.read"),
        default_scopes=("openid", "calendar.read"),
        issuer=issuer.url,
        jwks_url=issuer.jwks_uri,
        allow_http_loopback=True,
    )


@pytest.fixture
def services(
    system: ActorSystemHandle, store: SqlCredentialStore, provider: AuthCodeProvider
) -> Iterator[tuple[AuthorizationFlows, TokenService]]:
    flows = AuthorizationFlows.start(store, [provider], system=system, name=unique("flows"))
    tokens = TokenService.start(store, system=system, name=unique("tokens"))
    yield flows, tokens
    flows.stop(system=system)
    tokens.stop(system=system)


def calendar_tool(
    flows: AuthorizationFlows,
    tokens: TokenService,
    provider: str,
    userinfo: str,
    scope: CredentialScope | None = None,
) -> FunctionTool:
    """``read_calendar(day)``: asks for the user's credential until a flow completed, then calls the API with a
    token from the node's token service (runs in a worker process: the handles are names only). The credential
    belongs to the session's app and user, or to ``scope`` when given."""

    def read_calendar(day: str, tool_context: ToolContext) -> dict[str, Any]:
        """Read the user's calendar for a day."""
        owner = scope or CredentialScope(app=tool_context.app_name, user=tool_context.user_id)
        client = flows.client_for(owner, provider)
        if client is None:
            return request_credential(flows.begin(owner, provider))
        token = tokens.access_token(client)
        answer = requests.get(userinfo, headers={"Authorization": "Bearer " + token.reveal()}, timeout=10)
        return {"day": day, "owner": answer.json()["sub"]}

    return FunctionTool(read_calendar)


@pytest.fixture
def runner(
    system: ActorSystemHandle,
    emu: Any,
    svc: ActorSessionService,
    agent_factory: Callable[..., str],
    services: tuple[AuthorizationFlows, TokenService],
    provider: AuthCodeProvider,
    issuer: OAuthIssuer,
) -> Runner:
    emu.set_script(SCRIPT)
    flows, tokens = services
    tool = calendar_tool(flows, tokens, provider.name, issuer.url + "/userinfo")
    return Runner(agent_factory("Calendar", [tool]), APP, svc, system=system)


def pause_of(result: Any) -> Any:
    assert isinstance(result, runs.Paused), f"expected a pause, got {result!r}"
    pause = result.event.actions.pause
    assert pause is not None
    return pause


def sign_in(flows: AuthorizationFlows, system: ActorSystemHandle, pause: Any, user: str = "alice") -> dict[str, str]:
    """The application's part: send the browser to the authorization URI, take the callback, complete the flow."""
    scope = CredentialScope(app=APP, user=USER)
    uri = flows.authorization_uri(pause.details["flow_ref"], scope, system=system).reveal()
    code, state = follow_authorize(uri + "&login_hint=" + user)
    return flows.complete(state, code, system=system)


def test_a_credential_pause_resumes_after_the_code_flow_and_the_tool_calls_the_api_with_the_users_token(
    system: ActorSystemHandle,
    runner: Runner,
    services: tuple[AuthorizationFlows, TokenService],
    svc: ActorSessionService,
    store: SqlCredentialStore,
    provider: AuthCodeProvider,
    issuer: OAuthIssuer,
) -> None:
    flows, _ = services
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "What is on my calendar?"))
    assert pause.reason == "credential"
    details = pause.details
    assert details["type"] == "credential_request" and details["function_name"] == "read_calendar"
    assert details["provider"] == provider.name and details["scopes"] == ["openid", "calendar.read"]
    assert details["pkce_method"] == "S256" and details["state_digest"].startswith("sha256:")
    assert details["flow_ref"].startswith("flow_")

    uri = flows.authorization_uri(details["flow_ref"], CredentialScope(app=APP, user=USER), system=system)
    query = parse_qs(urlsplit(uri.reveal()).query)
    assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
    assert query["nonce"][0] and query["redirect_uri"] == [REDIRECT]
    state = query["state"][0]

    answer = sign_in(flows, system, pause)
    assert answer == {"flow_ref": details["flow_ref"], "correlation_id": state}
    done = runner.resume(USER, sid, pause.continuation_id, answer)
    assert done == "Tool said: day: monday, owner: alice"
    assert issuer.token_requests.get("authorization_code") == 1 and issuer.token_requests.get("refresh_token") == 1

    stored = store.names(CredentialScope(app=APP, user=USER))
    assert refresh_credential_name(provider.name) in stored
    session_text = json.dumps([e.to_dict() for e in read_events(svc, APP, USER, sid)])
    for secret in (state, CLIENT_SECRET, *issuer.secrets_issued()):
        assert secret not in session_text

    with pytest.raises(RunError) as replay:
        runner.resume(USER, sid, pause.continuation_id, answer)
    assert replay.value.reason == "no_paused_invocation"
    with pytest.raises(AuthError) as again:
        flows.complete(state, "another-code", system=system)
    assert again.value.reason == "unknown_flow_state"


def test_a_resume_with_the_wrong_state_or_flow_consumes_nothing_and_the_right_one_still_works(
    system: ActorSystemHandle, runner: Runner, services: tuple[AuthorizationFlows, TokenService]
) -> None:
    flows, _ = services
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Read my calendar."))
    answer = sign_in(flows, system, pause)
    bad = [
        {"flow_ref": answer["flow_ref"], "correlation_id": "not-the-state"},
        {"flow_ref": "flow_" + "0" * 32, "correlation_id": answer["correlation_id"]},
        {"flow_ref": answer["flow_ref"]},
        {"confirmed": True},
        {"cancelled": False},
        "yes",
    ]
    for response in bad:
        with pytest.raises(ValidationError) as refused:
            runner.resume(USER, sid, pause.continuation_id, response)
        assert refused.value.reason == "invalid_resume_response"
        assert answer["correlation_id"] not in json.dumps(refused.value.to_dict())
    assert runner.resume(USER, sid, pause.continuation_id, answer) == "Tool said: day: monday, owner: alice"


def test_a_cancelled_sign_in_gives_the_model_a_structural_failure(runner: Runner) -> None:
    sid = unique("s")
    pause = pause_of(runner.run(USER, sid, "Read my calendar."))
    done = runner.resume(USER, sid, pause.continuation_id, {"cancelled": True})
    assert "credential_request_cancelled" in done


def test_a_callback_is_single_use_and_a_code_of_another_flow_fails_the_pkce_check(
    system: ActorSystemHandle, services: tuple[AuthorizationFlows, TokenService], provider: AuthCodeProvider
) -> None:
    flows, _ = services
    scope = CredentialScope(app=APP, user=unique("user"))
    first = flows.begin(scope, provider.name, system=system)
    second = flows.begin(scope, provider.name, system=system)
    code_a, state_a = follow_authorize(first.authorization_uri.reveal())
    assert state_a == first.correlation_id.reveal()
    # The attacker's mix-up: flow B's state with flow A's code. The server checks B's verifier against A's
    # challenge and refuses; flow B is consumed, flow A still completes once.
    with pytest.raises(AuthError) as mixed:
        flows.complete(second.correlation_id.reveal(), code_a, system=system)
    assert mixed.value.reason == "token_endpoint_refused" and mixed.value.details["oauth_error"] == "invalid_grant"
    with pytest.raises(AuthError) as consumed:
        flows.complete(second.correlation_id.reveal(), code_a, system=system)
    assert consumed.value.reason == "unknown_flow_state"
    # Flow A's code was spent by the failed exchange (codes are single use at the server): A fails closed too.
    with pytest.raises(AuthError):
        flows.complete(state_a, code_a, system=system)
    assert flows.client_for(scope, provider.name, system=system) is None


def test_cancel_expiry_and_bad_input_fail_closed(
    system: ActorSystemHandle, store: SqlCredentialStore, provider: AuthCodeProvider
) -> None:
    short = AuthCodeProvider(**{**_fields(provider), "name": unique("short"), "lifetime_s": 0.2})
    flows = AuthorizationFlows.start(store, [short], system=system, name=unique("flows"))
    try:
        scope = CredentialScope(app=APP, user=unique("user"))
        begun = flows.begin(scope, short.name, system=system)
        assert flows.cancel(begun.correlation_id.reveal(), system=system) is True
        assert flows.cancel(begun.correlation_id.reveal(), system=system) is False
        with pytest.raises(AuthError) as gone:
            flows.authorization_uri(begun.flow_ref, scope, system=system)
        assert gone.value.reason == "unknown_flow"

        late = flows.begin(scope, short.name, system=system)
        code, state = follow_authorize(late.authorization_uri.reveal())
        while time.time() <= late.expires_at:  # the flow's own expiry, not a fixed sleep
            time.sleep(0.02)
        with pytest.raises(AuthError) as expired:
            flows.complete(state, code, system=system)
        assert expired.value.reason == "flow_expired"

        for scopes, reason in ((("admin",), "scope_not_allowed"), ((), "invalid_scope")):
            with pytest.raises(AuthError) as refused:
                flows.begin(scope, short.name, scopes, system=system)
            assert refused.value.reason == reason
        with pytest.raises(AuthError) as unknown:
            flows.begin(scope, "nope", system=system)
        assert unknown.value.reason == "unknown_provider"
        for code_value in ("", "x" * 5000, "bad\ncode"):
            with pytest.raises(AuthError) as bad_code:
                flows.complete("some-state", code_value, system=system)
            assert bad_code.value.reason == "invalid_authorization_code"
    finally:
        flows.stop(system=system)


def _fields(provider: AuthCodeProvider) -> dict[str, Any]:
    return {name: getattr(provider, name) for name in AuthCodeProvider.__dataclass_fields__}


def test_an_id_token_from_another_issuer_is_refused_and_nothing_is_stored(
    system: ActorSystemHandle, store: SqlCredentialStore, provider: AuthCodeProvider
) -> None:
    wrong = AuthCodeProvider(**{**_fields(provider), "name": unique("wrongiss"), "issuer": "http://127.0.0.1:1/x"})
    flows = AuthorizationFlows.start(store, [wrong], system=system, name=unique("flows"))
    try:
        scope = CredentialScope(app=APP, user=unique("user"))
        begun = flows.begin(scope, wrong.name, system=system)
        code, state = follow_authorize(begun.authorization_uri.reveal())
        with pytest.raises(AuthError) as refused:
            flows.complete(state, code, system=system)
        assert refused.value.reason == "invalid_id_token" and refused.value.details["cause"] == "wrong_issuer"
        assert store.names(scope) == []
    finally:
        flows.stop(system=system)


def test_off_the_runner_a_credential_request_fails_closed(
    system: ActorSystemHandle,
    emu: Any,
    agent_factory: Callable[..., str],
    services: tuple[AuthorizationFlows, TokenService],
    provider: AuthCodeProvider,
    issuer: OAuthIssuer,
) -> None:
    emu.set_script(SCRIPT)
    flows, tokens = services
    scope = CredentialScope(app=APP, user=unique("user"))
    tool = calendar_tool(flows, tokens, provider.name, issuer.url + "/userinfo", scope)
    agent = agent_factory("OffRunnerCalendar", [tool])
    # Without a Runner there is no durable continuation: the flow begins, but the call fails closed.
    answer = prompt(agent, "Read my calendar.", system=system)
    assert answer == "Tool said: reason: credential_requires_runner, type: ToolError"


def test_request_credential_needs_a_begun_flow() -> None:
    with pytest.raises(ToolError) as refused:
        request_credential({"flow_ref": "flow_x"})
    assert refused.value.reason == "invalid_suspension"


# ---- the token service ------------------------------------------------------------------------------------------


def test_the_token_service_is_single_flight_across_callers_and_a_crash_keeps_every_stored_credential(
    system: ActorSystemHandle, store: SqlCredentialStore, issuer: OAuthIssuer
) -> None:
    secret = store.put(CredentialScope(app=APP), "crm-client-secret", CLIENT_SECRET)
    client = OAuthClient(
        token_url=issuer.token_endpoint,
        client_id="crm",
        client_secret=secret,
        scopes=("calendar.read",),
        allow_http_loopback=True,
    )
    tokens = TokenService.start(store, system=system, name=unique("tokens"))
    try:
        issuer.delay_token_s = 0.3  # keep the one request open while every caller arrives
        got: list[str] = []
        errors: list[BaseException] = []

        def call() -> None:
            try:
                got.append(tokens.access_token(client, system=system).reveal())
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert not errors and len(got) == 8 and len(set(got)) == 1
        assert issuer.token_requests.get("client_credentials") == 1
        issuer.delay_token_s = 0.0

        with pytest.raises(ActorCrashed):
            system.ask(tokens.name, _crash_request())
        fresh = tokens.access_token(client, system=system).reveal()  # restarted with an empty cache
        assert fresh != got[0] and issuer.token_requests.get("client_credentials") == 2
        assert store.get(secret).reveal() == CLIENT_SECRET
        tokens.revoke(client, system=system)
        assert tokens.access_token(client, system=system).reveal() not in (fresh, got[0])
    finally:
        tokens.stop(system=system)


def _crash_request() -> Any:
    from adk_actors.auth.service import GetAccessToken

    return GetAccessToken(client="not a client")  # type: ignore[arg-type]


def test_token_service_refusals_carry_no_secret(
    system: ActorSystemHandle, store: SqlCredentialStore, issuer: OAuthIssuer
) -> None:
    wrong = store.put(CredentialScope(app=APP), "wrong-secret", "not-the-secret-" + unique("x"))
    client = OAuthClient(
        token_url=issuer.token_endpoint, client_id="crm", client_secret=wrong, allow_http_loopback=True
    )
    tokens = TokenService.start(store, system=system, name=unique("tokens"))
    try:
        with pytest.raises(AdkError) as refused:
            tokens.access_token(client, system=system)
        assert refused.value.reason == "token_endpoint_refused"
        assert store.get(wrong).reveal() not in json.dumps(refused.value.to_dict())
    finally:
        tokens.stop(system=system)


def test_two_racing_callbacks_with_one_state_exchange_the_code_once(
    system: ActorSystemHandle,
    services: tuple[AuthorizationFlows, TokenService],
    provider: AuthCodeProvider,
    issuer: OAuthIssuer,
) -> None:
    flows, _ = services
    scope = CredentialScope(app=APP, user=unique("user"))
    begun = flows.begin(scope, provider.name, system=system)
    code, state = follow_authorize(begun.authorization_uri.reveal())
    issuer.delay_token_s = 0.3  # the first exchange is still in flight when the second callback arrives
    outcomes: list[Any] = []

    def callback() -> None:
        try:
            outcomes.append(flows.complete(state, code, system=system))
        except AuthError as err:
            outcomes.append(err.reason)

    threads = [threading.Thread(target=callback) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(map(str, outcomes)) == sorted(
        [str({"flow_ref": begun.flow_ref, "correlation_id": state}), "flow_already_used"]
    )
    assert issuer.token_requests.get("authorization_code") == 1
    assert flows.client_for(scope, provider.name, system=system) is not None
