"""The ``hubsync`` command line: one click group, one module per command."""
