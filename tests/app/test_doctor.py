"""``hubsync doctor``: one line per check, and exit 1 on a deployment that would lose data.

The command runs (in-process, and once as a real process) against private
redis-servers configured well and badly, a real hub database and a real
runtime state dir; the verdicts on each Redis setting are also checked
directly, for the configurations no test server has (an old Redis, another
fsync policy).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import redis

from hubstore import open_store
from hubsync.core import keys
from hubsync.core.settings import hub_url_from_path
from hubsync.demo.embedded_redis import RedisServerProcess, free_port
from hubsync.doctor import Check, Status
from hubsync.doctor.redis_checks import (
    judge_aof,
    judge_eviction,
    judge_version,
)
from hubsync.processes import run_hubsync
from hubsync.provisioning import enroll_state_dir
from producers.registry import RuntimeRegistry
from tests.helpers.broken_stores import corrupt_middle_page
from tests.helpers.operator_support import CliRun, run_cli
from tests.helpers.relay_player import event_entry, sync_event

HUB_PROJECT = "shop"


def doctor(capsys: pytest.CaptureFixture[str], redis_url: str, *args: str) -> CliRun:
    """``hubsync doctor ARGS`` in-process, its Redis URL in the environment."""
    return run_cli(capsys, "doctor", *args, env={"HUBSYNC_REDIS_URL": redis_url})


def lines_by_check(output: str) -> dict[str, str]:
    """Each output line under its check's name: ``{"aof": "FAIL aof: ..."}``."""
    return {line[5:].partition(":")[0]: line for line in output.splitlines()}


def failed_line(capsys: pytest.CaptureFixture[str], redis_url: str, start: str, *args: str) -> str:
    """``hubsync doctor ARGS``, which must exit 1 with a line starting ``start`` (``"FAIL
    check: ..."``): that line."""
    result = doctor(capsys, redis_url, *args)
    assert result.code == 1, result.out + result.err
    line = lines_by_check(result.out)[start[5:].partition(":")[0]]
    assert line.startswith(start), line
    return line


def make_hub_db(path: Path) -> Path:
    """A hub database with the current schema, as ``hubsync consume`` creates it."""
    open_store(hub_url_from_path(path), create_schema=True).close()
    return path


def hub_db_with_id(path: Path) -> tuple[Path, str]:
    """A hub database that ``hubsync hub init`` gave its id: (path, hub id)."""
    with open_store(hub_url_from_path(make_hub_db(path)), create_schema=False) as store:
        return path, store.init_hub()


def make_state_dir(path: Path, projects: int = 1) -> list[Path]:
    """A runtime state dir with ``projects`` registered projects, each with one event appended."""
    stores = []
    with RuntimeRegistry(path) as registry:
        for n in range(projects):
            project = registry.register_project(path / f"checkout-{n}", hub_project=HUB_PROJECT)
            with registry.open_store(project) as store:
                store.append_event("run-1", "run.started", {"workflow_id": "deploy"})
            stores.append(project.store_path)
    return stores


def set_schema_version(path: Path, version: int) -> None:
    """Stamp a SQLite file with another schema version, as another hubsync release would."""
    connection = sqlite3.connect(path)
    try:
        connection.execute(f"PRAGMA user_version = {version}")
    finally:
        connection.close()


def serve_project(client: redis.Redis, hub_project: str) -> None:
    """What a hub consumer leaves in Redis: the project listed, group ``hub`` on the stream of
    its runtime."""
    client.sadd(keys.PROJECTS, hub_project)
    client.xgroup_create(
        keys.events_stream(hub_project, "rt-1"), keys.CONSUMER_GROUP, id="0", mkstream=True
    )


@pytest.fixture
def good_redis(private_redis: RedisServerProcess) -> redis.Redis:
    """The private server (AOF everysec, noeviction) serving one project, as a client."""
    client = redis.Redis.from_url(private_redis.url)
    serve_project(client, HUB_PROJECT)
    return client


Doctor = Callable[..., CliRun]
"""``hubsync doctor ARGS`` in-process, against the good private Redis."""


@pytest.fixture
def run_doctor(
    capsys: pytest.CaptureFixture[str], private_redis: RedisServerProcess, good_redis: redis.Redis
) -> Doctor:
    """``doctor`` bound to this test's output and the good private Redis."""
    return functools.partial(doctor, capsys, private_redis.url)


# ----- the contract, as a process -----


@pytest.mark.parametrize(
    ("setting", "value", "check", "says"),
    [
        (
            "maxmemory-policy",
            "allkeys-lru",
            "maxmemory-policy",
            [
                "FAIL maxmemory-policy: allkeys-lru: ",
                "evict",
                "CONFIG SET maxmemory-policy noeviction",
                "maxmemory-policy noeviction` in redis.conf",
            ],
        ),
        (
            "appendonly",
            "no",
            "aof",
            ["FAIL aof: appendonly no: a Redis restart loses", "CONFIG SET appendonly yes"],
        ),
    ],
)
def test_doctor_fails_on_one_bad_setting_and_says_what_it_risks_and_the_fix(
    run_doctor: Doctor,
    good_redis: redis.Redis,
    setting: str,
    value: str,
    check: str,
    says: list[str],
) -> None:
    good_redis.config_set(setting, value)

    result = run_doctor()

    assert result.code == 1, result.err
    lines = lines_by_check(result.out)
    line = lines[check]
    assert line.startswith(says[0])
    assert all(text in line for text in says), line
    # the one bad setting is the only failure
    assert [name for name, text in lines.items() if text.startswith("FAIL")] == [check]


def test_a_good_deployment_passes_every_check_and_exits_0(
    tmp_path: Path,
    run_doctor: Doctor,
    good_redis: redis.Redis,
) -> None:
    make_state_dir(tmp_path / "runtime", projects=2)
    hub_db = make_hub_db(tmp_path / "hub.db")
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        hub_id = store.init_hub()
        enroll_state_dir(store, tmp_path / "runtime", [HUB_PROJECT])
    good_redis.set(keys.HUB_IDENTITY, hub_id)  # bound by this hub's consumer

    result = run_doctor("--hub-db", str(hub_db), "--state-dir", str(tmp_path / "runtime"))

    assert result.code == 0, result.out + result.err
    lines = result.out.splitlines()
    assert all(line.startswith("ok   ") for line in lines), result.out
    checks = lines_by_check(result.out)
    assert "Redis 7." in checks["redis-version"]
    assert "appendonly yes, appendfsync everysec: " in checks["aof"]
    assert "up to about 1 s" in checks["aof"]
    assert "every events stream (1 stream of 1 project)" in checks["consumer-group"]
    assert checks["hub-identity"].endswith(f"hubsync:hub = {hub_id}")
    assert str(hub_db) in checks["hub-store"]
    assert "2 projects" in checks["state-dir"]
    projects = [line for line in lines if line.startswith("ok   project ")]
    assert len(projects) == 2 and all("1 pending" in line for line in projects)
    assert f"joined hub {hub_id} for {HUB_PROJECT}; the hub accepts its key" in checks["enrollment"]


def test_the_enrollment_check_says_why_a_runtime_would_send_nothing_or_be_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    runtime = tmp_path / "runtime"
    make_state_dir(runtime)
    hub_db = make_hub_db(tmp_path / "hub.db")
    other_db = make_hub_db(tmp_path / "other.db")

    def enrollment_line(*hub: str) -> str:
        no_redis = "redis://127.0.0.1:1/0"
        return failed_line(capsys, no_redis, "FAIL enrollment: ", "--state-dir", str(runtime), *hub)

    assert "has not joined a hub, so its relay sends nothing" in enrollment_line()
    assert "hubsync runtime join --state-dir" in enrollment_line()
    with open_store(hub_url_from_path(hub_db), create_schema=False) as hub:
        enroll_state_dir(hub, runtime, ["elsewhere"])
        assert f"not enrolled for hub project(s) {HUB_PROJECT}" in enrollment_line()
        enroll_state_dir(hub, runtime, [HUB_PROJECT])
        hub.enroll(hub.enrolled_runtimes()[0].runtime_id, [HUB_PROJECT])  # re-keyed, not joined
        hub.enroll(hub.enrolled_runtimes()[0].runtime_id, [HUB_PROJECT])  # the old key is gone
        assert "no longer accepts its key" in enrollment_line("--hub-db", str(hub_db))
    with open_store(hub_url_from_path(other_db), create_schema=False) as other:
        other.init_hub()
    assert "but " in enrollment_line("--hub-db", str(other_db))
    assert "is hub hub-" in enrollment_line("--hub-db", str(other_db))


def test_json_is_one_document_with_every_check_and_its_fix(
    tmp_path: Path,
    run_doctor: Doctor,
    good_redis: redis.Redis,
) -> None:
    good_redis.config_set("maxmemory-policy", "volatile-lru")

    result = run_doctor("--json", "--hub-db", str(make_hub_db(tmp_path / "h.db")))

    assert result.code == 1, result.err
    document: dict[str, Any] = json.loads(result.out)
    assert document["ok"] is False and document["failed"] == ["maxmemory-policy"]
    checks = {check["name"]: check for check in document["checks"]}
    assert checks["maxmemory-policy"]["status"] == "fail"
    assert "noeviction" in checks["maxmemory-policy"]["fix"]
    assert checks["hub-store"] == checks["hub-store"] | {"status": "ok", "fix": None}
    assert checks["state-dir"]["status"] == "skip"
    assert "hub-identity" not in checks  # only shown when hubsync:hub exists


def test_a_project_without_the_consumer_group_fails_and_names_it(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    client = redis.Redis.from_url(redis_url)
    serve_project(client, "served")
    client.sadd(keys.PROJECTS, "unread")
    client.xadd(keys.events_stream("unread", "rt-1"), {"kind": "event"})  # no group on it

    line = failed_line(
        capsys, redis_url, "FAIL consumer-group: no group hub on 1 of 2 events streams"
    )
    assert "(hubsync:{unread}:events:{rt-1})" in line and "hubsync consume" in line


def test_a_redis_without_hubsyncs_functions_fails_naming_the_command_that_loads_them(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    assert lines_by_check(doctor(capsys, redis_url).out)["functions"].startswith(
        "ok   functions: library hubsync version"
    )
    redis.Redis.from_url(redis_url).function_flush()

    line = failed_line(capsys, redis_url, "FAIL functions: Redis has no functions library hubsync")
    assert "hubsync hub migrate" in line and "--redis-url" in line


def test_no_projects_yet_is_not_a_failure(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    result = doctor(capsys, redis_url)

    line = lines_by_check(result.out)["consumer-group"]
    assert line.startswith("ok   consumer-group: no projects yet in hubsync:projects")


def test_an_older_hub_store_fails_naming_the_migrate_command(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str
) -> None:
    hub_db = make_hub_db(tmp_path / "hub.db")
    set_schema_version(hub_db, 1)

    line = failed_line(capsys, redis_url, "FAIL hub-store: ", "--hub-db", str(hub_db))
    assert "hubsync hub migrate" in line


def test_a_newer_hub_store_fails_and_is_left_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str
) -> None:
    hub_db = make_hub_db(tmp_path / "hub.db")
    set_schema_version(hub_db, 99)
    before = hub_db.read_bytes()

    line = failed_line(capsys, redis_url, "FAIL hub-store: ", "--hub-db", str(hub_db))
    assert "schema version 99" in line
    assert "left untouched" in line and hub_db.read_bytes() == before


def test_a_missing_hub_store_fails_saying_how_to_create_it(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str
) -> None:
    result = doctor(capsys, redis_url, "--hub-db", str(tmp_path / "absent.db"))

    line = lines_by_check(result.out)["hub-store"]
    assert line.startswith("FAIL hub-store: no hub database at ")
    assert "hubsync hub migrate" in line
    assert not (tmp_path / "absent.db").exists()


def test_an_unreadable_project_store_fails_its_line_and_the_others_still_open(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str
) -> None:
    broken, healthy = make_state_dir(tmp_path / "runtime", projects=2)
    set_schema_version(broken, 99)

    result = doctor(capsys, redis_url, "--state-dir", str(tmp_path / "runtime"))

    assert result.code == 1
    lines = lines_by_check(result.out)
    assert lines["state-dir"].startswith("ok   state-dir: ")
    project_lines = [line for line in result.out.splitlines() if " project " in line[:13]]
    assert project_lines[0].startswith("FAIL project ") and "schema version 99" in project_lines[0]
    assert project_lines[1].startswith("ok   project ") and str(healthy) in project_lines[1]


def test_a_path_that_is_no_state_dir_fails_and_is_not_created(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str
) -> None:
    line = failed_line(capsys, redis_url, "FAIL state-dir: ", "--state-dir", str(tmp_path / "typo"))
    assert "is not a hubsync state dir" in line
    assert not (tmp_path / "typo").exists()


@pytest.mark.parametrize("reachable", [True, False], ids=["redis", "no-redis"])
def test_a_damaged_registry_fails_the_state_dir_line_and_is_left_untouched(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, redis_url: str, reachable: bool
) -> None:
    registry = tmp_path / "runtime" / "registry.sqlite"
    registry.parent.mkdir()
    registry.write_text("not a database\n")
    registry.chmod(0o600)  # private, as hubsync makes it: its bytes are what is wrong
    url = redis_url if reachable else "redis://127.0.0.1:1/0"

    result = doctor(capsys, url, "--state-dir", str(registry.parent))

    assert result.code == 1
    assert result.err == ""
    lines = lines_by_check(result.out)
    assert lines["state-dir"].startswith(f"FAIL state-dir: the runtime registry {registry} ")
    assert "restore it from a backup" in lines["state-dir"]
    assert lines["enrollment"].startswith("skip enrollment: the registry cannot be read")
    assert sorted(p.name for p in registry.parent.iterdir()) == ["registry.sqlite"]
    assert registry.read_text() == "not a database\n"


def test_unreachable_redis_is_a_failed_line_not_exit_3_and_never_shows_the_password(
    tmp_path: Path,
) -> None:
    url = f"redis://doctor:s3cret-pass@127.0.0.1:{free_port()}/0"

    # a real process: every byte it writes is scanned for the password
    result = run_hubsync(
        ["doctor", "--state-dir", str(tmp_path / "typo")], env={"HUBSYNC_REDIS_URL": url}
    )

    assert result.returncode == 1, result.stderr
    lines = lines_by_check(result.stdout)
    assert lines["redis"].startswith("FAIL redis: cannot reach redis://127.0.0.1:")
    assert lines["aof"] == "skip aof: Redis unreachable"
    assert lines["hub-store"] == "skip hub-store: no --hub-url or --hub-db given"
    assert lines["state-dir"].startswith("FAIL state-dir: ")  # the other checks still ran
    assert "s3cret-pass" not in result.stdout + result.stderr


def test_refused_credentials_are_a_failed_line_that_never_shows_the_password(
    capsys: pytest.CaptureFixture[str], private_redis: RedisServerProcess, good_redis: redis.Redis
) -> None:
    good_redis.config_set("requirepass", "the-right-one")
    url = private_redis.url.replace("redis://", "redis://default:s3cret-wrong@")

    result = doctor(capsys, url)

    assert result.code == 1, result.err
    lines = lines_by_check(result.out)
    assert lines["redis"].startswith(
        f"FAIL redis: Redis refused the password for user default at {private_redis.url}"
    )
    assert lines["aof"] == "skip aof: Redis refused the password"
    assert "s3cret-wrong" not in result.out + result.err


def test_a_malformed_hub_url_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    result = doctor(capsys, redis_url, "--hub-url", "ftp://hub")

    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith("error: hub URL 'ftp://hub' names no known store")


# ----- the verdicts, for configurations no test server has -----


@pytest.mark.parametrize(
    ("version", "status"),
    [("7.0.0", Status.OK), ("7.2.4", Status.OK), ("8.0.1", Status.OK), ("6.2.14", Status.FAIL),
     ("5.0.7", Status.FAIL), ("unstable", Status.WARN)],
)  # fmt: skip
def test_redis_older_than_7_0_fails(version: str, status: Status) -> None:
    check = judge_version(version)
    assert check.status is status
    if status is Status.FAIL:
        assert "upgrade Redis to 7.0 or later" in check.line()


@pytest.mark.parametrize(
    "policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"]
)
def test_every_eviction_policy_but_noeviction_fails(policy: str) -> None:
    assert judge_eviction(policy).status is Status.FAIL
    assert judge_eviction("noeviction").status is Status.OK


@pytest.mark.parametrize(
    ("enabled", "fsync", "last_write", "status", "said"),
    [
        (False, "everysec", "ok", Status.FAIL, "appendonly no"),
        (True, "everysec", "ok", Status.OK, "up to about 1 s"),
        (True, "always", "ok", Status.OK, "slowest"),
        (True, "no", "ok", Status.WARN, "about every 30 s"),
        (True, None, "ok", Status.WARN, "fsync policy is unknown"),
        (True, "everysec", "err", Status.FAIL, "last AOF write failed"),
    ],
)
def test_aof_verdict_states_the_fsync_policy_and_its_risk(
    enabled: bool, fsync: str | None, last_write: str, status: Status, said: str
) -> None:
    check = judge_aof(enabled, fsync, last_write)
    assert check.status is status
    assert said in check.detail
    assert bool(check.fix) is (status is not Status.OK)


def test_a_line_reads_status_check_detail_then_what_to_do() -> None:
    assert Check("aof", Status.OK, "fine").line() == "ok   aof: fine"
    assert Check("aof", Status.FAIL, "off", "turn it on").line() == "FAIL aof: off; turn it on"
    assert Check("hub-store", Status.SKIP, "not given").line() == "skip hub-store: not given"


def test_a_hub_store_of_another_hub_than_the_namespace_owner_fails_hub_identity(
    tmp_path: Path,
    run_doctor: Doctor,
    good_redis: redis.Redis,
) -> None:
    hub_db, hub_id = hub_db_with_id(tmp_path / "hub.db")
    good_redis.set(keys.HUB_IDENTITY, "hub-00000000000000aa")

    result = run_doctor("--hub-db", str(hub_db))

    assert result.code == 1, result.out + result.err
    line = next(line for line in result.out.splitlines() if "hub-identity" in line)
    assert line.startswith("FAIL") and "hub-00000000000000aa" in line and hub_id in line
    without_store = run_doctor()
    assert "hub-identity" in without_store.out and without_store.code == 0, without_store.out


def test_a_hub_store_behind_what_redis_saw_it_commit_fails_hub_mark(
    tmp_path: Path,
    run_doctor: Doctor,
    good_redis: redis.Redis,
) -> None:
    hub_db, hub_id = hub_db_with_id(tmp_path / "hub.db")
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        store.ingest([event_entry(sync_event(1))])
        store.ingest([event_entry(sync_event(2))])
    good_redis.set(keys.HUB_IDENTITY, hub_id)
    good_redis.zadd(keys.HUB_MARK, {hub_id: 2})
    level = run_doctor("--hub-db", str(hub_db))
    assert level.code == 0 and "committed 2 ingest batches, this Redis saw 2" in level.out

    good_redis.zadd(keys.HUB_MARK, {hub_id: 7})  # what the hub committed after the backup
    behind = run_doctor("--hub-db", str(hub_db))
    assert behind.code == 1, behind.out + behind.err
    line = next(line for line in behind.out.splitlines() if "hub-mark" in line)
    assert line.startswith("FAIL hub-mark: ") and "committed 2" in line and "commit 7" in line
    assert "hubsync hub restore" in line
    assert "hub-mark" not in run_doctor().out  # no store: no line


# ----- what opening a file does not show: malformed pages, keys others can read -----


def healthy_deployment(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A hub database and a runtime enrolled on it with one project: (hub db, state dir, store)."""
    hub_db = make_hub_db(tmp_path / "hub.db")
    runtime = tmp_path / "runtime"
    [store] = make_state_dir(runtime)
    with open_store(hub_url_from_path(hub_db), create_schema=False) as hub:
        hub.init_hub()
        enroll_state_dir(hub, runtime, [HUB_PROJECT])
    return hub_db, runtime, store


def failed_lines(result: CliRun) -> list[str]:
    """The FAIL lines of a doctor run."""
    return [line for line in result.out.splitlines() if line.startswith("FAIL ")]


def malform(path: Path) -> list[str]:
    """Break a page of the SQLite file: what doctor then says of it."""
    corrupt_middle_page(path)
    return [f"{path}: PRAGMA quick_check found damage", "restore it from a backup"]


def expose(path: Path) -> list[str]:
    """Let others read the file: what doctor then says of it."""
    path.chmod(0o644)
    return [f"{path} is mode 0644", f"chmod 600 {path}"]


def link(path: Path) -> list[str]:
    """Put a symbolic link in the file's place, to the file moved aside: what doctor says of it."""
    moved = path.with_name(path.name + ".moved")
    path.rename(moved)
    path.symlink_to(moved)
    return [f"{path} is a symbolic link (to {moved})", "put the file itself in"]


@pytest.mark.parametrize(
    ("damage", "which"),
    [
        (malform, "hub db"),
        (malform, "registry"),
        (malform, "project store"),
        (expose, "registry"),
        (expose, "hub db"),
        (expose, "project store"),
        (link, "registry"),
        (link, "hub db"),
        (link, "project store"),
    ],
    ids=lambda value: value if isinstance(value, str) else value.__name__,
)
def test_a_malformed_or_readable_file_fails_naming_the_file_and_the_fix(
    tmp_path: Path,
    run_doctor: Doctor,
    damage: Callable[[Path], list[str]],
    which: str,
) -> None:
    hub_db, runtime, store = healthy_deployment(tmp_path)
    args = ("--hub-db", str(hub_db), "--state-dir", str(runtime))
    assert failed_lines(run_doctor(*args)) == []  # 0600 as created
    files = {"hub db": hub_db, "registry": runtime / "registry.sqlite", "project store": store}
    says = damage(files[which])

    result = run_doctor(*args)

    assert result.code == 1, result.out
    [failed, *also] = failed_lines(result)
    assert all(text in failed for text in says), failed
    # a link fails the open as well as the file check; anything else fails one line only
    assert len(also) == (1 if damage is link and which != "project store" else 0), also
    if damage is expose:
        assert files[which].stat().st_mode & 0o777 == 0o644, "doctor changes nothing"
    if damage is link:
        assert files[which].is_symlink(), "doctor changes nothing"
