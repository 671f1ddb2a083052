"""Logical references to actors and placement.

A ref is either a tier-1 name (``str``, resolved through the registry), a Thespian address, or a
:class:`LocalRef` naming an inner actor on a host. Placement of inner actors is ``blake2b(id) mod hosts`` —
never Python's ``hash()``, which is seeded per interpreter and would disagree between processes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

__all__ = ["LocalRef", "host_name", "place"]


@dataclass(frozen=True, slots=True)
class LocalRef:
    """An inner (tier-2) actor: ``local_id`` on host ``host_id``. Stable across restarts of the actor."""

    host_id: int
    local_id: str

    def __str__(self) -> str:
        return f"{host_name(self.host_id)}/{self.local_id}"


def host_name(host_id: int) -> str:
    """The registry name of host ``host_id``."""
    return f"host-{host_id}"


def place(key: str, hosts: int) -> int:
    """The host index for ``key`` among ``hosts`` hosts (stable across processes and machines)."""
    if hosts < 1:
        raise ValueError("hosts must be >= 1")
    digest = hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % hosts
