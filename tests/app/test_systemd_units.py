"""The shipped systemd units: ``systemd-analyze verify`` finds nothing to say about them,
they keep their hardening, and ``systemd-analyze security`` rates their exposure low.

``verify`` checks that ``ExecStart``'s binary exists, so each unit is rendered into a
temporary directory with this environment's ``hubsync`` in place of /opt/hubsync's, as
an instance (``hubsync-relay@rt-1.service``), the way systemd loads it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.support import REPO_ROOT, run_tool

UNITS = REPO_ROOT / "deploy" / "systemd"
INSTALLED_BINARY = "/opt/hubsync/bin/hubsync"
INSTANCES = {"hubsync-relay@.service": "rt-1", "hubsync-consume@.service": "1"}
HARDENING = {
    "NoNewPrivileges": "yes",
    "ProtectSystem": "strict",
    "ProtectHome": "yes",
    "PrivateTmp": "yes",
    "PrivateDevices": "yes",
    "RestrictSUIDSGID": "yes",
    "CapabilityBoundingSet": "",
    "UMask": "0077",
}
EXPOSURE_THRESHOLD = 20
"""At most 2.0 of systemd's 0-10 exposure scale ("OK")."""


def hubsync_binary() -> str:
    """The ``hubsync`` console script of the environment running the tests."""
    found = shutil.which("hubsync") or str(Path(sys.executable).with_name("hubsync"))
    if not Path(found).exists():
        pytest.skip("no hubsync console script in this environment (pip install -e .)")
    return found


def render(template: str, directory: Path, extra: str = "") -> Path:
    """The unit ``template`` as an instance in ``directory``, run by this environment's
    hubsync; ``extra`` lines go at the end of its [Service] section."""
    text = (UNITS / template).read_text(encoding="utf-8")
    assert INSTALLED_BINARY in text
    text = text.replace(INSTALLED_BINARY, hubsync_binary())
    if extra:
        text = text.replace("\n[Install]", f"\n{extra}\n\n[Install]")
    path = directory / template.replace("@.", f"@{INSTANCES[template]}.")
    path.write_text(text, encoding="utf-8")
    return path


def analyze(*args: str) -> subprocess.CompletedProcess[str]:
    return run_tool("systemd-analyze", "systemd", *args)


def service_settings(template: str) -> dict[str, list[str]]:
    """Each key of the unit's [Service] section with its values, in order."""
    settings: dict[str, list[str]] = {}
    section = ""
    for line in (UNITS / template).read_text(encoding="utf-8").splitlines():
        if line.startswith("["):
            section = line
        elif section == "[Service]" and "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings.setdefault(key, []).append(value)
    return settings


def test_the_units_are_the_two_templates() -> None:
    assert sorted(path.name for path in UNITS.iterdir()) == sorted(INSTANCES)


@pytest.mark.parametrize("template", sorted(INSTANCES))
def test_systemd_analyze_verify_passes_without_a_warning(template: str, tmp_path: Path) -> None:
    verified = analyze("verify", str(render(template, tmp_path)))
    assert (verified.returncode, verified.stdout + verified.stderr) == (0, "")


def test_verify_does_flag_a_misspelt_setting(tmp_path: Path) -> None:
    # what the test above relies on: verify says so, even when it exits 0
    template = "hubsync-relay@.service"
    verified = analyze("verify", str(render(template, tmp_path, "ProtectHomes=yes")))
    assert "Unknown key 'ProtectHomes'" in verified.stderr


@pytest.mark.parametrize("template", sorted(INSTANCES))
def test_the_units_keep_their_hardening(template: str) -> None:
    settings = service_settings(template)
    assert {key: settings.get(key, [None])[-1] for key in HARDENING} == HARDENING
    assert settings["User"] == ["hubsync"]
    assert settings["RestartPreventExitStatus"] == ["2"]  # a usage error is not retried


@pytest.mark.parametrize("template", sorted(INSTANCES))
def test_systemd_rates_the_units_exposure_low(template: str, tmp_path: Path) -> None:
    rated = analyze(
        "security",
        "--offline=yes",
        f"--threshold={EXPOSURE_THRESHOLD}",
        str(render(template, tmp_path)),
    )
    assert rated.returncode == 0, rated.stdout[-400:] + rated.stderr
