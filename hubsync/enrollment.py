"""Deprecated for one release: ``hubsync.core.enrollment`` is the enrollment token's path."""

from hubsync.core.enrollment import Enrollment, EnrollmentTokenError, decode_token, encode_token
from hubsync.core.moved import warn_moved

warn_moved("hubsync.enrollment", "hubsync.core.enrollment")
__all__ = ["Enrollment", "EnrollmentTokenError", "decode_token", "encode_token"]
