"""Spans as JSON lines in a file: the exporter behind ``HUBSYNC_TRACES_FILE``.

Needs the OpenTelemetry SDK (the ``otel`` extra); ``hubsync.telemetry`` imports it only
once the SDK is known to be there.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult


class JsonLinesExporter(SpanExporter):
    """Appends each span as one JSON line (``ReadableSpan.to_json``) to a file opened for
    appending (private, ``0600``), so several processes may share it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Write ``spans``, one line each, in one ``write`` (appends do not interleave)."""
        lines = "".join(span.to_json(indent=None) + "\n" for span in spans)
        os.write(self._fd, lines.encode("utf-8"))
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Close the file."""
        os.close(self._fd)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        """Nothing is buffered: always done."""
        return True


__all__ = ["JsonLinesExporter"]
