"""How the benchmark scripts hand over their report: JSON on stdout, and in a file if asked."""

from __future__ import annotations

import json
from collections.abc import Mapping


def print_report(report: Mapping[str, object], json_path: str | None) -> None:
    """Print ``report`` as indented JSON with sorted keys, and write it to ``json_path`` too
    when one is given."""
    document = json.dumps(report, indent=2, sort_keys=True)
    print(document)
    if json_path:
        with open(json_path, "w", encoding="utf-8") as out:
            out.write(document + "\n")
