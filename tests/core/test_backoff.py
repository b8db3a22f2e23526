"""The one retry delay: equal jitter in [c/2, c], c doubling from base up to cap."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from hubsync.core.backoff import Backoff, backoff_ceiling, compute_backoff


def test_the_ceiling_starts_at_base_and_doubles_per_failure_up_to_the_cap() -> None:
    ceilings = [backoff_ceiling(n, base=0.1, cap=1.0) for n in range(1, 8)]
    assert ceilings == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.0, 1.0, 1.0])


def test_a_huge_failure_count_stays_at_the_cap_without_overflowing() -> None:
    assert backoff_ceiling(10**9, base=0.1, cap=30.0) == 30.0


def test_a_cap_below_base_bounds_every_delay() -> None:
    assert backoff_ceiling(1, base=0.1, cap=0.05) == 0.05
    delays = Backoff(base=0.1, cap=0.05, random_fraction=random.Random(3).random)
    assert all(0.025 <= delays.next_delay() <= 0.05 for _ in range(50))


def test_the_delay_spans_the_upper_half_of_the_ceiling() -> None:
    assert compute_backoff(3, base=0.1, cap=10.0, random_fraction=lambda: 0.0) == pytest.approx(0.2)
    almost_one = 1.0 - 2**-53
    highest = compute_backoff(3, base=0.1, cap=10.0, random_fraction=lambda: almost_one)
    assert 0.399 < highest <= 0.4
    assert compute_backoff(3, base=0.1, cap=10.0, random_fraction=lambda: 0.5) == pytest.approx(0.3)


def test_consecutive_failures_grow_the_delay_and_reset_starts_over() -> None:
    backoff = Backoff(base=0.1, cap=1.0, random_fraction=lambda: 0.0)
    assert [backoff.next_delay() for _ in range(6)] == pytest.approx(
        [0.05, 0.1, 0.2, 0.4, 0.5, 0.5]
    )
    assert backoff.failures == 6
    backoff.reset()
    assert backoff.failures == 0
    assert backoff.next_delay() == pytest.approx(0.05)


def test_seeded_draws_are_uniform_over_the_upper_half() -> None:
    rng = random.Random(20240601)
    draws = [
        compute_backoff(5, base=0.0625, cap=30.0, random_fraction=rng.random) for _ in range(20_000)
    ]
    assert min(draws) >= 0.5 and max(draws) < 1.0  # ceiling 0.0625 * 2**4 = 1.0
    assert sum(draws) / len(draws) == pytest.approx(0.75, abs=0.01)
    bins = Counter(int((d - 0.5) * 10) for d in draws)  # five bins of 0.1 s
    assert sorted(bins) == [0, 1, 2, 3, 4]
    assert all(abs(count / len(draws) - 0.2) < 0.02 for count in bins.values())


def test_the_same_seed_gives_the_same_delays() -> None:
    first = Backoff(random_fraction=random.Random(9).random)
    second = Backoff(random_fraction=random.Random(9).random)
    assert [first.next_delay() for _ in range(10)] == [second.next_delay() for _ in range(10)]


@pytest.mark.parametrize(("base", "cap"), [(0.0, 1.0), (-1.0, 1.0), (0.1, 0.0)])
def test_a_non_positive_base_or_cap_is_refused(base: float, cap: float) -> None:
    with pytest.raises(ValueError, match="must be positive"):
        Backoff(base=base, cap=cap)


def test_failures_below_one_have_no_ceiling() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        backoff_ceiling(0, base=0.1, cap=1.0)
