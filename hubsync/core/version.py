"""The version of hubsync, as the package metadata and ``hubsync --version`` give it."""

__version__ = "0.1.0"
