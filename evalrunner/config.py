"""Configuration: the ``[eval]`` section, where it comes from, and what wins (SPEC §9).

Discovery: ``--config FILE`` if given (it must exist); otherwise the nearest directory, walking
up from the working directory, that holds ``evalrunner.toml`` (preferred) or a
``pyproject.toml`` with a ``[tool.evalrunner]`` table. Files are not merged. Precedence for each
value: command-line flag > environment (``EVALRUNNER_SUITE_DIR``, ``EVALRUNNER_MODE``) > config
file > default. Relative paths from a file resolve against that file's directory; relative paths
from a flag or the environment, against the working directory. With no config file, the default
suite is ``evals/regression`` under the working directory.
"""

from __future__ import annotations

import difflib
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.exceptions import ValidationError


from evalrunner.fixture.load import (
    NotARegularFile,
    RawDocument,
    parse_document,
    read_regular_file,
    relative_to_cwd,
)
from evalrunner.fixture.schemas import config_validator
from evalrunner.model import DEFAULT_MAX_TOOL_ITERATIONS, AdmissionError, JSONPath
from evalrunner.repeats import MAX_REPEAT
from evalrunner.text import compiled, dotted, printable, printable_path
from evalrunner.wire import WIRES as WIRES

CONFIG_FILE = "evalrunner.toml"
PYPROJECT = "pyproject.toml"
DEFAULT_SUITE_DIR = "evals/regression"
DEFAULT_CASE_TIMEOUT_SECS = 120.0
MAX_CASE_TIMEOUT_SECS = 86400.0
"""One day. Far beyond any case, and far below what the clock functions a timeout reaches
can hold (``1e10`` seconds overflows them)."""
DEFAULT_AGENT_EXIT_GRACE_SECS = 5.0
MAX_AGENT_EXIT_GRACE_SECS = 300.0
MAX_TOOL_ITERATIONS = 10_000
"""The largest ``max_tool_iterations``: a loop guard, not a budget."""
CONFIG_MAX_BYTES = 1024 * 1024
"""Config files larger than this are refused unread (a real one is a few hundred bytes)."""
MODES = ("replay", "live")
"""Replay the scripts, or ask a live model (``[eval] mode``)."""
DEFAULT_BASE_URLS = {
    "openai": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
}
"""Each wire's public endpoint, in its SDK's convention: OpenAI's includes ``/v1``."""
DEFAULT_KEY_VARIABLES = {
    "openai": "OPENAI_API_KEY",
    "openai-responses": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
}
LIVE_KEYS = (
    "wire",
    "base_url",
    "model",
    "api_key_env",
    "temperature",
    "max_tokens",
    "pin",
    "timeout_secs",
    "max_retries",
    "max_concurrency",
    "stream",
    "max_total_tokens",
)
"""The keys of ``[eval.live]``, in the order ``evalrunner config`` shows them."""
ENV_SUITE_DIR = "EVALRUNNER_SUITE_DIR"
ENV_MODE = "EVALRUNNER_MODE"


class ConfigError(Exception):
    """The configuration is unusable; ``problems`` holds one ``file:line:col: message`` each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True, slots=True)
class LiveConfig:
    """The real model of live mode (``[eval.live]``). Holds the *name* of the key's variable,
    never the key: the key is read from the environment when a request is sent."""

    wire: str = "openai"
    base_url: str = DEFAULT_BASE_URLS["openai"]
    model: str | None = None
    api_key_env: str = DEFAULT_KEY_VARIABLES["openai"]
    temperature: float = 0.0
    max_tokens: int = 1024
    pin: tuple[str, ...] = ()
    """Which of ``temperature`` and ``max_tokens`` the config pins: sent as set here, whatever
    the agent's request says (by default the agent's own value wins)."""
    timeout_secs: float = 60.0
    max_retries: int = 2
    max_concurrency: int = 1
    stream: bool = False
    max_total_tokens: int | None = None

    def problems(self) -> list[str]:
        """What keeps a live run from starting with these settings (empty when nothing)."""
        if self.model is None:
            return [
                "live mode needs a model: set model in [eval.live] (the model name sent with "
                'every request, for example model = "gpt-4.1-mini")'
            ]
        return []


@dataclass(frozen=True, slots=True)
class RecordConfig:
    """How ``evalrunner record`` writes fixtures (``[eval.record]``)."""

    redact: tuple[str, ...] = ()
    """RE2 patterns; every match in what a recorded fixture holds becomes ``[redacted]``.
    Each compiles: a pattern that does not is refused when the config is read."""


@dataclass(frozen=True, slots=True)
class Config:
    """Effective settings, and for each the place it came from."""

    suite_dir: Path
    mode: str = "replay"
    max_tool_iterations: int = DEFAULT_MAX_TOOL_ITERATIONS
    case_timeout_secs: float = DEFAULT_CASE_TIMEOUT_SECS
    agent: str | None = None
    tools: tuple[str, ...] = ()
    builtin_tools: bool = True
    agent_command: str | None = None
    base_dir: Path = field(default_factory=Path.cwd)
    """Where ``agent``/``tools`` modules are imported from: the config file's directory, or
    the working directory when there is none."""
    command_dir: Path | None = None
    """Where ``agent_command`` runs: the config file's directory when the command comes from
    the file, the working directory when it comes from ``--agent-command`` (``None``: as
    ``base_dir``)."""
    trimmed_history: bool = False
    """The agent drops earlier turns from its history on purpose: conformance then checks
    the current turn only (and the report says so)."""
    framed_results: bool = False
    """The agent frames or truncates tool results on purpose: conformance then requires a
    fed-back result to hold the tool's result or a prefix of it (and the report says so)."""
    agent_exit_grace_secs: float = DEFAULT_AGENT_EXIT_GRACE_SECS
    """Seconds an agent command gets to exit once its standard input is closed."""
    live: LiveConfig = field(default_factory=LiveConfig)
    record: RecordConfig = field(default_factory=RecordConfig)
    repeat: int = 1
    """How many times each case runs (``--repeat``, ``[eval] repeat``)."""
    file: Path | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    written_at: Mapping[str, str] = field(default_factory=dict, compare=False)
    """Where each plugin reference is set, to prefix the refusal of one that cannot be used:
    ``file:line:col: [eval] agent`` at the ``agent`` value, ``file:line:col: [eval] tools[I]``
    at each ``tools`` entry (keyed ``agent`` and ``tools[I]``), or the environment variable
    that set it; absent when not set."""


def parse_mode(raw: str, origin: str) -> str:
    """A mode value, trimmed and lower-cased; anything but replay/live is a :class:`ConfigError`."""
    mode = raw.strip().lower()
    if mode not in MODES:
        raise ConfigError([f"{origin}: mode must be 'replay' or 'live', got {raw!r}"])
    return mode


def parse_repeat(raw: str, most: int = MAX_REPEAT) -> int:
    """A repeat count (or, with ``most``, another count) as written on the command line or in
    the environment: a plain whole number from 1 to ``most``, spaces around it allowed;
    anything else (``1_0``, ``1e3``, ``²``, ``5.0``) is a ``ValueError`` saying what would be
    right."""
    text = raw.strip()
    digits = text.isascii() and text.isdecimal() and len(text) <= len(str(most))
    if digits and 1 <= int(text) <= most:
        return int(text)
    raise ValueError(f"must be a whole number from 1 to {most}, got {printable(raw[:40])!r}")


def find_config_file(start: Path) -> Path | None:
    """The nearest ``evalrunner.toml``, or ``pyproject.toml`` with ``[tool.evalrunner]``."""
    for directory in (start, *start.parents):
        dedicated = directory / CONFIG_FILE
        if dedicated.is_file():
            return dedicated
        if os.path.lexists(dedicated):
            # A FIFO, a directory, a link to a device... named evalrunner.toml is meant as a
            # config: selected, so that reading it reports what it is, never skipped for the
            # defaults or a parent's config.
            return dedicated
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and _has_tool_table(pyproject):
            return pyproject
    return None


# Patterns here are sources, compiled on first use (evalrunner.text.compiled): most runs
# meet none of them.
# A [tool.evalrunner...] header or a tool.evalrunner... dotted key at the start of a line.
_DECLARES_TABLE = r"(?m)^[ \t]*\[?[ \t]*tool[ \t]*\.[ \t]*evalrunner\b"


def _has_tool_table(pyproject: Path) -> bool:
    """Whether a ``pyproject.toml`` is ours: it has a ``[tool.evalrunner]`` table.

    A pyproject that cannot be read or parsed is someone else's problem (every command run
    beneath it would fail otherwise), unless its text visibly declares our table: then it is
    selected, and its problems are reported rather than silently replaced by defaults.
    """
    try:
        raw = read_regular_file(pyproject, CONFIG_MAX_BYTES + 1)
    except OSError:
        return False
    outcome = _parse(raw, pyproject, ("tool", "evalrunner"))
    if isinstance(outcome, list):
        return compiled(_DECLARES_TABLE).search(raw.decode("utf-8", errors="replace")) is not None
    tool = outcome.data.get("tool") if isinstance(outcome.data, dict) else None
    return isinstance(tool, dict) and "evalrunner" in tool


def _parse(raw: bytes, path: Path, within: JSONPath) -> RawDocument | list[AdmissionError]:
    return parse_document(
        raw, "toml", path, max_bytes=CONFIG_MAX_BYTES, within=within, noun="config file"
    )


def load_config(
    *,
    config_file: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    suite_dir: Path | None = None,
    mode: str | None = None,
    case_timeout_secs: float | None = None,
    agent_command: str | None = None,
    repeat: int | None = None,
    agent_exit_grace_secs: float | None = None,
) -> Config:
    """Resolve the effective configuration; the keyword values come from the command line."""
    cwd = cwd or Path.cwd()
    env = env if env is not None else {}
    path: Path | None
    if config_file is not None:
        path = config_file if config_file.is_absolute() else cwd / config_file
        if not path.exists():
            raise ConfigError([f"{printable_path(config_file)}: config file not found"])
    else:
        path = find_config_file(cwd)

    eval_table = _EvalTable()
    base = cwd
    if path is not None:
        eval_table = _read_eval_table(path)
        base = path.parent
    from_env, env_problems = _from_environment(env)
    table = {**eval_table.values, **from_env}

    sources: dict[str, str] = {}
    problems: list[str] = list(env_problems)

    if suite_dir is not None:
        suite, sources["suite_dir"] = cwd / suite_dir, "--suite"
    elif env.get(ENV_SUITE_DIR):
        suite, sources["suite_dir"] = cwd / env[ENV_SUITE_DIR], ENV_SUITE_DIR
    elif "suite_dir" in table:
        suite, sources["suite_dir"] = base / table["suite_dir"], eval_table.source("suite_dir")
    else:
        suite, sources["suite_dir"] = base / DEFAULT_SUITE_DIR, "default"

    chosen_mode = "replay"
    sources["mode"] = "default"
    for raw, origin, blame in (
        (mode, "--mode", "--mode"),
        (env.get(ENV_MODE) or None, ENV_MODE, ENV_MODE),  # empty: unset, as for every variable
        (table.get("mode"), eval_table.source("mode"), eval_table.value_at("mode")),
    ):
        if raw is None:
            continue
        try:
            chosen_mode = parse_mode(raw, blame)
        except ConfigError as exc:
            problems.extend(exc.problems)
        sources["mode"] = origin
        break

    iterations = table.get("max_tool_iterations", DEFAULT_MAX_TOOL_ITERATIONS)
    sources["max_tool_iterations"] = _source(eval_table, from_env, "max_tool_iterations")

    if case_timeout_secs is not None:
        timeout, sources["case_timeout_secs"] = case_timeout_secs, "--case-timeout"
        problem = check_seconds("case_timeout_secs", timeout)
        if problem:
            problems.append(f"--case-timeout: {problem}")
    else:
        timeout = float(table.get("case_timeout_secs", DEFAULT_CASE_TIMEOUT_SECS))
        sources["case_timeout_secs"] = _source(eval_table, from_env, "case_timeout_secs")

    if repeat is not None:
        repeats, sources["repeat"] = repeat, "--repeat"
    else:
        repeats = table.get("repeat", 1)
        sources["repeat"] = _source(eval_table, from_env, "repeat")

    if agent_exit_grace_secs is not None:
        grace = agent_exit_grace_secs
        sources["agent_exit_grace_secs"] = "--agent-exit-grace-secs"
        problem = check_seconds("agent_exit_grace_secs", grace)
        if problem:
            problems.append(f"--agent-exit-grace-secs: {problem}")
    else:
        grace = float(table.get("agent_exit_grace_secs", DEFAULT_AGENT_EXIT_GRACE_SECS))
        sources["agent_exit_grace_secs"] = _source(eval_table, from_env, "agent_exit_grace_secs")

    for key in ("agent", "tools", "builtin_tools", "trimmed_history", "framed_results"):
        sources[key] = _source(eval_table, from_env, key)
    if agent_command is not None and "agent" in table:
        # Shown by `evalrunner config`: the configured agent is there but not used.
        sources["agent"] += ", overridden by --agent-command"
    command: str | None
    command_dir = base
    if agent_command is not None:
        command, sources["agent_command"] = agent_command, "--agent-command"
        blame = "--agent-command"
        command_dir = cwd  # a flag's paths are the user's, typed where they stand
    elif "agent_command" in from_env:
        command = from_env["agent_command"]
        sources["agent_command"] = blame = ENV_VARIABLES["agent_command"]
        command_dir = cwd  # as for the flag: the user's own shell set it
    else:
        command = table.get("agent_command")
        sources["agent_command"] = eval_table.source("agent_command")
        blame = eval_table.value_at("agent_command")
    if command is not None and not command.strip():
        problems.append(f"{blame}: agent_command must not be blank")
    elif command is not None:
        import shlex  # here: only a configured agent command is split

        try:
            shlex.split(command)
        except ValueError as exc:  # as the run would split it, refused before anything runs
            problems.append(
                f"{blame}: agent_command is not a command line a shell could split ({exc}); "
                "close each quote, or escape a literal one with a backslash"
            )
    # --agent-command overrides a configured Python agent; both in one file is a contradiction
    if agent_command is None and command is not None and "agent" in table:
        where = ENV_VARIABLES["agent"] if "agent" in from_env else eval_table.key_at("agent")
        problems.append(
            f"{where}: agent and agent_command "
            f"({sources['agent_command']}) both choose the agent under test; keep one"
        )

    live = _live_config(eval_table, sources)
    # [eval.record] as the schema and _bad_redactions checked it
    record = RecordConfig(redact=tuple(eval_table.values.get("record", {}).get("redact", ())))
    sources["record.redact"] = eval_table.source("redact", within="record")
    written_at: dict[str, str] = {}
    if "agent" in table:
        written_at["agent"] = (
            ENV_VARIABLES["agent"]
            if "agent" in from_env
            else f"{eval_table.value_at('agent')}: [eval] agent"
        )
    for index, _ in enumerate(table.get("tools", ())):
        written_at[f"tools[{index}]"] = (
            ENV_VARIABLES["tools"]
            if "tools" in from_env
            else f"{eval_table.item_at('tools', index)}: [eval] tools[{index}]"
        )

    if problems:
        raise ConfigError(problems)
    return Config(
        suite_dir=suite,
        mode=chosen_mode,
        max_tool_iterations=iterations,
        case_timeout_secs=timeout,
        agent=table.get("agent") if agent_command is None else None,
        tools=tuple(table.get("tools", ())),
        builtin_tools=table.get("builtin_tools", True),
        agent_command=command,
        base_dir=base,
        command_dir=command_dir,
        trimmed_history=table.get("trimmed_history", False),
        framed_results=table.get("framed_results", False),
        agent_exit_grace_secs=grace,
        live=live,
        record=record,
        repeat=repeats,
        file=path,
        sources=sources,
        written_at=written_at,
    )


def _live_config(table: _EvalTable, sources: dict[str, str]) -> LiveConfig:
    """``[eval.live]`` as checked by the schema, with the wire's defaults filled in; each
    key's origin goes into ``sources`` as ``live.KEY``."""
    raw = table.values.get("live", {})
    wire = raw.get("wire", "openai")
    defaults = {
        "base_url": DEFAULT_BASE_URLS[wire],
        "api_key_env": DEFAULT_KEY_VARIABLES[wire],
    }
    values: dict[str, Any] = {}
    for key in LIVE_KEYS:
        sources[f"live.{key}"] = table.source(key, within="live")
        if key in raw:
            values[key] = raw[key]
        elif key in defaults:
            values[key] = defaults[key]
    for key in ("temperature", "timeout_secs"):
        if key in values:
            values[key] = float(values[key])  # TOML's 1 is an integer; the setting is a float
    if "pin" in values:
        values["pin"] = tuple(values["pin"])
    return LiveConfig(**values)


ENV_VARIABLES: dict[str, str] = {
    "suite_dir": ENV_SUITE_DIR,
    "mode": ENV_MODE,
    "max_tool_iterations": "EVALRUNNER_MAX_TOOL_ITERATIONS",
    "case_timeout_secs": "EVALRUNNER_CASE_TIMEOUT_SECS",
    "agent": "EVALRUNNER_AGENT",
    "tools": "EVALRUNNER_TOOLS",
    "builtin_tools": "EVALRUNNER_BUILTIN_TOOLS",
    "agent_command": "EVALRUNNER_AGENT_COMMAND",
    "trimmed_history": "EVALRUNNER_TRIMMED_HISTORY",
    "framed_results": "EVALRUNNER_FRAMED_RESULTS",
    "agent_exit_grace_secs": "EVALRUNNER_AGENT_EXIT_GRACE_SECS",
    "repeat": "EVALRUNNER_REPEAT",
}
"""Every ``[eval]`` key's environment variable (a test holds this to the config schema). An
empty variable counts as unset; a set one beats the file and loses to a flag."""

_REFERENCE = r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*"
_BOOLEANS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _from_environment(env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The ``[eval]`` values the environment sets (suite_dir and mode are read apart), and a
    message per variable that holds no valid value."""
    values: dict[str, Any] = {}
    problems: list[str] = []
    for key, name in ENV_VARIABLES.items():
        raw = env.get(name)
        if key in ("suite_dir", "mode") or not raw:
            continue
        shown = printable(raw[:60])
        if "\x00" in raw:
            problems.append(f"{name}: holds a NUL character (\\x00), which no value can contain")
        elif key in ("max_tool_iterations", "repeat"):
            most = MAX_TOOL_ITERATIONS if key == "max_tool_iterations" else MAX_REPEAT
            try:
                values[key] = parse_repeat(raw, most)
            except ValueError as exc:
                problems.append(f"{name}: {exc}")
        elif key in _SECONDS_LIMITS:
            try:
                seconds = parse_seconds(raw)
            except ValueError:
                seconds = math.nan
            if check_seconds(key, seconds) is None:
                values[key] = seconds
            else:
                problems.append(
                    f"{name}: must be a number of seconds above 0 and at most "
                    f"{_SECONDS_LIMITS[key][0]:g}, got {shown!r}"
                )
        elif key in ("builtin_tools", "trimmed_history", "framed_results"):
            flag = _BOOLEANS.get(raw.strip().lower())
            if flag is None:
                problems.append(f"{name}: must be true or false, got {shown!r}")
            else:
                values[key] = flag
        elif key == "agent":
            if compiled(_REFERENCE).fullmatch(raw.strip()):
                values[key] = raw.strip()
            else:
                problems.append(
                    f'{name}: must name a Python object as "package.module:name", got {shown!r}'
                )
        elif key == "tools":
            references = [part.strip() for part in raw.split(",") if part.strip()]
            bad = [r for r in references if not compiled(_REFERENCE).fullmatch(r)]
            if bad:
                problems.append(
                    f'{name}: comma-separated "package.module:name" references, got '
                    f"{printable(bad[0][:60])!r}"
                )
            else:
                values[key] = references
        elif key == "agent_command":
            if raw.strip():
                values[key] = raw
            else:
                problems.append(f"{name}: agent_command must not be blank")
    return values, problems


def _source(table: _EvalTable, from_env: Mapping[str, Any], key: str) -> str:
    """Where a key's value comes from: its environment variable, the file, or the default."""
    return ENV_VARIABLES[key] if key in from_env else table.source(key)


_DECIMAL = r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"


def parse_seconds(text: str) -> float:
    """A number of seconds as a person writes one: ``30``, ``0.5``, ``1e2``.

    Stricter than :func:`float`, which also takes ``1_0``, ``inf``, ``nan`` and non-ASCII
    digits: a value that does not read as plain decimal is refused (``ValueError``) rather
    than taken to mean something the writer may not have meant.
    """
    stripped = text.strip()
    if not compiled(_DECIMAL).fullmatch(stripped):
        raise ValueError(f"must be a decimal number of seconds such as 30 or 0.5, got {text!r}")
    return float(stripped)


def _exactly(seconds: float) -> str:
    """``seconds`` as short as :g writes it, unless that would show another number
    (86400.0000001 is not 86400)."""
    short = f"{seconds:g}"
    return short if float(short) == seconds or seconds != seconds else repr(seconds)


_SECONDS_LIMITS = {
    "case_timeout_secs": (MAX_CASE_TIMEOUT_SECS, " (one day)"),
    "agent_exit_grace_secs": (MAX_AGENT_EXIT_GRACE_SECS, ""),
}
"""The keys given in seconds: the most each takes, and how to say it."""


def check_seconds(key: str, seconds: float) -> str | None:
    """What is wrong with ``seconds`` given for ``key`` on the command line, or ``None``."""
    most, said = _SECONDS_LIMITS[key]
    if math.isfinite(seconds) and 0 < seconds <= most:
        return None
    return (
        f"must be a number of seconds above 0 and at most {most:g}{said}, got {_exactly(seconds)}"
    )


@dataclass(frozen=True, slots=True)
class _EvalTable:
    """The ``[eval]`` table of a config file, and where each of its keys and values is."""

    values: dict[str, Any] = field(default_factory=dict)
    document: RawDocument | None = None
    prefix: JSONPath = ()

    def _where(self, *path: str | int, at_key: bool = False) -> str:
        if self.document is None:
            return "default"
        return _position(self.document.error("", self.prefix + ("eval", *path), key=at_key))

    def source(self, key: str, *, within: str | None = None) -> str:
        """``file:line`` of the key when the file sets it, else ``default`` (for ``config``);
        ``within`` names a sub-table of ``[eval]`` (``live``) the key is in."""
        table = self.values.get(within, {}) if within is not None else self.values
        if not isinstance(table, dict) or key not in table or self.document is None:
            return "default"
        path = ("eval", within, key) if within is not None else ("eval", key)
        error = self.document.error("", self.prefix + path, key=True)
        return f"{error.path}:{error.line}" if error.line is not None else error.path

    def item_at(self, key: str, index: int) -> str:
        """``file:line:col`` of the key's array item ``index``, for messages about it."""
        return self._where(key, index)

    def key_at(self, key: str) -> str:
        """``file:line:col`` of the key, for messages about it."""
        return self._where(key, at_key=True)

    def value_at(self, key: str) -> str:
        """``file:line:col`` of the key's value, for messages about the value."""
        return self._where(key)


def _position(error: AdmissionError) -> str:
    """The ``file:line:col`` (or ``file: at $.path``) prefix of an error, without a message."""
    return str(error).removesuffix(": ")


def _read_eval_table(path: Path) -> _EvalTable:
    """The ``[eval]`` table of a config file, checked, with the positions of its keys.

    Every problem is collected before anything is refused: the file's syntax, then its shape
    (a ``tool`` that is not a table, an ``eval`` that is an array, ...), then each value.
    """
    shown_path = relative_to_cwd(path)  # as the user would type it, when below where they are
    shown = printable_path(shown_path)
    try:
        raw = read_regular_file(path, CONFIG_MAX_BYTES + 1)
    except NotARegularFile as exc:
        raise ConfigError([f"{shown}: {exc}; a config file must be a regular file"]) from None
    except OSError as exc:
        raise ConfigError([f"{shown}: cannot read config file: {exc.strerror or exc}"]) from None
    if len(raw) > CONFIG_MAX_BYTES:
        raise ConfigError(
            [f"{shown}: config file is over the {CONFIG_MAX_BYTES}-byte cap for config files"]
        )
    prefix: JSONPath = ("tool", "evalrunner") if path.name == PYPROJECT else ()
    outcome = _parse(raw, shown_path, prefix)
    if isinstance(outcome, list):
        raise ConfigError([str(error) for error in outcome])
    document = outcome

    section: object = document.data
    problems: list[AdmissionError] = []
    for depth in range(len(prefix)):
        here = prefix[: depth + 1]
        value = section.get(here[-1]) if isinstance(section, dict) else None
        if value is None:
            section = {}
            break
        if not isinstance(value, dict):
            problems.append(document.error(_not_a_table(here, value), here))
            break
        section = value
    if problems:
        raise ConfigError([str(error) for error in problems])

    for error in sorted(config_validator().iter_errors(section), key=_schema_order):
        problems.extend(_explain(document, prefix, error))
    eval_values = section.get("eval") if isinstance(section, dict) else None
    if isinstance(eval_values, dict):
        problems.extend(_nul_characters(document, prefix, eval_values))
        live = eval_values.get("live")
        if isinstance(live, dict):
            problems.extend(_control_characters(document, prefix, live))
            problems.extend(_bad_port(document, prefix, live))
        record = eval_values.get("record")
        if isinstance(record, dict):
            problems.extend(_bad_redactions(document, prefix, record))
    if problems:
        ordered = sorted(set(problems), key=AdmissionError.sort_key)
        raise ConfigError([str(error) for error in ordered])
    assert isinstance(section, dict)
    return _EvalTable(dict(section.get("eval", {})), document, prefix)


def _schema_order(error: ValidationError) -> tuple[str, str]:
    return (json.dumps(list(error.absolute_path)), error.message)


# --- problems, in words ------------------------------------------------------------------------

_TOML_TYPE = {
    dict: "table",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "float",
}

_EXPECTED = {
    "object": "a table",
    "array": "an array",
    "string": "a string",
    "boolean": "true or false",
    "integer": "a whole number (written without a decimal point)",
    "number": "a number",
}

_BOUNDS = {"minimum": "at least", "maximum": "at most", "exclusiveMinimum": "above"}

_PATTERN_WORDS = {
    "^[A-Za-z_][\\w.]*:[A-Za-z_][\\w.]*$": (
        'must name a Python object as "package.module:name" '
        '(for example "my_agent.hooks:make_agent")'
    ),
    "^https?://[^\\s\\x00-\\x1f\\x7f]+$": (
        "must be an http:// or https:// URL without spaces or control characters "
        '(for example "https://api.openai.com/v1")'
    ),
    "^[^\\x00-\\x1f\\x7f]+$": "must not hold control characters (tabs, newlines, ...)",
    "^[A-Za-z_][A-Za-z0-9_]*$": (
        "must be the NAME of an environment variable (letters, digits and _, not starting "
        'with a digit), for example "OPENAI_API_KEY"; never put the key itself here'
    ),
}


class _Withheld:
    """A value no message may show (it may be a secret): only its type is named.

    A plain class, not a dataclass: it is only ever tested with isinstance and read, and a
    dataclass would cost every start the compiling of methods nothing calls."""

    __slots__ = ("kind",)

    def __init__(self, kind: type) -> None:
        self.kind = kind


def _shown(value: object) -> str:
    """A value as TOML would spell it, shortened: its type and its text."""
    if isinstance(value, _Withheld):
        return f"{_TOML_TYPE.get(value.kind, value.kind.__name__)} (value not shown)"
    kind = _TOML_TYPE.get(type(value), type(value).__name__)
    if isinstance(value, dict | list):
        return kind
    if isinstance(value, bool):
        text = str(value).lower()
    elif isinstance(value, str | int | float):
        text = json.dumps(value, ensure_ascii=False)
    else:  # a date or time, outside the part of a pyproject whose values are checked
        text = str(value)
    return f"{kind} {text if len(text) <= 40 else text[:37] + '...'}"


def _not_a_table(path: JSONPath, value: object) -> str:
    name = dotted(path)
    return f"{name} must be a table ([{name}]), got {_shown(value)}"


def _explain(
    document: RawDocument, prefix: JSONPath, error: ValidationError
) -> list[AdmissionError]:
    """One schema error as messages that say what is wrong and what would be right."""
    rel: JSONPath = tuple(error.absolute_path)
    where = prefix + rel
    name = dotted(where)
    keyword = error.validator
    schema = error.schema if isinstance(error.schema, dict) else {}
    instance = error.instance
    limit = error.validator_value
    if rel[-2:] == ("live", "api_key_env") and not isinstance(instance, dict):
        # Someone may have pasted the key itself here: a message must never repeat it.
        instance = _Withheld(type(instance))
    if rel[-2:] == ("live", "base_url") and isinstance(instance, str):
        # A refused URL may still carry a gateway's key (user:password@, ?key=...).
        from evalrunner.redact import shown_url

        instance = shown_url(instance)
    if keyword == "additionalProperties" and isinstance(instance, dict):
        allowed = sorted(schema.get("properties", {}))
        table = name or "the file"
        return [
            document.error(
                f"unknown key {key!r} in {table} ({_suggest(key, allowed)})",
                where + (key,),
                key=True,
            )
            for key in instance
            if key not in allowed
        ]
    if keyword == "type" and rel in ((), ("eval",)) and not isinstance(instance, dict):
        return [document.error(_not_a_table(where, instance), where)]
    if keyword == "type":
        expected = _EXPECTED.get(str(limit), f"of type {limit}")
        if limit == "array" and schema.get("items", {}).get("type") == "string":
            expected = "an array of strings"
        message = f"{name} must be {expected}, got {_shown(instance)}"
    elif keyword == "minLength":
        message = f"{name} must not be empty"
    elif keyword == "maxLength":
        length = len(error.instance) if isinstance(error.instance, str) else 0
        message = f"{name} must be at most {limit} characters long, got {length}"
    elif keyword == "enum" and isinstance(limit, list):
        accepted = " or ".join(repr(item) for item in limit)
        message = f"{name} must be {accepted}, got {_shown(instance)}"
    elif keyword == "pattern":
        words = _PATTERN_WORDS.get(str(limit), f"must match the pattern {limit}")
        message = f"{name} {words}, got {_shown(instance)}"
    elif keyword in _BOUNDS:
        message = f"{name} must be {_BOUNDS[keyword]} {limit}, got {_shown(instance)}"
    else:  # a keyword this schema does not use yet: still say where, and jsonschema's words
        message = f"{name}: {error.message}"
    return [document.error(message, where)]


def _suggest(key: str, allowed: list[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return f"{hint}known keys: {', '.join(allowed)}"


_CONTROL = r"[\x00-\x1f\x7f]"


def _control_characters(
    document: RawDocument, prefix: JSONPath, live: Mapping[str, Any]
) -> list[AdmissionError]:
    """A control character in a URL, model name or variable name is a mistake (a pasted
    newline, a tab) that would reach an HTTP header or request line: refused at its place.
    The schema's patterns say the same to editors, but a regex ``$`` also matches before a
    final newline, so the check that counts is this one."""
    problems = []
    for key, value in live.items():
        if isinstance(value, str) and compiled(_CONTROL).search(value):
            at = prefix + ("eval", "live", key)
            problems.append(
                document.error(
                    f"{dotted(at)} holds a control character (a newline, tab, NUL, ...); remove it",
                    at,
                )
            )
    return problems


def _bad_port(
    document: RawDocument, prefix: JSONPath, live: Mapping[str, Any]
) -> list[AdmissionError]:
    """A ``base_url`` port that is no TCP port (``:99999``, ``:0``, ``:http``) is refused at
    its place: otherwise every request of a live run would fail alike, with a less clear
    word. The URL itself is not repeated: it may carry a gateway's key."""
    from urllib.parse import urlsplit

    url = live.get("base_url")
    if not isinstance(url, str):
        return []
    try:
        port = urlsplit(url).port
    except ValueError:
        port = 0
    if port is None or 1 <= port <= 65535:
        return []
    at = prefix + ("eval", "live", "base_url")
    return [
        document.error(
            f"{dotted(at)} has a port that is not a whole number from 1 to 65535; give a valid "
            "port after the host (https://host:8443/v1), or none for the scheme's default",
            at,
        )
    ]


def _bad_redactions(
    document: RawDocument, prefix: JSONPath, record: Mapping[str, Any]
) -> list[AdmissionError]:
    """Each ``redact`` pattern compiles as RE2, or is refused at its place: a pattern that
    cannot match would leave the text it was meant to strike in every recorded fixture."""
    from evalrunner.redact import RedactionError, compile_redaction

    patterns = record.get("redact")
    if not isinstance(patterns, list):
        return []  # the schema's message says what it must be
    problems = []
    for index, pattern in enumerate(patterns):
        if not isinstance(pattern, str) or not pattern:
            continue
        try:
            compile_redaction(pattern)
        except RedactionError as exc:
            at = prefix + ("eval", "record", "redact", index)
            problems.append(document.error(f"{dotted(at)}: {exc}", at))
    return problems


def _nul_characters(
    document: RawDocument, prefix: JSONPath, table: Mapping[str, Any]
) -> list[AdmissionError]:
    """A NUL character cannot be part of a path or a command line: refuse it here, where it
    has a position, rather than let the operating system refuse it with a traceback."""
    problems = []
    for key, value in table.items():
        items = value if isinstance(value, list) else [value]
        for index, item in enumerate(items):
            if isinstance(item, str) and "\x00" in item:
                at = prefix + ("eval", key) + ((index,) if isinstance(value, list) else ())
                problems.append(
                    document.error(
                        f"{dotted(at)} holds a NUL character (\\x00), which no path or "
                        "command can contain; remove it",
                        at,
                    )
                )
    return problems
