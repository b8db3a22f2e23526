"""The shipped alert rules: Prometheus's own ``promtool`` checks them and runs their unit
tests, each rule fires in those tests, and every rule queries metrics the daemons serve."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.exported_metrics import hubsync_names, served_names
from tests.helpers.support import REPO_ROOT, run_tool

RULES = REPO_ROOT / "deploy" / "prometheus" / "hubsync-rules.yml"
RULE_TESTS = REPO_ROOT / "deploy" / "prometheus" / "hubsync-rules.test.yml"


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def rules() -> list[dict[str, Any]]:
    return [rule for group in load(RULES)["groups"] for rule in group["rules"]]


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return run_tool("promtool", "prometheus", *args)


def test_promtool_finds_the_rules_valid() -> None:
    checked = promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(rules())} rules found" in checked.stdout


def test_the_rules_unit_tests_pass_under_promtool() -> None:
    tested = promtool("test", "rules", str(RULE_TESTS))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_rule_fires_in_a_unit_test() -> None:
    fired = {
        case["alertname"]
        for test in load(RULE_TESTS)["tests"]
        for case in test.get("alert_rule_test", [])
        if case.get("exp_alerts")
    }
    assert {rule["alert"] for rule in rules()} == fired


def test_the_rules_cover_what_an_operator_must_hear_of() -> None:
    queried = set().union(*(hubsync_names(rule["expr"]) for rule in rules()))
    must = {
        "hubsync_consumer_lag",  # lag
        "hubsync_oldest_pending_age_seconds",  # oldest pending age
        "hubsync_dead_letters_total",  # dead letters
        "hubsync_conflicts_total",  # security alerts
        "hubsync_runtime_heartbeat_age_seconds",  # stale runtimes
    }
    assert must <= queried
    assert any("up{" in rule["expr"] for rule in rules())  # daemons down


def test_every_rule_queries_metrics_the_daemons_serve() -> None:
    served = served_names()
    for rule in rules():
        used = hubsync_names(rule["expr"])
        assert used or "up{" in rule["expr"], f"{rule['alert']} queries nothing a daemon serves"
        assert used <= served, f"{rule['alert']} queries {sorted(used - served)}"
