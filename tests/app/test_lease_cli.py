"""`hubsync lease ...`: JSON output, a distinct exit code per refusal, one-line usage errors."""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from hubsync.cli.main import main
from tests.helpers.lease_support import expire_lease


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(argv))
    out, err = capsys.readouterr()
    return int(info.value.code or 0), out, err


def acquire(
    capsys: pytest.CaptureFixture[str], url: str, holder: str
) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(
        capsys, "lease", "acquire", "repo/main", "--holder", holder, "--json", "--redis-url", url
    )
    return code, json.loads(out)


def test_acquire_renew_release_by_hand_with_json(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    code, doc = acquire(capsys, redis_url, "box-a")
    assert code == 0 and doc["ok"] and doc["token"] == 1 and doc["transition"] == "acquired"
    args = ["--holder", "box-a", "--token", "1", "--proof", doc["proof"], "--redis-url", redis_url]
    code, out, _ = run(capsys, "lease", "renew", "repo/main", *args, "--ttl-ms", "60000", "--json")
    assert code == 0 and json.loads(out)["remaining_ms"] > 30_000
    code, out, _ = run(capsys, "lease", "release", "repo/main", *args, "--json")
    assert code == 0 and json.loads(out)["transition"] == "released"
    code, out, _ = run(
        capsys, "lease", "show", "repo/main", "--json", "--history", "5", "--redis-url", redis_url
    )
    shown = json.loads(out)
    assert (shown["state"], shown["fence"]) == ("free", 1)
    assert [e["event"] for e in shown["history"]] == ["acquired", "renewed", "released"]
    assert "proof" not in out


def test_each_refusal_has_its_own_exit_code(
    capsys: pytest.CaptureFixture[str], redis_url: str, redis_client: redis.Redis
) -> None:
    _, first = acquire(capsys, redis_url, "box-a")
    code, doc = acquire(capsys, redis_url, "box-b")
    assert (code, doc["refusal"], doc["holder"]) == (10, "held", "box-a")
    mine = [
        "--holder",
        "box-a",
        "--token",
        "1",
        "--proof",
        first["proof"],
        "--redis-url",
        redis_url,
    ]
    expire_lease(redis_client, "repo/main")
    code, _, err = run(capsys, "lease", "renew", "repo/main", *mine)
    assert code == 12 and "expired" in err
    _, second = acquire(capsys, redis_url, "box-b")
    code, _, err = run(capsys, "lease", "renew", "repo/main", *mine)
    assert code == 11 and "superseded" in err
    theirs = ["--holder", "box-b", "--token", "2", "--proof", second["proof"]]
    assert run(capsys, "lease", "release", "repo/main", *theirs, "--redis-url", redis_url)[0] == 0
    code, _, err = run(capsys, "lease", "release", "repo/main", *theirs, "--redis-url", redis_url)
    assert code == 13 and "missing" in err


@pytest.mark.parametrize(
    "argv",
    [
        ["lease", "acquire", "bad{name}", "--holder", "h"],
        ["lease", "acquire", "r", "--holder", "h\x07"],
        ["lease", "acquire", "r", "--holder", "h", "--ttl-ms", "10"],
        ["lease", "acquire", "r", "--holder", "h", "--ttl-ms", "soon"],
        ["lease", "renew", "r", "--holder", "h", "--token", "0", "--proof", "p"],
        ["lease", "renew", "r", "--holder", "h", "--token", "1", "--proof", "has space"],
        ["lease", "renew", "r", "--holder", "h"],
    ],
)
def test_malformed_input_exits_2_with_one_line(
    capsys: pytest.CaptureFixture[str], redis_url: str, argv: list[str]
) -> None:
    code, out, err = run(capsys, *argv, "--redis-url", redis_url)
    assert code == 2
    assert out == ""
    # One error line (click's own parse errors add its usage hint above it).
    assert [line for line in err.splitlines() if line.lower().startswith("error")] != []
    assert len([line for line in err.splitlines() if line.lower().startswith("error")]) == 1
    assert "has space" not in err


def test_list_shows_every_lease(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    acquire(capsys, redis_url, "box-a")
    code, out, _ = run(capsys, "lease", "list", "--json", "--redis-url", redis_url)
    assert code == 0
    assert [(x["resource"], x["holder"]) for x in json.loads(out)["leases"]] == [
        ("repo/main", "box-a")
    ]


def test_unreachable_redis_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "lease", "show", "r", "--redis-url", "redis://127.0.0.1:1/0")
    assert code == 3 and "cannot reach Redis" in err


def test_the_proof_is_printed_by_the_acquire_that_made_it_and_by_nothing_after(
    capsys: pytest.CaptureFixture[str], redis_url: str
) -> None:
    code, out, _ = run(
        capsys, "lease", "acquire", "repo/main", "--holder", "box-a", "--redis-url", redis_url
    )
    assert code == 0 and out.startswith("acquired repo/main token=1 ")
    proof = out.strip().rsplit("proof=", 1)[1]
    assert len(proof) >= 16
    mine = ["--holder", "box-a", "--token", "1", "--proof", proof, "--redis-url", redis_url]
    outputs = [
        run(capsys, "lease", "renew", "repo/main", *mine),
        run(capsys, "lease", "renew", "repo/main", *mine, "--json"),
        run(capsys, "lease", "acquire", "repo/main", *mine[:2], *mine[4:]),  # renews: same token
        run(capsys, "lease", "show", "repo/main", "--history", "9", "--redis-url", redis_url),
        run(capsys, "lease", "list", "--json", "--redis-url", redis_url),
        run(capsys, "lease", "release", "repo/main", *mine),
    ]
    assert [code for code, _, _ in outputs] == [0] * len(outputs)
    assert outputs[0][1].startswith("renewed repo/main token=1 ")
    assert "renewed" in outputs[2][1]
    for _, printed, errors in outputs:
        assert proof not in printed and proof not in errors
        assert "proof" not in printed


def test_a_proof_on_the_command_line_is_warned_about_and_one_from_its_variable_is_not(
    capsys: pytest.CaptureFixture[str], redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, granted = acquire(capsys, redis_url, "box-a")
    proof = granted["proof"]
    mine = ["--holder", "box-a", "--token", str(granted["token"]), "--redis-url", redis_url]
    code, _, err = run(capsys, "lease", "renew", "repo/main", *mine, "--proof", proof)
    assert code == 0
    assert err.startswith("warning: the lease proof on the command line can be read")
    assert err.endswith("set HUBSYNC_PROOF instead\n") and proof not in err
    monkeypatch.setenv("HUBSYNC_PROOF", proof)
    code, _, err = run(capsys, "lease", "renew", "repo/main", *mine)
    assert (code, err) == (0, "")
