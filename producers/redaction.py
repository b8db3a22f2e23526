"""Redaction: every secret is replaced by ``[REDACTED:<kind>]`` before anything is written.

Three kinds of secret are recognised, in every string value and every key, at
any depth:

* values registered by the runtime (``Redactor.register``, kind ``registered``);
* values of environment variables named like secrets (``ENV_SECRET_NAMES``,
  ``ENV_SECRET_SUFFIXES``; ``register_environment``, kind ``env``), registered
  when a store opens, before its first append;
* well-known credential formats (``CREDENTIAL_PATTERNS``): GitHub tokens, AWS
  access key ids, AWS secret access keys (after a key name that says so), Slack
  tokens, PEM private-key blocks, JWTs, and the ``user:password`` part of URLs.

Secret values live only in this object's memory. A registered value must be at
least ``MIN_SECRET_LENGTH`` characters: a short one would redact ordinary text
(register "a" and every "a" disappears), so it is refused, and environment
values that short are skipped with a warning naming the variable.

Where matches overlap, the longest one decides the marker's kind and the whole
overlapping span is replaced, so no fragment of any secret survives. Numbers
whose text is a secret are replaced too (a numeric PIN is still a secret).

Hot path: ``redact_json`` serialises a payload once and runs ONE combined
regular expression over the text, plus a lowercase substring test for the
patterns that need a key name (``CredentialPattern.hint``); a clean payload (the
common case) costs that. Only a payload with a hit is walked value by value.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from producers.errors import SecretTooShortError, UnsafeSecretError

log = logging.getLogger(__name__)

MIN_SECRET_LENGTH = 6
"""Shortest value ``Redactor.register`` accepts."""

ENV_SECRET_SUFFIXES = (
    "_TOKEN",
    "_SECRET",
    "_PASSWORD",
    "_PASSWD",
    "_PASS",
    "_PWD",
    "_PASSPHRASE",
    "_KEY",  # also _API_KEY, _PRIVATE_KEY, _SECRET_KEY, _ACCESS_KEY
    "_APIKEY",
    "_CREDENTIALS",
    "_CREDENTIAL",
    "_AUTH",
    "_CONN_STR",
    "_CONNECTION_STRING",
)
"""Environment variables whose names end in one of these (any case) hold secrets.

Each starts with ``_`` so that ``PWD`` and ``OLDPWD`` (the shell's directories)
and words such as ``KEYBOARD`` or ``BYPASS`` are not taken for secrets."""

ENV_SECRET_NAMES = frozenset(
    {"PASSWORD", "PASSWD", "TOKEN", "SECRET", "PGPASSWORD", "HUBSYNC_PROOF"}
)
"""Environment variables with exactly one of these names (any case) hold secrets too."""

KIND_REGISTERED = "registered"
KIND_ENV = "env"

_KIND = re.compile(r"[a-z][a-z0-9_]{0,31}")
_MAX_PASSES = 3


@dataclass(frozen=True, slots=True)
class CredentialPattern:
    """A well-known credential format.

    ``regex`` finds it in a raw string; ``group`` is the part replaced (0 = the
    whole match). ``detect`` must match wherever ``regex`` does, in a raw string
    AND in its JSON-escaped form, and in a serialised ``"key":"value"`` pair when
    ``keyed``, so that one scan of serialised JSON can prove a payload clean.
    """

    kind: str
    regex: str
    detect: str
    group: int = 0
    keyed: bool = False
    """Also tried on each mapping entry as the text ``key:value``, so a value whose
    key names it (``{"SecretAccessKey": "..."}``) is found as it would be in text."""
    hint: str | None = None
    """A lowercase ASCII word every match holds, in any case. Such a pattern is
    searched only in text holding the word, not in the combined scan: a
    case-insensitive branch there would slow the scan of every payload."""


def _same(kind: str, regex: str) -> CredentialPattern:
    # For formats made only of characters JSON never escapes, one regex does both jobs.
    return CredentialPattern(kind, regex, regex)


# A 40-character AWS secret access key looks like any base64 text (a git commit id
# too), so it is recognised only after a key name that says what it is, as written in
# credentials files, environment dumps, JSON, YAML and XML: `aws_secret_access_key = `,
# `"SecretAccessKey": "`, `<SecretAccessKey>`, and any `secret_key`. The name stays;
# only the value goes.
_AWS_KEY_LABEL = r"(?ai:secret[_.-]?(?:access[_.-]?)?key)"
_AWS_KEY_BODY = r"[A-Za-z0-9/+]{40,}"


CREDENTIAL_PATTERNS: tuple[CredentialPattern, ...] = (
    # GitHub's classic tokens have 36 characters after the prefix; 30 also catches
    # a token cut short, which is still mostly secret. No format has an upper bound
    # here: a longer token is replaced whole, never leaving a tail behind.
    _same("github_token", r"gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,}"),
    _same("aws_access_key_id", r"(?:AKIA|ASIA)[A-Z0-9]{16,}"),
    # Separators are spaces and quotes (escaped inside JSON text: the detector allows
    # the backslash) around '=', '=>', ':' or an XML tag's '>'.
    CredentialPattern(
        "aws_secret_access_key",
        _AWS_KEY_LABEL + rf"[ \"']*(?:=>?|:|>)[ \"']*({_AWS_KEY_BODY})",
        _AWS_KEY_LABEL + rf"[ \"'\\]*(?:=>?|:|>)[ \"'\\]*{_AWS_KEY_BODY}",
        group=1,
        keyed=True,
        hint="secret",
    ),
    _same("slack_token", r"xox[abprs]-[A-Za-z0-9-]{10,}"),
    # A block cut short (no END line) is still key material: redact to the end.
    CredentialPattern(
        "private_key",
        r"(?s:-----BEGIN[ A-Z0-9]*PRIVATE KEY-----(?:.*?-----END[ A-Z0-9]*PRIVATE KEY-----|.*))",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY-----",
    ),
    _same("jwt", r"eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*"),
    # Only the userinfo is replaced, so the host stays readable. The password part
    # is greedy up to the LAST '@' of the authority: an unencoded '@' in a password
    # must not leave its tail behind. The user may be empty (`redis://:password@host`).
    # A user name cannot hold '[' (RFC 3986), which also keeps the pattern from
    # matching its own marker.
    CredentialPattern(
        "url_credentials",
        r"://([^\s/?#@:\[\]]*:[^\s/?#]+)@",
        r"://[^\s/?#@:\[\]]*:[^\s/?#]+@",
        group=1,
    ),
)


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


# One encoder for the hot path: json.dumps would build a new one on every call.
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


@dataclass(frozen=True, slots=True)
class _Detector:
    """Whether a text may hold a secret: one combined scan, then the hinted patterns."""

    combined: re.Pattern[str]
    hinted: tuple[tuple[str, re.Pattern[str]], ...]  # (hint, detect regex)

    def search(self, text: str) -> bool:
        """True if any secret or credential format may be in ``text``."""
        if self.combined.search(text) is not None:
            return True
        if not self.hinted:
            return False
        lowered = text.lower()
        return any(hint in lowered and rx.search(text) for hint, rx in self.hinted)


@dataclass(frozen=True, slots=True)
class _Matchers:
    """Everything ``redact`` needs, swapped as one object when registrations change."""

    secrets: tuple[tuple[str, str], ...]  # (value, kind), longest first
    patterns: tuple[tuple[re.Pattern[str], int, str], ...]
    keyed: tuple[tuple[re.Pattern[str], int, str], ...]  # also tried on "key:value"
    text_detector: _Detector
    json_detector: _Detector


class Redactor:
    """Replaces secrets in JSON-like values; see the module docstring for the rules."""

    def __init__(self, patterns: tuple[CredentialPattern, ...] = CREDENTIAL_PATTERNS) -> None:
        self._patterns = patterns
        self._kinds: dict[str, str] = {}
        self._lock = threading.Lock()
        self._matchers = self._build()
        self._listeners: list[Callable[[str], object]] = []

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
            self._matchers = self._build()
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
        """Whether ``text`` holds any registered value or credential format."""
        return self._matchers.text_detector.search(text)

    def redact_text(self, text: str) -> str:
        """``text`` with every secret replaced."""
        matchers = self._matchers
        if not matchers.text_detector.search(text):
            return text
        for _ in range(_MAX_PASSES):
            text = _replace_spans(text, matchers)
            if not matchers.text_detector.search(text):
                return text
        # A replacement glued pieces into a new secret more than once: give up on
        # precision rather than risk a leak.
        return marker(KIND_REGISTERED)

    def redact(self, value: Any) -> Any:
        """A copy of a JSON-like value with every secret replaced, in keys and values."""
        if isinstance(value, str):
            return self.redact_text(value)
        if isinstance(value, Mapping):
            return self._redact_mapping(value)
        if isinstance(value, list | tuple):
            return [self.redact(item) for item in value]
        if isinstance(value, int | float) and not isinstance(value, bool):
            text = _dumps(value) if isinstance(value, float) else str(value)
            if self.contains_secret(text):
                return self.redact_text(text)
        return value

    def redact_json(self, payload: Any) -> tuple[Any, str]:
        """Redact ``payload`` and return it with its compact JSON text.

        One serialisation and one scan when the payload is clean; the returned
        object is then ``payload`` itself (not a copy). Raises ``ValueError`` or
        ``TypeError`` if the payload is not JSON (NaN, sets, ...).
        """
        text = _dumps(payload)
        if not self._matchers.json_detector.search(text):
            return payload, text
        redacted = self.redact(payload)
        return redacted, _dumps(redacted)

    def _redact_mapping(self, mapping: Mapping[Any, Any]) -> dict[Any, Any]:
        items = [
            (self.redact_text(k) if isinstance(k, str) else k, k, self._redact_entry(k, v))
            for k, v in mapping.items()
        ]
        result: dict[Any, Any] = {}
        collided: list[tuple[Any, Any, Any]] = []
        counts = Counter(new for new, _, _ in items)
        for item in items:
            if counts[item[0]] > 1:
                collided.append(item)
            else:
                result[item[0]] = item[2]
        # Two keys that redact to the same marker both survive, numbered in the order
        # of their original keys so the result does not depend on dict order.
        collided.sort(key=lambda item: str(item[1]))
        for new, _, value in collided:
            key, n = new, 1
            while key in result:
                n += 1
                key = f"{new}~{n}"
            result[key] = value
        return result

    def _redact_entry(self, key: Any, value: Any) -> Any:
        # The value of a mapping entry, also checked with its key as context: some
        # secrets are recognisable only by the name they are stored under.
        redacted = self.redact(value)
        keyed = self._matchers.keyed
        if not keyed or not isinstance(key, str) or not isinstance(redacted, str):
            return redacted
        offset = len(key) + 1
        spans = [
            (start - offset, end - offset, kind)
            for start, end, kind in _pattern_spans(f"{key}:{redacted}", keyed)
            if start >= offset
        ]
        return _splice(redacted, spans)

    def _build(self) -> _Matchers:
        secrets = tuple(sorted(self._kinds.items(), key=lambda kv: -len(kv[0])))
        raw = [re.escape(value) for value, _ in secrets]
        escaped = [
            re.escape(form)
            for value, _ in secrets
            if (form := _dumps(value)[1:-1]) != value  # its spelling inside JSON text
        ]
        detect = [p.detect for p in self._patterns if p.hint is None]
        hinted = tuple((p.hint, re.compile(p.detect)) for p in self._patterns if p.hint)
        patterns = tuple((re.compile(p.regex), p.group, p.kind) for p in self._patterns)
        return _Matchers(
            secrets=secrets,
            patterns=patterns,
            keyed=tuple(m for m, p in zip(patterns, self._patterns, strict=True) if p.keyed),
            text_detector=_Detector(_alternation([*raw, *detect]), hinted),
            json_detector=_Detector(_alternation([*raw, *escaped, *detect]), hinted),
        )


def _alternation(branches: list[str]) -> re.Pattern[str]:
    # An empty alternation would match everywhere; nothing to find must find nothing.
    return re.compile("|".join(branches) if branches else "(?!)")


def is_secret_variable(name: str) -> bool:
    """Whether an environment variable of this name holds a secret (see ``ENV_SECRET_*``)."""
    upper = name.upper()
    return upper in ENV_SECRET_NAMES or upper.endswith(ENV_SECRET_SUFFIXES)


_Span = tuple[int, int, str]


def _pattern_spans(
    text: str, patterns: tuple[tuple[re.Pattern[str], int, str], ...]
) -> list[_Span]:
    return [
        (*match.span(group), kind)
        for regex, group, kind in patterns
        for match in regex.finditer(text)
    ]


def _replace_spans(text: str, matchers: _Matchers) -> str:
    spans: list[_Span] = []
    for value, kind in matchers.secrets:
        start = text.find(value)
        while start != -1:
            spans.append((start, start + len(value), kind))
            start = text.find(value, start + 1)
    spans.extend(_pattern_spans(text, matchers.patterns))
    return _splice(text, spans)


def _splice(text: str, spans: list[_Span]) -> str:
    # Each span becomes one marker; overlapping spans merge into one.
    if not spans:
        return text
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    out: list[str] = []
    cursor = 0
    index = 0
    while index < len(spans):
        start, end, kind = spans[index]
        longest = end - start
        index += 1
        # Merge every span overlapping this cluster; the longest match names it.
        while index < len(spans) and spans[index][0] < end:
            s_start, s_end, s_kind = spans[index]
            if s_end - s_start > longest:
                longest, kind = s_end - s_start, s_kind
            end = max(end, s_end)
            index += 1
        out.append(text[cursor:start])
        out.append(marker(kind))
        cursor = end
    out.append(text[cursor:])
    return "".join(out)
