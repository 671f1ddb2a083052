"""An OpenAPI document as an agent toolset: the model calls an operation, the request goes over real HTTP.

A small pet API (Starlette, on 127.0.0.1) is described by an OpenAPI 3.1 document with an API-key security
scheme. ``openapi_toolset`` compiles the document into one tool per operation; its ``allowed_hosts`` names the only
origin the tools may reach. The API key lives encrypted in a SQLite credential store and is injected into the
request's header when the call is made, in the node's worker process: the model never sees it.

Run: ``.venv/bin/python samples/openapi_toolset.py``
"""

from __future__ import annotations

import os
import tempfile

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import adk_actors as adk
from adk_actors.auth import CredentialKeys, CredentialScope, SqlCredentialStore
from adk_actors.emulator import Emulator
from adk_actors.openapi import AuthBroker, StoredCredential, openapi_toolset
from adk_actors.testing import reserved_port
from adk_actors.web import start_in_thread

API_KEY = "pets-" + os.urandom(8).hex()
PETS = {1: {"id": 1, "name": "doggie", "status": "available"}}

DOCUMENT = {
    "openapi": "3.1.0",
    "info": {"title": "Pets", "version": "1.0"},
    "components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Api-Key"}}},
    "security": [{"key": []}],
    "paths": {
        "/pets/{petId}": {
            "get": {
                "operationId": "getPetById",
                "summary": "Find a pet by its id.",
                "parameters": [{"name": "petId", "in": "path", "required": True, "schema": {"type": "integer"}}],
                "responses": {"200": {"description": "The pet."}},
            }
        }
    },
}

SCRIPT = {"rules": [
    {"when": {"has_function_response": False},
     "respond": {"function_calls": [{"name": "getPetById", "args": {"petId": 1}}]}},
    {"when": {"has_function_response": True},
     "respond": {"text": "Pet 1 is {response.body.name} ({response.body.status}), HTTP {response.status}."}},
]}


async def pet(request: Request) -> JSONResponse:
    if request.headers.get("x-api-key") != API_KEY:
        return JSONResponse({"message": "unauthorized"}, status_code=401)
    found = PETS.get(int(request.path_params["pet_id"]))
    return JSONResponse(found) if found else JSONResponse({"message": "not found"}, status_code=404)


def main() -> None:
    # The store's key: read by every process of the node from its environment (set before the node starts).
    os.environ["ADK_CREDENTIAL_KEYS"] = CredentialKeys.generate()
    api = Starlette(routes=[Route("/pets/{pet_id:int}", pet)])
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data, start_in_thread(api) as server:
        settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
        store = SqlCredentialStore(f"sqlite:///{data}/credentials.db")
        store.put(CredentialScope(app="pets_app", user="u1"), "pets-key", API_KEY)
        pets = openapi_toolset(
            DOCUMENT,
            allowed_hosts=[server.url],  # http only because it is loopback and allow_http_loopback=True
            server_url=server.url,
            allow_http_loopback=True,
            auth=AuthBroker({"key": StoredCredential(store, "pets-key")}),  # the calling user's key
        )
        print("tools:", [tool.name for tool in pets.tools])
        with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
            config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "offline"}
            agent = adk.spawn_agent("PetAgent", config, [pets])
            runner = adk.Runner(agent, "pets_app", adk.session_service(settings))
            print("agent:", runner.run("u1", "s1", "What is pet 1?"))
            seen = str(emu.requests)
            print("key shown to the model:", API_KEY in seen)


if __name__ == "__main__":
    main()
