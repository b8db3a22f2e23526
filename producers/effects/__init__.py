"""Shared external effects: a SQLite ledger on the runtime and fenced leases in Redis.

Start at ``SharedEffects`` (claim / heartbeat / commit), ``EffectsLedger`` (the
``external_effects`` table), ``kinds`` (which effects need a lease) and ``review``
(the operator's list, show and verdict: ``list_effects``, ``show_effect``,
``resolve_effect``).
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
from producers.effects.review import (
    EffectDetail,
    EffectResolved,
    EffectState,
    EffectView,
    Verdict,
    list_effects,
    resolve_effect,
    show_effect,
)
from producers.effects.shared import SharedEffects

__all__ = [
    "SHARED_KINDS",
    "AttemptState",
    "EffectBeat",
    "EffectClaim",
    "EffectCommitted",
    "EffectDetail",
    "EffectKind",
    "EffectRecord",
    "EffectRefusalCode",
    "EffectRefused",
    "EffectResolved",
    "EffectSpec",
    "EffectState",
    "EffectStatus",
    "EffectView",
    "EffectsLedger",
    "SharedEffects",
    "Verdict",
    "effect_key",
    "lease_resource_for",
    "list_effects",
    "requires_lease",
    "resolve_effect",
    "show_effect",
]
