"""Logging set-up for the daemons: stdlib logging, plain text or one JSON object per line.

Log records never carry event bytes or secret values; callers log keys
(project, run, sequence) and hashes only. Those keys may have come off Redis,
where anyone with write access chooses them, so both formats escape control
characters in what a record says: a newline cannot forge a log line of its
own, nor an ESC byte drive the terminal that tails the log.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Mapping
from datetime import UTC, datetime

from hubsync.core.clock import format_timestamp
from hubsync.core.redis_values import printable


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, and any ``extra`` keys."""

    _STANDARD = frozenset(vars(logging.makeLogRecord({})).keys()) | {"message", "asctime"}

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "time": format_timestamp(datetime.fromtimestamp(record.created, UTC)),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in self._STANDARD and not key.startswith("_"):
                payload[key] = _field(value)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        # JSON escapes C0 controls itself; the rest it leaves raw with ensure_ascii off
        return _JSON_UNPRINTABLE.sub(_json_escape, json.dumps(payload, ensure_ascii=False))


def _field(value: object) -> object:
    """An ``extra`` value as JSON takes it: a scalar or None as is, a mapping (a daemon's
    summary) as an object of such values, anything else as its ``str``."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Mapping):
        return {str(key): _field(item) for key, item in value.items()}
    return str(value)


_JSON_UNPRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
"""What JSON leaves raw and a terminal may act on (DEL, C1 controls, separators, bidi)."""


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"  # the same string once parsed


class TextFormatter(logging.Formatter):
    """``<time> <LEVEL> <logger>: <message>``, the line's control characters escaped.

    Only the line itself is escaped: a traceback the record carries follows
    on lines of its own, as Python printed it.
    """

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s: %(message)s")

    def formatMessage(self, record: logging.LogRecord) -> str:
        """The record's line, with ``printable``'s escapes."""
        return printable(super().formatMessage(record))


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Send hubsync's logs to stderr in the chosen format (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(TextFormatter())
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
