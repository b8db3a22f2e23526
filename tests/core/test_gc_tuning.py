"""The daemons' garbage-collector settings (checked in a child: they are process-wide)."""

from __future__ import annotations

import subprocess
import sys

from hubsync.core.gc_tuning import OLDER_THRESHOLDS, YOUNG_THRESHOLD
from hubsync.processes import child_environment

CHECK = """
import gc
from hubsync.core.gc_tuning import tune_for_throughput
before = gc.get_freeze_count()
tune_for_throughput()
print(gc.get_threshold(), gc.get_freeze_count() > before)
"""


def test_tuning_freezes_what_exists_and_collects_less_often() -> None:
    # tests/conftest.py put the checkout first on PYTHONPATH, which the child keeps
    out = subprocess.run(
        [sys.executable, "-c", CHECK],
        capture_output=True,
        text=True,
        check=True,
        env=child_environment(),
    ).stdout.strip()
    assert out == f"{(YOUNG_THRESHOLD, *OLDER_THRESHOLDS)} True"
