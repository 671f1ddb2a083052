"""The auth and OpenAPI samples run offline as their own processes and print what docs/AUTH.md and docs/OPENAPI.md
say they print."""

from __future__ import annotations

from actor_tests.samples_runner import run_sample


def test_the_sign_in_sample_pauses_for_a_credential_and_resumes_signed_in() -> None:
    assert run_sample("auth_sign_in.py").stdout.splitlines() == [
        "paused: reason=credential provider=idp scopes=['openid', 'profile'] pkce=S256",
        "flow completed: True",
        "agent: You are signed in as alice.",
        "stored: ['oauth.idp.refresh']",
    ]


def test_the_openapi_sample_calls_an_operation_with_a_stored_api_key_the_model_never_sees() -> None:
    assert run_sample("openapi_toolset.py").stdout.splitlines() == [
        "tools: ['getPetById']",
        "agent: Pet 1 is doggie (available), HTTP 200.",
        "key shown to the model: False",
    ]
