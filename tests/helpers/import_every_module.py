"""Imports every module of an installed hubsync and builds its Redis Functions library (run as a
child process by the interpreter of the environment under test, with ``-P``).

Usage: python -P tests/helpers/import_every_module.py SITE_PACKAGES

Prints one JSON object: the modules imported, those that need an extra that is not installed
(``{module: missing import}``), those that failed otherwise (``{module: error}``), those loaded
from outside SITE_PACKAGES (a checkout on the path, not the install), and the size of the
Functions library (every ``.lua`` file read through ``importlib.resources``).
"""

from __future__ import annotations

import importlib
import json
import pkgutil
import sys
from pathlib import Path

PACKAGES = ("hubsync", "producers", "consumers", "hubstore")
OPTIONAL = frozenset({"psycopg", "psycopg_pool", "nats", "starlette", "anyio", "jinja2", "uvicorn"})
"""What only an extra installs (postgres, bench, web): a module that imports it may be left out."""


def main(site_packages: str) -> int:
    installed = Path(site_packages).resolve()
    report: dict[str, object] = {}
    imported: list[str] = []
    optional: dict[str, str] = {}
    failed: dict[str, str] = {}
    outside: list[str] = []
    names = [*PACKAGES]
    for top in PACKAGES:
        package = importlib.import_module(top)
        names += [info.name for info in pkgutil.walk_packages(package.__path__, f"{top}.")]
    for name in names:
        if name.rpartition(".")[2] == "__main__":
            continue  # running it is the command itself
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if (exc.name or "").partition(".")[0] in OPTIONAL:
                optional[name] = str(exc.name)
            else:
                failed[name] = repr(exc)
            continue
        except Exception as exc:
            failed[name] = repr(exc)
            continue
        imported.append(name)
        if not Path(module.__file__ or "").resolve().is_relative_to(installed):
            outside.append(f"{name}: {module.__file__}")
    from hubstore.redis_functions import library_source

    report.update(
        imported=imported,
        optional=optional,
        failed=failed,
        outside=outside,
        library_chars=len(library_source()),
    )
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
