"""The embedding API's old module paths still work for one release, and say where it moved."""

from __future__ import annotations

import importlib
import sys

import pytest


@pytest.mark.parametrize(
    ("old", "new", "names"),
    [
        ("producers.event_store", "producers.store.event_store", ("NewEvent", "RunEventStore")),
        ("hubsync.enrollment", "hubsync.core.enrollment", ("decode_token", "encode_token")),
    ],
)
def test_an_old_path_re_exports_the_new_module_with_a_deprecation_warning(
    old: str, new: str, names: tuple[str, ...]
) -> None:
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new):
        module = importlib.import_module(old)
    moved = importlib.import_module(new)
    for name in names:
        assert getattr(module, name) is getattr(moved, name)
