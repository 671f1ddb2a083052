"""``compile_plugins``: descriptors validated once, in order, with the reference's hard bounds; the compiled
pipeline's per-hook index; a property test of the validator against an independent model of the rules."""

from __future__ import annotations

import pickle
import types
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adk_actors.errors import ConfigError
from adk_actors.plugins import HOOKS, PluginDescriptor, PluginPipeline, compile_plugins
from adk_actors.plugins.descriptors import MAX_CONFIG_BYTES, MAX_MEMORY_MB, MAX_TIMEOUT_MS
from adk_actors.secrets import REDACTED

MOD = "actor_tests.plugins.test_descriptors"
GOOD = f"{MOD}:Policy"


class Policy:
    """A plugin with two hooks."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = config

    def before_model(self, context: Mapping[str, Any]) -> None:
        return None

    def on_event(self, context: Mapping[str, Any]) -> None:
        return None


class Legacy:
    @staticmethod
    def on_error(context: Mapping[str, Any]) -> None:
        return None


class Nothing:
    """Defines no hook (``before_model_callback`` is google-adk's spelling, not a plugin hook)."""

    def before_model_callback(self, context: Any) -> None:
        return None


class Picky:
    @staticmethod
    def check_config(config: Mapping[str, Any]) -> None:
        if "level" not in config:
            raise ConfigError("level is required", reason="invalid_value", details={"key": "level"})

    @staticmethod
    def after_run(context: Any) -> None:
        return None


class Fragile:
    @staticmethod
    def check_config(config: Mapping[str, Any]) -> None:
        raise RuntimeError("the user's secret config text")

    @staticmethod
    def after_run(context: Any) -> None:
        return None


def before_agent(context: Any) -> None:
    """Makes this test module usable as a module plugin."""
    return None


def entry(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"id": "policy", "plugin": GOOD, "mode": "intervene", "failure_policy": "closed"}
    base.update(overrides)
    return {k: v for k, v in base.items() if v is not _DROP}


_DROP = object()


def reason_of(entries: Any) -> str:
    with pytest.raises(ConfigError) as info:
        compile_plugins(entries)
    return info.value.reason


def test_descriptors_compile_in_order_with_defaults_and_the_hooks_they_define() -> None:
    pipeline = compile_plugins([entry(id="b"), entry(id="a", plugin=Legacy, mode="observe", failure_policy="open")])
    first, second = pipeline.plugins
    assert (first.id, second.id) == ("b", "a")
    assert first.hooks == ("before_model", "on_event") and second.hooks == ("on_error",)
    assert (first.timeout_ms, first.max_memory_mb, first.config, first.inline, first.instance) == (
        1000,
        None,
        {},
        False,
        None,
    )
    assert second.plugin == f"{MOD}:Legacy"  # an importable class travels by name
    assert not pipeline.empty and compile_plugins([]).empty and compile_plugins(None).empty


def test_for_hook_keeps_list_order_and_routes_phase_errors_to_a_legacy_on_error() -> None:
    pipeline = compile_plugins([entry(id="p1"), entry(id="legacy", plugin=Legacy), entry(id="p2")])
    assert [d.id for d in pipeline.for_hook("before_model")] == ["p1", "p2"]
    for hook in ("on_model_error", "on_tool_error", "on_agent_error", "on_run_error", "on_error"):
        assert [d.id for d in pipeline.for_hook(hook)] == ["legacy"]
    assert pipeline.for_hook("after_tool") == () and pipeline.for_hook("no_such_hook") == ()


def test_a_pipeline_pickles_with_its_index() -> None:
    pipeline = compile_plugins([entry(id="p1", config={"level": 3}), entry(id="legacy", plugin=Legacy)])
    copy = pickle.loads(pickle.dumps(pipeline))
    assert copy == pipeline
    assert [d.id for d in copy.for_hook("on_run_error")] == ["legacy"]


def test_plugins_by_module_object_or_script_class_travel_by_name_or_by_value() -> None:
    import actor_tests.plugins.test_descriptors as module

    def on_event(context: Any) -> None:
        return None

    local = type("Local", (), {"after_model": staticmethod(lambda context: None)})
    pipeline = compile_plugins(
        [
            entry(id="module", plugin=module),
            entry(id="object", plugin=types.SimpleNamespace(on_event=on_event)),
            entry(id="local", plugin=local),
        ]
    )
    by_module, by_object, by_local = pipeline.plugins
    assert by_module.plugin == MOD and by_module.hooks == ("before_agent",)
    assert isinstance(by_object.plugin, bytes) and by_object.hooks == ("on_event",)
    assert isinstance(by_local.plugin, bytes) and by_local.hooks == ("after_model",)


def test_a_descriptor_value_is_revalidated_and_its_hooks_found_again() -> None:
    given_descriptor = PluginDescriptor(id="d", plugin=GOOD, mode="observe", failure_policy="open", hooks=())
    assert compile_plugins([given_descriptor]).plugins[0].hooks == ("before_model", "on_event")


def test_the_config_is_a_secret_pruned_private_copy() -> None:
    levels = [1, 2]
    config = {"api_key": "AIza-do-not-keep", "levels": levels}
    descriptor = compile_plugins([entry(config=config)]).plugins[0]
    assert descriptor.config == {"api_key": REDACTED, "levels": [1, 2]}
    levels.append(3)
    assert descriptor.config["levels"] == [1, 2]


def test_an_instance_name_is_kept() -> None:
    assert compile_plugins([entry(instance="counter-1")]).plugins[0].instance == "counter-1"
    assert reason_of([entry(instance="")]) == "invalid_value"


def test_more_than_128_plugins_are_refused() -> None:
    assert len(compile_plugins([entry(id=f"p{i}") for i in range(128)]).plugins) == 128
    assert reason_of([entry(id=f"p{i}") for i in range(129)]) == "too_many_plugins"


@pytest.mark.parametrize("bad", ["", "é" * 129, 7, None, "tab\there"], ids=["empty", "257-bytes", "int", "none", "ctl"])
def test_ids_are_non_empty_names_of_at_most_256_bytes(bad: Any) -> None:
    assert reason_of([entry(id=bad)]) == "invalid_plugin_id"
    assert compile_plugins([entry(id="é" * 128)]).plugins[0].id == "é" * 128


def test_duplicate_ids_are_refused() -> None:
    assert reason_of([entry(id="same"), entry(id="same", plugin=Legacy)]) == "duplicate_plugin_id"


@pytest.mark.parametrize("mode", ["watch", "", None, _DROP])
def test_a_mode_other_than_observe_or_intervene_is_refused(mode: Any) -> None:
    assert reason_of([entry(mode=mode)]) == "invalid_plugin_mode"


@pytest.mark.parametrize("policy", ["fail", "OPEN", None, _DROP])
def test_a_failure_policy_other_than_open_or_closed_is_refused(policy: Any) -> None:
    assert reason_of([entry(failure_policy=policy)]) == "invalid_failure_policy"


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"timeout_ms": 0}, "limit_exceeded"),
        ({"timeout_ms": MAX_TIMEOUT_MS + 1}, "limit_exceeded"),
        ({"timeout_ms": True}, "invalid_value"),
        ({"timeout_ms": 1.5}, "invalid_value"),
        ({"max_memory_mb": 0}, "limit_exceeded"),
        ({"max_memory_mb": MAX_MEMORY_MB + 1}, "limit_exceeded"),
        ({"max_memory_mb": "lots"}, "invalid_value"),
        ({"config": ["not", "a", "map"]}, "invalid_value"),
        ({"config": {"x": float("nan")}}, "invalid_value"),
        ({"config": {"blob": "x" * MAX_CONFIG_BYTES}}, "limit_exceeded"),
        ({"inline": "yes"}, "invalid_value"),
        ({"plugin": _DROP}, "invalid_value"),
        ({"plugin": Nothing}, "invalid_value"),
        ({"hooks": ["before_model"]}, "unknown_key"),
        ({"priority": 1}, "unknown_key"),
    ],
)
def test_bounds_types_and_unknown_keys_are_refused(overrides: dict[str, Any], reason: str) -> None:
    assert reason_of([entry(**overrides)]) == reason


def test_the_bounds_themselves_are_accepted() -> None:
    descriptor = compile_plugins(
        [entry(timeout_ms=MAX_TIMEOUT_MS, max_memory_mb=MAX_MEMORY_MB, config={"blob": "x" * 1000}, inline=True)]
    ).plugins[0]
    assert (descriptor.timeout_ms, descriptor.max_memory_mb, descriptor.inline) == (MAX_TIMEOUT_MS, MAX_MEMORY_MB, True)


@pytest.mark.parametrize("plugin", ["no.such.module:Plugin", f"{MOD}:Missing", "", b"not a pickle", lambda: None])
def test_a_plugin_that_cannot_be_loaded_or_sent_is_refused_without_the_import_error(plugin: Any) -> None:
    with pytest.raises(ConfigError) as info:
        compile_plugins([entry(plugin=plugin)])
    assert info.value.reason in ("plugin_not_importable", "invalid_value")
    assert "No module named" not in str(info.value.to_dict())
    if isinstance(plugin, str) and plugin:
        assert info.value.reason == "plugin_not_importable"
        assert info.value.details["plugin"] == "policy"


def test_a_plugin_checks_its_config_when_the_pipeline_is_compiled() -> None:
    assert compile_plugins([entry(plugin=Picky, config={"level": 1})]).plugins[0].hooks == ("after_run",)
    with pytest.raises(ConfigError) as info:
        compile_plugins([entry(plugin=Picky)])
    assert (info.value.reason, info.value.details["key"], info.value.details["plugin"]) == (
        "invalid_value",
        "config",
        "policy",
    )
    with pytest.raises(ConfigError) as raised:
        compile_plugins([entry(plugin=Fragile)])
    assert raised.value.reason == "invalid_value" and "secret" not in str(raised.value.to_dict())


@pytest.mark.parametrize("entries", ["policy", {"id": "x"}, 42, [42]])
def test_the_entries_are_a_list_of_mappings(entries: Any) -> None:
    assert reason_of(entries) == "invalid_value"


# ---- property: the validator against a model of the rules ------------------------------------------------------

_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"), max_size=4)
_FIELDS: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]] = {
    # key: (well-formed values, malformed values)
    "id": (
        st.text(min_size=1, max_size=8, alphabet="abcé"),
        st.one_of(st.just(""), st.just("x" * 257), st.integers(), st.none()),
    ),
    "plugin": (st.sampled_from([GOOD, f"{MOD}:Legacy"]), st.sampled_from([f"{MOD}:Nothing", "no.such:Plugin", 3])),
    "mode": (st.sampled_from(["observe", "intervene"]), st.sampled_from(["watch", None])),
    "failure_policy": (st.sampled_from(["open", "closed"]), st.sampled_from(["maybe", None])),
    "timeout_ms": (
        st.integers(1, MAX_TIMEOUT_MS),
        st.one_of(st.integers(-5, 0), st.integers(MAX_TIMEOUT_MS + 1, MAX_TIMEOUT_MS + 5), st.booleans(), st.floats()),
    ),
    "max_memory_mb": (
        st.one_of(st.none(), st.integers(1, MAX_MEMORY_MB)),
        st.one_of(st.integers(-1, 0), st.just(MAX_MEMORY_MB + 1), st.text(max_size=2)),
    ),
    "config": (
        st.one_of(st.none(), st.dictionaries(_TEXT, st.integers(-(2**63), 2**63) | _TEXT, max_size=3)),
        st.one_of(
            st.integers(),
            st.lists(st.integers(), max_size=2),
            st.dictionaries(st.sampled_from(["\x00", "\ud800"]), st.integers(), min_size=1),
            st.dictionaries(_TEXT, st.sampled_from([float("nan"), float("inf"), b"bytes"]), min_size=1),
        ),
    ),
    "inline": (st.booleans(), st.one_of(st.integers(0, 1), st.none())),
    "instance": (st.one_of(st.none(), st.text(min_size=1, max_size=4, alphabet="xyz")), st.just("")),
    "weight": (st.integers(), st.integers()),
}
REQUIRED = ("id", "plugin", "mode", "failure_policy")
_FAULTS = [None] * 6 + ["missing", "unknown"] + [k for k in sorted(_FIELDS) if k != "weight"]
"""At most one fault per descriptor, so every rule gets its share of examples."""


@st.composite
def descriptor_maps(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed descriptor, then perhaps one fault: a required key missing, an unknown key, a bad value."""
    optional = [k for k in sorted(_FIELDS) if k not in REQUIRED and k != "weight"]
    keys = [*REQUIRED, *draw(st.lists(st.sampled_from(optional), unique=True))]
    entry = {key: draw(_FIELDS[key][0]) for key in keys}
    fault = draw(st.sampled_from(_FAULTS))
    if fault == "missing":
        del entry[draw(st.sampled_from(REQUIRED))]
    elif fault == "unknown":
        entry["weight"] = draw(_FIELDS["weight"][0])
    elif fault is not None:
        entry[fault] = draw(_FIELDS[fault][1])
    return entry


def _json_safe(config: dict[str, Any]) -> bool:
    texts = [*config, *(v for v in config.values() if isinstance(v, str))]
    scalars_ok = all(isinstance(v, str | int) and not isinstance(v, bool) for v in config.values())
    return scalars_ok and not any("\x00" in t or any("\ud800" <= c <= "\udfff" for c in t) for t in texts)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def expected_reason(entry: dict[str, Any]) -> str | None:
    """The reason the first failing rule gives, or ``None`` when the entry is valid (an independent model)."""
    if "weight" in entry:
        return "unknown_key"
    ident = entry.get("id")
    if not isinstance(ident, str) or not ident or len(ident.encode()) > 256:
        return "invalid_plugin_id"
    plugin = entry.get("plugin")
    if "plugin" not in entry:
        return "invalid_value"
    if entry.get("mode") not in ("observe", "intervene"):
        return "invalid_plugin_mode"
    if entry.get("failure_policy") not in ("open", "closed"):
        return "invalid_failure_policy"
    timeout = entry.get("timeout_ms", 1000)
    if not _is_int(timeout):
        return "invalid_value"
    if not 1 <= timeout <= MAX_TIMEOUT_MS:
        return "limit_exceeded"
    memory = entry.get("max_memory_mb")
    if memory is not None and not _is_int(memory):
        return "invalid_value"
    if memory is not None and not 1 <= memory <= MAX_MEMORY_MB:
        return "limit_exceeded"
    config = entry.get("config")
    if config is not None and (not isinstance(config, dict) or not _json_safe(config)):
        return "invalid_value"
    if not isinstance(entry.get("inline", False), bool):
        return "invalid_value"
    if entry.get("instance") == "":
        return "invalid_value"
    if plugin == "no.such:Plugin":  # loaded last, once every field is known to be well-formed
        return "plugin_not_importable"
    if plugin in (f"{MOD}:Nothing", 3):  # no plugin hook defined
        return "invalid_value"
    return None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(descriptor_maps(), max_size=4))
def test_the_validator_accepts_exactly_what_the_rules_allow(entries: list[dict[str, Any]]) -> None:
    expected: str | None = None
    seen: set[Any] = set()
    for item in entries:
        expected = expected_reason(item)
        if expected is None and item["id"] in seen:
            expected = "duplicate_plugin_id"
        if expected is not None:
            break
        seen.add(item["id"])
    if expected is None:
        pipeline = compile_plugins(entries)
        assert [d.id for d in pipeline.plugins] == [e["id"] for e in entries]
        for descriptor in pipeline.plugins:
            assert 1 <= descriptor.timeout_ms <= MAX_TIMEOUT_MS and descriptor.hooks
            assert set(descriptor.hooks) <= set(HOOKS)
        assert isinstance(pickle.loads(pickle.dumps(pipeline)), PluginPipeline)
    else:
        with pytest.raises(ConfigError) as info:
            compile_plugins(entries)
        assert info.value.reason == expected
