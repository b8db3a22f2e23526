"""Stream growth: trim what every consumer has acknowledged, cap what nobody consumes.

``hubsync:{P}:events`` is trimmed only below the oldest entry still pending for
group ``hub`` (and never above its last-delivered id), in one Redis function, so an
unacknowledged entry is never removed. Dead-letter and alert streams have no
consumer group; they are capped by length at every XADD (``MAXLEN ~``, settings
``dead_maxlen`` / ``alerts_maxlen``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from hubstore.redis_functions import RedisFunctions
from hubsync.core import keys
from hubsync.core.redis_values import as_text

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TrimResult:
    """How many entries were removed, and the id everything below was removed up to."""

    removed: int
    threshold: str


def trim_acknowledged(functions: RedisFunctions, stream: str) -> TrimResult:
    """Remove the entries of an events stream that group ``hub`` has acknowledged."""
    removed, threshold = functions.stream_trim_acked(keys=[stream], args=[keys.CONSUMER_GROUP])
    text = as_text(threshold)
    if removed:
        log.debug("trimmed %s entries of %s below %s", removed, stream, text)
    return TrimResult(removed=int(removed), threshold=text)
