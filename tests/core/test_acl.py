"""``hubsync acl``: each role's Redis user can do its job and nothing else, on a real redis-server.

The lines are applied as an administrator would (each line one command); each
user then runs its role's real code, and the commands it must not run are
refused NOPERM by Redis itself.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from consumers.stream.consumer_admin import list_consumers, remove_consumer
from hubstore import hub_url_from_path, open_store
from hubstore.leases import LeaseClient
from hubstore.redis_functions import function_name
from hubsync.core import keys
from hubsync.core.acl_rules import (
    RedisUser,
    consumer_user,
    glob_literal,
    operator_user,
    replayer_user,
    runtime_user,
)
from hubsync.processes import child_environment
from tests.helpers.acl_support import (
    HUB_PROJECT,
    PASSWORD,
    PREFIX,
    apply_lines,
    hubsync_acl,
    user_url,
)
from tests.helpers.lease_support import counter_lowerings
from tests.helpers.operator_support import error_lines, run_cli


@pytest.fixture
def users(redis_client: redis.Redis) -> Iterator[list[str]]:
    """Names of users a test creates on the session's server; deleted afterwards."""
    created: list[str] = []
    yield created
    for name in created:
        redis_client.execute_command("ACL", "DELUSER", name)


@pytest.fixture
def log_in(
    redis_url: str, redis_client: redis.Redis, users: list[str]
) -> Callable[[RedisUser], redis.Redis]:
    """Create a role's user from its lines (deleted afterwards); a client authenticated as it."""

    def log_in(user: RedisUser) -> redis.Redis:
        users.append(user.name)
        apply_lines(redis_client, user.setuser_lines(PASSWORD))
        return redis.Redis.from_url(user_url(redis_url, user.name))

    return log_in


def refused(call: Callable[[], object]) -> bool:
    """True once ``call()`` was refused NOPERM (the test fails otherwise)."""
    with pytest.raises(redis.exceptions.NoPermissionError):
        call()
    return True


# ----- the lines themselves -----


def test_a_runtime_user_names_only_its_own_keys() -> None:
    user = runtime_user("box-1", ["acme", "beta"], prefix=PREFIX)
    line = user.setuser_lines()[0]
    assert user.name == "t-runtime-box-1"
    for key in (
        keys.events_stream("acme", "box-1"),
        keys.events_stream("beta", "box-1"),
        keys.acks_stream("acme", "box-1"),
        keys.acks_stream("beta", "box-1"),
        keys.relay_health("box-1"),
    ):
        assert f"~{key} " in line
    assert "*" not in line.split("-@all", 1)[1]  # no wildcard key, no category
    assert "xdel" not in line and "xreadgroup" not in line
    assert "xtrim" not in line.split("~hubsync:{acme}:acks", 1)[0]  # only on its acks
    assert keys.PROJECTS not in line and "sadd" not in line  # no key every runtime shares
    for word in ("eval", "script", "function", "+select"):
        assert word not in line, word


def test_a_password_is_printed_only_as_its_sha256(tmp_path: Path) -> None:
    lines = hubsync_acl(tmp_path, "--consumer")
    digest = hashlib.sha256(PASSWORD.encode()).hexdigest()
    assert lines[0].startswith(f"ACL SETUSER t-consumer resetpass #{digest} on resetkeys")
    assert all(">" not in line and "nopass" not in line for line in lines)


def test_without_a_password_file_the_lines_leave_passwords_and_state_alone(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "acl", "--operator", "--replayer")
    assert code == 0
    assert [line.split()[2] for line in out.splitlines()] == [
        "hubsync-operator",
        "hubsync-operator",
        "hubsync-replayer",
        "hubsync-replayer",
    ]
    for word in ("resetpass", " on ", "nopass", ">", "#"):
        assert word not in out
    assert "rules only" in err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        ((), "name a user"),
        (("--runtime", "box-1"), "--hub-project: missing"),
        (("--hub-project", "acme"), "give --runtime"),
        (("--runtime", "box*1", "--hub-project", "acme"), "runtime id may hold only"),
        (("--runtime", "box-1", "--hub-project", "acme", "--effects", "x[1]"), "effects pattern"),
        (("--consumer", "--operator", "--password-file", __file__), "one user per call"),
    ],
)
def test_a_bad_call_is_one_usage_line(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], says: str
) -> None:
    code, out, err = run_cli(capsys, "acl", *argv)
    assert code == 2 and out == ""
    assert len(error_lines(err)) == 1 and says in error_lines(err)[0]


def test_effects_on_every_resource_are_printed_with_a_note_and_a_narrow_pattern_without(
    capsys: pytest.CaptureFixture[str],
) -> None:
    runtime = ("--runtime", "box-1", "--hub-project", "acme")
    code, out, err = run_cli(capsys, "acl", *runtime, "--effects", "effect:*")
    assert code == 0 and "~hubsync:lease:{effect:*}" in out
    assert "every shared effect" in err
    code, out, err = run_cli(capsys, "acl", *runtime, "--effects", "effect:pr-create:*")
    assert code == 0 and "~hubsync:lease:{effect:pr-create:*}:counter" in out
    assert "every shared effect" not in err


def test_with_the_hub_a_runtime_user_grants_exactly_its_enrolled_hub_projects(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    hub_db = tmp_path / "hub.db"
    with open_store(hub_url_from_path(hub_db), create_schema=True) as hub:
        hub.init_hub()
        hub.enroll("box-1", ["acme", "beta"])
        hub.enroll("box-2", ["acme"])
        hub.revoke("box-2")
    code, out, _ = run_cli(capsys, "acl", "--hub-db", str(hub_db), "--runtime", "box-1")
    assert code == 0
    assert out.splitlines() == runtime_user("box-1", ["acme", "beta"]).setuser_lines()
    code, out, _ = run_cli(
        capsys, "acl", "--hub-db", str(hub_db), "--runtime", "box-1", "--hub-project", "beta"
    )
    assert code == 0 and out.splitlines() == runtime_user("box-1", ["beta"]).setuser_lines()

    for runtime, extra, says in (
        ("box-1", ("--hub-project", "gamma"), "not enrolled for gamma"),
        ("box-2", (), "runtime box-2 is revoked"),
        ("box-3", (), "runtime box-3 is not enrolled"),
    ):
        code, out, err = run_cli(
            capsys, "acl", "--hub-db", str(hub_db), "--runtime", runtime, *extra
        )
        assert code == 2 and out == ""
        assert len(error_lines(err)) == 1 and says in error_lines(err)[0]


def test_glob_literal_escapes_what_a_redis_glob_treats_specially() -> None:
    assert glob_literal("hubsync:{a}:events") == "hubsync:{a}:events"
    assert glob_literal("a*b?c[d]e\\") == "a\\*b\\?c\\[d\\]e\\\\"


# ----- each user on a real redis-server -----


def test_every_line_is_accepted_by_redis_cli(redis_url: str, users: list[str]) -> None:
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli is not installed")
    lines = [
        *runtime_user("box-1", ["acme"], effects=["effect:pr:*"], prefix=PREFIX).setuser_lines(),
        *consumer_user(prefix=PREFIX).setuser_lines(),
        *operator_user(prefix=PREFIX).setuser_lines(),
        *replayer_user(prefix=PREFIX).setuser_lines(),
    ]
    users.extend(["t-runtime-box-1", "t-consumer", "t-operator", "t-replayer"])
    done = subprocess.run(
        [cli, "-u", redis_url],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=child_environment(),
    )
    replies = [line for line in done.stdout.splitlines() if line.strip()]
    assert replies.count("OK") == 4, done.stdout  # the main line of each user
    assert all(r == "OK" or "client|setinfo" in r for r in replies), done.stdout


def test_the_runtime_user_appends_and_reads_its_acks_but_may_not_delete_trim_or_read_others(
    redis_client: redis.Redis, log_in: Callable[[RedisUser], redis.Redis]
) -> None:
    client = log_in(runtime_user("box-1", [HUB_PROJECT], prefix=PREFIX))
    events, own_acks = (
        keys.events_stream(HUB_PROJECT, "box-1"),
        keys.acks_stream(HUB_PROJECT, "box-1"),
    )
    other_events, other_acks = (
        keys.events_stream(HUB_PROJECT, "box-2"),
        keys.acks_stream(HUB_PROJECT, "box-2"),
    )
    redis_client.xadd(own_acks, {"outcomes": "[]"})
    redis_client.xadd(other_acks, {"outcomes": "[]"})

    entry = client.xadd(events, {"kind": "event"})
    assert client.xread({own_acks: "0-0"}) and client.xtrim(own_acks, minid="0-0") == 0
    assert client.set(keys.relay_health("box-1"), "{}", px=1000)

    assert refused(lambda: client.xdel(events, entry))
    assert refused(lambda: client.xtrim(events, maxlen=0))
    assert refused(lambda: client.xread({other_acks: "0-0"}))
    assert refused(lambda: client.xread({events: "0-0"}))
    assert refused(lambda: client.xtrim(other_acks, maxlen=0))
    assert refused(lambda: client.xadd(own_acks, {"outcomes": "[]"}))  # no forging its acks
    assert refused(lambda: client.xadd(keys.events_stream("other", "box-1"), {"kind": "event"}))
    # nothing of another runtime's, nor of the streams every runtime once shared
    assert refused(lambda: client.xadd(other_events, {"kind": "event"}))
    assert refused(lambda: client.xadd(keys.shared_events_stream(HUB_PROJECT), {"kind": "e"}))
    assert refused(lambda: client.execute_command("XSETID", events, "99999999999999-0"))
    assert refused(lambda: client.sadd(keys.PROJECTS, HUB_PROJECT))
    assert refused(lambda: client.set(keys.relay_health("box-2"), "{}"))
    assert refused(lambda: LeaseClient(client).acquire("effect:x:1", "box-1", 5_000))
    client.close()


def test_effects_grant_the_lease_functions_on_matching_resources_only(
    log_in: Callable[[RedisUser], redis.Redis],
) -> None:
    client = log_in(runtime_user("box-1", [HUB_PROJECT], effects=["effect:pr:*"], prefix=PREFIX))
    leases = LeaseClient(client)

    granted = leases.acquire_or_raise("effect:pr:abc", "box-1:1", 5_000)
    assert leases.check_or_raise(granted.lease).token == granted.lease.token
    assert leases.renew_or_raise(granted.lease).lease.token == granted.lease.token
    assert leases.release_or_raise(granted.lease).token == granted.lease.token

    assert refused(lambda: leases.acquire("deploy:prod", "box-1:1", 5_000))
    assert refused(lambda: leases.acquire("effect:webhook:abc", "box-1:1", 5_000))
    assert refused(lambda: client.xadd(keys.events_stream("other", "box-1"), {"kind": "event"}))
    counter = keys.lease_counter("effect:pr:abc")
    renamed = keys.lease_counter("effect:pr:other")
    for lower in (*counter_lowerings(client, counter), lambda: client.rename(counter, renamed)):
        assert refused(lower)
    client.close()


@pytest.mark.parametrize("role", ["runtime", "consumer", "replayer", "operator"])
def test_no_user_may_run_its_own_lua_or_reach_another_database(
    log_in: Callable[[RedisUser], redis.Redis], role: str
) -> None:
    user = {
        "runtime": runtime_user("box-1", [HUB_PROJECT], effects=["effect:pr:*"], prefix=PREFIX),
        "consumer": consumer_user(prefix=PREFIX),
        "replayer": replayer_user(prefix=PREFIX),
        "operator": operator_user(prefix=PREFIX),
    }[role]
    client = log_in(user)
    lease = keys.lease("effect:pr:abc")
    assert refused(lambda: client.eval("return 1", 1, lease))
    assert refused(lambda: client.evalsha("0" * 40, 1, lease))
    assert refused(lambda: client.script_load("return 1"))
    assert refused(
        lambda: client.function_load(
            "#!lua name=mine\nredis.register_function('f', function() return 1 end)"
        )
    )
    assert refused(lambda: client.execute_command("SELECT", 1))
    client.close()


def test_the_operator_reads_but_may_not_write_or_replay(
    redis_client: redis.Redis, log_in: Callable[[RedisUser], redis.Redis]
) -> None:
    client = log_in(operator_user(prefix=PREFIX))
    events, dead = keys.events_stream(HUB_PROJECT, "box-1"), keys.dead_stream(HUB_PROJECT)
    redis_client.xadd(events, {"kind": "event"})
    letter = redis_client.xadd(dead, {"reason": "bad_json", "field.kind": "event"})

    assert client.xlen(events) == 1 and len(client.xrange(dead)) == 1
    assert refused(lambda: client.xadd(events, {"kind": "event"}))
    assert refused(lambda: client.xdel(dead, letter))
    assert refused(lambda: client.xtrim(dead, maxlen=0))
    assert refused(lambda: client.xread({keys.acks_stream(HUB_PROJECT, "box-1"): "0-0"}))
    assert refused(lambda: client.xgroup_create(events, keys.CONSUMER_GROUP, id="0"))
    assert refused(lambda: client.config_get("requirepass"))
    # doctor asks whether hubsync's library is loaded; no function with a key runs
    assert client.fcall_ro(function_name("library_version"), 0) == b"hubsync"
    assert refused(
        lambda: client.fcall_ro(
            function_name("lease_check"), 2, keys.lease("r"), keys.lease_counter("r"), "h", 1, "p"
        )
    )
    client.close()


def test_the_consumer_may_not_append_events_or_delete_entries(
    redis_client: redis.Redis, log_in: Callable[[RedisUser], redis.Redis]
) -> None:
    client = log_in(consumer_user(prefix=PREFIX))
    events = keys.events_stream(HUB_PROJECT, "box-1")
    entry = redis_client.xadd(events, {"kind": "event"})

    assert client.xgroup_create(events, keys.CONSUMER_GROUP, id="0", mkstream=True)
    assert refused(lambda: client.xlen(keys.shared_events_stream(HUB_PROJECT)))  # not its need
    assert client.sadd(keys.PROJECTS, HUB_PROJECT) == 1  # the projects it follows
    assert refused(lambda: client.xadd(events, {"kind": "event"}))
    assert refused(lambda: client.xdel(events, entry))
    assert refused(lambda: client.keys("*"))
    client.close()


def test_the_consumer_admin_runs_as_the_consumer_and_lists_as_the_operator(
    redis_client: redis.Redis, log_in: Callable[[RedisUser], redis.Redis]
) -> None:
    events = keys.events_stream(HUB_PROJECT, "box-1")
    redis_client.xadd(events, {"kind": "event"})
    redis_client.xgroup_create(events, keys.CONSUMER_GROUP, id="0")
    redis_client.xreadgroup(keys.CONSUMER_GROUP, "ghost", {events: ">"})
    operator = log_in(operator_user(prefix=PREFIX))
    consumer = log_in(consumer_user(prefix=PREFIX))

    assert [c.name for c in list_consumers(operator)] == ["ghost"]
    assert refused(lambda: remove_consumer(operator, "ghost", to="hub-1"))
    assert remove_consumer(consumer, "ghost", to="hub-1").moved == 1
    # the mark and the revocations: the consumer reads and writes them, the operator reads
    # the mark only
    consumer.zadd(keys.HUB_MARK, {"hub-00000000000000aa": 3}, gt=True)
    consumer.hset(keys.REVOCATIONS, "0" * 16, "{}")
    assert consumer.hmget(keys.REVOCATIONS, ["0" * 16]) == [b"{}"]
    assert operator.zscore(keys.HUB_MARK, "hub-00000000000000aa") == 3
    assert refused(lambda: operator.zadd(keys.HUB_MARK, {"hub-00000000000000aa": 1}))
    assert refused(lambda: consumer.delete(keys.REVOCATIONS))
    operator.close()
    consumer.close()
