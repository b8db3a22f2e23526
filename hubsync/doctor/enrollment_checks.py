"""The enrollment check: has this runtime joined a hub, and does that hub accept its key?

A runtime that has not joined sends nothing, one whose key the hub replaced
(or revoked) has everything it sends refused, and one whose projects sync to a
hub project it is not enrolled for has those projects' events held back: each
looks like a quiet relay, so doctor says which it is.
"""

from __future__ import annotations

from pathlib import Path

from hubsync.core.errors import HubsyncError
from hubsync.doctor.check import Check, Status

NAME = "enrollment"


def enrollment_check(state_dir: Path | None, hub_url: str | None, shown_hub: str) -> Check:
    """The runtime's enrollment, checked against the hub store when one is given."""
    if state_dir is None:
        return Check(NAME, Status.SKIP, "no --state-dir given")
    from producers.registry import RuntimeRegistry

    try:
        with RuntimeRegistry(state_dir, create=False) as registry:
            runtime_id = registry.runtime_id
            enrollment = registry.enrollment()
            projects = registry.projects()
    except (HubsyncError, OSError) as exc:
        return Check(NAME, Status.SKIP, f"the registry cannot be read ({type(exc).__name__})")
    if enrollment is None:
        return Check(
            NAME,
            Status.FAIL,
            f"runtime {runtime_id} has not joined a hub, so its relay sends nothing",
            f"on the hub run `hubsync enroll {runtime_id} --hub-project P ...`, then here "
            f"`hubsync runtime join --state-dir {state_dir} -` with the token it prints",
        )
    outside = sorted({p.hub_project for p in projects} - set(enrollment.hub_projects))
    if outside:
        return Check(
            NAME,
            Status.FAIL,
            f"runtime {runtime_id} is not enrolled for hub project(s) {', '.join(outside)}, "
            "so the projects that sync there are not sent",
            f"enroll it for them too (hubsync enroll {runtime_id} --hub-project ... with every "
            "hub project) and join the new token",
        )
    joined = (
        f"runtime {runtime_id} joined hub {enrollment.hub_id} for "
        f"{', '.join(enrollment.hub_projects)}"
    )
    if hub_url is None:
        return Check(NAME, Status.OK, joined)
    return _against_hub(hub_url, shown_hub, runtime_id, enrollment.hub_id, enrollment.key, joined)


def _against_hub(
    hub_url: str, shown_hub: str, runtime_id: str, hub_id: str, key: bytes, joined: str
) -> Check:
    from hubstore import open_store
    from hubsync.core.clock import utc_now

    try:
        with open_store(hub_url, create_schema=False, busy_budget=10.0) as store:
            store_hub = store.hub_id()
            record = store.enrolled_runtime(runtime_id)
    except (HubsyncError, OSError) as exc:
        return Check(NAME, Status.WARN, f"{joined}; {shown_hub} cannot be read ({exc})")
    if store_hub != hub_id:
        return Check(
            NAME,
            Status.FAIL,
            f"{joined}, but {shown_hub} is hub {store_hub or '(no id yet)'}",
            "point --hub-url at the hub this runtime joined, or enroll it on this hub and use "
            "another state dir (a runtime syncs with one hub)",
        )
    if record is None or key not in record.keys_at(utc_now()):
        state = (
            "never enrolled it" if record is None else f"no longer accepts its key ({record.state})"
        )
        return Check(
            NAME,
            Status.FAIL,
            f"{joined}, but the hub {state}: everything it sends is refused",
            f"enroll it again on the hub (hubsync enroll {runtime_id} ...) and join the token",
        )
    return Check(NAME, Status.OK, f"{joined}; the hub accepts its key")
