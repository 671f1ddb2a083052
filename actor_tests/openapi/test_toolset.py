"""OpenAPI toolsets on real documents against the real test API: the Swagger Petstore 3.0 document (``uploadFile``
excluded) with an API key from an encrypted SQLite credential store and an OAuth 2.0 client-credentials token, and
the 3.1 lending-library document with bearer, cookie keys and anonymous operations. Build-time refusals
(servers off the allow-list, unknown or unsupported schemes, forbidden header parameters), the snapshot and
``refresh()``, confirmation and parallel-safety flags, and pickling for worker processes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cloudpickle
import pytest

from actor_tests.openapi.conftest import APP, LIBRARY_TEXT, PETSTORE_TEXT, SPECS, USER, context
from actor_tests.openapi.petstore_api import LIBRARY, PETSTORE, ApiServer
from adk_actors.auth import OAuthClient, TokenManager
from adk_actors.auth.credentials import CredentialScope, SqlCredentialStore
from adk_actors.errors import ConfigError, ToolError
from adk_actors.openapi import (
    AuthBroker,
    ClientCredentials,
    OpenApiTool,
    StoredCredential,
    compile_openapi,
    openapi_toolset,
)
from adk_actors.tools import Toolset

pytestmark = pytest.mark.timeout(60)

SCOPE = CredentialScope(app=APP, user=USER)


def tools_of(toolset: Toolset) -> dict[str, OpenApiTool]:
    return {t.name: t for t in toolset.tools}


def close(toolset: Toolset) -> None:
    for tool in toolset.tools:
        tool.transport.close()


@pytest.fixture
def pets(api: ApiServer, store: SqlCredentialStore) -> Iterator[Toolset]:
    """The Petstore toolset against the test API; the API key and the bearer token are stored for (APP, USER)."""
    store.put(SCOPE, "petstore-key", api.state.api_key)
    store.put(SCOPE, "petstore-token", api.state.bearer)
    toolset = openapi_toolset(
        SPECS / "petstore3.json",
        allowed_hosts=[api.origin],
        server_url=api.origin + PETSTORE,
        allow_http_loopback=True,
        exclude=["uploadFile"],
        auth=AuthBroker(
            {
                "api_key": StoredCredential(store, "petstore-key"),
                "petstore_auth": StoredCredential(store, "petstore-token"),
            }
        ),
    )
    yield toolset
    close(toolset)


def call(toolset: Toolset, name: str, args: dict[str, Any], **ctx: Any) -> Any:
    return tools_of(toolset)[name].execute(args, context(**ctx))


def test_every_petstore_operation_round_trips_against_the_api(pets: Toolset, api: ApiServer) -> None:
    assert pets.name == "Swagger Petstore - OpenAPI 3.0"
    assert len(pets.tools) == 18 and "uploadFile" not in tools_of(pets)
    pet = call(pets, "getPetById", {"petId": 1})
    assert pet == {"status": 200, "content_type": "application/json", "body": api.state.pets[1]}
    found = call(pets, "findPetsByStatus", {"status": "available"})
    assert [p["name"] for p in found["body"]] == ["doggie", "rex"]
    added = call(pets, "addPet", {"body": {"name": "nemo", "photoUrls": [], "status": "sold"}})
    assert added["status"] == 200 and added["body"]["id"] == 4
    updated = call(pets, "updatePet", {"body": {"id": 4, "name": "nemo", "photoUrls": [], "status": "available"}})
    assert updated["body"]["status"] == "available"
    assert call(pets, "deletePet", {"petId": 2}) == {"status": 200, "content_type": "", "body": None}
    assert call(pets, "getInventory", {})["body"] == {"available": 3}
    missing = call(pets, "getPetById", {"petId": 99})
    assert missing["status"] == 404 and missing["body"]["message"] == "Pet not found"  # a result, not an error
    everything = json.dumps([pet, found, added, updated, missing])
    assert api.state.api_key not in everything and api.state.bearer not in everything


def test_the_api_key_is_the_callers_own_and_a_missing_one_is_credential_missing(
    pets: Toolset, api: ApiServer, store: SqlCredentialStore
) -> None:
    store.put(CredentialScope(app=APP, user="u2"), "petstore-key", "someone-elses-key")
    assert call(pets, "getPetById", {"petId": 1}, user="u2")["status"] == 401  # u2's key, which the API refuses
    hits = api.state.hits
    for ctx in ({"user": "u3"}, {"app": "other"}, {"app": ""}):
        with pytest.raises(ToolError) as caught:
            call(pets, "getPetById", {"petId": 1}, **ctx)
        assert caught.value.reason == "credential_missing"
        assert caught.value.details == {"scheme": "api_key", "name": "petstore-key"}
    assert api.state.hits == hits


def test_a_fixed_scope_serves_every_caller(api: ApiServer, store: SqlCredentialStore) -> None:
    team = CredentialScope(app="pets-team")
    store.put(team, "key", api.state.api_key)
    toolset = openapi_toolset(
        PETSTORE_TEXT,
        allowed_hosts=[api.origin],
        server_url=api.origin + PETSTORE,
        allow_http_loopback=True,
        include=["getInventory"],
        auth=AuthBroker({"api_key": StoredCredential(store, "key", scope=team)}),
    )
    try:
        assert call(toolset, "getInventory", {}, app="", user="")["body"] == {"available": 2, "pending": 1}
    finally:
        close(toolset)


def test_an_operation_whose_schemes_have_no_source_fails_with_no_credential(
    api: ApiServer, store: SqlCredentialStore
) -> None:
    store.put(SCOPE, "petstore-key", api.state.api_key)
    toolset = openapi_toolset(
        PETSTORE_TEXT,
        allowed_hosts=[api.origin],
        server_url=api.origin + PETSTORE,
        allow_http_loopback=True,
        exclude=["uploadFile"],
        auth=AuthBroker({"api_key": StoredCredential(store, "petstore-key")}),
    )
    try:
        assert call(toolset, "getPetById", {"petId": 3})["body"]["name"] == "rex"
        with pytest.raises(ToolError) as caught:
            call(toolset, "findPetsByStatus", {"status": "available"})
        assert caught.value.reason == "no_credential_for_operation"
        assert caught.value.details == {"operation": "findPetsByStatus", "schemes": ["petstore_auth"]}
    finally:
        close(toolset)


def test_oauth2_client_credentials_come_from_the_token_manager(api: ApiServer, store: SqlCredentialStore) -> None:
    client = OAuthClient(
        token_url=api.origin + "/oauth/token",
        client_id="pets",
        client_secret=store.put(CredentialScope(app=APP), "pets-client-secret", api.state.client_secret),
        allow_http_loopback=True,
    )
    manager = TokenManager(store)
    toolset = openapi_toolset(
        PETSTORE_TEXT,
        allowed_hosts=[api.origin],
        server_url=api.origin + PETSTORE,
        allow_http_loopback=True,
        include=["findPetsByStatus", "addPet"],
        auth=AuthBroker({"petstore_auth": ClientCredentials(client, manager)}),
    )
    try:
        assert len(call(toolset, "findPetsByStatus", {"status": "available"})["body"]) == 2
        assert call(toolset, "addPet", {"body": {"name": "tom", "photoUrls": []}})["status"] == 200
        assert api.state.token_requests == 1  # one token, reused
        manager.revoke(client)
        api.state.client_secret = "rotated-elsewhere"
        with pytest.raises(ToolError) as caught:
            call(toolset, "findPetsByStatus", {"status": "available"})
        assert caught.value.reason == "credential_unavailable"
        assert caught.value.details == {"scheme": "petstore_auth", "cause": "token_endpoint_refused"}
    finally:
        close(toolset)


def test_the_31_library_api_with_bearer_cookie_key_and_anonymous_operations(
    api: ApiServer, store: SqlCredentialStore
) -> None:
    store.put(SCOPE, "library-token", api.state.bearer)
    store.put(SCOPE, "library-key", api.state.library_key)
    common: dict[str, Any] = {
        "allowed_hosts": [api.origin],
        "server_url": api.origin + LIBRARY,
        "allow_http_loopback": True,
    }
    bearer = openapi_toolset(
        LIBRARY_TEXT, auth=AuthBroker({"bearer": StoredCredential(store, "library-token")}), **common
    )
    keyed = openapi_toolset(
        LIBRARY_TEXT, auth=AuthBroker({"libraryKey": StoredCredential(store, "library-key")}), **common
    )
    anonymous = openapi_toolset(LIBRARY_TEXT, **common)
    try:
        assert sorted(tools_of(bearer)) == [
            "addBook",
            "borrow",
            "get_books_isbn",
            "listBooks",
            "listLoans",
            "updateBook",
        ]
        listed = call(bearer, "listBooks", {"pageSize": 1, "filter": {"year": 2018}, "X-Request-Id": "r-1"})
        assert listed["status"] == 200 and len(listed["body"]) == 1
        book = {"isbn": "9780441013593", "title": "Dune", "year": 1965}
        assert call(keyed, "addBook", {"body": book}) == {
            "status": 201,
            "content_type": "application/json",
            "body": book,
        }
        with pytest.raises(ToolError) as caught:
            call(keyed, "listBooks", {})  # the document's default security is bearer only
        assert caught.value.reason == "no_credential_for_operation"
        assert call(anonymous, "get_books_isbn", {"isbn": "9780441013593"})["body"]["title"] == "Dune"
        patched = call(bearer, "updateBook", {"isbn": "9780441013593", "body": {"subtitle": None, "title": "Dune!"}})
        assert patched["body"] == {"isbn": "9780441013593", "title": "Dune!", "year": 1965}
        assert call(bearer, "borrow", {"memberId": 7, "body": {"isbn": "9780441013593", "days": 7}})["status"] == 201
        loans = call(bearer, "listLoans", {"memberId": 7, "session": "s-1", "status": ["open", "late"]})["body"]
        assert loans == {
            "member": 7,
            "session": "s-1",
            "statuses": ["open", "late"],
            "loans": [{"isbn": "9780441013593", "days": 7, "status": "open"}],
        }
    finally:
        for toolset in (bearer, keyed, anonymous):
            close(toolset)


def test_build_refuses_servers_off_the_allow_list_and_unusable_configuration(
    api: ApiServer, store: SqlCredentialStore
) -> None:
    def build(source: Any = PETSTORE_TEXT, **options: Any) -> Toolset:
        options.setdefault("allowed_hosts", [api.origin])
        options.setdefault("allow_http_loopback", True)
        options.setdefault("exclude", ["uploadFile"])
        return openapi_toolset(source, **options)

    def reason(**options: Any) -> str:
        with pytest.raises(ConfigError) as caught:
            build(**options)
        return caught.value.reason

    assert reason() == "host_not_allowed"  # the document's server is petstore3.swagger.io
    assert len(build(allowed_hosts=["https://petstore3.swagger.io"]).tools) == 18
    assert reason(server_url="https://evil.example/api/v3") == "host_not_allowed"
    assert reason(server_url=api.origin + PETSTORE, auth=AuthBroker({"petstore": StoredCredential(store, "k")})) == (
        "unknown_security_scheme"
    )
    assert reason(allowed_hosts=["*.swagger.io"]) == "invalid_allowed_host"
    assert reason(server_url=api.origin + PETSTORE, prefix="bad prefix") == "invalid_value"
    assert reason(server_url=api.origin + PETSTORE, requires_confirmation=["nope"]) == "unknown_operation"
    doc = json.loads(PETSTORE_TEXT)
    doc["paths"]["/pet/{petId}"]["get"]["parameters"].append(
        {"name": "Proxy-Authorization", "in": "header", "schema": {"type": "string"}}
    )
    assert reason(source=doc, server_url=api.origin + PETSTORE) == "forbidden_header"
    assert len(build(doc, server_url=api.origin + PETSTORE, exclude=["uploadFile", "getPetById"]).tools) == 17
    relative = json.loads(LIBRARY_TEXT)
    relative["servers"] = [{"url": "/api/v2"}]
    with pytest.raises(ConfigError) as caught:
        openapi_toolset(relative, allowed_hosts=[api.origin], allow_http_loopback=True)
    assert caught.value.reason == "invalid_server_url"


def test_confirmation_parallel_safety_and_prefix(api: ApiServer) -> None:
    toolset = openapi_toolset(
        PETSTORE_TEXT,
        allowed_hosts=[api.origin],
        server_url=api.origin + PETSTORE,
        allow_http_loopback=True,
        exclude=["uploadFile"],
        prefix="pets_",
        requires_confirmation=["deletePet", "deleteUser"],
    )
    tools = tools_of(toolset)
    assert all(name.startswith("pets_") for name in tools)
    assert {n for n, t in tools.items() if t.requires_confirmation} == {"pets_deletePet", "pets_deleteUser"}
    assert {n for n, t in tools.items() if t.parallel_safe} == {
        "pets_" + n
        for n in (
            "findPetsByStatus",
            "findPetsByTags",
            "getPetById",
            "getInventory",
            "getOrderById",
            "loginUser",
            "logoutUser",
            "getUserByName",
        )
    }
    everything = openapi_toolset(
        PETSTORE_TEXT,
        allowed_hosts=[api.origin],
        server_url=api.origin + PETSTORE,
        allow_http_loopback=True,
        include=["getPetById", "addPet"],
        requires_confirmation=True,
        parallel_safe=False,
    )
    assert all(t.requires_confirmation and not t.parallel_safe for t in everything.tools)


def test_refresh_compiles_the_file_again_and_the_old_snapshot_stays(api: ApiServer, tmp_path: Path) -> None:
    path = tmp_path / "pets.json"
    path.write_text(PETSTORE_TEXT, encoding="utf-8")
    options: dict[str, Any] = {
        "allowed_hosts": [api.origin],
        "server_url": api.origin + PETSTORE,
        "allow_http_loopback": True,
    }
    first = openapi_toolset(path, exclude=["uploadFile"], **options)
    doc = json.loads(PETSTORE_TEXT)
    doc["paths"]["/pet/{petId}"]["get"]["summary"] = "Fetch one pet."
    del doc["paths"]["/store/inventory"]
    path.write_text(json.dumps(doc), encoding="utf-8")
    second = first.refresh()
    assert "getInventory" in tools_of(first) and "getInventory" not in tools_of(second)
    assert tools_of(second)["getPetById"].description.startswith("Fetch one pet.")
    assert first.version != second.version
    # A decoded document is copied: the caller's later edits do not reach refresh().
    mine = json.loads(PETSTORE_TEXT)
    third = openapi_toolset(mine, exclude=["uploadFile"], **options)
    del mine["paths"]["/pet"]
    assert tools_of(third.refresh()).keys() == tools_of(third).keys()
    # A compiled catalog is a fixed snapshot.
    catalog = compile_openapi(PETSTORE_TEXT, include=["getPetById"])
    fixed = openapi_toolset(catalog, **options)
    assert fixed.refresh().version == fixed.version
    with pytest.raises(ConfigError):
        openapi_toolset(catalog, include=["getPetById"], **options)


def test_a_tool_pickles_without_secrets_or_connections_and_runs_after(pets: Toolset, api: ApiServer) -> None:
    tool = tools_of(pets)["getPetById"]
    assert tool.execute({"petId": 1}, context())["status"] == 200  # this process's session now exists
    payload = cloudpickle.dumps(tool)
    assert api.state.api_key.encode() not in payload and api.state.bearer.encode() not in payload
    copy = cloudpickle.loads(payload)
    try:
        assert copy.execute({"petId": 3}, context())["body"]["name"] == "rex"
    finally:
        copy.transport.close()
