"""docker-compose.yml parses, and every command it runs is a real entry point with real options.

Docker is not needed: each service command and health check is resolved with
click's own parser against ``hubsync``'s command group (or rq's, for ``rq
worker``), so a renamed command or option breaks this test, not a deployment;
and the quick start in the file's header is the one docs/operations.md gives (it runs,
step by step, in ``tests/e2e/test_compose_quick_start.py``).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import click
import pytest
from rq.cli import main as rq_cli

from hubsync.cli.main import cli as hubsync_cli
from hubsync.core.keys import EFFECTS_QUEUE
from tests.helpers.deployment_docs import (
    COMPOSE,
    COMPOSE_QUICK_START,
    CONSUMERS,
    DAEMONS,
    OURS,
    SERVICES,
    argv,
    quick_start,
)
from tests.helpers.support import REPO_ROOT, scrub_environment


def resolve(args: list[str], service: str | None = None) -> click.Context:
    """Parse ``args`` with the real click command they name; raise if anything is unknown.

    With ``service``, options also come from that service's environment, as in
    its container (``HUBSYNC_<OPTION>`` variables).
    """
    program, *rest = args
    groups: dict[str, click.Group] = {"hubsync": hubsync_cli, "rq": rq_cli}
    assert program in groups, f"{program!r} is not one of our entry points"
    group = groups[program]
    environment = {} if service is None else SERVICES[service].get("environment", {})
    with pytest.MonkeyPatch.context() as patch:
        for key, value in environment.items():
            patch.setenv(key, str(value))
        with click.Context(group) as parent:
            while True:  # down through subcommand groups (hubsync hub migrate)
                name, *rest = rest
                command = group.get_command(parent, name)
                assert command is not None, f"{program} has no command {name!r}"
                if not isinstance(command, click.Group):
                    break
                group, parent = command, click.Context(command, parent=parent)
            # make_context parses (unknown options, missing required ones, bad
            # types all raise) without running the command.
            return command.make_context(name, rest, parent=parent)


@pytest.fixture(autouse=True)
def _no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Options must come from the file, not from this machine's environment."""
    scrub_environment(monkeypatch, "RQ_")


def test_the_services_are_redis_postgres_a_relay_two_consumers_and_the_effects_worker() -> None:
    programs = {name: argv(SERVICES[name]["command"])[:2] for name in DAEMONS}
    assert "redis" in SERVICES and "postgres" in SERVICES
    assert sorted(programs.values()).count(["hubsync", "consume"]) >= 2
    assert ["hubsync", "relay"] in programs.values()
    assert ["rq", "worker"] in programs.values()
    assert [argv(SERVICES[name]["command"])[:3] for name in OURS if name not in DAEMONS] == [
        ["hubsync", "hub", "migrate"]
    ]


def test_redis_keeps_an_append_only_file_on_a_volume_and_answers_ping() -> None:
    redis = SERVICES["redis"]
    assert str(redis["image"]).startswith("redis:7")
    command = " ".join(argv(redis["command"]))
    assert "--appendonly yes" in command
    assert "--appendfsync everysec" in command
    assert any(str(volume).endswith(":/data") for volume in redis["volumes"])
    assert argv(redis["healthcheck"]["test"]) == ["redis-cli", "ping"]
    volume_names = {str(volume).split(":")[0] for volume in redis["volumes"]}
    assert volume_names <= set(COMPOSE["volumes"])


@pytest.mark.parametrize("service", OURS)
def test_each_command_is_a_real_entry_point(service: str) -> None:
    resolve(argv(SERVICES[service]["command"]), service)


@pytest.mark.parametrize("service", DAEMONS)
def test_each_daemon_has_a_health_check_that_is_a_real_entry_point(service: str) -> None:
    check = argv(SERVICES[service]["healthcheck"]["test"])
    assert "--check" in check
    context = resolve(check, service)
    assert context.params["check"] is True


@pytest.mark.parametrize("service", DAEMONS)
def test_each_daemon_waits_for_a_healthy_redis(service: str) -> None:
    assert SERVICES[service]["depends_on"]["redis"]["condition"] == "service_healthy"


def test_consumers_have_distinct_names_and_share_one_postgresql_hub_store() -> None:
    consumers = [resolve(argv(SERVICES[name]["command"]), name) for name in CONSUMERS]
    names = [context.params["name"] for context in consumers]
    assert len(set(names)) == len(names) >= 2
    urls = {str(context.params["hub_url"]) for context in consumers}
    [url] = urls
    assert url.startswith("postgresql://") and urlsplit(url).hostname == "postgres"
    assert urlsplit(url).password is None, "the password comes from PGPASSWORD, not the URL"
    assert all(context.params["hub_db"] is None for context in consumers)
    for name in DAEMONS:
        command = resolve(argv(SERVICES[name]["command"]), name)
        check = resolve(argv(SERVICES[name]["healthcheck"]["test"]), name)
        if "name" in check.params and check.params["name"] is not None:
            # the health check must look at the worker this service runs, in its store
            assert check.params["name"] == command.params["name"]
            assert check.params.get("hub_url") == command.params.get("hub_url")


def test_postgres_keeps_its_data_on_a_volume_and_answers_pg_isready() -> None:
    postgres = SERVICES["postgres"]
    assert str(postgres["image"]) == "postgres:16"
    assert any(str(v).endswith(":/var/lib/postgresql/data") for v in postgres["volumes"])
    assert {str(v).split(":")[0] for v in postgres["volumes"]} <= set(COMPOSE["volumes"])
    assert argv(postgres["healthcheck"]["test"])[0] == "pg_isready"
    environment = postgres["environment"]
    url = urlsplit(SERVICES[CONSUMERS[0]]["environment"]["HUBSYNC_HUB_URL"])
    assert (url.username, url.path) == (
        environment["POSTGRES_USER"],
        f"/{environment['POSTGRES_DB']}",
    )
    for name in ("hub-migrate", *CONSUMERS):
        assert SERVICES[name]["environment"]["PGPASSWORD"] == environment["POSTGRES_PASSWORD"]


def test_the_schema_is_migrated_once_before_the_consumers_start() -> None:
    migrate = SERVICES["hub-migrate"]
    context = resolve(argv(migrate["command"]), "hub-migrate")
    consumer_url = SERVICES[CONSUMERS[0]]["environment"]["HUBSYNC_HUB_URL"]
    assert context.params["hub_url"] == consumer_url
    # and hubsync's functions go into the pipeline's Redis, before any consumer calls one
    assert context.params["redis_url"] == SERVICES[CONSUMERS[0]]["environment"]["HUBSYNC_REDIS_URL"]
    assert migrate["restart"] == "no"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert migrate["depends_on"]["redis"]["condition"] == "service_healthy"
    for name in CONSUMERS:
        depends = SERVICES[name]["depends_on"]
        assert depends["hub-migrate"]["condition"] == "service_completed_successfully"


def test_the_effects_worker_serves_the_effects_queue_and_metrics_ports_are_published() -> None:
    worker = next(
        resolve(argv(SERVICES[name]["command"]))
        for name in OURS
        if argv(SERVICES[name]["command"])[:2] == ["rq", "worker"]
    )
    assert EFFECTS_QUEUE in worker.params["queues"]
    assert worker.params["url"].startswith("redis://redis:6379")
    for name in DAEMONS:
        port = resolve(argv(SERVICES[name]["command"]), name).params.get("metrics_port")
        if port:
            published = [str(mapping).rsplit(":", 1)[-1] for mapping in SERVICES[name]["ports"]]
            assert str(port) in published, (
                f"{name} serves metrics on {port} but does not publish it"
            )


def test_the_image_is_built_from_this_repository_with_pip_the_pins_and_the_postgresql_driver() -> (
    None
):
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert re.search(
        r'^RUN pip install -c constraints.txt "\.\[postgres\]"', dockerfile, re.MULTILINE
    )
    assert re.search(r"^COPY [^\n]*\bconstraints.txt\b", dockerfile, re.MULTILINE)
    # pyproject.toml's license-files: the package the image installs carries its license
    assert re.search(r"^COPY [^\n]*\bLICENSE\b", dockerfile, re.MULTILINE)
    for package in ("hubsync", "producers", "consumers", "hubstore"):
        assert f"COPY {package} ./{package}" in dockerfile
    assert all(SERVICES[name]["build"] == "." for name in OURS)


# ----- the quick start, run in order against a private Redis -----


def test_the_quick_start_is_the_same_in_the_compose_file_and_in_operations() -> None:
    operations = (REPO_ROOT / "docs" / "operations.md").read_text()
    documented = quick_start(operations.split("\n## docker-compose\n")[1].split("```sh\n")[1], "")
    assert "docker compose up -d" in COMPOSE_QUICK_START
    assert [c for c in documented if c in COMPOSE_QUICK_START] == COMPOSE_QUICK_START
