"""Logging set-up for the daemons: stdlib logging, plain text or one JSON object per line.

Log records never carry event bytes or secret values; callers log keys
(project, run, sequence) and hashes only.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime

from hubsync.clock import format_timestamp


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
                payload[key] = value if isinstance(value, (str, int, float, bool)) else str(value)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return json.dumps(payload, ensure_ascii=False)


def configure_logging(level: str = "INFO", fmt: str = "text") -> None:
    """Send hubsync's logs to stderr in the chosen format (idempotent)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    for existing in list(root.handlers):
        root.removeHandler(existing)
    root.addHandler(handler)
    root.setLevel(level.upper())
