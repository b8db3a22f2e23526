"""The table of redaction rules: each rule on a realistic (fake) sample, and its limits.

Samples are built at test time from a seeded generator, and prefixes are joined
from pieces, so that no literal here looks like a live credential to a scanner.
"""

from __future__ import annotations

import base64
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from producers.redaction import (
    CREDENTIAL_PATTERNS,
    KIND_CREDENTIAL,
    KIND_PATH,
    Redactor,
    is_secret_name,
    is_secret_variable,
    marker,
    normalised,
)
from producers.redaction_engine import Rule

ALNUM = string.ascii_letters + string.digits
B64URL = ALNUM + "-_"


def _random(alphabet: str, length: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(rng.choice(alphabet) for _ in range(length))


def _b64url(data: str) -> str:
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Sample:
    """A secret as it appears in text, the part redaction must remove, and the result."""

    kind: str
    text: str
    secret: str
    expected: str


def _whole(kind: str, secret: str) -> Sample:
    return Sample(kind, f"before {secret} after", secret, f"before {marker(kind)} after")


def _part(kind: str, before: str, secret: str, after: str = "") -> Sample:
    return Sample(kind, before + secret + after, secret, before + marker(kind) + after)


def _pem(label: str, end: str) -> str:
    body = "\n".join(_random(ALNUM + "+/", 64, n) for n in range(3))
    return f"-----BEGIN {label}-----\n{body}\n-----END {end}-----"


SAMPLES: dict[str, Callable[[], Sample]] = {
    "github_token": lambda: _whole("github_token", "gh" + "p_" + _random(ALNUM, 36, 1)),
    "aws_access_key_id": lambda: _whole(
        "aws_access_key_id", "AK" + "IA" + _random(string.ascii_uppercase + "234567", 16, 2)
    ),
    "aws_secret_access_key": lambda: _part(
        "aws_secret_access_key", "aws_secret_access_key = ", _random(ALNUM + "/+", 40, 3)
    ),
    "slack_token": lambda: _whole(
        "slack_token", "xo" + "xb-" + _random(string.digits, 12, 4) + "-" + _random(ALNUM, 24, 5)
    ),
    "slack_webhook": lambda: _whole(
        "slack_webhook",
        "https://hooks."
        + "slack.com/services/T"
        + _random(string.ascii_uppercase, 8, 6)
        + "/B"
        + _random(string.ascii_uppercase, 8, 7)
        + "/"
        + _random(ALNUM, 24, 8),
    ),
    "stripe_key": lambda: _whole("stripe_key", "sk" + "_live_" + _random(ALNUM, 24, 9)),
    "google_api_key": lambda: _whole("google_api_key", "AI" + "za" + _random(B64URL, 35, 10)),
    "gitlab_token": lambda: _whole("gitlab_token", "gl" + "pat-" + _random(B64URL, 20, 11)),
    "openai_key": lambda: _whole("openai_key", "sk" + "-proj-" + _random(B64URL, 48, 12)),
    "npm_token": lambda: _whole("npm_token", "np" + "m_" + _random(ALNUM, 36, 13)),
    "private_key": lambda: _whole(
        "private_key", _pem("PGP PRIVATE KEY BLOCK", "PGP PRIVATE KEY BLOCK")
    ),
    "jwt": lambda: _whole(
        "jwt",
        ".".join(
            [
                _b64url('{ "alg": "HS256", "typ": "JWT" }'),
                _b64url('{ "sub": "42" }'),
                _random(B64URL, 43, 14),
            ]
        ),
    ),
    "url_credentials": lambda: _part(
        "url_credentials", "git clone https://", _random(ALNUM, 40, 15), "@git.example.com/r.git"
    ),
    "url_signature": lambda: _part(
        "url_signature",
        "https://acct.blob.core.windows.net/c/b.txt?sv=2022-11-02&sig=",
        _random(ALNUM, 30, 16) + "%2B" + _random(ALNUM, 10, 17) + "%3D",
        "&se=2030-01-01",
    ),
    "authorization": lambda: _part(
        "authorization", "curl -H 'Authorization: Bearer ", _random(ALNUM, 32, 18), "' x"
    ),
    KIND_CREDENTIAL: lambda: _part(KIND_CREDENTIAL, 'login token="', "whatever it is", '"'),
    KIND_PATH: lambda: _whole(KIND_PATH, "/home/alice/.config/tool/settings.json"),
}


def test_every_rule_of_the_table_has_a_sample() -> None:
    assert {p.kind for p in CREDENTIAL_PATTERNS} == set(SAMPLES)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_each_rule_replaces_its_sample_in_text_and_in_json(kind: str) -> None:
    sample = SAMPLES[kind]()
    redactor = Redactor()
    assert redactor.redact_text(sample.text) == sample.expected
    redacted, text = redactor.redact_json({"log": sample.text, "list": [sample.text]})
    assert sample.secret not in text
    assert redacted == {"log": sample.expected, "list": [sample.expected]}
    # Redacting again changes nothing, and the same input always gives the same bytes.
    assert redactor.redact_text(sample.expected) == sample.expected
    assert Redactor().redact_json({"log": sample.text})[1] == text.split(',"list"')[0] + "}"


@pytest.mark.parametrize("kind", sorted(set(SAMPLES) - {KIND_PATH, KIND_CREDENTIAL}))
def test_each_rule_also_finds_its_sample_fullwidth_or_split_by_a_zero_width_space(
    kind: str,
) -> None:
    sample = SAMPLES[kind]()
    fullwidth = sample.text.translate({c: c + 0xFEE0 for c in range(0x21, 0x7F)})
    middle = len(sample.text) // 2
    split = sample.text[:middle] + "\u200b" + sample.text[middle:]
    redactor = Redactor()
    for text in (fullwidth, split):
        result = redactor.redact_text(text)
        assert sample.secret not in result
        assert marker(kind) in result
        result.encode("utf-8")  # well-formed text: no lone surrogate, nothing cut


@pytest.mark.parametrize("kind", ["github_token", "stripe_key", "google_api_key", "npm_token"])
def test_a_token_split_by_a_space_is_found_whole_and_the_next_word_kept(kind: str) -> None:
    token = SAMPLES[kind]().secret
    text = f"key {token[:12]} {token[12:]} rotated"
    assert Redactor().redact_text(text) == f"key {marker(kind)} rotated"


def test_a_registered_secret_split_by_a_space_or_a_zero_width_character_is_found() -> None:
    redactor = Redactor()
    redactor.register("deploy-" + _random(ALNUM, 20, 30))
    secret = next(iter(redactor._kinds))
    for text in (secret[:9] + " " + secret[9:], secret[:9] + "\u2060" + secret[9:]):
        assert redactor.redact_text(f"[{text}]") == f"[{marker('registered')}]"


@pytest.mark.parametrize("offset", [0, 1, 2])
def test_base64_of_a_registered_or_environment_secret_is_replaced(offset: int) -> None:
    registered = "reg-" + _random(ALNUM, 24, 31)
    env = "env-" + _random(ALNUM, 24, 32)
    redactor = Redactor()
    redactor.register(registered)
    redactor.register_environment({"DEPLOY_TOKEN": env})
    for secret in (registered, env):
        data = ("u" * offset + ":" + secret + ":tail").encode()
        for encoded in (base64.b64encode(data), base64.urlsafe_b64encode(data)):
            redacted = redactor.redact_json({"auth": "Basic " + encoded.decode()})[1]
            assert "[REDACTED:" in redacted
            assert base64.b64encode(secret.encode()).decode()[4:-4] not in redacted


def test_base64_text_without_a_known_secret_is_left_alone() -> None:
    redactor = Redactor()
    redactor.register("reg-" + _random(ALNUM, 24, 33))
    text = "digest " + base64.b64encode(b"nothing secret in here at all").decode()
    assert redactor.redact_text(text) == text


@pytest.mark.parametrize(
    "name",
    [
        "PASSPHRASE",
        "CLIENT_SECRET_VALUE",
        "SENTRY_DSN",
        "CONN_STR",
        "STRIPE_SK",
        "CREDENTIALS",
        "AUTH",
        "GITHUB_TOKEN",
        "DB_PASS",
        "MYSQL_PWD",
        "SIGNING_KEY",
        "PGPASSWORD",
        "APP_SECRETS_JSON",
        "AZURE_STORAGE_CONNECTION_STRING",
        "OAUTH_CLIENT_SECRET",
    ],
)
def test_secret_environment_names_and_their_families(name: str) -> None:
    assert is_secret_variable(name)
    value = "value-" + _random(ALNUM, 16, 34)
    redactor = Redactor()
    assert redactor.register_environment({name: value}) == [name]
    assert redactor.redact_text(f"x {value} y") == f"x {marker('env')} y"


@pytest.mark.parametrize(
    "name",
    [
        *("PWD", "OLDPWD", "KEYBOARD", "BYPASS", "PASSAGE", "AUTHOR", "TOKENIZER", "HOME"),
        *("PATH", "SKIP_TESTS", "TASK", "DISK_SIZE", "AUTH0_DOMAIN_NAME", "PASS"),
    ],
)
def test_ordinary_environment_names_are_not_secrets(name: str) -> None:
    assert not is_secret_variable(name)


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("password", True),
        ("db_password", True),
        ("clientSecret", True),
        ("X-Auth-Token", True),
        ("access_token", True),
        ("apiKey", True),
        ("AccountKey", True),
        ("Authorization", True),
        ("dsn", True),
        ("conn_str", True),
        ("token_count", False),
        ("max_tokens", False),
        ("cache_key", False),
        ("sort_key", False),
        ("author", False),
        ("pass", False),
        ("task", False),
    ],
)
def test_which_keys_name_a_secret(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("token=abc", "token=[REDACTED:credential]"),
        ("secret: x", "secret: [REDACTED:credential]"),
        ("api_key Zx9-81", "api_key [REDACTED:credential]"),
        ("--api-key Zx9-81 --verbose", "--api-key [REDACTED:credential] --verbose"),
        ('password = "correct horse battery"', 'password = "[REDACTED:credential]"'),
        (
            "Server=db;User Id=sa;Password=Pa55;",
            "Server=db;User Id=sa;Password=[REDACTED:credential];",
        ),
        (
            "GET https://api.example.com/x?access_token=a1b2&page=2",
            "GET https://api.example.com/x?access_token=[REDACTED:credential]&page=2",
        ),
        ("X-Auth-Token: 1234", "X-Auth-Token: [REDACTED:credential]"),
        ("Authorization: token abc", "Authorization: token [REDACTED:credential]"),
        ('{"clientSecret": "s"}', '{"clientSecret": "[REDACTED:credential]"}'),
    ],
)
def test_a_value_after_a_key_naming_a_secret_goes_whatever_it_looks_like(
    text: str, expected: str
) -> None:
    assert Redactor().redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the password was wrong",
        "api_key is missing",
        "rotate the token soon",
        "tokens: 5, task: build, cache_key: abc",
        "Basic authentication is off",
        "password: [REDACTED:env]",
    ],
)
def test_prose_and_ordinary_keys_are_left_alone(text: str) -> None:
    assert Redactor().redact_text(text) == text


def test_a_value_stored_under_a_key_naming_a_secret_goes_whole() -> None:
    payload = {
        "password": "two words",
        "pin_password": 12345678,
        "db": {"CONN_STR": "Server=x"},
        "enabled_auth": True,
        "token_count": 3,
        "Authorization": "",
    }
    assert Redactor().redact_json(payload)[0] == {
        "password": marker(KIND_CREDENTIAL),
        "pin_password": marker(KIND_CREDENTIAL),
        "db": {"CONN_STR": marker(KIND_CREDENTIAL)},
        "enabled_auth": True,
        "token_count": 3,
        "Authorization": "",
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see /work/proj/src/app.py:12", "see src/app.py:12"),
        ("cd /work/proj", "cd ."),
        ("open file:///work/proj/a.txt", "open file://a.txt"),
        ("cat /work/proj/../other/x", "cat [REDACTED:path]"),
        ("key in /home/alice/.ssh/id_ed25519.", "key in [REDACTED:path]."),
        ("PATH=/usr/local/bin:/usr/bin", "PATH=[REDACTED:path]:[REDACTED:path]"),
        ("C:\\Users\\alice\\AppData\\x", "[REDACTED:path]\\AppData\\x"),
        ("and/or text/plain 1/2 refs/heads/main", "and/or text/plain 1/2 refs/heads/main"),
        ("https://example.com/a/b s3://bucket/k", "https://example.com/a/b s3://bucket/k"),
    ],
)
def test_absolute_paths_are_made_relative_to_the_project_root_or_replaced(
    text: str, expected: str
) -> None:
    redactor = Redactor(project_root="/work/proj", home="/home/alice")
    assert redactor.redact_text(text) == expected


def test_a_home_relative_path_counts_as_the_path_it_stands_for() -> None:
    redactor = Redactor(project_root="/home/alice/proj", home="/home/alice")
    assert redactor.redact_text("~/proj/notes.md and ~/other") == "notes.md and [REDACTED:path]"


def test_without_a_project_root_every_absolute_path_is_replaced() -> None:
    redactor = Redactor(project_root=None)
    assert redactor.redact_text("at /work/proj/x.py") == "at [REDACTED:path]"
    assert Redactor(project_root="/").redact_text("at /x.py") == "at [REDACTED:path]"


def test_a_path_holding_a_secret_is_replaced_whole_even_inside_the_project() -> None:
    redactor = Redactor(project_root="/work/proj")
    redactor.register("inner-secret-42")
    assert redactor.redact_text("at /work/proj/inner-secret-42/x") == "at [REDACTED:path]"


def test_a_path_in_an_id_is_accepted_but_a_credential_is_not() -> None:
    redactor = Redactor()
    assert not redactor.contains_secret("ci:/home/runner")
    assert redactor.contains_secret("run:token=abc")


_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=60)
_pieces = st.sampled_from(
    ["token=", " ", "/", "://", "@", "ghp_", "\u200b", "\uff47", "secret: ", "[REDACTED:env]"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(_text, _pieces), max_size=8))
def test_redaction_is_deterministic_idempotent_and_well_formed(parts: list[str]) -> None:
    text = "".join(parts)
    redactor = Redactor(project_root="/work/proj")
    once = redactor.redact_text(text)
    assert Redactor(project_root="/work/proj").redact_text(text) == once
    assert redactor.redact_text(once) == once
    once.encode("utf-8")
    payload = {text: [text, {"k": text}]}
    first = redactor.redact_json(payload)[1]
    assert json.loads(first) is not None
    assert redactor.redact_json(payload)[1] == first


_words = st.sampled_from(
    [
        *("db", "Api", "KEY", "secret", "Pass", "pwd", "token", "conn", "str", "auth", "sk"),
        *("x2", "Authorization", "connection", "String", "dsn", "Credentials", "private"),
    ]
)
_joints = st.sampled_from(["_", "-", ".", " ", "/", "", ":", "é"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_words, _joints), min_size=1, max_size=4), st.text(min_size=1))
def test_the_probe_of_a_payload_finds_every_key_naming_a_secret(
    parts: list[tuple[str, str]], value: str
) -> None:
    key = "".join(word + joint for word, joint in parts)
    redacted = Redactor().redact_json({"outer": {key: value, "n": 1}})[0]["outer"]
    values = [v for k, v in redacted.items() if k != "n"]
    if is_secret_name(key):
        assert values == [marker(KIND_CREDENTIAL)]


_fragments = st.sampled_from(
    [
        *("db", "Api", "KEY", "secret", "Pass", "token", "Authorization", "dsn", "--api-key"),
        *("Bearer", "basic", "gh" + "p_", "a1B2c3D4e5" * 4, "AK" + "IA", "ABCD2345" * 2),
        *("sk" + "_live_", "AI" + "za", "gl" + "pat-", "np" + "m_", "eyJ", "eyAi", "xo" + "xb-"),
        *("hooks.slack.com/services/", "https://", "@", "?sig=", "/", "~/", "file://"),
        *("C:\\Users\\", "-----BEGIN PGP PRIVATE KEY BLOCK-----", "secret_access_key"),
        *("_", "-", ".", " ", "=", ":", "=>", '"', "'", "\t", "\n", "\\", "\u200b", "\x01"),
        *("abc", "Zx9-81", "12345", "[REDACTED:env]", "{x}", "a,b", "\uff47", "é"),
    ]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_fragments, min_size=1, max_size=10))
def test_the_probes_never_miss_what_a_rule_would_replace(parts: list[str]) -> None:
    # Each rule's probe must find its matches in text and in JSON text, or a payload
    # would be passed as clean; normalisation first, as redaction reads text.
    text = "".join(parts)
    rules = [Rule.of_pattern(p) for p in CREDENTIAL_PATTERNS]
    spans = [span for rule in rules for span in rule.spans(normalised(text))]
    redactor = Redactor()
    payload = {"s": text, text: 1}
    if spans:
        assert redactor.redact_text(text) != text
        assert redactor.redact_json(payload)[1] != json.dumps(
            payload, ensure_ascii=False, separators=(",", ":")
        )
