"""Enrollment: what a hub gives a runtime it lets sync, and the token that carries it.

The hub enrolls a runtime (``hubsync enroll``): it draws a fresh 256-bit key
for it and records which hub projects it may write to. The runtime learns the
same through one string, the enrollment token (``hubsync runtime join``)::

    hubsync-enroll-v1.<base64url of the canonical JSON of the enrollment>

The token holds the key itself, so it is a secret: it is printed once by
``hubsync enroll`` and never logged, and nothing here ever puts it, or any
part of it, in an error message or a ``repr``. ``decode_token`` refuses a
malformed token with ``EnrollmentTokenError`` saying only what was wrong.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import secrets
from dataclasses import dataclass, field
from typing import Any

from hubsync.core.canonical import canonical_json
from hubsync.core.errors import ConfigError
from hubsync.core.names import validate_name

TOKEN_PREFIX = "hubsync-enroll-v1."  # noqa: S105 - a format tag, not a secret
"""What every enrollment token of this format starts with; the version is part of it."""

KEY_BYTES = 32
"""A runtime key is 256 random bits."""

HUB_ID_PREFIX = "hub-"
_HUB_ID = re.compile(r"hub-[0-9a-f]{16}")
_FIELDS = frozenset({"hub_id", "runtime_id", "hub_projects", "key"})
_TOKEN_FORMAT = re.compile(r"hubsync-enroll-v([0-9]+)\.")
_MAX_TOKEN_CHARS = 16_384  # a few hundred hub projects; refuses pasted files before decoding


class EnrollmentTokenError(ConfigError):
    """A string is not a valid enrollment token; the message never repeats any of it."""


@dataclass(frozen=True, slots=True)
class Enrollment:
    """One runtime's enrollment on one hub: the hub's id, the runtime's id and key, its projects.

    What the hub returns when it enrolls (or re-keys) a runtime, what the token
    carries, and what the runtime's registry keeps. ``key`` is left out of the
    ``repr`` so that logging the object cannot leak it.
    """

    hub_id: str
    runtime_id: str
    hub_projects: tuple[str, ...]
    key: bytes = field(repr=False)

    def __post_init__(self) -> None:
        validate_hub_id(self.hub_id)
        validate_name(self.runtime_id, "runtime id")
        validate_hub_projects(self.hub_projects)
        if len(self.key) != KEY_BYTES:
            raise ConfigError(f"a runtime key must be {KEY_BYTES} bytes")


def new_key() -> bytes:
    """A fresh runtime key: ``KEY_BYTES`` bytes from the operating system's CSPRNG."""
    return secrets.token_bytes(KEY_BYTES)


def new_hub_id() -> str:
    """A fresh hub id: ``hub-`` and 16 random hex digits."""
    return HUB_ID_PREFIX + secrets.token_hex(8)


def validate_hub_id(hub_id: str) -> str:
    """Return ``hub_id`` if it has the form ``hub-<16 hex>``; ``ConfigError`` otherwise."""
    if not isinstance(hub_id, str) or not _HUB_ID.fullmatch(hub_id):
        raise ConfigError("a hub id has the form hub-<16 lowercase hex digits>")
    return hub_id


def validate_hub_projects(hub_projects: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    """The hub projects of an enrollment, sorted and without repeats; at least one, each valid."""
    if not hub_projects:
        raise ConfigError("an enrollment names at least one hub project")
    for hub_project in hub_projects:
        validate_name(hub_project, "hub project")
    return tuple(sorted(set(hub_projects)))


def encode_token(enrollment: Enrollment) -> str:
    """The enrollment token of ``enrollment`` (a secret: it carries the key)."""
    body = canonical_json(
        {
            "hub_id": enrollment.hub_id,
            "runtime_id": enrollment.runtime_id,
            "hub_projects": list(enrollment.hub_projects),
            "key": _b64encode(enrollment.key),
        }
    )
    return TOKEN_PREFIX + _b64encode(body)


def decode_token(token: str) -> Enrollment:
    """The enrollment a token carries; ``EnrollmentTokenError`` saying what is wrong otherwise.

    Surrounding whitespace is ignored (a token read from a file or stdin ends
    with a newline). No message repeats the token or any part of it.
    """
    text = token.strip()
    if len(text) > _MAX_TOKEN_CHARS:
        raise EnrollmentTokenError(
            f"the enrollment token is {len(text)} characters long, more than any token "
            "hubsync enroll prints; pass the token itself"
        )
    if not text.startswith(TOKEN_PREFIX):
        version = _TOKEN_FORMAT.match(text)
        if version is not None:
            raise EnrollmentTokenError(
                f"the enrollment token is of format v{version.group(1)}, which this hubsync "
                "does not read; use the hubsync release of the hub that made it"
            )
        raise EnrollmentTokenError(
            f"this is not an enrollment token (it does not start with {TOKEN_PREFIX}); copy "
            "the whole line `hubsync enroll` printed"
        )
    document = _document(text.removeprefix(TOKEN_PREFIX))
    try:
        key = _b64decode(document["key"])
    except ValueError:
        raise EnrollmentTokenError(
            "the enrollment token is damaged: its key is not base64url"
        ) from None
    try:
        return Enrollment(
            hub_id=document["hub_id"],
            runtime_id=document["runtime_id"],
            hub_projects=validate_hub_projects(document["hub_projects"]),
            key=key,
        )
    except (ConfigError, ValueError, TypeError) as exc:
        # Our own messages never echo a value; anything else might, so it is not shown.
        reason = str(exc) if isinstance(exc, ConfigError) else "a field has the wrong type"
        raise EnrollmentTokenError(f"the enrollment token is damaged: {reason}") from None


def _document(body: str) -> dict[str, Any]:
    try:
        raw = _b64decode(body)
        document = json.loads(raw.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise EnrollmentTokenError(
            "the enrollment token is damaged (its body is not base64url-encoded JSON); copy "
            "the whole line `hubsync enroll` printed, or enroll the runtime again"
        ) from None
    if not isinstance(document, dict) or set(document) != _FIELDS:
        raise EnrollmentTokenError(
            f"the enrollment token is damaged: it must hold exactly the fields "
            f"{', '.join(sorted(_FIELDS))}"
        )
    if not isinstance(document["hub_projects"], list) or not isinstance(document["key"], str):
        raise EnrollmentTokenError("the enrollment token is damaged: a field has the wrong type")
    return document


def _b64encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _b64decode(text: str) -> bytes:
    if not isinstance(text, str) or not re.fullmatch(r"[A-Za-z0-9_-]*", text):
        raise ValueError("not base64url")
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error:
        raise ValueError("not base64url") from None
