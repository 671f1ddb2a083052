"""The credential store on SQLite and PostgreSQL (and in memory): scoped values, encrypted at rest, key rotation,
keys from the environment or a private file, never a value in a repr, an error or a pickle."""

from __future__ import annotations

import os
import pickle
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from actor_tests.sessions.conftest import sql_urls
from adk_actors.auth.credentials import (
    KEY_FILE_ENV,
    KEYS_ENV,
    CredentialKeys,
    CredentialRef,
    CredentialScope,
    InMemoryCredentialStore,
    SqlCredentialStore,
)
from adk_actors.errors import AdkError, ConfigError, StorageError, ValidationError

VALUE = "tok-" + "9f8e7d6c5b4a3f2e1d0c"
SCOPE = CredentialScope(app="crm", user="u1")


@pytest.fixture
def urls() -> Iterator[Callable[[str], str]]:
    directory = Path(tempfile.mkdtemp(prefix="adk-creds-"))
    try:
        with sql_urls(directory, "creds") as make:
            yield make
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _raw_rows(url: str) -> list[str]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return [str(r[0]) for r in conn.execute(text("SELECT ciphertext FROM adk_credentials"))]
    finally:
        engine.dispose()


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_values_are_scoped_and_encrypted_at_rest(urls: Callable[[str], str], kind: str) -> None:
    url = urls(kind)
    keys = CredentialKeys([CredentialKeys.generate()])
    store = SqlCredentialStore(url, keys=keys)
    ref = store.put(SCOPE, "orders-api", VALUE)
    other = store.put(CredentialScope(app="crm", user="u2"), "orders-api", "another-value")
    assert ref == CredentialRef("crm", "u1", "orders-api") and VALUE not in repr(ref)
    assert store.get(ref).reveal() == VALUE and store.get(other).reveal() == "another-value"
    assert VALUE not in repr(store.get(ref))
    assert store.names(SCOPE) == ["orders-api"]
    assert all(VALUE not in row and "another-value" not in row for row in _raw_rows(url))  # ciphertext only
    # Revealed values are registered with the log scrubber for the whole process: a distinctive one, never a word
    # another test's output could be.
    store.put(SCOPE, "orders-api", "replaced-value-7c1e")
    assert store.get(ref).reveal() == "replaced-value-7c1e"
    assert store.delete(ref) is True and store.delete(ref) is False
    with pytest.raises(StorageError) as caught:
        store.get(ref)
    assert caught.value.reason == "credential_not_found"
    assert store.get(other).reveal() == "another-value"  # the other user's credential is untouched


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_rotation_reencrypts_with_the_new_key_and_the_old_key_can_then_go(
    urls: Callable[[str], str], kind: str
) -> None:
    url = urls(kind)
    old, new = CredentialKeys.generate(), CredentialKeys.generate()
    ref = SqlCredentialStore(url, keys=CredentialKeys([old])).put(SCOPE, "api", VALUE)
    with pytest.raises(StorageError) as caught:  # the new key alone cannot read what the old one wrote
        SqlCredentialStore(url, keys=CredentialKeys([new])).get(ref)
    assert caught.value.reason == "credential_undecryptable" and VALUE not in str(caught.value.to_dict())
    both = SqlCredentialStore(url, keys=CredentialKeys([new, old]))
    assert both.rotate() == 1
    assert SqlCredentialStore(url, keys=CredentialKeys([new])).get(ref).reveal() == VALUE


def test_a_rotation_that_meets_an_unreadable_row_changes_nothing(urls: Callable[[str], str]) -> None:
    url = urls("sqlite")
    first, stray, new = (CredentialKeys.generate() for _ in range(3))
    SqlCredentialStore(url, keys=CredentialKeys([first])).put(SCOPE, "a", "value-a")
    SqlCredentialStore(url, keys=CredentialKeys([stray])).put(SCOPE, "b", "value-b")
    before = _raw_rows(url)
    with pytest.raises(StorageError) as caught:
        SqlCredentialStore(url, keys=CredentialKeys([new, first])).rotate()
    assert caught.value.reason == "credential_undecryptable"
    assert _raw_rows(url) == before  # one transaction: nothing was re-encrypted


def test_keys_come_from_the_environment_or_a_private_file(tmp_path: Path) -> None:
    key = CredentialKeys.generate()
    assert CredentialKeys.from_env({KEYS_ENV: f"{key}, {CredentialKeys.generate()}"}).count == 2
    path = tmp_path / "keys"
    path.write_text(key + "\n")
    os.chmod(path, 0o600)
    assert CredentialKeys.from_env({KEY_FILE_ENV: str(path)}).count == 1
    os.chmod(path, 0o644)
    for environ, reason in (
        ({KEY_FILE_ENV: str(path)}, "key_file_too_open"),
        ({KEY_FILE_ENV: str(tmp_path / "missing")}, "key_file_unreadable"),
        ({}, "missing_credential_key"),
        ({KEYS_ENV: "not-a-key"}, "invalid_credential_key"),
    ):
        with pytest.raises(ConfigError) as caught:
            CredentialKeys.from_env(environ)
        assert caught.value.reason == reason
    keys = CredentialKeys([key])
    assert key not in repr(keys)
    with pytest.raises(TypeError):
        pickle.dumps(keys)  # keys never travel: each process reads its own


def test_a_store_pickles_as_its_url_and_the_other_side_reads_its_own_keys(
    urls: Callable[[str], str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = CredentialKeys.generate()
    monkeypatch.setenv(KEYS_ENV, key)
    store = SqlCredentialStore(urls("sqlite"))
    ref = store.put(SCOPE, "api", VALUE)
    blob = pickle.dumps(store)
    assert key.encode() not in blob and VALUE.encode() not in blob
    assert pickle.loads(blob).get(ref).reveal() == VALUE


def test_the_in_memory_store_has_the_same_interface() -> None:
    store = InMemoryCredentialStore()
    ref = store.put(SCOPE, "api", VALUE)
    assert store.get(ref).reveal() == VALUE and store.names(SCOPE) == ["api"]
    assert store.rotate() == 1 and store.get(ref).reveal() == VALUE
    assert store.delete(ref) and store.names(SCOPE) == []


@given(
    app=st.text(max_size=140),
    name=st.text(max_size=140),
    value=st.one_of(st.text(max_size=70_000), st.integers(), st.none()),
)
def test_bad_scopes_names_and_values_are_refused_with_a_reason(app: str, name: str, value: object) -> None:
    store = InMemoryCredentialStore()
    try:
        ref = store.put(CredentialScope(app=app), name, value)
    except ValidationError as err:
        assert err.reason in ("invalid_value", "limit_exceeded")
        return
    except AdkError as err:  # pragma: no cover - any other error would be a bug
        raise AssertionError(err.reason) from None
    assert store.get(ref).reveal() == value
