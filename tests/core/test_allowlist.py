"""The allowlist both sides share: what the deriver lets cross is exactly what the hub allows."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hubsync.core.allowlist import (
    DEFAULT_ALLOWLIST,
    DEFAULT_TREES,
    compile_paths,
    first_outside,
    not_allowlisted,
    select,
)
from producers.derivation import Allowlist


def test_the_runtime_derives_through_the_kernels_table() -> None:
    assert {t: Allowlist().fields(t) for t in Allowlist().event_types()} == {
        t: frozenset(paths) for t, paths in DEFAULT_ALLOWLIST.items()
    }


@pytest.mark.parametrize(
    ("event_type", "data", "outside"),
    [
        ("step.completed", {"step_id": "s1", "status": "ok"}, None),
        ("step.completed", {}, None),
        ("step.completed", {"step_id": "s1", "stack": "..."}, "stack"),
        ("run.failed", {"error": {"message": "boom"}}, None),
        ("run.failed", {"error": {"message": "boom", "stack": "at x"}}, "error.stack"),
        ("run.failed", {"error": "boom"}, "error"),  # a subtree's parent must be an object
        ("run.failed", {"error": {}}, "error"),  # the deriver drops an empty one
        ("step.completed", {"outputs": {"anything": {"below": 1}}}, None),  # crosses whole
        ("deploy.finished", {"environment": "prod"}, None),  # a runtime's own type
    ],
)
def test_the_hub_names_the_first_field_outside_its_types_allowlist(
    event_type: str, data: dict[str, Any], outside: str | None
) -> None:
    assert not_allowlisted(event_type, data) == outside


json_leaves = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
payloads = st.recursive(
    json_leaves,
    lambda inner: st.dictionaries(
        st.sampled_from(["error", "type", "message", "stack", "status", "step_id", "x"]),
        inner,
        max_size=4,
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(DEFAULT_ALLOWLIST)), payloads)
def test_what_the_deriver_selects_the_hub_allows_and_nothing_more(
    event_type: str, payload: object
) -> None:
    if not isinstance(payload, dict):
        payload = {"x": payload}
    tree = DEFAULT_TREES[event_type]
    selected = select(tree, payload)
    assert first_outside(tree, selected) is None
    outside = first_outside(tree, payload)
    assert (outside is None) == (selected == payload)


def test_a_field_named_whole_covers_a_dotted_path_beneath_it() -> None:
    assert compile_paths(["error", "error.message"]) == {"error": None}
    assert compile_paths(["a.b", "a.c.d"]) == {"a": {"b": None, "c": {"d": None}}}
