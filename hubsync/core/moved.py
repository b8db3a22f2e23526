"""Old import paths kept for one release: each warns once where its module went."""

import warnings


def warn_moved(old: str, new: str) -> None:
    """Warn (``DeprecationWarning``, at the importer's line) that ``old`` is now ``new``."""
    # 3: this function, the old module's body, the import statement that loaded it
    warnings.warn(f"{old} moved to {new}; import it from there", DeprecationWarning, stacklevel=3)
