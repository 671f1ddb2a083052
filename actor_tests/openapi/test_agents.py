"""OpenAPI tools in agents, end to end: the Gemini emulator scripts a model that calls Petstore operations, the
agent runs the tool in the node's worker processes, and the request goes over real HTTP to the test API with the
caller's API key from an encrypted SQLite credential store, or an OAuth 2.0 token from the node's token service.
The model receives the API's answer; nothing the model was sent holds a credential."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from actor_tests.agents.conftest import Spawner
from actor_tests.openapi.conftest import (
    APP,
    LIBRARY_TEXT,
    PETSTORE_TEXT,
    USER,
    config_for,
    function_responses,
    probe_document,
    unique,
)
from actor_tests.openapi.petstore_api import LIBRARY, PETSTORE, ApiServer
from adk_actors import Runner, prompt, runs
from adk_actors.auth import AuthCodeProvider, AuthorizationFlows, JwtPolicy, OAuthClient, TokenService
from adk_actors.auth.credentials import CredentialScope, SqlCredentialStore
from adk_actors.devtools.oauth_issuer import IssuerClient, OAuthIssuer, follow_authorize
from adk_actors.emulator import Emulator
from adk_actors.openapi import AuthBroker, ClientCredentials, StoredCredential, UserAuthorization, openapi_toolset
from adk_actors.runtime.system import ActorSystemHandle
from adk_actors.sessions.actor import ActorSessionService
from adk_actors.tools import Toolset

pytestmark = pytest.mark.timeout(90)


def call_then_echo(name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A script: the model calls ``name(args)`` once, then answers with the tool's response text."""
    return {
        "rules": [
            {"when": {"has_function_response": False}, "respond": {"function_calls": [{"name": name, "args": args}]}},
            {"when": {"has_function_response": True}, "respond": {"text": "done: {response_text}"}},
        ]
    }


def last_function_response(emu: Emulator) -> dict[str, Any]:
    responses = function_responses(emu.requests[-1])
    assert len(responses) == 1
    return responses[0]


@pytest.fixture
def pets(api: ApiServer, store: SqlCredentialStore) -> Iterator[Toolset]:
    """The Petstore toolset, its API key stored for (APP, USER) in a SQLite store that the workers open by URL."""
    store.put(CredentialScope(app=APP, user=USER), "petstore-key", api.state.api_key)
    toolset = openapi_toolset(
        PETSTORE_TEXT,
        allowed_hosts=[api.origin],
        server_url=api.origin + PETSTORE,
        allow_http_loopback=True,
        exclude=["uploadFile"],
        auth=AuthBroker({"api_key": StoredCredential(store, "petstore-key")}),
    )
    yield toolset


def test_a_runner_turn_calls_get_pet_by_id_over_http_and_the_model_gets_the_pet(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, svc: ActorSessionService, api: ApiServer, pets: Toolset
) -> None:
    emu.set_script(call_then_echo("getPetById", {"petId": 1}))
    name = unique("PetAgent")
    spawn(name, config_for(emu), [pets])
    hits = api.state.hits
    answer = Runner(name, APP, svc, system=system).run(USER, unique("s"), "What is pet 1?")
    assert "doggie" in str(answer)
    response = last_function_response(emu)
    assert response["name"] == "getPetById"
    assert response["response"] == {"status": 200, "content_type": "application/json", "body": api.state.pets[1]}
    assert api.state.hits == hits + 1
    seen = json.dumps(emu.requests)
    assert api.state.api_key not in seen


def test_a_turn_without_a_caller_scope_gets_credential_missing_and_nothing_is_sent(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, api: ApiServer, pets: Toolset
) -> None:
    emu.set_script(call_then_echo("getInventory", {}))
    name = unique("PetPrompt")
    spawn(name, config_for(emu), [pets])
    prompt(name, "How many pets are there?", timeout=30, system=system)
    assert last_function_response(emu)["response"] == {"error": {"reason": "credential_missing", "type": "ToolError"}}
    assert api.state.hits == 0
    assert api.state.api_key not in json.dumps(emu.requests)


def test_a_path_escape_by_the_model_stays_in_its_segment(
    system: ActorSystemHandle, emu: Emulator, spawn: Spawner, api: ApiServer
) -> None:
    probe = openapi_toolset(
        probe_document(api.origin), allowed_hosts=[api.origin], allow_http_loopback=True, include=["echoPath"]
    )
    emu.set_script(call_then_echo("echoPath", {"value": "../../api/v3/store/inventory"}))
    name = unique("PetEscape")
    spawn(name, config_for(emu), [probe])
    prompt(name, "go", timeout=30, system=system)
    body = last_function_response(emu)["response"]["body"]
    assert body["raw_path"] == "/test/echo/p/%2E%2E%2F%2E%2E%2Fapi%2Fv3%2Fstore%2Finventory"


def test_an_oauth2_token_from_the_node_token_service_in_a_worker(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,
    api: ApiServer,
    store: SqlCredentialStore,
) -> None:
    client = OAuthClient(
        token_url=api.origin + "/oauth/token",
        client_id="pets",
        client_secret=store.put(CredentialScope(app=APP), "pets-client-secret", api.state.client_secret),
        allow_http_loopback=True,
    )
    tokens = TokenService.start(store, system=system, name=unique("adk.tokens"))
    try:
        toolset = openapi_toolset(
            PETSTORE_TEXT,
            allowed_hosts=[api.origin],
            server_url=api.origin + PETSTORE,
            allow_http_loopback=True,
            include=["findPetsByStatus"],
            auth=AuthBroker({"petstore_auth": ClientCredentials(client, tokens)}),
        )
        emu.set_script(call_then_echo("findPetsByStatus", {"status": "available"}))
        name = unique("PetOAuth")
        spawn(name, config_for(emu), [toolset])
        runner = Runner(name, APP, svc, system=system)
        for _ in range(2):
            runner.run(USER, unique("s"), "Which pets are available?")
            response = last_function_response(emu)["response"]
            assert [p["name"] for p in response["body"]] == ["doggie", "rex"]
        assert api.state.token_requests == 1  # one token for both turns, node-wide
        assert api.state.bearer not in json.dumps(emu.requests)
        assert api.state.client_secret not in json.dumps(emu.requests)
    finally:
        tokens.stop(system=system)


def test_a_users_sign_in_pauses_the_run_and_the_resumed_call_carries_the_users_token(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,
    api: ApiServer,
    store: SqlCredentialStore,
) -> None:
    """``petstore_auth`` (oauth2) served by :class:`UserAuthorization`: the first call pauses for the sign-in (no
    request reaches the API), the application completes the code flow at a real OAuth server, the resumed call
    sends the user's access token, which the API verifies against the issuer's JWKS."""
    redirect = "http://127.0.0.1:9/callback"
    clients = {"pets": IssuerClient(client_id="pets", client_secret=api.state.client_secret, redirect_uris=(redirect,))}
    with OAuthIssuer(clients=clients, users=("alice",), audience="https://pets.test") as issuer:
        policy = JwtPolicy(
            issuer=issuer.url,
            audience="https://pets.test",
            jwks_url=issuer.jwks_uri,
            token_types=("at+jwt",),
            allow_http_loopback=True,
        )
        api.state.bearer_check = lambda token: policy.verify(token).subject == "alice"
        secret = store.put(CredentialScope(app=APP), "pets-client-secret", api.state.client_secret)
        provider = AuthCodeProvider(
            name=unique("pets"),
            authorization_url=issuer.authorization_endpoint,
            token_url=issuer.token_endpoint,
            client_id="pets",
            client_secret=secret,
            redirect_uri=redirect,
            allowed_scopes=("read:pets",),
            default_scopes=("read:pets",),
            allow_http_loopback=True,
        )
        flows = AuthorizationFlows.start(store, [provider], system=system, name=unique("flows"))
        tokens = TokenService.start(store, system=system, name=unique("tokens"))
        try:
            toolset = openapi_toolset(
                PETSTORE_TEXT,
                allowed_hosts=[api.origin],
                server_url=api.origin + PETSTORE,
                allow_http_loopback=True,
                include=["findPetsByStatus"],
                auth=AuthBroker({"petstore_auth": UserAuthorization(flows, provider.name, tokens=tokens)}),
            )
            emu.set_script(call_then_echo("findPetsByStatus", {"status": "available"}))
            name = unique("PetSignIn")
            spawn(name, config_for(emu), [toolset])
            runner = Runner(name, APP, svc, system=system)
            sid = unique("s")
            hits = api.state.hits
            paused = runner.run(USER, sid, "Which pets are available?")
            assert isinstance(paused, runs.Paused) and api.state.hits == hits
            pause = paused.event.actions.pause
            assert pause is not None and pause.reason == "credential"
            assert pause.details["function_name"] == "findPetsByStatus" and pause.details["provider"] == provider.name

            uri = flows.authorization_uri(pause.details["flow_ref"], CredentialScope(app=APP, user=USER), system=system)
            code, state = follow_authorize(uri.reveal())
            answer = flows.complete(state, code, system=system)
            done = runner.resume(USER, sid, pause.continuation_id, answer)
            assert "doggie" in str(done) and api.state.hits == hits + 1
            response = last_function_response(emu)["response"]
            assert [p["name"] for p in response["body"]] == ["doggie", "rex"]
            seen = json.dumps(emu.requests)
            for secret_value in (state, api.state.client_secret, *issuer.secrets_issued()):
                assert secret_value not in seen
        finally:
            flows.stop(system=system)
            tokens.stop(system=system)


def test_a_runner_turn_calls_an_operation_of_the_31_document_with_a_bearer_token(
    system: ActorSystemHandle,
    emu: Emulator,
    spawn: Spawner,
    svc: ActorSessionService,
    api: ApiServer,
    store: SqlCredentialStore,
) -> None:
    """The 3.1 lending-library document: the model lists books by year (a ``deepObject`` query) with the caller's
    bearer token from the store; the model gets the books, never the token."""
    store.put(CredentialScope(app=APP, user=USER), "library-token", api.state.bearer)
    library = openapi_toolset(
        LIBRARY_TEXT,
        allowed_hosts=[api.origin],
        server_url=api.origin + LIBRARY,
        allow_http_loopback=True,
        include=["listBooks"],
        auth=AuthBroker({"bearer": StoredCredential(store, "library-token")}),
    )
    emu.set_script(call_then_echo("listBooks", {"filter": {"year": 2018}, "pageSize": 5}))
    name = unique("Librarian")
    spawn(name, config_for(emu), [library])
    Runner(name, APP, svc, system=system).run(USER, unique("s"), "Which books are from 2018?")
    response = last_function_response(emu)["response"]
    assert response["status"] == 200
    assert sorted(b["title"] for b in response["body"]) == ["Effective Java", "Eloquent JavaScript"]
    assert api.state.bearer not in json.dumps(emu.requests)
