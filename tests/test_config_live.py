"""``[eval.live]``: the live model's settings, their defaults per wire, and every hostile value
refused at its file:line:col in words (issue 12)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from evalrunner.config import LIVE_KEYS, ConfigError, LiveConfig, load_config

ROOT = Path(__file__).resolve().parent.parent


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def problems_of(tmp_path: Path, live: str) -> list[str]:
    write(tmp_path / "evalrunner.toml", f"[eval]\n[eval.live]\n{live}\n")
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    return caught.value.problems


def test_defaults_follow_the_wire(tmp_path: Path) -> None:
    assert load_config(cwd=tmp_path, env={}).live == LiveConfig()
    write(tmp_path / "evalrunner.toml", '[eval.live]\nwire = "anthropic"\nmodel = "m"\n')
    live = load_config(cwd=tmp_path, env={}).live
    assert (live.base_url, live.api_key_env) == ("https://api.anthropic.com", "ANTHROPIC_API_KEY")
    assert live.model == "m"
    assert LiveConfig().base_url == "https://api.openai.com/v1"
    assert LiveConfig().api_key_env == "OPENAI_API_KEY"


def test_every_key_is_read_with_its_position(tmp_path: Path) -> None:
    write(
        tmp_path / "evalrunner.toml",
        "[eval.live]\n"
        'wire = "openai"\nbase_url = "http://127.0.0.1:9/v1"\nmodel = "gpt"\n'
        'api_key_env = "MY_KEY"\ntemperature = 1\nmax_tokens = 5\npin = ["temperature"]\n'
        "timeout_secs = 2\nmax_retries = 0\nmax_concurrency = 3\nstream = true\n"
        "max_total_tokens = 100\n",
    )
    config = load_config(cwd=tmp_path, env={})
    assert config.live == LiveConfig(
        "openai",
        "http://127.0.0.1:9/v1",
        "gpt",
        "MY_KEY",
        1.0,
        5,
        ("temperature",),
        2.0,
        0,
        3,
        True,
        100,
    )
    assert isinstance(config.live.temperature, float)
    for line, key in enumerate(LIVE_KEYS, start=2):
        assert config.sources[f"live.{key}"].endswith(f"evalrunner.toml:{line}"), key


def test_live_needs_a_model() -> None:
    assert LiveConfig().problems() and "set model in [eval.live]" in LiveConfig().problems()[0]
    assert LiveConfig(model="m").problems() == []


@pytest.mark.parametrize(
    ("line", "problem"),
    [
        (
            'wire = "openai-chat"',
            "3:8: eval.live.wire must be 'openai' or 'openai-responses' or 'anthropic', got string",
        ),
        ("wire = 1", "3:8: eval.live.wire must be a string, got integer 1"),
        ('base_url = "ftp://x"', "3:12: eval.live.base_url must be an http:// or https:// URL"),
        ('base_url = ""', "3:12: eval.live.base_url must not be empty"),
        ('base_url = "http://a b"', "3:12: eval.live.base_url must be an http:// or https:// URL"),
        (
            'base_url = "http://' + "a" * 3000 + '"',
            "3:12: eval.live.base_url must be at most 2000 characters long, got 3007",
        ),
        ('model = "gpt\\n"', "3:9: eval.live.model holds a control character"),
        ('model = "g\\u0000"', "3:9: eval.live.model holds a control character"),
        ('model = "g\\tx"', "3:9: eval.live.model holds a control character"),
        ("model = []", "3:9: eval.live.model must be a string, got array"),
        ('api_key_env = "KEY\\n"', "3:15: eval.live.api_key_env holds a control character"),
        ("temperature = nan", "3:15: NaN is not allowed; numbers must be finite"),
        ("temperature = inf", "3:15: Infinity is not allowed; numbers must be finite"),
        ("temperature = -0.5", "3:15: eval.live.temperature must be at least 0, got float -0.5"),
        ("temperature = 2.5", "3:15: eval.live.temperature must be at most 2, got float 2.5"),
        ('temperature = "0"', "3:15: eval.live.temperature must be a number, got string"),
        ("temperature = true", "3:15: eval.live.temperature must be a number, got boolean true"),
        ("max_tokens = 0", "3:14: eval.live.max_tokens must be at least 1, got integer 0"),
        ("max_tokens = 1.5", "3:14: eval.live.max_tokens must be a whole number"),
        (
            "max_tokens = 9223372036854775807",
            "3:14: eval.live.max_tokens must be at most 1000000, got integer",
        ),
        ("timeout_secs = 0", "3:16: eval.live.timeout_secs must be above 0, got integer 0"),
        ("timeout_secs = -1", "3:16: eval.live.timeout_secs must be above 0, got integer -1"),
        ("timeout_secs = 1e9", "3:16: eval.live.timeout_secs must be at most 3600"),
        ("max_retries = -1", "3:15: eval.live.max_retries must be at least 0, got integer -1"),
        ("max_retries = 11", "3:15: eval.live.max_retries must be at most 10, got integer 11"),
        ("max_concurrency = 0", "3:19: eval.live.max_concurrency must be at least 1"),
        ("max_concurrency = 65", "3:19: eval.live.max_concurrency must be at most 64"),
        ('stream = "yes"', '3:10: eval.live.stream must be true or false, got string "yes"'),
        ("max_total_tokens = 0", "3:20: eval.live.max_total_tokens must be at least 1"),
        ("max_total_tokens = -5", "3:20: eval.live.max_total_tokens must be at least 1"),
        ("max_total_tokens = 1e3", "3:20: eval.live.max_total_tokens must be a whole number"),
        (
            "max_total_tokens = " + "9" * 40,
            "3:20: an integer of about 41 digits is out of range",  # the loader estimates
        ),
        (
            'pin = ["top_k"]',
            "3:8: eval.live.pin[0] must be 'temperature' or 'max_tokens', got string \"top_k\"",
        ),
        ('pin = "temperature"', "3:7: eval.live.pin must be an array of strings"),
        ('pin = ["temperature", "temperature"]', "3:7: eval.live.pin: "),
        ("api_key = 1", "3:1: unknown key 'api_key' in eval.live (did you mean 'api_key_env'?"),
        ("live = 1", "3:1: unknown key 'live' in eval.live"),
    ],
)
def test_a_bad_live_value_is_refused_at_its_place_in_words(
    tmp_path: Path, line: str, problem: str
) -> None:
    problems = problems_of(tmp_path, line)
    where = f"{tmp_path / 'evalrunner.toml'}:{problem}"
    assert any(p.startswith(where) for p in problems), problems
    text = "\n".join(problems)
    assert "is not of type" not in text and "does not match" not in text


def test_live_must_be_a_table(tmp_path: Path) -> None:
    write(tmp_path / "evalrunner.toml", '[eval]\nlive = "openai"\n')
    with pytest.raises(ConfigError) as caught:
        load_config(cwd=tmp_path, env={})
    assert caught.value.problems == [
        f'{tmp_path / "evalrunner.toml"}:2:8: eval.live must be a table, got string "openai"'
    ]


@pytest.mark.parametrize("pasted", ["sk-live-0123456789abcdef", "sk live secret", "1SECRETKEY"])
def test_a_key_pasted_as_the_variable_name_is_never_repeated(tmp_path: Path, pasted: str) -> None:
    problems = problems_of(tmp_path, f'api_key_env = "{pasted}"')
    assert problems == [
        f"{tmp_path / 'evalrunner.toml'}:3:15: eval.live.api_key_env must be the NAME of an "
        "environment variable (letters, digits and _, not starting with a digit), for example "
        '"OPENAI_API_KEY"; never put the key itself here, got string (value not shown)'
    ]
    assert not any(pasted[:6] in problem for problem in problems)


def test_evalrunner_config_shows_the_live_table_but_never_the_key(tmp_path: Path) -> None:
    write(
        tmp_path / "evalrunner.toml",
        '[eval.live]\nwire = "anthropic"\nmodel = "claude"\napi_key_env = "LIVE_KEY"\n',
    )
    secret = "sk-ant-never-shown-4242"
    done = subprocess.run(
        [sys.executable, "-m", "evalrunner", "config"],
        cwd=tmp_path,
        env={"LIVE_KEY": secret, "PATH": "/usr/bin:/bin", "NO_COLOR": "1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert secret not in done.stdout + done.stderr
    live, record = done.stdout.split("[eval.live]\n", 1)[1].split("[eval.record]\n")
    assert record == "redact = []  # default\n"
    assert 'wire = "anthropic"  # evalrunner.toml:2' in live
    assert 'api_key_env = "LIVE_KEY"  # evalrunner.toml:4' in live
    assert 'base_url = "https://api.anthropic.com"  # default' in live
    assert "# max_total_tokens is not set  # default" in live
    shown = [line.split(" ")[1 if line.startswith("#") else 0] for line in live.splitlines()]
    assert shown == list(LIVE_KEYS)


def test_the_live_keys_in_code_are_the_keys_in_the_schema() -> None:
    schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text(encoding="utf-8"))
    # The schema file has sorted keys (as `schema export` writes it); the code's order is its own.
    assert sorted(schema["$defs"]["live"]["properties"]) == sorted(LIVE_KEYS)
    assert list(LIVE_KEYS) == [f for f in LiveConfig.__dataclass_fields__]


def test_every_list_of_wires_is_the_wire_packages() -> None:
    """The wires are named once (evalrunner.wire.common.WIRES); the schemas' enums, the
    config's defaults and the clients follow it."""
    from evalrunner.config import DEFAULT_BASE_URLS, DEFAULT_KEY_VARIABLES, WIRES
    from evalrunner.wire import common
    from evalrunner.wire.client import client_wire

    config_schema = json.loads((ROOT / "schemas" / "config.schema.json").read_text("utf-8"))
    case_schema = json.loads((ROOT / "schemas" / "case.schema.json").read_text("utf-8"))
    assert WIRES == common.WIRES
    assert config_schema["$defs"]["live"]["properties"]["wire"]["enum"] == list(common.WIRES)
    assert case_schema["$defs"]["recorded"]["properties"]["wire"]["enum"] == list(common.WIRES)
    assert set(DEFAULT_BASE_URLS) == set(DEFAULT_KEY_VARIABLES) == set(common.WIRES)
    assert [client_wire(wire).name for wire in common.WIRES] == list(common.WIRES)
