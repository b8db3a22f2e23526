"""Deprecated: ``hubsync.enrollment`` moved to ``hubsync.core.enrollment``.

This module re-exports it, with a ``DeprecationWarning``, for one release; import
``hubsync.core.enrollment`` instead.
"""

import warnings

from hubsync.core.enrollment import Enrollment, EnrollmentTokenError, decode_token, encode_token

warnings.warn(
    "hubsync.enrollment moved to hubsync.core.enrollment; import it from there",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["Enrollment", "EnrollmentTokenError", "decode_token", "encode_token"]
