"""``hubsync demo``: the README's first command runs end to end and checks its invariants."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
import redis

from hubsync.core import keys
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import Child, hubsync_command, run_hubsync
from tests.helpers.support import wait_until

SMALL = ("--runs-per-runtime", "2", "--events-per-run", "60")


def run_demo(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return run_hubsync(["demo", *SMALL, *args], cwd=cwd, env=env)


def children_of(pid: int) -> dict[int, str]:
    """The command lines of ``pid``'s child processes, by pid (from /proc)."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rpartition(")")[2].split()[1])
        except (OSError, ValueError):
            continue  # gone meanwhile
        line = command_line(int(stat.parent.name)) if parent == pid else None
        if line is not None:
            found[int(stat.parent.name)] = line
    return found


def command_line(pid: int) -> str | None:
    """The command line of ``pid``, arguments joined by spaces; None once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie has exited: only its entry waits to be reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_demo_stopped_by_sigterm_or_sighup_leaves_no_process_and_no_temp_dir(
    tmp_path: Path, signum: signal.Signals
) -> None:
    temp = tmp_path / "tmp"  # the demo's work dir and the private Redis's dir go here
    temp.mkdir()
    argv = hubsync_command("demo", "--embedded", "redis-server", "--events-per-run", "2000")
    demo = Child(
        "demo", argv, tmp_path / "demo.err", env={"TMPDIR": str(temp)}, stdout=tmp_path / "out"
    )
    demo.start()
    children: dict[int, str] = {}
    try:

        def every_daemon_up() -> dict[int, str] | None:
            children = children_of(demo.pid)
            lines = list(children.values())
            daemons = sum(" relay " in line or " consume " in line for line in lines)
            has_redis = any("redis-server" in line for line in lines)
            return children if daemons == 5 and has_redis else None

        children = wait_until(every_daemon_up, timeout=60, what="the demo's Redis and 5 daemons")
        assert sorted(p.name for p in temp.iterdir())[0].startswith("hubsync-demo-")
        demo.signal(signum)
        code = demo.wait(timeout=60)
        wait_until(
            lambda: not any(running(pid) for pid in children),
            timeout=20,
            what=f"the demo's children {sorted(children)} to be gone",
        )
    finally:
        demo.kill()
        for pid, line in children.items():  # what a failed run left: never left to run on
            if running(pid) and command_line(pid) == line:
                os.kill(pid, signal.SIGKILL)
    message = demo.log_text()
    assert code == 128 + signum, message[-2000:]
    assert f"stopped by {signum.name}" in message and "Traceback" not in message
    assert list(temp.iterdir()) == []


@pytest.mark.parametrize("embedded", ["redis-server", "fakeredis"])
def test_demo_runs_the_pipeline_end_to_end_and_every_invariant_holds(embedded: str) -> None:
    result = run_demo("--embedded", embedded, "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    summary = json.loads(result.stdout)
    assert summary["ok"] is True
    assert summary["events_produced"] == summary["events_in_hub"] == 3 * 2 * 60
    assert summary["outbox_acked"] == summary["events_produced"]
    # the signed conflicting entry, and the run signed into another runtime's project
    assert summary["conflicts"] == 2 and summary["refused_unauthenticated"] == 1
    assert summary["dead_letters"] == 2  # the garbage entry and the unsigned forgery
    assert summary["secrets_found"] == 0
    assert summary["lease"]["token_b"] > summary["lease"]["token_a"]
    assert summary["lease"]["stale_attempt_state"] == "blocked_uncertain"
    shared_push = summary["shared_push"]
    assert shared_push["a_refused_by_remote"] and shared_push["main_holds_only_b"]
    names = {check["name"] for check in summary["invariants"]}
    assert "the stalled holder's push was refused by the remote" in names
    assert all(check["held"] for check in summary["invariants"])


def test_demo_prints_a_summary_table_and_redis_cli_commands_only_for_a_redis_it_keeps() -> None:
    result = run_demo()
    assert result.returncode == 0, result.stderr[-2000:]
    assert "events in the hub" in result.stdout
    assert "secrets found in hub, Redis, state, logs" in result.stdout
    assert "FAIL" not in result.stdout
    # the private Redis is gone when the summary prints: no commands against it
    assert "redis-cli -u" not in result.stdout and "hubsync demo --keep" in result.stdout
    # a narrow terminal's width: the commands to copy still come one to a line, whole
    kept = run_demo("--embedded", "redis-server", "--keep", env={"COLUMNS": "40"})
    url = re.search(r"redis-cli -u (redis://127\.0\.0\.1:[0-9]+/0) XRANGE", kept.stdout)
    assert kept.returncode == 0 and url, kept.stdout[-2000:]
    client = redis.Redis.from_url(url.group(1))
    redis_dir = Path(client.config_get("dir")["dir"])
    files = re.search(r"^  files: (.+)$", kept.stdout, re.MULTILINE)
    try:
        assert client.xlen("hubsync:{demo}:events:{demo-rt-1}") > 0, "the printed commands reach it"
        lines = kept.stdout.splitlines()
        status_line = f"  hubsync status --redis-url {url.group(1)} --hub-db "
        [status_command] = [line for line in lines if line.startswith(status_line)]
        assert status_command.endswith("/hub.db") and Path(status_command.split()[-1]).is_file()
        assert f"  stop Redis: redis-cli -u {url.group(1)} shutdown nosave" in lines
    finally:
        client.shutdown(nosave=True)  # what the kept run left, removed however the test ends
        shutil.rmtree(redis_dir, ignore_errors=True)
        if files is not None:
            shutil.rmtree(files.group(1), ignore_errors=True)


def test_demo_refuses_bad_arguments_with_a_usage_error() -> None:
    result = run_demo("--events-per-run", "0")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    keep_fake = run_demo("--embedded", "fakeredis", "--keep")
    assert keep_fake.returncode == 2 and "--keep needs a redis-server" in keep_fake.stderr


def test_demo_on_a_given_redis_keeps_its_password_out_of_output_and_command_lines(
    private_redis: RedisServerProcess,
) -> None:
    password = "demo-pass-" + "7" * 12
    redis.Redis.from_url(private_redis.url).config_set("requirepass", password)
    url = f"redis://:{password}@127.0.0.1:{private_redis.port}/0"
    result = run_hubsync(
        ["demo", "--runs-per-runtime", "1", "--events-per-run", "30"],
        env={"HUBSYNC_REDIS_URL": url},
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"127.0.0.1:{private_redis.port}" in result.stdout
    assert password not in result.stdout + result.stderr
    assert not redis.Redis.from_url(url).exists(keys.HUB_IDENTITY)  # the demo gave it back


def test_demo_on_a_redis_given_by_option_says_which_keys_are_its_own(
    private_redis: RedisServerProcess,
) -> None:
    result = run_hubsync(
        ["demo", "--runs-per-runtime", "1", "--events-per-run", "30",
         "--redis-url", private_redis.url],
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    events = keys.events_stream("demo", "demo-rt-1")
    assert f"redis-cli -u {private_redis.url} XRANGE '{events}' - + COUNT 5" in result.stdout
    assert "(the demo's keys in that Redis are those with {demo} in their name)" in result.stdout


def test_demo_refuses_a_given_redis_that_another_hub_owns_and_touches_nothing(
    private_redis: RedisServerProcess,
) -> None:
    client = redis.Redis.from_url(private_redis.url)
    client.set(keys.HUB_IDENTITY, "hub-00000000000000aa")  # a real hub's consumers read here
    client.xadd(keys.events_stream("demo", "rt-1"), {"kind": "event"})
    result = run_hubsync(
        ["demo", "--runs-per-runtime", "1", "--events-per-run", "5"],
        env={"HUBSYNC_REDIS_URL": private_redis.url},
    )
    assert result.returncode == 2, result.stderr[-2000:]
    assert "owned by hub hub-00000000000000aa" in result.stderr
    assert client.get(keys.HUB_IDENTITY) == b"hub-00000000000000aa"
    assert (
        client.xlen(keys.events_stream("demo", "rt-1")) == 1
    )  # its {demo} keys are not cleaned either


def test_demo_runs_from_a_directory_whose_hubsync_folder_is_not_hubsync(tmp_path: Path) -> None:
    # the parent directory of a clone, or a clone itself: ``hubsync/`` right in the cwd
    shadow = tmp_path / "hubsync"
    shadow.mkdir()
    (shadow / "__init__.py").write_text('raise ImportError("this hubsync/ is not the package")\n')
    result = run_demo("--embedded", "fakeredis", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["ok"] is True


def test_a_daemon_that_dies_ends_the_demo_at_once_with_its_name_code_and_log(
    tmp_path: Path,
) -> None:
    argv = hubsync_command("demo", "--embedded", "redis-server", "--events-per-run", "2000")
    demo = Child("demo", argv, tmp_path / "demo.err", stdout=tmp_path / "demo.out").start()
    try:
        relay = wait_until(
            lambda: next(
                (pid for pid, line in children_of(demo.pid).items() if " relay " in line), None
            ),
            timeout=60,
            what="the demo's first relay",
        )
        os.kill(relay, signal.SIGKILL)  # as the OOM killer would
        code = demo.wait(timeout=60)
    finally:
        demo.kill()
    message = demo.log_text()
    assert code == 1, message[-2000:]
    assert "relay-runtime-" in message and "exited with code -9" in message
    assert "the end of its log" in message
    assert "Traceback" not in message
