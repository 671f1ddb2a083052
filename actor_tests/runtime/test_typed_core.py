"""The typed runtime core: both tiers' ports implement the ``Port`` protocol member for member, and every typed
request (``Request[R]``) is answered with an ``R`` by the actors that handle it, at tier 1 and tier 2."""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any, ForwardRef

from adk_actors.runtime import host, messages
from adk_actors.runtime.host import (
    FindInner,
    InnerGroupSpec,
    InnerPort,
    InnerSpec,
    Spawn,
    SpawnGroup,
    SpawnMany,
    StopInner,
)
from adk_actors.runtime.messages import DumpProfile, GetStatus, Lookup, Ping, Request
from adk_actors.runtime.refs import LocalRef, host_name
from adk_actors.runtime.server import Port, Tier1Port
from adk_actors.runtime.system import ActorSystemHandle

from .helpers import PROBE, unique

_PORT_MEMBERS = sorted(name for name in vars(Port) if not name.startswith("_"))


def _ports() -> list[Any]:
    fake_actor = types.SimpleNamespace(myAddress="address")
    fake_host = types.SimpleNamespace(host_id=0, _port=types.SimpleNamespace(names={}))
    return [Tier1Port(typing.cast(Any, fake_actor)), InnerPort(typing.cast(Any, fake_host), "x")]


def test_both_ports_have_every_port_member_with_its_signature() -> None:
    assert {"send", "start_timer", "submit_io", "resolved", "settle_job", "take_ready"} <= set(_PORT_MEMBERS)
    for port in _ports():
        for name in _PORT_MEMBERS:
            assert hasattr(port, name), (type(port).__name__, name)
            declared = vars(Port)[name]
            if inspect.isfunction(declared):
                assert list(inspect.signature(declared).parameters) == list(
                    inspect.signature(getattr(type(port), name)).parameters
                ), (type(port).__name__, name)


def test_the_inner_port_has_no_process_resources() -> None:
    inner = _ports()[1]
    assert inner.lane is None and inner.extra_fds() == [] and inner.take_ready([3, 4]) == [3, 4]


def _reply_type(cls: type) -> Any:
    for base in getattr(cls, "__orig_bases__", ()):
        if typing.get_origin(base) is Request:
            (reply,) = typing.get_args(base)
            if isinstance(reply, ForwardRef):
                return getattr(messages, reply.__forward_arg__)
            return reply
    raise AssertionError(f"{cls.__name__} declares no reply type")


def _conforms(value: Any, tp: Any) -> bool:
    origin = typing.get_origin(tp)
    if origin in (types.UnionType, typing.Union):
        return any(_conforms(value, arm) for arm in typing.get_args(tp))
    if tp is None or tp is type(None):
        return value is None
    if origin is list:
        (item,) = typing.get_args(tp)
        return isinstance(value, list) and all(_conforms(v, item) for v in value)
    if origin is dict:
        key, _item = typing.get_args(tp)
        return isinstance(value, dict) and all(isinstance(k, key) for k in value)
    return isinstance(value, tp)


def _typed_requests() -> set[type]:
    return {
        obj
        for module in (messages, host)
        for obj in vars(module).values()
        if isinstance(obj, type) and obj is not Request and issubclass(obj, Request)
    }


def test_typed_requests_get_the_declared_reply_type(system: ActorSystemHandle) -> None:
    h0 = host_name(0)
    tag = unique("typed")
    inner = system.ask(h0, Spawn(spec=InnerSpec(local_id=f"{tag}-one", actor=PROBE)))
    many = system.ask(h0, SpawnMany(specs=(InnerSpec(local_id=f"{tag}-m", actor=PROBE),)))
    group = system.ask(
        h0,
        SpawnGroup(spec=InnerGroupSpec(local_id=f"{tag}-g", members=(InnerSpec(local_id=f"{tag}-g1", actor=PROBE),))),
    )
    asked: list[tuple[Any, Any]] = [
        (Spawn, inner),
        (SpawnMany, many),
        (SpawnGroup, group),
        (Ping, system.ask(system.registry, Ping())),
        (Ping, system.ask(inner, Ping())),
        (GetStatus, system.ask(h0, GetStatus())),
        (GetStatus, system.ask(inner, GetStatus())),
        (GetStatus, system.ask(system.root, GetStatus())),
        (DumpProfile, system.ask(h0, DumpProfile())),
        (Lookup, system.ask(system.registry, Lookup(name=h0))),
        (FindInner, system.ask(h0, FindInner(actor=PROBE))),
        (StopInner, system.ask(h0, StopInner(local_id=f"{tag}-g"))),
        (StopInner, system.ask(h0, StopInner(local_id=inner.local_id))),
        (StopInner, system.ask(h0, StopInner(local_id=many[0].local_id))),
    ]
    assert isinstance(inner, LocalRef)
    assert {cls for cls, _ in asked} == _typed_requests()  # every typed request is exercised here
    for cls, value in asked:
        assert _conforms(value, _reply_type(cls)), (cls.__name__, value)
