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

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalrunner.agent import DEFAULT_MAX_TOOL_ITERATIONS
from evalrunner.model import AdmissionError, JSONPath
from evalrunner.schemas import config_validator
from evalrunner.sourcemap import SourceMap

CONFIG_FILE = "evalrunner.toml"
PYPROJECT = "pyproject.toml"
DEFAULT_SUITE_DIR = "evals/regression"
DEFAULT_CASE_TIMEOUT_SECS = 120.0
MODES = ("replay", "live")
ENV_SUITE_DIR = "EVALRUNNER_SUITE_DIR"
ENV_MODE = "EVALRUNNER_MODE"


class ConfigError(Exception):
    """The configuration is unusable; ``problems`` holds one ``file:line: message`` each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
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
    """Where ``agent``/``tools`` modules are imported from and ``agent_command`` runs: the
    config file's directory, or the working directory when there is none."""
    file: Path | None = None
    sources: Mapping[str, str] = field(default_factory=dict)


def parse_mode(raw: str, origin: str) -> str:
    """A mode value, trimmed and lower-cased; anything but replay/live is a :class:`ConfigError`."""
    mode = raw.strip().lower()
    if mode not in MODES:
        raise ConfigError([f"{origin}: mode must be 'replay' or 'live', got {raw!r}"])
    return mode


def find_config_file(start: Path) -> Path | None:
    """The nearest ``evalrunner.toml``, or ``pyproject.toml`` with ``[tool.evalrunner]``."""
    for directory in (start, *start.parents):
        dedicated = directory / CONFIG_FILE
        if dedicated.is_file():
            return dedicated
        pyproject = directory / PYPROJECT
        if pyproject.is_file() and _has_tool_table(pyproject):
            return pyproject
    return None


def _has_tool_table(pyproject: Path) -> bool:
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return False  # an unrelated broken pyproject is not ours to report
    tool = data.get("tool")
    return isinstance(tool, dict) and "evalrunner" in tool


def load_config(
    *,
    config_file: Path | None = None,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    suite_dir: Path | None = None,
    mode: str | None = None,
    case_timeout_secs: float | None = None,
    agent_command: str | None = None,
) -> Config:
    """Resolve the effective configuration; the keyword values come from the command line."""
    cwd = cwd or Path.cwd()
    env = env if env is not None else {}
    path: Path | None
    if config_file is not None:
        path = config_file if config_file.is_absolute() else cwd / config_file
        if not path.is_file():
            raise ConfigError([f"{config_file}: config file not found"])
    else:
        path = find_config_file(cwd)

    table: dict[str, Any] = {}
    positions: dict[str, str] = {}
    base = cwd
    if path is not None:
        table, positions = _read_eval_table(path)
        base = path.parent

    sources: dict[str, str] = {}
    problems: list[str] = []

    if suite_dir is not None:
        suite, sources["suite_dir"] = cwd / suite_dir, "--suite"
    elif env.get(ENV_SUITE_DIR):
        suite, sources["suite_dir"] = cwd / env[ENV_SUITE_DIR], ENV_SUITE_DIR
    elif "suite_dir" in table:
        suite, sources["suite_dir"] = base / table["suite_dir"], positions["suite_dir"]
    else:
        suite, sources["suite_dir"] = base / DEFAULT_SUITE_DIR, "default"

    chosen_mode = "replay"
    sources["mode"] = "default"
    for raw, origin in (
        (mode, "--mode"),
        (env.get(ENV_MODE), ENV_MODE),
        (table.get("mode"), positions.get("mode", "")),
    ):
        if raw is None:
            continue
        try:
            chosen_mode = parse_mode(raw, origin)
        except ConfigError as exc:
            problems.extend(exc.problems)
        sources["mode"] = origin
        break

    iterations = table.get("max_tool_iterations", DEFAULT_MAX_TOOL_ITERATIONS)
    sources["max_tool_iterations"] = positions.get("max_tool_iterations", "default")

    if case_timeout_secs is not None:
        timeout, sources["case_timeout_secs"] = case_timeout_secs, "--case-timeout"
        if not timeout > 0:
            problems.append(f"--case-timeout: must be a number of seconds above 0, got {timeout:g}")
    else:
        timeout = float(table.get("case_timeout_secs", DEFAULT_CASE_TIMEOUT_SECS))
        sources["case_timeout_secs"] = positions.get("case_timeout_secs", "default")

    for key in ("agent", "tools", "builtin_tools"):
        sources[key] = positions.get(key, "default")
    command: str | None
    if agent_command is not None:
        command, sources["agent_command"] = agent_command, "--agent-command"
    else:
        command = table.get("agent_command")
        sources["agent_command"] = positions.get("agent_command", "default")
    if command is not None and not command.strip():
        problems.append(f"{sources['agent_command']}: agent_command must not be blank")
    # --agent-command overrides a configured Python agent; both in one file is a contradiction
    if agent_command is None and command is not None and "agent" in table:
        problems.append(
            f"{positions['agent']}: agent and agent_command ({sources['agent_command']}) both "
            "choose the agent under test; keep one"
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
        file=path,
        sources=sources,
    )


def _read_eval_table(path: Path) -> tuple[dict[str, Any], dict[str, str]]:
    """The ``[eval]`` table of a config file, schema-checked, and ``file:line`` of each key."""
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([f"{path}: cannot read config file: {exc}"]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError([f"{path}: invalid TOML: {exc}"]) from None

    prefix: JSONPath = ()
    section: Any = data
    if path.name == PYPROJECT:
        prefix = ("tool", "evalrunner")
        section = data.get("tool", {}).get("evalrunner", {})
    source_map = SourceMap(text, "toml")

    def where(rel: JSONPath, *, key: bool = False) -> AdmissionError:
        spot = source_map.locate(prefix + rel, key=key)
        line = spot[0] if spot else None
        return AdmissionError(str(path), "", line, None, prefix + rel)

    problems = []
    for error in config_validator().iter_errors(section):
        rel: JSONPath = tuple(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            allowed = sorted(error.schema.get("properties", {}))
            for key in error.instance:
                if key not in allowed:
                    table_name = ".".join(str(p) for p in prefix + rel) or "the file"
                    spot = where(rel + (key,), key=True)
                    problems.append(
                        f"{_at(spot)}: unknown key {key!r} in {table_name} "
                        f"(known keys: {', '.join(allowed)})"
                    )
        else:
            name = ".".join(str(p) for p in prefix + rel)
            problems.append(f"{_at(where(rel))}: {name}: {error.message}")
    if problems:
        raise ConfigError(problems)

    table = section.get("eval", {})
    positions = {key: _at(where(("eval", key), key=True)) for key in table}
    return dict(table), positions


def _at(error: AdmissionError) -> str:
    return f"{error.path}:{error.line}" if error.line is not None else error.path
