"""Every daemon's ``--check`` reports an unreachable Redis alike (hubsync/cli/health_checks.py):
one line naming the daemon, and exit 3. (A refused password is exit 1, one line naming the
user: tests/app/test_redis_password.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest

from producers.registry import RuntimeRegistry
from tests.helpers.operator_support import run_cli


def test_an_unreachable_redis_is_one_line_naming_the_daemon_and_exit_3(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    with RuntimeRegistry(tmp_path / "state") as registry:
        registry.register_project(tmp_path / "shop")
        runtime_id = registry.runtime_id
    checks = {
        f"relay {runtime_id}": ["relay", "--state-dir", str(tmp_path / "state"), "--check"],
        "consumer h": ["consume", "--hub-db", str(tmp_path / "hub.db"), "--name", "h", "--check"],
        "effects worker fx": ["effects-worker", "--name", "fx", "--check"],
    }
    for daemon, argv in checks.items():
        result = run_cli(capsys, *argv, env={"HUBSYNC_REDIS_URL": "redis://127.0.0.1:1/0"})
        assert result.code == 3, (daemon, result.err)
        assert result.err.strip().splitlines() == [f"{daemon}: cannot reach Redis"], daemon
