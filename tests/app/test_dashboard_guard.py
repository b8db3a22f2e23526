"""The dashboard's guards: what counts as loopback, and confirmation tokens bound to one action."""

from __future__ import annotations

import pytest

from hubsync.dashboard.guard import Confirmations, is_loopback


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.8.0.1", True), ("::1", True), ("localhost", True),
     ("0.0.0.0", False), ("::", False), ("10.0.0.5", False), ("hub.example", False)],
)  # fmt: skip
def test_only_this_machines_addresses_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_confirmation_token_confirms_only_the_action_and_targets_it_was_made_for() -> None:
    confirmations = Confirmations()
    token = confirmations.token("replay", "acme/dead", ["1-0"])
    assert confirmations.valid(token, "replay", "acme/dead", ["1-0"])
    assert not confirmations.valid(token, "purge", "acme/dead", ["1-0"])
    assert not confirmations.valid(token, "replay", "beta/dead", ["1-0"])
    assert not confirmations.valid(token, "replay", "acme/dead", ["2-0"])
    assert not confirmations.valid(token, "replay", "acme/dead", ["1-0", "2-0"])
    assert not Confirmations().valid(token, "replay", "acme/dead", ["1-0"])  # another start
    assert not confirmations.valid("", "replay", "acme/dead", ["1-0"])
