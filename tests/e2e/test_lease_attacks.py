"""Attacks on leases by runtimes that share a resource, as their real Redis users.

A private redis-server with its default user off; each runtime and the
operator log in as the user ``hubsync acl`` prints for it (both runtimes with
``--effects 'effect:pr:*'``). What one of them can read or rewrite never lets
it act as another holder, never makes a token be issued twice, and never lets
a stale or stolen token's write land in a fenced value.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis

from hubstore.leases import Lease, LeaseClient, LeaseRefusal, LeaseRefused
from hubstore.redis_functions import function_name, library_loaded
from hubsync.core import keys
from hubsync.demo.embedded_redis import RedisServerProcess
from hubsync.processes import run_hubsync
from tests.helpers import acl_support as acl
from tests.helpers.lease_support import counter_lowerings

RESOURCE = "effect:pr:shared"
TTL = 30_000
LEASE_KEYS = [keys.lease(RESOURCE), keys.lease_log(RESOURCE), keys.lease_counter(RESOURCE)]


@dataclass
class Users:
    """URLs of the users on the ACL-enabled server, and its admin client."""

    server_url: str
    admin: redis.Redis
    rt_a: str
    rt_b: str
    operator: str
    consumer: str


@pytest.fixture
def users(private_redis: RedisServerProcess, tmp_path: Path) -> Iterator[Users]:
    admin = acl.admin_only(private_redis.url)
    for argv in (
        ["--runtime", "rt-a", "--hub-project", acl.HUB_PROJECT, "--effects", "effect:pr:*"],
        ["--runtime", "rt-b", "--hub-project", acl.HUB_PROJECT, "--effects", "effect:pr:*"],
        ["--operator"],
        ["--consumer"],
    ):
        acl.apply_lines(admin, acl.hubsync_acl(tmp_path, *argv))

    def url(role: str) -> str:
        return acl.user_url(private_redis.url, acl.PREFIX + role)

    yield Users(
        private_redis.url,
        admin,
        url("runtime-rt-a"),
        url("runtime-rt-b"),
        url("operator"),
        url("consumer"),
    )
    admin.close()


def lease_cli(url: str, *argv: str, proof: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {"HUBSYNC_REDIS_URL": url} | ({"HUBSYNC_PROOF": proof} if proof else {})
    return run_hubsync(["lease", *argv, "--json"], env=env)


def refused_as(result: object) -> LeaseRefusal:
    assert isinstance(result, LeaseRefused), result
    return result.refusal


def test_a_proof_read_from_redis_renews_releases_and_writes_nothing(users: Users) -> None:
    taken = lease_cli(users.rt_b, "acquire", RESOURCE, "--holder", "rt-b")
    assert taken.returncode == 0, taken.stderr
    granted = json.loads(taken.stdout)
    token, proof = granted["token"], granted["proof"]
    rt_a, operator = redis.Redis.from_url(users.rt_a), redis.Redis.from_url(users.operator)
    rt_b = redis.Redis.from_url(users.rt_b)
    try:
        # what the others can read of rt-b's lease: the digest, never the secret
        read = {operator.hgetall(keys.lease(RESOURCE))[b"proof"]}
        read.add(rt_a.hmget(keys.lease(RESOURCE), ["proof"])[0])
        (digest,) = {value.decode() for value in read}
        assert proof not in digest and digest not in proof

        # through the CLI, as rt-a, presenting what it read as rt-b's proof
        held = 10
        for argv in (
            ("renew", RESOURCE, "--holder", "rt-b", "--token", str(token)),
            ("release", RESOURCE, "--holder", "rt-b", "--token", str(token)),
            ("acquire", RESOURCE, "--holder", "rt-b"),
        ):
            done = lease_cli(users.rt_a, *argv, proof=digest)
            assert done.returncode == held, (argv, done.stdout, done.stderr)
            assert "Traceback" not in done.stderr

        # through the client, and in place of the proof in the very call the CLI makes
        stolen = Lease(RESOURCE, "rt-b", token, digest, 0, TTL)
        leases = LeaseClient(rt_a)
        assert refused_as(leases.renew(stolen)) is LeaseRefusal.HELD
        assert refused_as(leases.release(stolen)) is LeaseRefusal.HELD
        assert refused_as(leases.check(stolen)) is LeaseRefusal.HELD
        assert leases.fenced_write(stolen, "deploy", b"forged").status == "not_holder"
        renew = rt_a.fcall(function_name("lease_renew"), 3, *LEASE_KEYS,
                           "rt-b", token, digest, TTL, 1000)  # fmt: skip
        assert renew[0] == b"held"
        write = rt_a.fcall(function_name("fenced_write"), 3, keys.lease(RESOURCE),
                           keys.fenced_resource(RESOURCE, "deploy"), keys.lease_counter(RESOURCE),
                           token, "forged", "rt-b", digest)  # fmt: skip
        assert write[0] == b"not_holder"

        # the genuine holder still holds it, and its secret still works
        genuine = Lease(RESOURCE, "rt-b", token, proof, 0, TTL)
        assert LeaseClient(rt_b).check(genuine).ok
        assert LeaseClient(rt_b).fenced_write(genuine, "deploy", b"genuine").ok
        assert LeaseClient(rt_b).read_fenced(RESOURCE, "deploy") == (b"genuine", token)
    finally:
        for client in (rt_a, rt_b, operator):
            client.close()


def test_rewriting_or_deleting_the_lease_hash_never_issues_a_token_twice(users: Users) -> None:
    rt_a, rt_b = redis.Redis.from_url(users.rt_a), redis.Redis.from_url(users.rt_b)
    a_leases, b_leases = LeaseClient(rt_a), LeaseClient(rt_b)
    lease_hash = keys.lease(RESOURCE)
    try:
        first = b_leases.acquire_or_raise(RESOURCE, "rt-b", TTL).lease
        assert b_leases.fenced_write(first, "deploy", b"first").ok
        issued = [first.token]

        # rt-a deletes the lease as far as its rights go, then takes the resource
        rt_a.hdel(lease_hash, "holder", "token", "proof", "deadline_ms", "acquired_ms", "ttl_ms")
        assert rt_a.hmget(lease_hash, ["holder", "token"]) == [None, None]
        issued.append(a_leases.acquire_or_raise(RESOURCE, "rt-a", TTL).lease.token)
        # rt-a rewrites it as a lease that expired long ago under token 1, with fence 0
        rt_a.hset(lease_hash, mapping={"holder": "x", "token": 1, "fence": 0, "deadline_ms": 1})
        issued.append(a_leases.acquire_or_raise(RESOURCE, "rt-a", TTL).lease.token)
        # the counter it may only read and increase
        counter = keys.lease_counter(RESOURCE)
        for lower in (*counter_lowerings(rt_a, counter), lambda: rt_a.rename(lease_hash, counter)):
            with pytest.raises(redis.exceptions.NoPermissionError):
                lower()
        assert issued == sorted(set(issued)) == [1, 2, 3]

        # rt-b's stale token never lands, whatever the hash says now
        assert b_leases.fenced_write(first, "deploy", b"stale").status == "superseded"
        assert b_leases.read_fenced(RESOURCE, "deploy") == (b"first", first.token)
    finally:
        rt_a.close()
        rt_b.close()


def test_a_token_stolen_by_rewriting_the_hash_never_writes_over_its_holder(users: Users) -> None:
    rt_a, rt_b = redis.Redis.from_url(users.rt_a), redis.Redis.from_url(users.rt_b)
    try:
        mine = LeaseClient(rt_b).acquire_or_raise(RESOURCE, "rt-b", TTL).lease
        assert LeaseClient(rt_b).fenced_write(mine, "deploy", b"genuine").ok
        # rt-a makes the hash name itself, with a secret of its own, under rt-b's token
        secret = "rt-a-own-secret"
        rt_a.hset(
            keys.lease(RESOURCE),
            mapping={"holder": "rt-a", "proof": hashlib.sha1(secret.encode()).hexdigest()},
        )
        stolen = Lease(RESOURCE, "rt-a", mine.token, secret, 0, TTL)
        assert LeaseClient(rt_a).fenced_write(stolen, "deploy", b"stolen").status == "not_holder"
        assert LeaseClient(rt_a).read_fenced(RESOURCE, "deploy") == (b"genuine", mine.token)
    finally:
        rt_a.close()
        rt_b.close()


def test_only_the_administrator_loads_the_library_and_a_missing_one_is_one_line(
    users: Users, tmp_path: Path
) -> None:
    users.admin.function_flush()
    users.admin.hset(keys.lease("effect:pr:old"), mapping={"fence": 7, "released_ms": 1})
    done = lease_cli(users.rt_a, "acquire", "effect:pr:new", "--holder", "rt-a")
    assert done.returncode == 1 and done.stdout == ""
    (line,) = done.stderr.strip().splitlines()
    assert "hubsync hub migrate" in line and "--redis-url" in line

    hub_db = str(tmp_path / "hub.db")
    for user_url in (users.consumer, users.rt_a):  # no FUNCTION LOAD for them
        done = run_hubsync(["hub", "migrate", "--hub-db", hub_db, "--redis-url", user_url])
        assert done.returncode == 1 and "Traceback" not in done.stderr
        assert len(done.stderr.strip().splitlines()) == 1
        assert not library_loaded(users.admin)

    admin_url = acl.user_url(users.server_url, "admin", acl.ADMIN_PASSWORD)
    done = run_hubsync(["hub", "migrate", "--hub-db", hub_db, "--redis-url", admin_url, "--json"])
    assert done.returncode == 0, done.stderr
    prepared = json.loads(done.stdout)["redis"]
    assert (prepared["version"], prepared["fences_moved"]) == (1, 1)
    assert acl.ADMIN_PASSWORD not in done.stdout + done.stderr
    assert library_loaded(users.admin)
    rt_a = redis.Redis.from_url(users.rt_a)
    try:
        assert LeaseClient(rt_a).acquire_or_raise("effect:pr:old", "rt-a", TTL).lease.token == 8
    finally:
        rt_a.close()
