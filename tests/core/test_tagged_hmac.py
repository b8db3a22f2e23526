"""The tagged HMAC fast path against its reference: the same digests for the same inputs."""

from __future__ import annotations

import hashlib
import hmac

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubsync.core import tagged_hmac
from hubsync.core.tagged_hmac import reference_context, tagged_context

KEY = bytes(range(32))
TAG = b"16:hubsync/event/v2,"


def _mac(context: tagged_hmac.TaggedMac, body: bytes) -> str:
    mac = context.copy()
    mac.update(body)
    return mac.hexdigest()


@settings(max_examples=200, deadline=None)
@given(
    secret=st.binary(min_size=0, max_size=80),
    tag=st.binary(max_size=40),
    body=st.binary(max_size=3000),
)
def test_fast_context_gives_the_reference_digest(secret: bytes, tag: bytes, body: bytes) -> None:
    expected = hmac.new(secret, tag + body, hashlib.sha256).hexdigest()
    assert _mac(tagged_context(secret, tag), body) == expected
    assert _mac(reference_context(secret, tag), body) == expected


def test_copies_leave_the_tagged_context_as_it_was() -> None:
    context = tagged_context(KEY, TAG)
    first = _mac(context, b"one body")
    _mac(context, b"another body, fed to a copy")
    assert _mac(context, b"one body") == first
    assert first == hmac.new(KEY, TAG + b"one body", "sha256").hexdigest()


def test_a_context_without_the_native_object_falls_back_to_the_reference(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    plain = reference_context(KEY, TAG)
    if hasattr(plain, "_hmac"):  # CPython with OpenSSL: take the native object away
        monkeypatch.setattr(
            tagged_hmac, "reference_context", lambda secret, tag: _WithoutNative(secret, tag)
        )
    context = tagged_context(KEY, TAG)
    assert isinstance(context, hmac.HMAC)
    assert _mac(context, b"body") == hmac.new(KEY, TAG + b"body", "sha256").hexdigest()


def test_this_interpreter_takes_the_fast_path_when_it_has_one() -> None:
    native = getattr(reference_context(KEY, TAG), "_hmac", None)
    expected = hmac.HMAC if native is None else type(native)
    assert type(tagged_context(KEY, TAG)) is expected


class _WithoutNative(hmac.HMAC):
    """An ``hmac.HMAC`` made the way a build without OpenSSL makes it (no ``_hmac``)."""

    def __init__(self, secret: bytes, tag: bytes) -> None:
        self._hmac = None
        self._init_old(secret, tag, hashlib.sha256)  # type: ignore[attr-defined]
