"""Moved to ``hubstore.leases.args``; this name stays only until ``hubstore.fence`` imports that."""

from hubstore.leases.args import validate_resource, validate_token

__all__ = ["validate_resource", "validate_token"]
