"""Hub persistence: the hub store (opened by URL with ``open_store``) and the Redis leases."""

from hubstore.factory import hub_url_from_path, open_store

__all__ = ["hub_url_from_path", "open_store"]
