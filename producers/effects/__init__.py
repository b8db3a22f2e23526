"""Shared external effects: a SQLite ledger on the runtime and fenced leases in Redis.

Start at ``SharedEffects`` (claim / heartbeat / commit), ``EffectsLedger`` (the
``external_effects`` table) and ``kinds`` (which effects need a lease).
"""

from producers.effects.kinds import SHARED_KINDS, EffectKind, lease_resource_for, requires_lease
from producers.effects.ledger import EffectsLedger, effect_key
from producers.effects.records import (
    AttemptState,
    EffectBeat,
    EffectClaim,
    EffectCommitted,
    EffectRecord,
    EffectRefusalCode,
    EffectRefused,
    EffectSpec,
    EffectStatus,
)
from producers.effects.shared import SharedEffects

__all__ = [
    "SHARED_KINDS",
    "AttemptState",
    "EffectBeat",
    "EffectClaim",
    "EffectCommitted",
    "EffectKind",
    "EffectRecord",
    "EffectRefusalCode",
    "EffectRefused",
    "EffectSpec",
    "EffectStatus",
    "EffectsLedger",
    "SharedEffects",
    "effect_key",
    "lease_resource_for",
    "requires_lease",
]
