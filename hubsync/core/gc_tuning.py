"""The garbage collector's settings for the long-running daemons (relay, hub consumer).

A daemon moves thousands of events a second, each a handful of short-lived
containers (entry fields, parsed payloads, outcomes), so CPython's default
thresholds (a young collection every 700 allocations, a full one every few
hundred young ones) spend a measurable share of its CPU walking objects that
live for one batch, and, in every full collection, the hundreds of thousands
of objects the imports made (modules, schemas), which live for ever.

``tune_for_throughput`` moves what exists once the daemon has started into
the permanent generation (``gc.freeze``: never walked again) and collects
the young generation every ``YOUNG_THRESHOLD`` allocations. Reference counting
still frees almost everything at once; the collector is only for cycles, which
the pipeline's per-event objects do not make, so memory stays flat
(``hubsync bench`` reports the daemons' peak RSS).
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000
"""Allocations (net of frees) between two collections of the youngest generation."""
OLDER_THRESHOLDS = (20, 100)
"""Collections of a generation between two of the next one (CPython's defaults: 10, 10)."""


def tune_for_throughput() -> None:
    """Freeze what exists now and collect less often (call once a daemon has started)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)
