"""How many entries a worker's next read asks for, so that one batch stays within a byte budget.

Redis caps a read by entry count only, and returns every entry whole. Entries a
relay writes are small (an event is at most 256 KiB, a batch of them a few
MiB), but anyone who can XADD can write entries of many megabytes, and a read
of ``read_count`` of them would hold them all in memory at once. So a worker
starts with one entry per stream (nothing is known of the entries yet: a
first read of ``read_count`` 60 MiB entries would hold gigabytes), and each
reply is measured: the count doubles towards ``read_count`` with every batch
of entries that fits, as far as entries like its largest would still fit;
after one over ``read_bytes``, the next reads ask for as many entries as the
largest one seen would fit (down to one per stream). An empty reply teaches
nothing and changes nothing.

One read can still exceed the budget (the count is chosen before the entries
are seen): the bound on a single entry is Redis's own (``proto-max-bulk-len``
and ``client-query-buffer-limit``), see docs/consumers.md.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from consumers.stream.fast_reads import PairsEntry
from hubsync.core.redis_values import RawEntry

log = logging.getLogger(__name__)


def reply_bytes(entries: Sequence[PairsEntry | RawEntry]) -> tuple[int, int]:
    """Total and largest size of ``entries`` (field names and values, in bytes), as either
    reader gives them (``consumers.stream.fast_reads``)."""
    total = largest = 0
    for _, raw in entries:
        if raw is None:
            continue
        if isinstance(raw, list):  # names and values alternating
            size = sum(map(len, raw))
        else:
            size = sum(map(len, raw)) + sum(map(len, raw.values()))
        total += size
        if size > largest:
            largest = size
    return total, largest


class ReadBudget:
    """The per-stream COUNT of the next read, adapted to the bytes of the replies seen."""

    def __init__(self, read_count: int, read_bytes: int) -> None:
        self.read_count = read_count
        self.read_bytes = read_bytes
        self.count = 1  # grown by replies that fit, never on trust
        self.over_budget = 0
        """Replies larger than ``read_bytes`` so far."""

    def observe(self, total: int, largest: int) -> None:
        """Adapt the next count to a reply of ``total`` bytes whose largest entry was ``largest``."""
        if total > self.read_bytes:
            self.over_budget += 1
            fits = max(1, self.read_bytes // max(1, largest))
            if fits < self.count:
                log.warning(
                    "a read returned %d bytes (its largest entry %d), over --read-bytes %d; "
                    "reading %d entries per stream until batches fit again",
                    total,
                    largest,
                    self.read_bytes,
                    fits,
                )
                self.count = fits
        elif self.count < self.read_count and largest > 0:
            # grow, but not past what entries like this batch's largest would fill
            fits = self.read_bytes // max(1, largest)
            self.count = min(self.read_count, self.count * 2, max(self.count, fits))
