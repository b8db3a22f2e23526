"""The metric names the daemons serve, read from their registries, and the names a query uses.

A shipped rule or dashboard may only query what a relay or a consumer
exports: ``served_names`` derives every sample name from the role registries
(``hubsync.core.metrics``) by each family's type, so a family renamed or
dropped in the code fails the files that still name it.
"""

from __future__ import annotations

import re

from hubsync.core import metrics

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
}
_HUBSYNC_NAME = re.compile(r"\bhubsync_[a-z0-9_]+")


def served_names() -> frozenset[str]:
    """Every sample name ``hubsync relay`` or ``hubsync consume`` can serve at /metrics."""
    return frozenset(
        family.name + suffix
        for registry in (metrics.RELAY_REGISTRY, metrics.CONSUMER_REGISTRY)
        for family in registry.collect()
        for suffix in _SUFFIXES[family.type]
    )


def hubsync_names(query: str) -> set[str]:
    """The hubsync metric names a PromQL expression uses."""
    return set(_HUBSYNC_NAME.findall(query))
