"""Redaction: every secret is replaced by ``[REDACTED:<kind>]`` before anything is written.

What is recognised, in every string value and every key, at any depth:

* values registered by the runtime (``Redactor.register``, kind ``registered``),
  also split by single spaces and in base64;
* values of environment variables named like secrets (``is_secret_variable``;
  ``register_environment``, kind ``env``), registered when a store opens,
  before its first append;
* the credential formats of ``CREDENTIAL_PATTERNS`` (``producers.redaction_rules``):
  vendor tokens, private keys, JWTs, URL credentials and signatures, any value
  after a key that names a secret (``token=...``), and absolute paths outside
  the project root (a path inside it is made relative to it).

Text is read normalised (NFKC, without zero-width characters), so fullwidth
lookalikes and invisible splits are found too. Secret values live only in this
object's memory. A registered value must be at least ``MIN_SECRET_LENGTH``
characters: a short one would redact ordinary text, so it is refused, and
environment values that short are skipped with a warning naming the variable.

Where matches overlap, the longest one decides the marker's kind and the whole
overlapping span is replaced, so no fragment of any secret survives. Numbers
whose text is a secret are replaced too (a numeric PIN is still a secret).
Redaction is deterministic: the same value, secrets and project root give the
same result.

Hot path: ``redact_json`` serialises a payload once and probes the text once
per rule (substring tests and searches that start with fixed text,
``producers.redaction_engine``); a clean payload (the common case) costs that.
Only a payload with a hit is walked, with only the rules that hit.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from producers.errors import SecretTooShortError, UnsafeSecretError
from producers.redaction_engine import (
    KIND_REGISTERED,
    MIN_SECRET_LENGTH,
    Detector,
    Rule,
    Walk,
    base64_forms,
    blank_markers,
    dumps,
    marker,
    normalised,
    views,
)
from producers.redaction_rules import (
    CREDENTIAL_PATTERNS,
    ENV_SECRET_NAMES,
    KIND_CREDENTIAL,
    KIND_PATH,
    CredentialPattern,
    RedactionContext,
    is_secret_name,
    is_secret_variable,
)

__all__ = [
    "CREDENTIAL_PATTERNS",
    "ENV_SECRET_NAMES",
    "KIND_CREDENTIAL",
    "KIND_ENV",
    "KIND_PATH",
    "KIND_REGISTERED",
    "MIN_SECRET_LENGTH",
    "CredentialPattern",
    "Redactor",
    "base64_forms",
    "is_secret_name",
    "is_secret_variable",
    "marker",
    "normalised",
]

log = logging.getLogger(__name__)

KIND_ENV = "env"

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")


class Redactor:
    """Replaces secrets in JSON-like values; see the module docstring for the rules.

    ``project_root`` is the project's directory: an absolute path inside it is
    rewritten relative to it, any other absolute path is replaced (None: every
    absolute path is replaced). ``home`` is what ``~`` stands for (default: this
    user's home directory).
    """

    def __init__(
        self,
        patterns: tuple[CredentialPattern, ...] = CREDENTIAL_PATTERNS,
        *,
        project_root: Path | str | None = None,
        home: Path | str | None = None,
    ) -> None:
        self._patterns = patterns
        self._pattern_rules = tuple(Rule.of_pattern(p) for p in patterns)
        self._context = RedactionContext.of(project_root, home if home else _home())
        self._kinds: dict[str, str] = {}
        self._lock = threading.Lock()
        self._detectors = self._build()
        self._listeners: list[Callable[[str], object]] = []

    @property
    def project_root(self) -> str | None:
        """The project root paths are made relative to (None: no project root)."""
        return self._context.project_root

    @property
    def secret_count(self) -> int:
        """How many distinct values are registered (the values themselves are never exposed)."""
        return len(self._kinds)

    def register(self, value: str, kind: str = KIND_REGISTERED) -> None:
        """Redact ``value`` from now on, as ``[REDACTED:<kind>]``.

        Raises ``SecretTooShortError`` for values shorter than ``MIN_SECRET_LENGTH``
        and ``UnsafeSecretError`` for text of a redaction marker such as
        ``REDACTED`` (the messages never repeat the value).
        """
        if not isinstance(value, str):
            raise TypeError("a secret must be a str")
        if len(value) < MIN_SECRET_LENGTH:
            raise SecretTooShortError(
                f"refusing to register a secret shorter than {MIN_SECRET_LENGTH} characters: "
                "it would redact ordinary text; register the full credential instead"
            )
        if not _KIND.fullmatch(kind):
            raise ValueError("a redaction kind is 1-32 lowercase letters, digits or '_'")
        with self._lock:
            if value in self._kinds:
                return
            # A secret inside a marker would reappear in every replacement of itself.
            kinds = {KIND_REGISTERED, KIND_ENV, kind, *self._kinds.values()}
            kinds.update(p.kind for p in self._patterns)
            if any(value in marker(k) for k in kinds) or any(
                known in marker(kind) for known in self._kinds
            ):
                raise UnsafeSecretError(
                    "refusing to register a secret that is part of the redaction marker text "
                    f"{marker(kind)!r}; register the full credential instead"
                )
            self._kinds[value] = kind
            self._detectors = self._build()
            listeners = list(self._listeners)
        # After the swap: what is appended from now on is redacted already, and each
        # listener (a store) scrubs what was written before, outside the lock.
        for listener in listeners:
            listener(value)

    def on_register(self, listener: Callable[[str], object]) -> Callable[[], None]:
        """Call ``listener(value)`` after each new value is registered; returns an unsubscribe.

        ``RunEventStore`` listens so that rows written before a secret was known
        are scrubbed by the call that registers it (docs/redaction.md).
        """
        with self._lock:
            self._listeners.append(listener)

        def unsubscribe() -> None:
            with self._lock:
                if listener in self._listeners:
                    self._listeners.remove(listener)

        return unsubscribe

    def register_environment(self, environ: Mapping[str, str] | None = None) -> list[str]:
        """Register the values of secret-named environment variables; return their names.

        A value shorter than ``MIN_SECRET_LENGTH`` is skipped with a warning that
        names the variable (never its value): refusing it would make every store
        open fail on a harmless ``FOO_KEY=1``. Surrounding whitespace is also
        registered stripped, since a copy in a payload rarely keeps it.
        """
        source = os.environ if environ is None else environ
        registered: list[str] = []
        for name, value in source.items():
            if not is_secret_variable(name) or not value:
                continue
            candidates = {value, value.strip()}
            usable = [c for c in candidates if len(c) >= MIN_SECRET_LENGTH]
            if not usable:
                log.warning(
                    "environment variable %s is shorter than %d characters; not redacted",
                    name,
                    MIN_SECRET_LENGTH,
                )
                continue
            try:
                for candidate in usable:
                    self.register(candidate, KIND_ENV)
            except UnsafeSecretError:
                log.warning("environment variable %s cannot be redacted safely; skipped", name)
                continue
            registered.append(name)
        return registered

    def contains_secret(self, text: str) -> bool:
        """Whether ``text`` holds a registered value or a credential format (paths aside).

        This is what a run id or event type is checked with: an absolute path in
        one is no secret, so it does not count here.
        """
        detector = self._detectors[0]
        for view in views(text):
            for rule in detector.hits(view):
                if (rule.pattern is None or rule.pattern.in_ids) and rule.spans(view):
                    return True
        return False

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced (normalised first if that shows one)."""
        return Walk(self._detectors[0], self._context).text(text)

    def redact(self, value: Any) -> Any:
        """A copy of a JSON-like value with every secret replaced, in keys and values."""
        return Walk(self._detectors[0], self._context).value(value)

    def redact_json(self, payload: Any) -> tuple[Any, str]:
        """Redact ``payload`` and return it with its compact JSON text.

        One serialisation and one probe per rule when the payload is clean; the
        returned object is then ``payload`` itself (not a copy). Raises
        ``ValueError`` or ``TypeError`` if the payload is not JSON (NaN, sets, ...).
        """
        text_detector, json_detector = self._detectors
        text = dumps(payload)
        found = _json_hits(json_detector, text)
        if not found:
            return payload, text
        redacted = Walk(Detector(found, json_text=False), self._context).value(payload)
        result = dumps(redacted)
        # A rule that missed the payload and hits its redacted text found something a
        # replacement made: walk again with every rule. (Markers are blanked first:
        # their kinds hold words such as `token` that some probes start at.)
        if not set(_json_hits(json_detector, blank_markers(result))) <= set(found):
            redacted = Walk(text_detector, self._context).value(redacted)
            result = dumps(redacted)
        return redacted, result

    def _build(self) -> tuple[Detector, Detector]:
        # Registered values first, longest first: on an equal span, the earlier rule
        # names the marker. One detector for plain text, one for JSON text.
        secrets = sorted(self._kinds.items(), key=lambda kv: -len(kv[0]))
        rules = (*(Rule.of_secret(v, k) for v, k in secrets), *self._pattern_rules)
        return Detector(rules, json_text=False), Detector(rules, json_text=True)


def _json_hits(detector: Detector, text: str) -> tuple[Rule, ...]:
    found = {rule for view in views(text) for rule in detector.hits(view)}
    return tuple(rule for rule in detector.rules if rule in found)


def _home() -> str | None:
    try:
        return str(Path.home())
    except RuntimeError:  # no HOME and no password entry
        return None


_CREDENTIALS = Redactor(tuple(p for p in CREDENTIAL_PATTERNS if p.kind != KIND_PATH))


def credentials_redacted(text: str) -> str:
    """``text`` (an effect's target, what git printed) with every credential format
    replaced: URL userinfo, ``token=`` query values, known token formats. Paths stay: they
    are not secrets outside a payload."""
    return _CREDENTIALS.redact_text(text)


def credentials_redacted_value(value: Any) -> Any:
    """``credentials_redacted`` of every string of a JSON-like value (an effect's receipt)."""
    return _CREDENTIALS.redact(value)
