"""Tracing for the daemons: the OpenTelemetry SDK, configured from the environment.

The runtime, relay and consumer trace through the OpenTelemetry API alone
(``hubsync.core.tracing``); without an SDK that is a no-op. ``hubsync relay`` and
``hubsync consume`` call ``configure_tracing`` at start, which installs the SDK's
tracer provider when the environment asks for spans (docs/operations.md, tracing):

* ``OTEL_TRACES_EXPORTER``: a comma-separated list of ``otlp`` (OTLP over HTTP, to
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, read by the
  exporter itself), ``console`` (JSON on standard error) and ``none``. Unset, no exporter
  is configured: tracing is opt-in;
* ``HUBSYNC_TRACES_FILE``: a file the spans are appended to, one JSON object a line, as
  each span ends (for a quick look without a collector, and for the tests);
* ``OTEL_SDK_DISABLED=true`` turns all of it off; ``OTEL_SERVICE_NAME`` names the
  service (default ``hubsync-relay`` or ``hubsync-consume``), and the SDK reads the other
  standard variables (``OTEL_RESOURCE_ATTRIBUTES``, ``OTEL_TRACES_SAMPLER``,
  ``OTEL_BSP_*``, ``OTEL_EXPORTER_OTLP_HEADERS``...) itself.

The SDK and the OTLP exporter come with the ``otel`` extra (``pip install
'hubsync[otel]'``); asking for spans without it is a configuration error, said in one line.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hubsync.core.errors import ConfigError

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

TRACES_FILE_ENV = "HUBSYNC_TRACES_FILE"
"""Where ``configure_tracing`` appends finished spans as JSON lines, when set."""

_EXPORTERS = ("otlp", "console", "none")


@dataclass(frozen=True, slots=True)
class Tracing:
    """The SDK set up by ``configure_tracing``: flush and stop it with ``shutdown``."""

    provider: TracerProvider
    exporters: tuple[str, ...]

    def shutdown(self) -> None:
        """Export what is still buffered, then stop the exporters."""
        self.provider.shutdown()


def tracing_requested(environ: Mapping[str, str]) -> tuple[str, ...]:
    """The exporters the environment asks for (``otlp``, ``console``, ``file``), none when
    it asks for none or disables the SDK; ``ConfigError`` names an unknown exporter."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return ()
    names = [
        name.strip().lower()
        for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",")
        if name.strip()
    ]
    unknown = [name for name in names if name not in _EXPORTERS]
    if unknown:
        raise ConfigError(
            f"OTEL_TRACES_EXPORTER names {unknown[0][:40]!r}; hubsync knows "
            f"{', '.join(_EXPORTERS)} (or set {TRACES_FILE_ENV} to a file)"
        )
    chosen = [name for name in dict.fromkeys(names) if name != "none"]
    if environ.get(TRACES_FILE_ENV):
        chosen.append("file")
    return tuple(chosen)


def configure_tracing(
    default_service: str, environ: Mapping[str, str] | None = None
) -> Tracing | None:
    """Install the SDK's tracer provider as the environment asks (see the module), or do
    nothing and return None when it asks for no exporter."""
    env = os.environ if environ is None else environ
    exporters = tracing_requested(env)
    if not exporters:
        return None
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SimpleSpanProcessor,
        )

        from hubsync.trace_file import JsonLinesExporter
    except ImportError:
        raise ConfigError(
            f"tracing is asked for ({', '.join(exporters)}) but the OpenTelemetry SDK is not "
            "installed: pip install 'hubsync[otel]', or unset OTEL_TRACES_EXPORTER and "
            f"{TRACES_FILE_ENV}"
        ) from None
    service = env.get("OTEL_SERVICE_NAME") or default_service
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    for name in exporters:
        if name == "otlp":
            provider.add_span_processor(BatchSpanProcessor(_otlp_exporter(exporters)))
        elif name == "console":
            provider.add_span_processor(BatchSpanProcessor(ConsoleSpanExporter()))
        else:  # each span as it ends: a file read while the daemon runs misses nothing
            path = Path(env[TRACES_FILE_ENV])
            provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    trace.set_tracer_provider(provider)
    return Tracing(provider, exporters)


def _otlp_exporter(exporters: tuple[str, ...]) -> SpanExporter:
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        raise ConfigError(
            f"tracing is asked for ({', '.join(exporters)}) but the OTLP exporter is not "
            "installed: pip install 'hubsync[otel]'"
        ) from None
    return OTLPSpanExporter()


__all__ = [
    "TRACES_FILE_ENV",
    "Tracing",
    "configure_tracing",
    "tracing_requested",
]
