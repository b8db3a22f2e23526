"""Running the ``git`` command line: one way in, with a clean environment and redacted output.

Credentials come only from git itself (its credential helpers, an SSH agent):
hubsync never passes one, git never prompts (``GIT_TERMINAL_PROMPT=0``), and a
remote URL carrying a password is refused before git sees it. Whatever git
prints goes through the project's URL-userinfo rule
(``producers.redaction_rules``) before it reaches an error, a log line or a
receipt.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlsplit

from producers.effects.errors import EffectFailedError, NothingExecutedError
from producers.redaction import Redactor
from producers.redaction_rules import CREDENTIAL_PATTERNS

GIT_TIMEOUT = 120.0
"""Seconds a git command may run before it is killed (its outcome is then settled by looking)."""
IDENTITY = ("hubsync", "hubsync@localhost")
"""Author and committer of the commits hubsync makes (run commits, fence markers)."""

_REPOSITORY_VARIABLES = frozenset(
    {
        "GIT_DIR",
        "GIT_WORK_TREE",
        "GIT_INDEX_FILE",
        "GIT_COMMON_DIR",
        "GIT_OBJECT_DIRECTORY",
        "GIT_ALTERNATE_OBJECT_DIRECTORIES",
        "GIT_NAMESPACE",
        "GIT_PREFIX",
    }
)
"""Variables that would point git at another repository than the one hubsync names."""
# URL userinfo only: git prints object ids and refs that other credential formats (a long
# lone token) would take for secrets, and the fence markers are read back from its output.
_URL_RULE = tuple(p for p in CREDENTIAL_PATTERNS if p.kind == "url_credentials")
_URL_REDACTOR = Redactor(_URL_RULE)


def redact_remote(text: str) -> str:
    """``text`` with the userinfo of any URL in it (``user:password@``, a token) replaced."""
    return _URL_REDACTOR.redact_text(text)


def check_remote(remote: str) -> str:
    """``remote`` (a remote's name or URL) if it carries no password; refused otherwise.

    A password in a URL would come from event data or the ledger; git's credential
    helpers and the SSH agent are the only sources hubsync lets git use.
    """
    if "://" in remote:
        try:
            parts = urlsplit(remote)
        except ValueError:
            raise EffectFailedError("the remote URL cannot be parsed") from None
        if parts.password is not None or redact_remote(remote) != remote:
            raise EffectFailedError(
                f"remote {redact_remote(remote)} carries credentials in its URL; give git a "
                "credential helper or an SSH agent instead"
            )
    elif not remote or remote.startswith("-"):
        raise EffectFailedError("a remote must be a configured remote's name or a URL")
    return remote


class GitCommandError(NothingExecutedError):
    """A git command failed; the message holds its (redacted) last lines of output.

    Nothing executed: no command run through ``run_git`` moves a ref of the remote
    except a push, and pushes report their outcome instead of raising
    (``remote.push``); the local steps are idempotent, so trying again is safe.
    """

    def __init__(self, args: Sequence[str], returncode: int | None, output: str) -> None:
        self.returncode = returncode
        self.output = output
        tail = " | ".join(output.strip().splitlines()[-3:]) or "no output"
        ended = "timed out" if returncode is None else f"exited {returncode}"
        super().__init__(f"git {args[0]} {ended}: {tail}")


def git_environment() -> dict[str, str]:
    """This process's environment for git: no prompts, C locale, hubsync's identity by default."""
    env = {name: value for name, value in os.environ.items() if name not in _REPOSITORY_VARIABLES}
    env.update(
        GIT_TERMINAL_PROMPT="0",
        LC_ALL="C",
        GIT_AUTHOR_NAME=IDENTITY[0],
        GIT_AUTHOR_EMAIL=IDENTITY[1],
        GIT_COMMITTER_NAME=IDENTITY[0],
        GIT_COMMITTER_EMAIL=IDENTITY[1],
    )
    # GIT_SSH_COMMAND, GIT_ASKPASS and SSH_AUTH_SOCK stay: they are how git finds credentials
    return env


def run_git(
    args: Sequence[str],
    cwd: Path,
    *,
    check: bool = True,
    timeout: float = GIT_TIMEOUT,
) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd``; its output redacted. Raises ``GitCommandError`` when it
    fails (unless ``check`` is false) and when it runs past ``timeout``."""
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=git_environment(),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        output = _text(exc.stdout) + _text(exc.stderr)
        raise GitCommandError(args, None, redact_remote(output)) from None
    done.stdout = redact_remote(done.stdout)
    done.stderr = redact_remote(done.stderr)
    if check and done.returncode != 0:
        raise GitCommandError(args, done.returncode, done.stderr or done.stdout)
    return done


def git_output(args: Sequence[str], cwd: Path) -> str:
    """The stripped standard output of ``git ARGS`` (which must succeed)."""
    return run_git(args, cwd).stdout.strip()


def _text(value: str | bytes | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""
