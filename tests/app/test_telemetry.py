"""``hubsync.telemetry``: which exporters the environment asks the daemons for, and a bad ask
refused in one line with exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from hubsync.core.errors import ConfigError
from hubsync.processes import run_hubsync
from hubsync.telemetry import configure_tracing, tracing_requested


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, ()),
        ({"OTEL_TRACES_EXPORTER": "none"}, ()),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, ("otlp",)),
        ({"OTEL_TRACES_EXPORTER": " OTLP , console,otlp"}, ("otlp", "console")),
        ({"HUBSYNC_TRACES_FILE": "/tmp/spans.jsonl"}, ("file",)),
        ({"OTEL_TRACES_EXPORTER": "console", "HUBSYNC_TRACES_FILE": "x"}, ("console", "file")),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, ()),
        ({"HUBSYNC_TRACES_FILE": "x", "OTEL_SDK_DISABLED": "TRUE"}, ()),
    ],
)
def test_the_environment_chooses_the_exporters(
    environ: dict[str, str], expected: tuple[str, ...]
) -> None:
    assert tracing_requested(environ) == expected


def test_an_unknown_exporter_is_a_configuration_error_naming_it() -> None:
    with pytest.raises(ConfigError, match="'zipkin'; hubsync knows otlp, console, none"):
        tracing_requested({"OTEL_TRACES_EXPORTER": "otlp,zipkin"})


def test_no_exporter_asked_for_configures_nothing() -> None:
    assert configure_tracing("hubsync-relay", {}) is None


def test_a_daemon_refuses_an_unknown_exporter_in_one_line_with_exit_2(tmp_path: Path) -> None:
    run = run_hubsync(
        ["relay", "--state-dir", str(tmp_path), "--once"],
        env={"OTEL_TRACES_EXPORTER": "jaeger\x1b[31m"},
    )
    assert run.returncode == 2, run.stderr
    [line] = run.stderr.strip().splitlines()
    assert "OTEL_TRACES_EXPORTER names 'jaeger\\x1b[31m'" in line
    assert "Traceback" not in run.stderr
