"""How ``Redactor`` finds and replaces secrets: compiled rules, detection, the walk.

Every secret source, a registered value or a ``CredentialPattern``, becomes one
``Rule``: cheap probes that say whether a text may hold a match (substring
tests, and regexes that start with fixed text), and the regex that finds the
spans to replace. A ``Detector`` runs the probes of some rules; a ``Walk``
replaces the spans of the rules that hit, in a JSON-like value's keys and
strings.

``Redactor.redact_json`` probes a payload's serialised text once and walks the
payload with only the rules that hit there: each rule's probes find it in
JSON-escaped text as well, so a rule that misses the whole text misses every
string in it.
"""

from __future__ import annotations

import base64
import json
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from producers.redaction_rules import (
    KIND_CREDENTIAL,
    CredentialPattern,
    RedactionContext,
    is_secret_name,
)

MIN_SECRET_LENGTH = 6
"""Shortest value ``Redactor.register`` accepts (and shortest base64 text looked for)."""

KIND_REGISTERED = "registered"

_MAX_PASSES = 3
_SHORT = 160  # characters: below this, ``Detector`` tries one combined search first
_WHOLE_MARKER = re.compile(r"\[REDACTED:[a-z][a-z0-9_]{0,31}\]")

# Invisible characters that can split a token without showing: zero-width spaces and
# joiners, direction marks, word joiners, the byte order mark, the soft hyphen.
_INVISIBLE = re.compile("[\u00ad\u180e\u200b-\u200f\u2060-\u2064\ufeff]")
_URLSAFE = str.maketrans("+/", "-_")
_NUMBER = frozenset("0123456789.-+eE")  # the characters of a JSON number's text

# One encoder for the hot path: json.dumps would build a new one on every call.
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def marker(kind: str) -> str:
    """The text that replaces a secret of ``kind``."""
    return f"[REDACTED:{kind}]"


def blank_markers(text: str) -> str:
    """``text`` with each whole marker replaced by one NUL, which no rule reads."""
    return _WHOLE_MARKER.sub("\0", text)


def normalised(text: str) -> str:
    """``text`` as every rule reads it: NFKC (a fullwidth ``ghp_`` reads as ``ghp_``), without
    invisible characters. ASCII text, the common case, is returned as it is at once."""
    if text.isascii():
        return text
    if unicodedata.is_normalized("NFKC", text) and _INVISIBLE.search(text) is None:
        return text
    return _INVISIBLE.sub("", unicodedata.normalize("NFKC", text))


def views(text: str) -> tuple[str, ...]:
    """The text as written and, if it differs, normalised: a secret may show in either."""
    view = normalised(text)
    return (text,) if view == text else (text, view)


def base64_forms(value: str) -> set[str]:
    """The text every base64 encoding of ``value`` holds, wherever it sits in the encoded data.

    Base64 turns 3 bytes into 4 characters, so a value encoded inside longer data
    (``user:value``) reads one of three ways, by its offset modulo 3; each is kept
    without the characters its neighbours share. Standard and URL-safe alphabets.
    """
    data = value.encode("utf-8")
    forms: set[str] = set()
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + data).decode("ascii")
        core = encoded[-(-8 * offset // 6) : 8 * (offset + len(data)) // 6]
        if len(core) >= MIN_SECRET_LENGTH:
            forms.update((core, core.translate(_URLSAFE)))
    return forms


@dataclass(frozen=True, slots=True)
class Probe:
    """A cheap test that a text may hold a match: no false negatives, few false positives.

    With ``hints``, ``regex`` is tried where a hint starts in the lowercase text.
    Otherwise it is searched in text holding one of ``anchors`` (no anchors:
    always; no regex: an anchor is a hit). ``Detector`` runs them.
    """

    anchors: tuple[str, ...] = ()
    regex: re.Pattern[str] | None = None
    hints: tuple[str, ...] = ()


Rewrite = Callable[[str, RedactionContext], "str | None"]
Span = tuple[int, int, str, "Rewrite | None"]


@dataclass(frozen=True, slots=True, eq=False)
class Rule:
    """One secret source, compiled: how to detect it and which spans it replaces."""

    kind: str
    regex: re.Pattern[str]
    group: int | str
    text_probes: tuple[Probe, ...]
    json_probes: tuple[Probe, ...]
    pattern: CredentialPattern | None = None  # None: a registered value
    numeric: bool = False  # a registered value that a number's text may hold

    @classmethod
    def of_pattern(cls, p: CredentialPattern) -> Rule:
        """The rule of a credential format."""
        probe = Probe(p.anchors, re.compile(p.detect), p.hints)
        return cls(p.kind, re.compile(p.regex), p.group, (probe,), (probe,), p)

    @classmethod
    def of_secret(cls, value: str, kind: str) -> Rule:
        """The rule of a registered value: as written, split by single spaces, in base64.

        Matches are found at every start (the regex is a lookahead), so that
        overlapping copies leave no fragment between them.
        """
        spaced = " ?".join(re.escape(char) for char in value)
        forms = sorted(base64_forms(value))
        anchors = tuple(sorted({_common_piece(form) for form in forms}))
        probes = [Probe(regex=re.compile(spaced))] + ([Probe(anchors)] if anchors else [])
        # Its spelling inside JSON text, each character escaped as JSON escapes it.
        escaped = " ?".join(re.escape(dumps(char)[1:-1]) for char in value)
        json_probes = probes + ([Probe(regex=re.compile(escaped))] if escaped != spaced else [])
        regex = re.compile(f"(?=({'|'.join([spaced, *map(re.escape, forms)])}))")
        numeric = any(set(form) <= _NUMBER for form in (value, *forms))
        return cls(kind, regex, 1, tuple(probes), tuple(json_probes), numeric=numeric)

    def spans(self, text: str, shift: int = 0) -> list[Span]:
        """The spans of ``text`` this rule replaces, moved by ``shift``."""
        accept = self.pattern.accept if self.pattern else None
        rewrite = self.pattern.rewrite if self.pattern else None
        spans: list[Span] = []
        position = 0
        while (match := self.regex.search(text, position)) is not None:
            if accept is not None and not accept(match):
                position = match.start() + 1  # a rejected match may hide one inside it
                continue
            start, end = match.span(self.group)
            spans.append((start + shift, end + shift, self.kind, rewrite))
            position = max(match.end(), match.start() + 1)
        return spans


def _common_piece(form: str) -> str:
    # The longest run of a base64 form that both alphabets spell alike (no + / - _):
    # one substring test covers a standard and a URL-safe spelling.
    piece = max(re.split(r"[+/_-]", form), key=len)
    return piece if len(piece) >= MIN_SECRET_LENGTH else form


class Detector:
    """The probes of some rules, laid out flat: one pass of cheap tests per text."""

    def __init__(self, rules: tuple[Rule, ...], json_text: bool) -> None:
        self.rules = rules
        probes = [(r, p) for r in rules for p in (r.json_probes if json_text else r.text_probes)]
        self._plain = [(r, p.regex) for r, p in probes if p.regex and not p.anchors + p.hints]
        self._anchored = [(r, p.anchors, p.regex) for r, p in probes if p.anchors]
        hinted: dict[str, list[tuple[Rule, re.Pattern[str]]]] = {}
        for rule, probe in probes:
            for hint in probe.hints:
                assert probe.regex is not None
                hinted.setdefault(hint, []).append((rule, probe.regex))
        self._hinted = [(hint, tuple(tried)) for hint, tried in hinted.items()]
        # For short text (most strings of a payload) one search of every probe's start
        # rejects the text at once: an alternation costs little over a few characters.
        starts = [p.regex.pattern for _, p in probes if p.regex and not p.anchors + p.hints]
        starts += [re.escape(anchor) for _, p in probes for anchor in p.anchors]
        starts += [f"(?i:{re.escape(hint)})" for hint in hinted]
        self._short = re.compile("|".join(starts)) if starts else None

    def hits(self, text: str) -> tuple[Rule, ...]:
        """The rules whose probes say ``text`` may hold a match of theirs, in rule order."""
        if len(text) <= _SHORT and (self._short is None or not self._short.search(text)):
            return ()
        found = {rule for rule, regex in self._plain if regex.search(text)}
        for rule, anchors, regex in self._anchored:
            if (
                rule not in found
                and any(anchor in text for anchor in anchors)
                and (regex is None or regex.search(text))
            ):
                found.add(rule)
        if self._hinted:
            self._hinted_hits(text, found)
        return tuple(rule for rule in self.rules if rule in found) if found else ()

    def _hinted_hits(self, text: str, found: set[Rule]) -> None:
        # One search per hint; at each place it starts, every rule it may begin.
        lowered = text.lower()
        aligned = len(lowered) == len(text)  # else lowercasing moved the hints
        for hint, tried in self._hinted:
            start = lowered.find(hint)
            while start != -1 and not all(rule in found for rule, _ in tried):
                for rule, regex in tried:
                    if rule not in found and (
                        regex.match(text, start) if aligned else regex.search(text)
                    ):
                        found.add(rule)
                start = lowered.find(hint, start + 1)


class Walk:
    """Redaction of text and JSON-like values with the rules of ``detector``."""

    def __init__(self, detector: Detector, context: RedactionContext) -> None:
        rules = detector.rules
        self.detector = detector
        self.context = context
        self.keyed = tuple(r for r in rules if r.pattern is not None and r.pattern.keyed)
        self.secret_keys = any(r.pattern is not None and r.pattern.secret_keys for r in rules)
        # Only a registered value can be a number's text (a PIN): the formats need letters.
        self.numeric = any(r.pattern is None and r.numeric for r in rules)

    def text(self, text: str) -> str:
        """``text`` with every secret replaced.

        Text whose normalised form shows a secret comes back normalised, and
        redacted; text with no secret comes back as it is.
        """
        view = normalised(text)
        if view == text:
            return self._view(text)
        # Registered values as written first: one that normalisation would change is
        # found as it was registered. Credential formats are read normalised only.
        text = self._view(text, values_only=True)
        view = normalised(text)
        redacted = self._view(view)
        return text if redacted == view else redacted

    def value(self, value: Any) -> Any:
        """A copy of a JSON-like value with every secret replaced, in keys and values."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Mapping):
            return self._mapping(value)
        if isinstance(value, list | tuple):
            return [self.value(item) for item in value]
        if self.numeric and isinstance(value, int | float) and not isinstance(value, bool):
            text = dumps(value) if isinstance(value, float) else str(value)
            redacted = self.text(text)
            if redacted != text:
                return redacted
        return value

    def _view(self, text: str, values_only: bool = False) -> str:
        found = self._hits(text, values_only)
        if not found:
            return text
        result = text
        for _ in range(_MAX_PASSES):
            spans = [span for rule in found for span in rule.spans(result)]
            redacted = splice(result, spans, self.context)
            if redacted == result:  # nothing more to replace
                return redacted
            result = redacted
            found = self._hits(result, values_only)
            if not found:
                return result
        # A replacement glued pieces into a new secret more than once: give up on
        # precision rather than risk a leak.
        return marker(KIND_REGISTERED)

    def _hits(self, text: str, values_only: bool) -> tuple[Rule, ...]:
        found = self.detector.hits(text)
        return tuple(r for r in found if r.pattern is None) if values_only else found

    def _mapping(self, mapping: Mapping[Any, Any]) -> dict[Any, Any]:
        items = [
            (self.text(k) if isinstance(k, str) else k, k, self._entry(k, v))
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

    def _entry(self, key: Any, value: Any) -> Any:
        # The value of a mapping entry, also checked with its key as context: some
        # secrets are recognisable only by the name they are stored under.
        redacted = self.value(value)
        if not isinstance(key, str):
            return redacted
        if self.keyed and isinstance(redacted, str):
            offset = len(key) + 1
            entry = f"{key}:{redacted}"
            spans = [s for r in self.keyed for s in r.spans(entry, -offset) if s[0] >= 0]
            redacted = splice(redacted, spans, self.context)
        # Under a key that names a secret the value goes whatever it looks like, unless
        # it is one marker already (a more precise rule named it).
        if self.secret_keys and _replaceable(redacted) and is_secret_name(normalised(key)):
            return marker(KIND_CREDENTIAL)
        return redacted


def _replaceable(value: Any) -> bool:
    # A value worth replacing under a secret-named key: text or a number, not empty,
    # not already one marker; containers are walked instead, booleans and null say nothing.
    if isinstance(value, str):
        return bool(value) and _WHOLE_MARKER.fullmatch(value) is None
    return isinstance(value, int | float) and not isinstance(value, bool)


def splice(text: str, spans: list[Span], context: RedactionContext) -> str:
    """``text`` with each span replaced by its marker; overlapping spans become one.

    Where spans overlap, the longest names the marker. A span that overlaps no
    other may be rewritten instead (a path made relative to the project root).
    """
    if not spans:
        return text
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    out: list[str] = []
    cursor = 0
    index = 0
    while index < len(spans):
        start, end, kind, rewrite = spans[index]
        longest = end - start
        merged = False
        index += 1
        while index < len(spans) and spans[index][0] < end:
            s_start, s_end, s_kind, _ = spans[index]
            if s_end - s_start > longest:
                longest, kind = s_end - s_start, s_kind
            end = max(end, s_end)
            merged = True
            index += 1
        rewritten = None if merged or rewrite is None else rewrite(text[start:end], context)
        out.append(text[cursor:start])
        out.append(marker(kind) if rewritten is None else rewritten)
        cursor = end
    out.append(text[cursor:])
    return "".join(out)
