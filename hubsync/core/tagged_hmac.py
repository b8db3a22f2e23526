"""The keyed and tagged HMAC-SHA256 context that every signature copies: the fast path.

``hubsync.core.signing`` keeps, per key and domain, one HMAC context already
keyed and fed its tag; a signature is a ``copy()`` of it, an ``update`` with the
body and a ``hexdigest``. The reference is the standard library's
``hmac.HMAC`` (``reference_context``), whose three methods are Python code
wrapping OpenSSL's own HMAC object; that wrapping costs about 0.9 us per
signature, a third of the whole HMAC, on every event the relay signs and the
consumer verifies.

``tagged_context`` hands out OpenSSL's object itself when the standard library
built one (CPython with OpenSSL keeps it as ``hmac.HMAC._hmac``): the same key,
the same tag, the same digests, with the same three methods in C. Without it
(another interpreter, a build without OpenSSL) it hands out the reference. The
choice is made once per context; ``tests/core/test_tagged_hmac.py`` feeds both
the same keys and messages and fails if a digest differs.
"""

from __future__ import annotations

import hmac
from typing import Protocol, cast


class TaggedMac(Protocol):
    """What signing uses of an HMAC context: copy it, feed it, read it as hex."""

    def copy(self) -> TaggedMac:
        """A context in the same state."""
        ...

    def update(self, data: bytes, /) -> None:
        """Feed ``data``."""
        ...

    def hexdigest(self) -> str:
        """The MAC so far, as lowercase hex."""
        ...


def reference_context(secret: bytes, tag: bytes) -> hmac.HMAC:
    """The plain context: ``hmac.new(secret, tag, "sha256")``."""
    return hmac.new(secret, tag, "sha256")


def tagged_context(secret: bytes, tag: bytes) -> TaggedMac:
    """An HMAC-SHA256 context keyed with ``secret`` and fed ``tag``: OpenSSL's own object
    when the standard library made one, else the reference (see the module docstring)."""
    reference = reference_context(secret, tag)
    native = getattr(reference, "_hmac", None)
    if native is None:
        return reference
    return cast("TaggedMac", native)
