"""Actor-backed and sharded artifacts: the contract through the clients (in memory and on a shared filesystem
root), one shard per app and user, and the client in a worker process."""

from __future__ import annotations

import functools
import os
import pickle
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actor_tests.artifacts import shard_support
from actor_tests.artifacts.test_contract import (  # noqa: F401 - the contract, collected again against the clients
    FakeClock,
    test_a_caller_changing_returned_metadata_does_not_change_the_store,
    test_a_malformed_mime_type_is_refused,
    test_a_missing_artifact_and_one_of_another_scope_get_the_same_answer,
    test_a_scope_argument_must_be_an_artifact_scope,
    test_a_version_that_is_not_a_positive_int_is_refused,
    test_an_artifact_over_the_byte_bound_is_refused,
    test_concurrent_threads_writing_one_name_get_distinct_versions,
    test_data_that_is_not_bytes_is_refused,
    test_deleted_version_numbers_are_never_given_out_again,
    test_get_returns_the_latest_or_the_asked_version_with_its_bytes,
    test_lifetime_version_capacity_is_a_third_of_the_scan_bound_and_delete_does_not_restore_it,
    test_list_names_pages_in_code_point_order_with_a_cursor,
    test_list_names_refuses_a_cursor_that_is_not_a_name,
    test_list_names_refuses_a_limit_outside_one_to_a_thousand,
    test_list_versions_lists_stored_versions_oldest_first,
    test_metadata_that_is_not_flat_and_bounded_is_refused,
    test_put_numbers_versions_from_one_and_describes_them,
    test_scopes_are_exact_app_user_and_session_do_not_see_each_other,
)
from adk_actors.artifacts import (
    ActorArtifactService,
    ArtifactScope,
    FileArtifactService,
    InMemoryArtifactService,
    ShardedArtifactService,
)
from adk_actors.errors import ConfigError
from adk_actors.runtime.system import ActorSystemHandle

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=["actor-memory", "sharded-memory", "sharded-files"])
def make(
    request: pytest.FixtureRequest, system: ActorSystemHandle, tmp_path: Path
) -> Iterator[Callable[..., ActorArtifactService]]:
    made: list[ActorArtifactService] = []

    def build(**options: Any) -> ActorArtifactService:
        svc: ActorArtifactService
        if request.param == "actor-memory":
            svc = ActorArtifactService.start(functools.partial(InMemoryArtifactService, **options), system=system)
        elif request.param == "sharded-memory":
            factory = functools.partial(shard_support.in_memory_for, **options)
            svc = ShardedArtifactService.start(factory, system=system)
        else:
            root = tmp_path / f"root-{len(made)}"
            svc = ShardedArtifactService.start(FileArtifactService(root, **options), system=system)
        made.append(svc)
        return svc

    yield build
    for svc in made:
        svc.stop()


@pytest.fixture
def service(make: Callable[..., ActorArtifactService]) -> ActorArtifactService:
    return make()


def test_each_app_and_user_gets_its_own_shard_and_app_scopes_one_per_app(system: ActorSystemHandle) -> None:
    svc = ShardedArtifactService.start(shard_support.in_memory_for, system=system)
    try:
        for scope in (
            ArtifactScope.user("app", "u1"),
            ArtifactScope.session("app", "u1", "s1"),  # same (app, user): same shard
            ArtifactScope.user("app", "u2"),
            ArtifactScope.app("app"),
        ):
            svc.put(scope, "notes.txt", b"x")
        assert svc.status()["active_scopes"] == 3 and svc.status()["started"] == 3
        assert svc.list_names(ArtifactScope.session("app", "u1", "s1")) == (["notes.txt"], None)
    finally:
        svc.stop()


def test_an_unpicklable_service_is_refused_and_the_client_works_from_a_worker(
    system: ActorSystemHandle, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError) as unshareable:
        ShardedArtifactService.start(InMemoryArtifactService(), system=system)
    assert unshareable.value.reason == "service_not_shareable"
    svc = ShardedArtifactService.start(FileArtifactService(tmp_path / "root"), system=system)
    try:
        copy = pickle.loads(pickle.dumps(svc))
        result = system.run_job(shard_support.remote_put, copy, "app", "u1", b"from a worker")
        assert result["pid"] != os.getpid() and result["version"] == 1
        assert svc.get(ArtifactScope.user("app", "u1"), "remote.bin").data == b"from a worker"
    finally:
        svc.stop()


def test_options_are_checked_when_the_service_is_built(system: ActorSystemHandle) -> None:
    with pytest.raises(ConfigError) as bad:
        ActorArtifactService.start(functools.partial(InMemoryArtifactService, max_scan_entries=1), system=system)
    assert bad.value.reason == "invalid_value"


_ = FakeClock
