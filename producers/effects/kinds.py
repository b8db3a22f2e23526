"""Which external effects are shared (and so need a lease) and which are lease-free.

Shared kinds act on something every box can name: two runs naming the same
target mean the same real thing, so at most one may execute at a time.
``git-branch``, ``git-commit`` and ``git-cleanup`` write in the run's own namespace,
and so does a ``git-push`` to the run's own branch (``run_branch(run_id)`` or a
name derived from it); those contend with nobody and take no lease.
"""

from __future__ import annotations

import hashlib
import re
from enum import StrEnum


class EffectKind(StrEnum):
    """The kinds of external side effect a run step may perform."""

    GIT_BRANCH = "git-branch"
    GIT_COMMIT = "git-commit"
    GIT_PUSH = "git-push"
    PR_CREATE = "pr-create"
    TRACKER_ISSUE = "tracker-issue"
    WEBHOOK = "webhook"
    GIT_CLEANUP = "git-cleanup"
    """Remove a merged run branch: its worktree, the local branch and the remote one."""


SHARED_KINDS = frozenset(
    {EffectKind.GIT_PUSH, EffectKind.PR_CREATE, EffectKind.TRACKER_ISSUE, EffectKind.WEBHOOK}
)
"""Kinds whose target is shared with every other box."""

RUN_BRANCH_PREFIX = "hubsync/run-"
"""A run's own branches are ``hubsync/run-<run_id>`` and ``hubsync/run-<run_id>-<suffix>``."""


_UNSAFE_IN_BRANCH = re.compile(r"[^A-Za-z0-9._-]+|\.{2,}")


def run_branch(run_id: str) -> str:
    """The branch a run owns: ``hubsync/run-<run_id>``, the same for the same id on every box.

    A run id may hold characters a branch name cannot (``:``, ``@``, ``/`` would nest
    branches); each run of them becomes ``-`` and the name then ends in ``-`` and 8
    hex of the id's sha256, so two ids never share a branch and the name stays readable.
    """
    safe = _UNSAFE_IN_BRANCH.sub("-", run_id).strip(".-")
    if safe != run_id or safe.endswith(".lock"):
        digest = hashlib.sha256(run_id.encode("utf-8")).hexdigest()[:8]
        safe = f"{safe}-{digest}" if safe else digest
    return f"{RUN_BRANCH_PREFIX}{safe}"


def is_run_branch_ref(run_id: str, target: str) -> bool:
    """Does ``target`` (a branch, with or without ``refs/heads/``) belong to this run alone?"""
    branch = target.removeprefix("refs/heads/")
    own = run_branch(run_id)
    return bool(run_id) and (branch == own or branch.startswith(f"{own}-"))


def requires_lease(kind: EffectKind, target: str, run_id: str) -> bool:
    """Whether an effect must hold a lease before it executes."""
    if kind not in SHARED_KINDS:
        return False
    if kind is EffectKind.GIT_PUSH:
        return not is_run_branch_ref(run_id, target)
    return True


def lease_resource_for(kind: EffectKind, target: str) -> str:
    """The lease resource guarding ``target``: ``effect:<kind>:<sha256(target)[:40]>``.

    Targets (URLs, refs, issue keys) may hold characters a key's hash tag cannot,
    so the resource names the target by its digest; the ledger keeps the target.
    Every box derives the same resource for the same target: a ``git-push`` to
    ``main`` and one to ``refs/heads/main`` share one.
    """
    if kind is EffectKind.GIT_PUSH:
        target = target.removeprefix("refs/heads/")
    digest = hashlib.sha256(target.encode("utf-8")).hexdigest()[:40]
    return f"effect:{kind.value}:{digest}"
