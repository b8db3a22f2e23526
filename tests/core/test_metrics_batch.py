"""Batched metric updates export what one update per value would."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram, generate_latest

from hubsync.core.metrics import observe_many

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 1.0, 60.0)
VALUES = [0.0, 0.005, 0.0051, 0.01, 0.02, 0.099, 0.1, 0.5, 1.0, 59.9, 60.0, 61.0, 1e9, 0.003]


def _exported(observe: str) -> bytes:
    registry = CollectorRegistry()
    histogram = Histogram("lat_seconds", "latency", buckets=BUCKETS, registry=registry)
    if observe == "one by one":
        for value in VALUES:
            histogram.observe(value)
    else:

        def refused(value: float) -> None:
            raise AssertionError("observe_many fell back to one observe per value")

        histogram.observe = refused  # type: ignore[method-assign]
        observe_many(histogram, VALUES)
        observe_many(histogram, [])
    return b"\n".join(
        line for line in generate_latest(registry).splitlines() if b"_created" not in line
    )


def test_observe_many_exports_what_one_observe_per_value_does() -> None:
    exported = _exported("batched")
    assert exported == _exported("one by one")
    assert b'lat_seconds_bucket{le="0.005"} 3.0' in exported  # bounds are inclusive
    assert b'lat_seconds_bucket{le="+Inf"} 14.0' in exported
