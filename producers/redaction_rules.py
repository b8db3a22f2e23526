"""The redaction rules: one table of named credential formats, and which names hold secrets.

``CREDENTIAL_PATTERNS`` is the table ``Redactor`` applies (docs/redaction.md lists
it with what each rule does and does not cover). ``is_secret_name`` decides
whether a key names a secret (``password``, ``clientSecret``, ``X-Auth-Token``):
the value after such a key is replaced whatever it looks like, in text
(``token=...``) and in a JSON object alike. ``is_secret_variable`` is the same
rule for environment variables, plus the names only an environment uses.

Every rule matches text already normalised (NFKC, zero-width characters
removed: ``producers.redaction_engine.normalised``), so fullwidth lookalikes and zero-width
splits need no rule of their own. Prefixed token formats also accept single
spaces inside the token's first characters (``_spaced``): a token pasted with
a space in it is still found, and ordinary words after a whole token are not.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

KIND_PATH = "path"
"""The kind of an absolute path outside the project root (``[REDACTED:path]``)."""
KIND_CREDENTIAL = "credential"
"""The kind of a value stored under a key that names a secret (``is_secret_name``)."""


@dataclass(frozen=True, slots=True)
class RedactionContext:
    """What a rule's ``rewrite`` may depend on besides the text: fixed per ``Redactor``."""

    project_root: str | None
    """The project root as an absolute POSIX path without a trailing ``/``; None if unknown."""
    home: str | None
    """The home directory ``~`` stands for; None if unknown."""

    @classmethod
    def of(cls, project_root: Path | str | None, home: Path | str | None) -> RedactionContext:
        """The context of a root and home; a root of ``/`` counts as no root at all."""
        root = posixpath.normpath(str(project_root)) if project_root is not None else None
        if root is not None and (root == "/" or not root.startswith("/")):
            root = None
        return cls(root, posixpath.normpath(str(home)) if home is not None else None)


@dataclass(frozen=True, slots=True)
class CredentialPattern:
    """A well-known credential format.

    ``regex`` finds it in a raw string; ``group`` is the part replaced (0 = the
    whole match; a number or a name). ``detect`` must match wherever ``regex``
    does, in a raw string AND in its JSON-escaped form, and in a serialised
    ``"key":"value"`` pair when ``keyed`` or ``secret_keys``, so that one probe
    of serialised JSON can prove a payload clean.
    """

    kind: str
    regex: str
    detect: str
    group: int | str = 0
    keyed: bool = False
    """Also tried on each mapping entry as the text ``key:value``, so a value whose
    key names it (``{"SecretAccessKey": "..."}``) is found as it would be in text."""
    anchors: tuple[str, ...] = ()
    """Text one of which every match holds: ``detect`` is searched only in text that
    holds one. For a ``detect`` that does not start with fixed text, which Python's
    engine would try at every position (a substring test is much cheaper)."""
    hints: tuple[str, ...] = ()
    """For a rule matched in any case, instead of ``anchors``: lowercase ASCII words,
    one of which every match STARTS with; ``detect`` is tried only where one starts
    (a case-insensitive search of the whole text would slow every payload)."""
    accept: Callable[[re.Match[str]], bool] | None = None
    """A final say on each match the regex cannot express (which names hold secrets)."""
    rewrite: Callable[[str, RedactionContext], str | None] | None = None
    """The replacement of a match (None: the marker). Used only where the match
    overlaps no other, so a rewrite can never keep part of another secret."""
    in_ids: bool = True
    """Whether a run id or event type holding a match is refused (a path is no secret)."""
    secret_keys: bool = False
    """Also replace, whole, a mapping value whose key names a secret (``is_secret_name``)."""

    def __post_init__(self) -> None:
        if self.anchors and self.hints:
            raise ValueError(f"rule {self.kind} has anchors or hints, not both")


def _rule(kind: str, regex: str, *anchors: str) -> CredentialPattern:
    # For formats made only of characters JSON never escapes, one regex does both jobs.
    return CredentialPattern(kind, regex, regex, anchors=anchors)


def _spaced(chars: str, minimum: int) -> str:
    # At least `minimum` of `chars`, with at most one space between any two of the first
    # `minimum`, then any more of `chars` (no space): a token split by a pasted space
    # is found whole, and a word after a complete token is left alone.
    return rf"(?:{chars} ?){{{minimum - 1}}}{chars}+"


_ALNUM = "[A-Za-z0-9]"
_B64URL = "[A-Za-z0-9_-]"

# --- names that hold secrets -----------------------------------------------------

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")

SECRET_WORDS = frozenset(
    {"secret", "secrets", "password", "passwords", "passwd", "passphrase"}
    | {"credential", "credentials", "apikey", "privatekey"}
)
"""A name holding one of these words anywhere holds a secret (``CLIENT_SECRET_VALUE``)."""

SECRET_LAST_WORDS = frozenset({"token", "auth", "authorization", "dsn"})
"""A name ending in one of these words holds a secret (``X-Auth-Token``, ``SENTRY_DSN``)."""

SECRET_LAST_WORDS_AFTER_ANOTHER = frozenset({"pass", "pwd", "sk"})
"""Words that name a secret only after another word (``DB_PASS``, ``STRIPE_SK``); alone,
``pass`` and ``pwd`` are ordinary (a test count, the shell's directory)."""

SECRET_KEY_QUALIFIERS = frozenset(
    {"api", "private", "secret", "access", "account", "signing", "encryption", "master"}
    | {"client", "shared", "license", "deploy", "ssh", "gpg", "pgp", "sas"}
)
"""``key`` names a secret after one of these words (``api_key``, ``AccountKey``); a
``cache_key`` or ``sort_key`` is ordinary."""

SECRET_LAST_PAIRS = frozenset({("conn", "str"), ("connection", "string")})
"""Two-word endings that name a secret (``DB_CONN_STR``)."""

ENV_SECRET_NAMES = frozenset({"PGPASSWORD", "HUBSYNC_PROOF"})
"""Environment variables with one of these names (any case) hold secrets too."""


def name_words(name: str) -> list[str]:
    """The lowercase words of an identifier: ``X-Auth-Token`` and ``xAuthToken`` alike."""
    return [word.lower() for word in _WORD.findall(name)]


def _is_secret_words(words: list[str], any_key: bool) -> bool:
    if not words:
        return False
    if not SECRET_WORDS.isdisjoint(words) or words[-1] in SECRET_LAST_WORDS:
        return True
    if len(words) < 2:
        return False
    last, before = words[-1], words[-2]
    if last in SECRET_LAST_WORDS_AFTER_ANOTHER or (before, last) in SECRET_LAST_PAIRS:
        return True
    return last == "key" and (any_key or before in SECRET_KEY_QUALIFIERS)


MAX_NAME_LENGTH = 200
"""Longer keys are not read as names (the probes that find names look no further)."""


def is_secret_name(name: str) -> bool:
    """Whether a key of this name holds a secret (see ``SECRET_*``), in any spelling."""
    return len(name) <= MAX_NAME_LENGTH and _is_secret_words(name_words(name), any_key=False)


def is_secret_variable(name: str) -> bool:
    """Whether an environment variable of this name holds a secret.

    ``is_secret_name``, and also any ``*_KEY`` (``SIGNING_KEY``) and the names in
    ``ENV_SECRET_NAMES``. Words are split at ``_``, so ``PWD``, ``OLDPWD``,
    ``KEYBOARD``, ``BYPASS`` and ``AUTHOR`` are not secrets.
    """
    if name.upper() in ENV_SECRET_NAMES:
        return True
    return _is_secret_words([w.lower() for w in name.split("_") if w], any_key=True)


# --- key/value credentials -------------------------------------------------------

_ASSIGN_SEPARATOR = r"""["']?[ \t]*(?P<sep>=>?|:|(?<=[A-Za-z0-9_-])[ \t](?=[ \t]*[^ \t=:]))[ \t]*"""
_SCHEME = r"(?:(?i:bearer|basic|token|digest|negotiate)[ \t]+)?+"
_NOT_MARKER = r"(?!\[REDACTED:)"
_ASSIGN_VALUE = (
    rf"(?P<value>(?<=\"){_NOT_MARKER}(?=[^\"\n]*[^\s\"\\])[^\"\n]+"
    rf"|(?<='){_NOT_MARKER}(?=[^'\n]*[^\s'\\])[^'\n]+"
    rf"|(?<![\"']){_NOT_MARKER}[^\s\"',;&<>{{\[\\][^\s\"',;&<>]*)"
)
_ASSIGN_REGEX = (
    rf"(?P<name>(?<![\w.-])-{{0,2}}[A-Za-z][\w.-]*){_ASSIGN_SEPARATOR}[\"']?{_SCHEME}"
    + _ASSIGN_VALUE
)
# From the hint that starts it, a name `is_secret_name` accepts (and more): in text and
# in JSON-escaped text, up to its separator and the first character of a value; as a
# JSON object's key, up to the end of the key and a non-empty string or a number (the
# value `secret_keys` replaces). A word that counts anywhere may be followed by more
# of the name; a last word only by what splits words. Every secret name holds a hint
# in its lowercase form.
_ASSIGN_HINTS = ("secret", "pass", "credential", "token", "auth", "dsn", "pwd", "sk", "conn", "key")
_NAME_ANYWHERE = r"(?:secret|passw|passphrase|credential|(?<=api)key|(?<=private)key)"
_NAME_LAST = (
    r"(?:token|auth|authorization|dsn|pass|pwd|sk|key"
    r"|conn[^a-z0-9]*str|connection[^a-z0-9]*string)"
)
_TEXT_VALUE = (
    r"(?:[\\\"' \t]|\\t)*(?:=>?|:|[ \t]|\\t)[ \t\"'\\]*"
    r"(?:(?i:bearer|basic|token|digest|negotiate)[ \t]+)?"
    rf"{_NOT_MARKER}[^\s\\\"']"
)
_JSON_VALUE = r'"[ \t]*:[ \t]*(?:"[^"]|-?[0-9])'
_ASSIGN_DETECT = (
    rf"(?i:{_NAME_ANYWHERE}[\w.-]{{0,200}}|{_NAME_LAST}[_.-]{{0,200}}){_TEXT_VALUE}"
    rf'|(?i:{_NAME_ANYWHERE}(?:[^"\\]|\\.){{0,200}}'
    rf'|{_NAME_LAST}(?:[^a-z0-9"\\]|\\u[0-9a-f]{{4}}|\\.){{0,200}}){_JSON_VALUE}'
)


def _secret_assignment(match: re.Match[str]) -> bool:
    # A value after a mere space (`api_key abc`, `--token abc`) counts only after a code
    # identifier (a flag, `snake_case`, `camelCase`) and when it is no plain lowercase
    # word: `the password was wrong` and `api_key is missing` are prose.
    name = match.group("name")
    if len(name) > MAX_NAME_LENGTH:
        return False
    if match.group("sep") in (" ", "\t"):
        value = match.group("value")
        identifier = name.startswith("-") or "_" in name or _CAMEL.search(name) is not None
        if not identifier or (value.isalpha() and value.islower()):
            return False
    return _is_secret_words(name_words(name), any_key=False)


_CAMEL = re.compile("[a-z][A-Z]")


# --- absolute paths --------------------------------------------------------------

_SEGMENT = r"[\w.@%+~-]"
# A '/' starts a path unless it follows a word, a dot, a bracket or another '/' (so
# `and/or`, `text/plain`, `https://host/x` and `[REDACTED:path]/x` are no paths),
# or is followed by another '/'. `file:///x` holds one; `~/x` is in the home directory.
_PATH_REGEX = (
    r"(?:(?<=file://)/|(?<![\w.~/\]-])/|(?<![\w.~/\]-])~/)(?!/)"
    rf"{_SEGMENT}+(?:/{_SEGMENT}+)*/?(?<!\.)"  # a sentence's full stop is not part of it
)
# Searched from the '/': the same start, seen from behind; in JSON text a path may also
# follow an escape (`\n/home`, `\u001f/x`) whose last character is a letter or digit.
_PATH_DETECT = (
    r"/(?:(?<![\w./\]-]/)|(?<=\\[nrtbf]/)|(?<=\\u00[0-9a-f]{2}/)|(?<=file:///))(?!/)"
    r"[\w.@%+~-]"
)
# Windows home directories: `C:\Users\name` (`C:\\Users\\name` inside JSON text).
_WINDOWS_HOME = r"(?<![A-Za-z])[A-Za-z]:\\(?i:users|documents and settings)\\[^\\\s\"'<>|:*?]+"
_WINDOWS_DETECT = r":\\{1,2}(?i:users|documents and settings)\\"


def relative_path(path: str, context: RedactionContext) -> str | None:
    """``path`` relative to the project root if it lies inside it; None otherwise."""
    if path.startswith("~/"):
        if context.home is None:
            return None
        path = context.home + path[1:]
    root = context.project_root
    if root is None or not path.startswith("/"):
        return None
    normal = posixpath.normpath(path)
    if normal == root:
        return "."
    if normal.startswith(root + "/"):
        return normal[len(root) + 1 :]
    return None


CREDENTIAL_PATTERNS: tuple[CredentialPattern, ...] = (
    # Rules earlier in the table name the marker when two find the same text.
    # GitHub's classic tokens have 36 characters after the prefix; 30 also catches
    # a token cut short, which is still mostly secret. No format has an upper bound
    # here: a longer token is replaced whole, never leaving a tail behind.
    _rule(
        "github_token",
        rf"gh[pousr]_{_spaced(_ALNUM, 30)}|github_pat_[A-Za-z0-9_]{{22,}}",
    ),
    _rule("aws_access_key_id", rf"(?:AKIA|ASIA){_spaced('[A-Z0-9]', 16)}"),
    # A 40-character AWS secret access key looks like any base64 text (a git commit
    # id too), so it is recognised only after a key name that says what it is, as in
    # credentials files, environment dumps, JSON, YAML and XML (`<SecretAccessKey>`).
    CredentialPattern(
        "aws_secret_access_key",
        r"(?ai:secret[_.-]?(?:access[_.-]?)?key)[ \"']*(?:=>?|:|>)[ \"']*([A-Za-z0-9/+]{40,})",
        r"(?ai:secret[_.-]?(?:access[_.-]?)?key)[ \"'\\]*(?:=>?|:|>)[ \"'\\]*[A-Za-z0-9/+]{40,}",
        group=1,
        keyed=True,
        hints=("secret",),
    ),
    _rule("slack_token", rf"xox[abprs]-{_spaced('[A-Za-z0-9-]', 10)}"),
    # The path of a Slack webhook is its credential: the whole URL goes.
    CredentialPattern(
        "slack_webhook",
        r"(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{8,}",
        r"hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9_/-]{8,}",
    ),
    CredentialPattern(
        "stripe_key",
        rf"(?:sk|rk)_(?:live|test)_{_spaced(_ALNUM, 16)}",
        r"k_live_|k_test_",
    ),
    _rule("google_api_key", f"AIza{_spaced(_B64URL, 30)}"),
    _rule("gitlab_token", f"glpat-{_spaced(_B64URL, 20)}"),
    _rule("openai_key", f"sk-(?:proj|svcacct|admin)-{_spaced(_B64URL, 20)}"),
    _rule("npm_token", f"npm_{_spaced(_ALNUM, 30)}"),
    # A block cut short (no END line) is still key material: redact to the end.
    # PEM (`RSA`, `EC`, `OPENSSH`, none) and PGP (`PGP PRIVATE KEY BLOCK`) alike.
    CredentialPattern(
        "private_key",
        r"(?s:-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:.*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|.*))",
        r"-----BEGIN[ A-Z0-9]*PRIVATE KEY",
    ),
    # A JWT's header and payload are base64url JSON objects: `{"` is `eyJ`, `{ "` is
    # `eyAi`, `{` then a line break is `ewo` or `ew0K`.
    _rule(
        "jwt",
        r"(?:eyJ|eyAi|ewo|ew0K)[A-Za-z0-9_-]{8,}\.(?:eyJ|eyAi|ewo|ew0K|e30)[A-Za-z0-9_-]*"
        r"\.[A-Za-z0-9_-]*",
    ),
    # Only the userinfo is replaced, so the host stays readable: `user:password`
    # (greedy up to the LAST '@' of the authority: an unencoded '@' in a password must
    # not leave its tail behind; the user may be empty, `redis://:password@host`), or a
    # lone user of 12 or more characters (`https://TOKEN@host`; `git@` stays). A user
    # name cannot hold '[' (RFC 3986), which also keeps the rule off its own marker.
    CredentialPattern(
        "url_credentials",
        r"://([^\s/?#@:\[\]]*:[^\s/?#]+|[^\s/?#@:\[\]]{12,})@",
        r"://(?:[^\s/?#@:\[\]]*:[^\s/?#]+|[^\s/?#@:\[\]]{12,})@",
        group=1,
        anchors=("://",),
    ),
    # Signed URLs: Azure SAS `sig=`, S3 and GCS `X-Amz-Signature=`, `X-Goog-Signature=`.
    CredentialPattern(
        "url_signature",
        r"[?&;](?:sig|signature|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token"
        r"|X-Goog-Signature|X-Goog-Credential)=([^&#\s\"'<>\\]+)",
        r"[?&;](?:sig|signature|X-Amz-Signature|X-Amz-Credential|X-Amz-Security-Token"
        r"|X-Goog-Signature|X-Goog-Credential)=[^&#\s\"'<>]",
        group=1,
        anchors=("sig=", "signature=", "X-Amz-", "X-Goog-"),
    ),
    # `Bearer`/`Basic` and a credential, outside any header name (the header itself is
    # a key/value below): 12 or more token characters, at least one a digit or `+/=`,
    # so `Basic authentication` stays.
    CredentialPattern(
        "authorization",
        r"(?i:\b(?:bearer|basic))[ \t]+((?=[A-Za-z0-9._~+/-]*[0-9+/=])[A-Za-z0-9._~+/-]{12,}=*)",
        r"(?i:bearer|basic)(?:[ \t]|\\t)+(?=[A-Za-z0-9._~+/-]*[0-9+/=])[A-Za-z0-9._~+/-]{12,}",
        group=1,
        hints=("bearer", "basic"),
    ),
    # `token=...`, `secret: ...`, `Password=...;`, `"api_key": "..."`, `--api-key ...`:
    # any value after a key that names a secret (`is_secret_name`), whatever it looks
    # like. A quoted value goes whole; an unquoted one ends at a space or , ; & < >.
    # An `Authorization: Bearer x` keeps its scheme word.
    CredentialPattern(
        KIND_CREDENTIAL,
        _ASSIGN_REGEX,
        _ASSIGN_DETECT,
        group="value",
        hints=_ASSIGN_HINTS,
        accept=_secret_assignment,
        secret_keys=True,
    ),
    CredentialPattern(KIND_PATH, _PATH_REGEX, _PATH_DETECT, rewrite=relative_path, in_ids=False),
    CredentialPattern(KIND_PATH, _WINDOWS_HOME, _WINDOWS_DETECT, anchors=(":\\",), in_ids=False),
)
"""Every credential format ``Redactor`` replaces (the table in docs/redaction.md)."""
