"""Enrollment from the command line, as real processes on a SQLite hub: ``hub init``,
``enroll`` (new key, re-key, ``--revoke``) and ``runtime join``; and where the key may
show up (the one token output, the hub database, the runtime's registry) and nowhere else."""

from __future__ import annotations

import base64
import json
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest

from hubstore import hub_url_from_path, open_store
from hubsync.clock import format_timestamp
from hubsync.enrollment import TOKEN_PREFIX, Enrollment, decode_token
from hubsync.processes import child_environment, hubsync_command, run_hubsync
from producers.registry import REGISTRY_FILE, RuntimeRegistry


def hubsync(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``hubsync ARGS`` as a child process; ``stdin`` fed to it when given."""
    if stdin is None:
        return run_hubsync(args)
    return subprocess.run(
        hubsync_command(*args),
        input=stdin,
        capture_output=True,
        text=True,
        env=child_environment(),
        timeout=120,
        check=False,
    )


def ok(result: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert result.returncode == 0, result.stderr
    return result


@pytest.fixture
def hub_db(tmp_path: Path) -> Path:
    """A hub database with its id."""
    path = tmp_path / "hub.db"
    ok(hubsync("hub", "init", "--hub-db", str(path)))
    return path


def enroll(hub_db: Path, runtime_id: str, *args: str) -> Enrollment:
    """``hubsync enroll RUNTIME_ID --hub-db HUB ARGS``; the enrollment its token carries."""
    result = ok(hubsync("enroll", runtime_id, "--hub-db", str(hub_db), *args))
    return decode_token(result.stdout)


def secret_forms(key: bytes) -> list[str]:
    """The spellings a key could leak as."""
    return [
        key.hex(),
        base64.b64encode(key).decode().rstrip("="),
        base64.urlsafe_b64encode(key).decode().rstrip("="),
    ]


# ----- hub init -----


def test_hub_init_makes_the_hub_id_once_and_prints_it(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    first = ok(hubsync("hub", "init", "--hub-db", str(path)))
    hub_id = first.stdout.split("hub id ")[1].split()[0]
    assert first.stdout == f"hub store {path}: hub id {hub_id} (created)\n"
    again = json.loads(
        ok(hubsync("hub", "init", "--hub-url", hub_url_from_path(path), "--json")).stdout
    )
    assert (again["hub_id"], again["created"], again["schema"]["action"]) == (
        hub_id,
        False,
        "current",
    )
    assert path.stat().st_mode & 0o777 == 0o600
    with open_store(hub_url_from_path(path), create_schema=False) as store:
        assert store.hub_id() == hub_id


def test_hub_init_on_a_migrated_hub_without_an_id_gives_it_one(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    ok(hubsync("hub", "migrate", "--hub-db", str(path)))
    document = json.loads(ok(hubsync("hub", "init", "--hub-db", str(path), "--json")).stdout)
    assert document["created"] is True and document["hub_id"].startswith("hub-")


# ----- enroll -----


def test_enroll_before_hub_init_is_refused_naming_hub_init(tmp_path: Path) -> None:
    path = tmp_path / "hub.db"
    missing = hubsync("enroll", "rt-a", "--hub-db", str(path), "--hub-project", "acme")
    assert missing.returncode == 2 and "hubsync hub init" in missing.stderr
    assert missing.stdout == ""
    ok(hubsync("hub", "migrate", "--hub-db", str(path)))
    no_id = hubsync("enroll", "rt-a", "--hub-db", str(path), "--hub-project", "acme")
    assert no_id.returncode == 1 and no_id.stdout == ""
    assert "has no hub id yet; run `hubsync hub init" in no_id.stderr
    assert "Traceback" not in no_id.stderr


def test_enroll_prints_the_token_alone_on_stdout_and_how_to_join_on_stderr(hub_db: Path) -> None:
    result = ok(
        hubsync(
            "enroll",
            "rt-a",
            "--hub-db",
            str(hub_db),
            "--hub-project",
            "beta",
            "--hub-project",
            "acme",
        )
    )
    assert result.stdout.count("\n") == 1 and result.stdout.startswith(TOKEN_PREFIX)
    enrollment = decode_token(result.stdout)
    assert (enrollment.runtime_id, enrollment.hub_projects) == ("rt-a", ("acme", "beta"))
    assert "hubsync runtime join --state-dir DIR -" in result.stderr
    assert "enrolled runtime rt-a on hub" in result.stderr
    assert TOKEN_PREFIX not in result.stderr
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        assert enrollment.hub_id == store.hub_id()
        record = store.enrolled_runtime("rt-a")
        assert record is not None and record.key == enrollment.key


def test_enroll_json_carries_the_token_in_a_field_named_token(hub_db: Path) -> None:
    result = ok(
        hubsync("enroll", "rt-a", "--hub-db", str(hub_db), "--hub-project", "acme", "--json")
    )
    document = json.loads(result.stdout)
    enrollment = decode_token(document["token"])
    assert document["action"] == "enrolled" and document["runtime_id"] == "rt-a"
    assert document["hub_id"] == enrollment.hub_id and document["hub_projects"] == ["acme"]
    assert document["previous_key_valid_until"] is None


def test_enroll_needs_a_hub_project_and_a_valid_runtime_id(hub_db: Path) -> None:
    none = hubsync("enroll", "rt-a", "--hub-db", str(hub_db))
    assert none.returncode == 2 and "--hub-project: missing" in none.stderr
    bad = hubsync("enroll", "rt {a}", "--hub-db", str(hub_db), "--hub-project", "acme")
    assert bad.returncode == 2 and "runtime id may hold only" in bad.stderr
    assert none.stdout == bad.stdout == ""


def test_enrolling_again_rotates_and_the_old_key_stays_valid_for_the_grace(hub_db: Path) -> None:
    first = enroll(hub_db, "rt-a", "--hub-project", "acme")
    result = ok(
        hubsync(
            "enroll", "rt-a", "--hub-db", str(hub_db), "--hub-project", "acme",
            "--rotation-grace", "2h", "--json",
        )
    )  # fmt: skip
    document = json.loads(result.stdout)
    second = decode_token(document["token"])
    assert document["action"] == "rotated" and second.key != first.key
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        record = store.enrolled_runtime("rt-a")
    assert record is not None and record.rotated_at is not None
    rotated = record.rotated_at
    assert document["previous_key_valid_until"] == format_timestamp(rotated + timedelta(hours=2))
    assert record.keys_at(rotated + timedelta(minutes=119)) == (second.key, first.key)
    assert record.keys_at(rotated + timedelta(hours=2)) == (second.key,)


def test_revoke_erases_the_keys_and_a_second_revoke_changes_nothing(hub_db: Path) -> None:
    enroll(hub_db, "rt-a", "--hub-project", "acme")
    first = ok(hubsync("enroll", "--revoke", "rt-a", "--hub-db", str(hub_db)))
    assert first.stdout == "revoked runtime rt-a: its keys are deleted from the hub store\n"
    again = json.loads(
        ok(hubsync("enroll", "--revoke", "rt-a", "--hub-db", str(hub_db), "--json")).stdout
    )
    assert again["action"] == "already_revoked"
    with open_store(hub_url_from_path(hub_db), create_schema=False) as store:
        record = store.enrolled_runtime("rt-a")
    assert record is not None and record.keys_at(record.enrolled_at) == ()
    assert again["revoked_at"] == format_timestamp(record.revoked_at)  # type: ignore[arg-type]
    unknown = hubsync("enroll", "--revoke", "rt-nobody", "--hub-db", str(hub_db))
    assert unknown.returncode == 2 and "never enrolled" in unknown.stderr
    with_project = hubsync(
        "enroll", "--revoke", "rt-a", "--hub-db", str(hub_db), "--hub-project", "x"
    )
    assert with_project.returncode == 2 and "not used with --revoke" in with_project.stderr


# ----- runtime join -----


def test_join_from_stdin_keeps_the_enrollment_in_a_private_registry(
    hub_db: Path, tmp_path: Path
) -> None:
    token = ok(hubsync("enroll", "rt-a", "--hub-db", str(hub_db), "--hub-project", "acme")).stdout
    state_dir = tmp_path / "runtime"
    result = ok(hubsync("runtime", "join", "--state-dir", str(state_dir), "-", stdin=token))
    assert f"created the state dir {state_dir} for runtime rt-a" in result.stdout
    assert "runtime rt-a joined hub" in result.stdout
    registry = state_dir / REGISTRY_FILE
    assert registry.stat().st_mode & 0o777 == 0o600
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.runtime_id == "rt-a"
        assert opened.enrollment() == decode_token(token)


def test_join_with_the_token_as_argument_then_a_rotated_one_replaces_the_key(
    hub_db: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "runtime"
    RuntimeRegistry(state_dir, "rt-a").close()  # the runtime existed before it was enrolled
    token = ok(hubsync("enroll", "rt-a", "--hub-db", str(hub_db), "--hub-project", "acme")).stdout
    joined = json.loads(
        ok(
            hubsync("runtime", "join", "--state-dir", str(state_dir), token.strip(), "--json")
        ).stdout
    )
    assert (joined["action"], joined["created_state_dir"]) == ("joined", False)
    same = json.loads(
        ok(
            hubsync("runtime", "join", "--state-dir", str(state_dir), "-", "--json", stdin=token)
        ).stdout
    )
    assert same["action"] == "unchanged"
    rotated = ok(
        hubsync(
            "enroll",
            "rt-a",
            "--hub-db",
            str(hub_db),
            "--hub-project",
            "acme",
            "--hub-project",
            "beta",
        )
    ).stdout
    updated = json.loads(
        ok(
            hubsync("runtime", "join", "--state-dir", str(state_dir), "-", "--json", stdin=rotated)
        ).stdout
    )
    assert (updated["action"], updated["hub_projects"]) == ("updated", ["acme", "beta"])
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.enrollment() == decode_token(rotated)


def test_join_refuses_another_runtimes_token_with_exit_2_and_never_echoes_it(
    hub_db: Path, tmp_path: Path
) -> None:
    state_dir = tmp_path / "runtime"
    RuntimeRegistry(state_dir, "rt-a").close()
    token = ok(hubsync("enroll", "rt-b", "--hub-db", str(hub_db), "--hub-project", "acme")).stdout
    for how in ("-", token.strip()):
        result = hubsync(
            "runtime",
            "join",
            "--state-dir",
            str(state_dir),
            how,
            stdin=token if how == "-" else None,
        )
        assert result.returncode == 2
        assert "this enrollment token is for runtime rt-b, but the state dir" in result.stderr
        assert result.stdout == ""
        body = token.strip().removeprefix(TOKEN_PREFIX)
        for leak in (body, body[:16], body[-16:], *secret_forms(decode_token(token).key)):
            assert leak not in result.stderr
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.enrollment() is None


def test_join_refuses_a_token_of_another_hub(hub_db: Path, tmp_path: Path) -> None:
    other_hub = tmp_path / "other.db"
    ok(hubsync("hub", "init", "--hub-db", str(other_hub)))
    state_dir = tmp_path / "runtime"
    first = ok(hubsync("enroll", "rt-a", "--hub-db", str(hub_db), "--hub-project", "acme")).stdout
    ok(hubsync("runtime", "join", "--state-dir", str(state_dir), "-", stdin=first))
    foreign = ok(
        hubsync("enroll", "rt-a", "--hub-db", str(other_hub), "--hub-project", "acme")
    ).stdout
    result = hubsync("runtime", "join", "--state-dir", str(state_dir), "-", stdin=foreign)
    assert result.returncode == 2 and "A runtime syncs with one hub" in result.stderr
    with RuntimeRegistry(state_dir, create=False) as opened:
        assert opened.enrollment() == decode_token(first)


@pytest.mark.parametrize(
    "damage",
    [
        lambda t: t[: len(t) // 2],
        lambda t: t.replace(TOKEN_PREFIX, "hubsync-enroll-v9."),
        lambda t: t.removeprefix(TOKEN_PREFIX),
    ],
    ids=["truncated", "another format", "no prefix"],
)
def test_join_refuses_a_damaged_token_without_echoing_it(
    hub_db: Path, tmp_path: Path, damage: object
) -> None:
    token = ok(
        hubsync("enroll", "rt-a", "--hub-db", str(hub_db), "--hub-project", "acme")
    ).stdout.strip()
    bad = damage(token)  # type: ignore[operator]
    result = hubsync("runtime", "join", "--state-dir", str(tmp_path / "rt"), "-", stdin=bad)
    assert result.returncode == 2 and "enrollment token" in result.stderr
    body = token.removeprefix(TOKEN_PREFIX)
    assert body[:16] not in result.stderr and body[-16:] not in result.stderr
    assert not (tmp_path / "rt").exists(), "a refused token creates no state dir"


def test_join_of_an_empty_stdin_is_a_usage_error(tmp_path: Path) -> None:
    result = hubsync("runtime", "join", "--state-dir", str(tmp_path / "rt"), "-", stdin="")
    assert result.returncode == 2 and "standard input, which was empty" in result.stderr


# ----- where the key may be -----


def test_the_key_shows_only_in_the_one_token_output_the_hub_db_and_the_registry(
    tmp_path: Path,
) -> None:
    hub = tmp_path / "hub" / "hub.db"
    state_dir = tmp_path / "runtime"
    outputs: list[tuple[str, subprocess.CompletedProcess[str]]] = []

    def step(name: str, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = hubsync(*args, stdin=stdin)
        outputs.append((name, result))
        return result

    step("init", "hub", "init", "--hub-db", str(hub))
    first = step("enroll", "enroll", "rt-a", "--hub-db", str(hub), "--hub-project", "acme")
    step("join", "runtime", "join", "--state-dir", str(state_dir), "-", stdin=first.stdout)
    step(
        "join again",
        "runtime",
        "join",
        "--state-dir",
        str(state_dir),
        "-",
        "--json",
        stdin=first.stdout,
    )
    second = step(
        "rotate", "enroll", "rt-a", "--hub-db", str(hub), "--hub-project", "acme", "--json"
    )
    second_token = json.loads(second.stdout)["token"]
    step("rejoin", "runtime", "join", "--state-dir", str(state_dir), "-", stdin=second_token)
    RuntimeRegistry(tmp_path / "rt-b", "rt-b").close()
    step(
        "refused", "runtime", "join", "--state-dir", str(tmp_path / "rt-b"), "-", stdin=first.stdout
    )
    step("revoke", "enroll", "--revoke", "rt-a", "--hub-db", str(hub), "--json")
    step("hub init again", "hub", "init", "--hub-db", str(hub), "--json")

    tokens = {"first": first.stdout.strip(), "second": second_token}
    keys = {which: decode_token(token).key for which, token in tokens.items()}
    for which, key in keys.items():
        carried_by = "enroll" if which == "first" else "rotate"
        # the token itself (its body holds the key, encoded), or the key in any spelling
        forms = [tokens[which].removeprefix(TOKEN_PREFIX), *secret_forms(key)]
        for name, result in outputs:
            for stream, text in (("stdout", result.stdout), ("stderr", result.stderr)):
                shown = any(form in text for form in forms)
                expected = name == carried_by and stream == "stdout"
                assert shown == expected, f"the {which} key in {name}'s {stream}"
    # At rest: the hub keeps the verification key until revoked; the runtime keeps the
    # key it signs with. No other file (backups, other state dirs) holds either.
    holders = {
        str(path.relative_to(tmp_path))
        for path in tmp_path.rglob("*")
        if path.is_file() and any(key in path.read_bytes() for key in keys.values())
    }
    assert holders <= {
        "hub/hub.db",
        "hub/hub.db-wal",
        "runtime/registry.sqlite",
        "runtime/registry.sqlite-wal",
    }
    assert any(h.startswith("runtime/registry.sqlite") for h in holders)
