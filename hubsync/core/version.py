"""The version of hubsync, written here only: pyproject.toml reads it for the package metadata
(``[tool.setuptools.dynamic]``) and ``hubsync --version`` prints it."""

__version__ = "0.1.0"
