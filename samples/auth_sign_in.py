"""A user's sign-in as a pause: a tool needs the user's own OAuth 2.0 token, the run waits for the sign-in.

The authorization server is a real OAuth 2.0 / OIDC server on 127.0.0.1 (``adk_actors.devtools.oauth_issuer``,
offline). The first call of ``read_profile`` finds no credential for the user, begins an authorization-code flow
with PKCE (S256) through the node's flow manager and returns ``request_credential``: the Runner pauses with reason
``credential``, and the pause holds the flow's reference, never its state or the authorization URI. The
application sends the browser to the URI (here ``follow_authorize`` plays the browser), takes the callback's code
and state to ``flows.complete`` and resumes the run with the answer. The call runs again and now calls the API
with the user's access token from the node's token service.

Run: ``.venv/bin/python samples/auth_sign_in.py``
"""

from __future__ import annotations

import os
import tempfile

import requests

import adk_actors as adk
from adk_actors.auth import (
    AuthCodeProvider,
    AuthorizationFlows,
    CredentialKeys,
    CredentialScope,
    SqlCredentialStore,
    TokenService,
)
from adk_actors.devtools.oauth_issuer import IssuerClient, OAuthIssuer, follow_authorize
from adk_actors.emulator import Emulator
from adk_actors.testing import reserved_port
from adk_actors.tools import FunctionTool, ToolContext

REDIRECT = "http://127.0.0.1:9/callback"  # the application's callback (never called here: the code is read off)
SCRIPT = {"rules": [
    {"when": {"has_function_response": False}, "respond": {"function_calls": [{"name": "read_profile", "args": {}}]}},
    {"when": {"has_function_response": True}, "respond": {"text": "You are signed in as {response.sub}."}},
]}


def profile_tool(flows: AuthorizationFlows, tokens: TokenService, userinfo: str) -> FunctionTool:
    def read_profile(tool_context: ToolContext) -> dict:
        """Read the user's profile at the identity provider."""
        me = CredentialScope(app=tool_context.app_name, user=tool_context.user_id)
        client = flows.client_for(me, "idp")
        if client is None:
            return adk.request_credential(flows.begin(me, "idp"))
        token = tokens.access_token(client)
        answer = requests.get(userinfo, headers={"Authorization": "Bearer " + token.reveal()}, timeout=10)
        return {"sub": answer.json()["sub"]}

    return FunctionTool(read_profile)


def main() -> None:
    os.environ["ADK_CREDENTIAL_KEYS"] = CredentialKeys.generate()  # read by every process of the node
    client_secret = os.urandom(16).hex()
    clients = {"crm": IssuerClient(client_id="crm", client_secret=client_secret, redirect_uris=(REDIRECT,))}
    with tempfile.TemporaryDirectory(prefix="adk-sample-") as data, OAuthIssuer(clients=clients) as idp:
        settings = adk.load_settings(admin_port=reserved_port(), data_dir=data)
        store = SqlCredentialStore(f"sqlite:///{data}/credentials.db")
        provider = AuthCodeProvider(
            name="idp",
            authorization_url=idp.authorization_endpoint,
            token_url=idp.token_endpoint,
            client_id="crm",
            client_secret=store.put(CredentialScope(app="crm"), "idp-client-secret", client_secret),
            redirect_uri=REDIRECT,
            allowed_scopes=("openid", "profile"),
            default_scopes=("openid", "profile"),
            issuer=idp.url,
            jwks_url=idp.jwks_uri,  # OIDC: the id_token's signature, audience and nonce are checked
            allow_http_loopback=True,  # the sample's server is plain http on 127.0.0.1
        )
        with Emulator(script=SCRIPT) as emu, adk.open_actor_system(settings):
            flows = AuthorizationFlows.start(store, [provider])
            tokens = TokenService.start(store)
            config = {"provider": "gemini", "base_url": emu.base_url, "api_key": "offline"}
            agent = adk.spawn_agent("Profile", config, [profile_tool(flows, tokens, idp.userinfo_endpoint)])
            runner = adk.Runner(agent, "crm", adk.session_service(settings))

            paused = runner.run("u1", "s1", "Who am I?")
            pause = paused.event.actions.pause
            print(f"paused: reason={pause.reason} provider={pause.details['provider']} "
                  f"scopes={pause.details['scopes']} pkce={pause.details['pkce_method']}")

            uri = flows.authorization_uri(pause.details["flow_ref"], CredentialScope(app="crm", user="u1"))
            code, state = follow_authorize(uri.reveal())  # the browser signs in and comes back with code and state
            answer = flows.complete(state, code)
            print("flow completed:", answer["flow_ref"] == pause.details["flow_ref"])
            print("agent:", runner.resume("u1", "s1", pause.continuation_id, answer))
            print("stored:", store.names(CredentialScope(app="crm", user="u1")))


if __name__ == "__main__":
    main()
