"""The derivation allowlist: which fields of each event type's ``data`` may cross to the hub.

One table for both sides (docs/redaction.md, derivation allowlist): the runtime
derives each sync event's ``data`` through it (``producers.derivation.Allowlist``),
and the hub refuses a signed event whose ``data`` holds anything else
(``consumers.stream.judging``), so a runtime with an older or broken deriver
cannot make the hub store what should have stayed local.

An entry is a field name or a dotted path into a nested object: ``error.message``
lets ``error.message`` cross but not ``error.stack``; a field named whole crosses
with everything beneath it. Compiled, the paths are a ``Tree``: field -> None
(the whole value crosses) or the tree of its nested fields.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

DEFAULT_ALLOWLIST: Final[Mapping[str, tuple[str, ...]]] = {
    "run.started": ("workflow_id", "workflow_name", "trigger", "attempt", "labels"),
    "run.completed": ("status", "duration_ms", "summary", "outputs"),
    "run.failed": ("status", "duration_ms", "failed_step", "error.type", "error.message"),
    "run.cancelled": ("reason", "cancelled_by"),
    "step.started": ("step_id", "step_name", "attempt", "executor"),
    "step.completed": ("step_id", "step_name", "status", "duration_ms", "outputs", "metrics"),
    "step.failed": ("step_id", "step_name", "attempt", "retryable", "error.type", "error.message"),
    "artifact.created": ("artifact_id", "name", "media_type", "size_bytes", "sha256", "uri"),
    "approval.requested": ("approval_id", "step_id", "title", "approvers", "expires_at"),
    "approval.granted": ("approval_id", "decided_by", "comment"),
    "approval.denied": ("approval_id", "decided_by", "comment"),
}
"""Event types and the fields of each that cross to the hub (documented in docs/redaction.md)."""

Tree = dict[str, "Tree | None"]
"""A compiled allowlist entry: field -> None (the whole value crosses) or a subtree."""


def compile_paths(paths: Iterable[str]) -> Tree:
    """The tree of ``paths`` (field names and dotted paths, already checked)."""
    tree: Tree = {}
    for path in sorted(paths, key=lambda p: p.count(".")):
        node = tree
        parts = path.split(".")
        for depth, part in enumerate(parts):
            if part in node and node[part] is None:
                break  # an ancestor already crosses whole
            if depth == len(parts) - 1:
                node[part] = None
            else:
                child = node.get(part)
                if child is None:
                    child = node[part] = {}
                node = child
    return tree


def select(tree: Tree, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The part of ``payload`` ``tree`` lets cross (shares nested values, does not copy)."""
    data: dict[str, Any] = {}
    for field, subtree in tree.items():
        if field not in payload:
            continue
        value = payload[field]
        if subtree is None:
            data[field] = value
        elif isinstance(value, Mapping):
            nested = select(subtree, value)
            if nested:
                data[field] = nested
    return data


def first_outside(tree: Tree, data: Mapping[str, Any]) -> str | None:
    """The dotted path of the first field of ``data`` that ``select(tree, ...)`` would not
    have let cross, or None when all of it crosses: a nested field whose parent is a
    subtree must itself be an object of allowed fields, and not empty (``select`` drops an
    empty one)."""
    for field, value in data.items():
        if field not in tree:
            return field
        subtree = tree[field]
        if subtree is None:
            continue
        if not isinstance(value, Mapping) or not value:
            return field
        inner = first_outside(subtree, value)
        if inner is not None:
            return f"{field}.{inner}"
    return None


DEFAULT_TREES: Final[Mapping[str, Tree]] = {
    event_type: compile_paths(paths) for event_type, paths in DEFAULT_ALLOWLIST.items()
}
"""``DEFAULT_ALLOWLIST`` compiled, by event type: what the hub checks an event's data against."""


def not_allowlisted(event_type: str, data: Mapping[str, Any]) -> str | None:
    """The first field of ``data`` outside ``event_type``'s entry of the table, or None.

    Only the types the table names are checked: a type it does not name is one a runtime
    added (``producers.derivation.Allowlist.extend``), whose fields only that runtime knows.
    """
    tree = DEFAULT_TREES.get(event_type)
    if tree is None or not data:
        return None
    return first_outside(tree, data)


__all__ = [
    "DEFAULT_ALLOWLIST",
    "DEFAULT_TREES",
    "Tree",
    "compile_paths",
    "first_outside",
    "not_allowlisted",
    "select",
]
