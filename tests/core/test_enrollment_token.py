"""The enrollment token: one string that round-trips an enrollment, and refuses damage
without ever repeating what it was given."""

from __future__ import annotations

import base64
import json

import pytest

from hubsync.core.canonical import canonical_json
from hubsync.core.enrollment import (
    KEY_BYTES,
    TOKEN_PREFIX,
    Enrollment,
    EnrollmentTokenError,
    decode_token,
    encode_token,
    new_hub_id,
    new_key,
)
from hubsync.core.errors import ConfigError
from tests.helpers.support import changed

KEY = bytes(range(32))
ENROLLMENT = Enrollment("hub-0123456789abcdef", "rt-build-1", ("acme", "beta"), KEY)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def token_of(document: object) -> str:
    return TOKEN_PREFIX + b64(canonical_json(document))


def good_document() -> dict[str, object]:
    return {
        "hub_id": ENROLLMENT.hub_id,
        "runtime_id": ENROLLMENT.runtime_id,
        "hub_projects": list(ENROLLMENT.hub_projects),
        "key": b64(KEY),
    }


def test_a_token_round_trips_the_enrollment() -> None:
    token = encode_token(ENROLLMENT)
    assert token.startswith("hubsync-enroll-v1.")
    assert decode_token(token) == ENROLLMENT


def test_a_token_is_one_url_safe_line() -> None:
    token = encode_token(Enrollment(new_hub_id(), "rt-a/b:c@d+e=f", ("acme",), new_key()))
    body = token.removeprefix(TOKEN_PREFIX)
    assert body and set(body) <= set(
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    )


def test_its_body_is_the_canonical_json_of_the_enrollment() -> None:
    body = encode_token(ENROLLMENT).removeprefix(TOKEN_PREFIX)
    raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    assert raw == canonical_json(good_document())


def test_surrounding_whitespace_is_ignored() -> None:
    assert decode_token(f"  {encode_token(ENROLLMENT)}\r\n") == ENROLLMENT


def test_fresh_keys_are_256_random_bits_and_hub_ids_have_their_form() -> None:
    keys = {new_key() for _ in range(100)}
    assert len(keys) == 100 and {len(k) for k in keys} == {KEY_BYTES} == {32}
    assert all(len(h) == 20 and h.startswith("hub-") for h in {new_hub_id() for _ in range(10)})


def test_no_repr_of_an_enrollment_shows_its_key() -> None:
    for shown in (repr(ENROLLMENT), str(ENROLLMENT)):
        assert "key" not in shown and KEY.hex() not in shown and b64(KEY) not in shown


def damaged(**changes: object) -> str:
    return token_of(changed(good_document(), changes))


MALFORMED = {
    "empty": ("", "not an enrollment token"),
    "no prefix": (b64(b"x" * 40), "not an enrollment token"),
    "a pasted key": ("ghp_" + "a" * 36, "not an enrollment token"),
    "a newer format": ("hubsync-enroll-v2." + b64(b"{}"), "format v2, which this hubsync does"),
    "not base64url": (TOKEN_PREFIX + "abc$def", "not base64url-encoded JSON"),
    "base64 of no JSON": (TOKEN_PREFIX + b64(b"\xff\xfe secret-ish"), "not base64url-encoded JSON"),
    "truncated": (encode_token(ENROLLMENT)[:-30], "not base64url-encoded JSON"),
    "a JSON list": (token_of(["a"]), "exactly the fields hub_id, hub_projects, key, runtime_id"),
    "a field missing": (damaged(key=None), "exactly the fields"),
    "a field too many": (damaged(extra="x"), "exactly the fields"),
    "a short key": (damaged(key=b64(KEY[:16])), "a runtime key must be 32 bytes"),
    "a key not base64url": (damaged(key="!!" + b64(KEY)), "its key is not base64url"),
    "a key that is a number": (damaged(key=7), "a field has the wrong type"),
    "a bad hub id": (damaged(hub_id="hub-XYZ"), "a hub id has the form hub-<16"),
    "a bad runtime id": (damaged(runtime_id="rt {x}"), "runtime id may hold only"),
    "a runtime id of no string": (damaged(runtime_id=5), "runtime id must be a non-empty string"),
    "no hub project": (damaged(hub_projects=[]), "names at least one hub project"),
    "hub projects not a list": (damaged(hub_projects="acme"), "a field has the wrong type"),
    "a bad hub project": (damaged(hub_projects=["ac me"]), "hub project may hold only"),
    "far too long": (TOKEN_PREFIX + "A" * 20_000, "more than any token"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_malformed_token_is_refused_saying_why_without_repeating_it(case: str) -> None:
    token, reason = MALFORMED[case]
    with pytest.raises(EnrollmentTokenError) as info:
        decode_token(token)
    message = str(info.value)
    assert reason in message
    assert isinstance(info.value, ConfigError), "a bad token is a usage error (exit 2)"
    body = token.removeprefix(TOKEN_PREFIX)
    for part in (token, body[:12], body[-12:], b64(KEY), "secret-ish", "ghp_"):
        if len(part) >= 8:
            assert part not in message, f"the message repeats {part!r}"


@pytest.mark.parametrize(
    ("field", "value"),
    [("hub_id", "nope"), ("runtime_id", ""), ("hub_projects", ()), ("key", b"short")],
)
def test_an_enrollment_must_be_well_formed(field: str, value: object) -> None:
    fields: dict[str, object] = {
        "hub_id": ENROLLMENT.hub_id,
        "runtime_id": ENROLLMENT.runtime_id,
        "hub_projects": ENROLLMENT.hub_projects,
        "key": KEY,
    }
    fields[field] = value
    with pytest.raises(ConfigError):
        Enrollment(**fields)  # type: ignore[arg-type]


def test_the_documented_body_fields_are_exactly_these() -> None:
    body = encode_token(ENROLLMENT).removeprefix(TOKEN_PREFIX)
    document = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    assert sorted(document) == ["hub_id", "hub_projects", "key", "runtime_id"]
