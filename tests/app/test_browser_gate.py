"""The browser tests' gate: without chromium they are skipped with the reason shown, and in CI
they fail instead (``tests/helpers/browser_support.require_chromium``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers import browser_support


def test_without_chromium_the_browser_tests_skip_saying_why(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(browser_support, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="apt-get install chromium"):
        browser_support.require_chromium()


def test_in_ci_a_missing_chromium_fails_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(browser_support, "CHROMIUM", tmp_path / "no-chromium")
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI never skips them"):
        browser_support.require_chromium()
