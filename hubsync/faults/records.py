"""What a fault run knows of its runtimes, and what the injector remembers of each fault."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from hubsync.core import keys
from hubsync.core.signing import RuntimeKey

Key = tuple[str, str, int]
"""An event's key: ``(project_id, run_id, sequence)``."""

FORGERY_REASON = "unauthenticated"
"""The dead-letter and alert reason every forgery must get."""


@dataclass
class RuntimeUnderTest:
    """One runtime of the pipeline under faults: who it is, where its outbox is, and the key
    the hub enrolled it with (for injections that sign as the runtime on purpose)."""

    runtime_id: str
    project_id: str
    hub_project: str
    store_path: Path
    key: RuntimeKey = field(repr=False)

    @property
    def events_stream(self) -> str:
        """The events stream this runtime's relay writes to: its own."""
        return keys.events_stream(self.hub_project, self.runtime_id)


@dataclass(frozen=True)
class InjectedOffer:
    """Other bytes offered under a key the hub already held: a conflict when signed with the
    runtime's key (``how`` is ``runtime_key``), else a forgery (``unsigned``, or
    ``wrong_key``: signed with a key the hub never enrolled)."""

    hub_project: str
    key: Key
    genuine_hash: str
    forged_hash: str
    entry_id: str
    how: str

    def __str__(self) -> str:
        return f"{self.key} offered {self.forged_hash[:12]} ({self.how})"


@dataclass(frozen=True)
class InjectedForgedAck:
    """An outcomes entry a forger put on a runtime's ack stream, not signed by its hub.

    ``deleted`` keys had their genuine entries XDELed first and are claimed
    ``accepted``: applied, they would be lost. ``parked`` keys are claimed
    ``conflict`` or ``rejected``: applied, their rows would never be resent.
    """

    hub_project: str
    runtime_id: str
    deleted: tuple[Key, ...]
    parked: tuple[Key, ...]
    how: str
    """``unsigned`` or ``wrong_key``."""

    def __str__(self) -> str:
        return (
            f"{self.runtime_id}: {len(self.deleted)} deleted and acked, "
            f"{len(self.parked)} claimed parked ({self.how})"
        )


@dataclass(frozen=True)
class InjectedGarbage:
    """An entry the hub must dead-letter with ``expected_reason``; ``key`` is the genuine
    row whose bytes it copied, if any (that row may end rejected)."""

    hub_project: str
    kind: str
    expected_reason: str
    entry_id: str
    key: Key | None
    alert: tuple[str, str, int, str] | None = None
    """``(*claimed key, hash of the bytes it carried)`` of the security alert it must raise,
    when the hub must refuse it ``unauthenticated``."""


@dataclass(frozen=True)
class InjectedCrossRuntime:
    """A new event in ``victim``'s project, signed with ``attacker``'s key and claiming
    ``attacker`` as its runtime (a squatted run id): the hub must refuse it ``not_owner``,
    alert, store nothing, and tell ``victim`` nothing."""

    hub_project: str
    attacker: str
    victim: str
    key: Key
    offered_hash: str
    entry_id: str

    def __str__(self) -> str:
        return f"{self.attacker} wrote {self.key} into {self.victim}'s project"


@dataclass(frozen=True)
class InjectedLeaseReplay:
    """A lease's hash read as any reader of Redis could, and what it held presented as the
    holder's proof: to renew, release and write a fenced value. ``refused`` of ``attempts``
    were refused, and the fenced value kept what the real holder wrote (``fenced_intact``)."""

    resource: str
    attempts: int
    refused: int
    fenced_intact: bool

    def __str__(self) -> str:
        return f"{self.resource}: {self.refused} of {self.attempts} replays refused"


@dataclass(frozen=True)
class InjectedExhaustion:
    """What a runtime's own Redis user could do to its own stream: trim it (``MAXLEN 1``)
    and use up its ids (an entry at the largest id). Only that runtime's relay may be held up
    (it logs the refusal); an operator deletes the stream and the relay resends."""

    hub_project: str
    runtime_id: str
    stream: str

    def __str__(self) -> str:
        return f"{self.stream} trimmed and at its largest id"


@dataclass
class Injections:
    """Every fault an injector wrote, for the checks to match with its effect."""

    conflicts: list[InjectedOffer] = field(default_factory=list)
    forgeries: list[InjectedOffer] = field(default_factory=list)
    forged_acks: list[InjectedForgedAck] = field(default_factory=list)
    garbage: list[InjectedGarbage] = field(default_factory=list)
    cross_runtime: list[InjectedCrossRuntime] = field(default_factory=list)
    lease_replays: list[InjectedLeaseReplay] = field(default_factory=list)
    duplicated: int = 0
    entry_ids: set[str] = field(default_factory=set)
    """Ids of the entries injected (duplicates aside): never copied as genuine ones."""

    def explained_keys(self) -> set[Key]:
        """Keys whose outbox row an injected fault may leave parked rather than acked."""
        explained = {c.key for c in self.conflicts}
        return explained | {g.key for g in self.garbage if g.key is not None}

    def alerted_keys(self) -> set[tuple[str, str, int, str]]:
        """``(*key, offered_hash)`` of every injection the hub must alert on."""
        conflicts = {(*c.key, c.forged_hash) for c in self.conflicts}
        refused = {g.alert for g in self.garbage if g.alert is not None}
        crossed = {(*c.key, c.offered_hash) for c in self.cross_runtime}
        return conflicts | refused | crossed | {(*f.key, f.forged_hash) for f in self.forgeries}
