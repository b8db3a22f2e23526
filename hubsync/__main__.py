"""``python -m hubsync``: the same CLI as the ``hubsync`` command, from any directory."""

import sys
from pathlib import Path


def _outrank_a_shadowing_folder() -> None:
    # From the folder that holds a clone named hubsync/, Python takes that clone for a
    # namespace package "hubsync" before it asks an editable install; this file always
    # lives in the real package, so its root goes first and the package is found anew.
    package = sys.modules.get("hubsync")
    if package is not None and getattr(package, "__file__", None) is None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        del sys.modules["hubsync"]


_outrank_a_shadowing_folder()

from hubsync.cli.main import main  # noqa: E402  (after the package is the real one)

if __name__ == "__main__":
    main()
