"""The shipped Grafana dashboard: valid JSON, and every query names metrics the daemons serve
(collected from their registries), in PromQL that Prometheus's own parser accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tests.helpers.exported_metrics import hubsync_names, served_names
from tests.helpers.support import REPO_ROOT, run_tool

DASHBOARD = REPO_ROOT / "deploy" / "grafana" / "hubsync.json"


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels() -> list[dict[str, Any]]:
    return [panel for panel in dashboard()["panels"] if panel["type"] != "row"]


def queries() -> list[tuple[str, str]]:
    """(panel or variable, PromQL) of every query the dashboard runs."""
    found = [(panel["title"], target["expr"]) for panel in panels() for target in panel["targets"]]
    for variable in dashboard()["templating"]["list"]:
        if variable["type"] == "query":
            found.append((f"${variable['name']}", variable["definition"]))
    return found


def test_the_dashboard_is_valid_json_with_an_id_and_panels() -> None:
    board = dashboard()
    assert (board["uid"], board["title"]) == ("hubsync", "hubsync")
    assert panels()
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    # every panel asks the datasource the user picks, never a fixed one
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in panels())


def test_every_query_names_metrics_the_daemons_serve() -> None:
    served = served_names()
    for where, query in queries():
        used = hubsync_names(query)
        assert used or "up{" in query, f"{where}: {query} names no hubsync metric"
        assert used <= served, f"{where}: {sorted(used - served)} are not served by any daemon"


def test_the_dashboard_shows_every_family_an_alert_rule_queries() -> None:
    rules = yaml.safe_load((REPO_ROOT / "deploy" / "prometheus" / "hubsync-rules.yml").read_text())
    alerted = set().union(
        *(hubsync_names(rule["expr"]) for group in rules["groups"] for rule in group["rules"])
    )
    shown = set().union(*(hubsync_names(query) for _, query in queries()))
    assert alerted <= shown


def test_promtool_parses_every_query(tmp_path: Path) -> None:
    # as recording rules, with the dashboard's variables filled in, so Prometheus parses each
    rules = [
        {"record": f"hubsync_dashboard_query_{index}", "expr": query.replace("$hub_project", ".*")}
        for index, (_, query) in enumerate(queries())
        if not query.startswith("label_values(")
    ]
    path = tmp_path / "queries.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    checked = run_tool("promtool", "prometheus", "check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
