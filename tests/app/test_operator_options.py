"""Parsing of operator arguments: durations, dead-letter ids, URLs shown without credentials."""

from __future__ import annotations

import pytest

from consumers.views.dead_letters import validate_entry_id
from hubsync.core.durations import parse_duration
from hubsync.core.errors import ConfigError
from hubsync.core.settings import safe_url


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90.0),
        ("90s", 90.0),
        ("15m", 900.0),
        ("2h", 7200.0),
        ("7d", 604800.0),
        ("1w", 604800.0),
        ("1h30m", 5400.0),
        ("0.5s", 0.5),
        (" 2M ", 120.0),
    ],
)
def test_durations_in_seconds_or_with_units(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["", "soon", "3 fortnights", "1x", "h", "-5", "1h 30m", "30s5", "1h30"]
)
def test_malformed_durations_are_refused_with_the_accepted_forms(text: str) -> None:
    with pytest.raises(ConfigError, match="15m"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["36501d", "999999999d", "9" * 400, "5300w"])
def test_durations_beyond_a_century_are_refused_in_one_line(text: str) -> None:
    with pytest.raises(ConfigError, match="longer than any duration hubsync takes"):
        parse_duration(text)
    assert parse_duration("36500d") == 36500 * 86400


@pytest.mark.parametrize("text", ["1-0", "1764431934123-0", "1764431934123-17"])
def test_full_stream_ids_are_dead_letter_ids(text: str) -> None:
    assert validate_entry_id(text) == text


@pytest.mark.parametrize("text", ["", "12345", "1-", "-1", "a-b", "1-0-0", "+", "$"])
def test_other_text_is_not_a_dead_letter_id(text: str) -> None:
    with pytest.raises(ConfigError, match="not a dead-letter id"):
        validate_entry_id(text)


def test_urls_are_shown_without_user_or_password() -> None:
    shown = safe_url("redis://ops:hunter2@redis.internal:6380/2")
    assert shown == "redis://redis.internal:6380/2"
    assert "hunter2" not in safe_url("rediss://:hunter2@h/0")
