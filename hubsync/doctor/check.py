"""One check's verdict and how it is printed: a line, or an object of the JSON document."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Status(StrEnum):
    """A check's verdict; only ``FAIL`` makes doctor exit 1."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


_LABELS = {Status.OK: "ok", Status.WARN: "warn", Status.FAIL: "FAIL", Status.SKIP: "skip"}


@dataclass(frozen=True, slots=True)
class Check:
    """One check: its name, verdict, what was found and, when not ok, what to do."""

    name: str
    status: Status
    detail: str
    fix: str = ""

    @property
    def failed(self) -> bool:
        """Whether this check makes the deployment unhealthy."""
        return self.status is Status.FAIL

    def line(self) -> str:
        """``ok   name: detail`` / ``FAIL name: what is wrong; what to do`` / ``skip name: why``."""
        text = f"{self.detail}; {self.fix}" if self.fix else self.detail
        return f"{_LABELS[self.status]:<4} {self.name}: {text}"

    def as_dict(self) -> dict[str, str | None]:
        """JSON-ready form (``fix`` is null when there is nothing to do)."""
        return {
            "name": self.name,
            "status": self.status.value,
            "detail": self.detail,
            "fix": self.fix or None,
        }


def from_error(name: str, exc: BaseException, fallback_fix: str) -> Check:
    """A failed check from a hubsync error, whose message reads ``what was wrong; what to do``."""
    what, _, todo = str(exc).partition("; ")
    return Check(name, Status.FAIL, what, todo or fallback_fix)


def counted(count: int, noun: str) -> str:
    """``1 project``, ``2 projects``."""
    return f"{count} {noun}{'' if count == 1 else 's'}"
