"""Real git for the git-effect tests: a bare remote (``file://``), runtimes' clones, hooks.

Every repository lives under the test's ``tmp_path``; git runs with the environment
the executors give it (``producers.effects.git.command``), so no user config leaks in.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from producers.effects import EffectClaim, EffectKind, EffectSpec
from producers.effects.git.command import git_output, run_git
from producers.effects.git.executors import GitBranchExecutor, GitCommitExecutor
from producers.effects.git.worktrees import Workspace
from producers.effects.kinds import run_branch

HOLD_HOOK = """#!/bin/sh
# Holds the first push that updates {ref} until {flags}/release exists (at most 30 s).
if grep -q " {ref}$" && mv "{flags}/hold" "{flags}/held" 2>/dev/null; then
  i=0
  while [ ! -e "{flags}/release" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done
fi
exit 0
"""


@dataclass(frozen=True)
class Runtime:
    """One runtime's clone of the remote and its workspace of run worktrees."""

    name: str
    repository: Path
    workspace: Workspace


def git(cwd: Path, *args: str) -> str:
    """``git ARGS`` in ``cwd`` (must succeed); its stripped output."""
    return git_output(list(args), cwd)


def make_remote(tmp_path: Path) -> str:
    """A bare repository with one commit on ``main``; its ``file://`` URL."""
    bare = tmp_path / "remote.git"
    run_git(["init", "--quiet", "--bare", "-b", "main", str(bare)], tmp_path)
    seed = tmp_path / "seed"
    run_git(["init", "--quiet", "-b", "main", str(seed)], tmp_path)
    (seed / "README").write_text("shared\n")
    git(seed, "add", "README")
    git(seed, "commit", "--quiet", "-m", "first")
    url = bare.as_uri()
    git(seed, "push", "--quiet", url, "main")
    return url


def make_runtime(tmp_path: Path, url: str, name: str) -> Runtime:
    """A clone of ``url`` for runtime ``name``, and its workspace."""
    repository = tmp_path / name / "repo"
    run_git(["clone", "--quiet", url, str(repository)], tmp_path)
    return Runtime(name, repository, Workspace(repository, tmp_path / name / "workspace"))


def remote_ref(url: str, ref: str) -> str:
    """The remote's value of ``ref`` (``""`` when it has none)."""
    line = run_git(["ls-remote", url, ref], Path("/")).stdout.strip()
    return line.partition("\t")[0]


def hold_pushes(url: str, hook: str, ref: str, flags: Path) -> None:
    """Install ``hook`` (``pre-receive`` or ``post-receive``) holding the next push of ``ref``."""
    flags.mkdir(parents=True, exist_ok=True)
    (flags / "hold").touch()
    path = Path(url.removeprefix("file://")) / "hooks" / hook
    path.write_text(HOLD_HOOK.format(ref=ref, flags=flags))
    path.chmod(0o755)


def spec(run_id: str, step: str, kind: EffectKind, target: str, **payload: str) -> EffectSpec:
    """An effect spec (attempt id ``<step>-1``)."""
    return EffectSpec(run_id, step, f"{step}-1", kind, target, dict(payload))


@dataclass(frozen=True)
class Context:
    """The claim context an executor is handed (what ``ExecutionContext`` carries)."""

    claim: EffectClaim


def lease_free(effect: EffectSpec) -> Context:
    """A context for a lease-free effect, without a ledger (the executors never read it)."""
    return Context(EffectClaim("eff_test_" + effect.step_id, effect, None))


def start_run(runtime: Runtime, run_id: str, content: str) -> str:
    """Branch run ``run_id`` off main, commit one file in its worktree; the commit."""
    branch = run_branch(run_id)
    GitBranchExecutor(runtime.workspace).execute(
        lease_free(spec(run_id, "branch", EffectKind.GIT_BRANCH, branch, start="main"))
    )
    (runtime.workspace.worktree(run_id) / f"{run_id}.txt").write_text(content)
    receipt = GitCommitExecutor(runtime.workspace).execute(
        lease_free(spec(run_id, "commit", EffectKind.GIT_COMMIT, branch, message=content))
    )
    return str(receipt["commit"])
