"""Plugging in a user's own agent and tools from ``package.module:name`` references.

The ``[eval]`` keys ``agent``, ``tools`` and ``builtin_tools`` name them; this module imports
them (with the config file's directory first on ``sys.path``, so a project's own modules are
found without installing them), checks that they have the right shape, and fails with a
message that says which reference, where it was configured, and what was expected.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, cast

from evalrunner.agents.reference import AgentFactory, reference_agent
from evalrunner.boundary.tools import Tool, ToolSource, builtin_tools
from evalrunner.config import Config
from evalrunner.process_exit import ProcessExitAttempt, watched


class PluginError(Exception):
    """A configured agent or tool cannot be used; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


@contextmanager
def _importable_from(directory: Path) -> Iterator[None]:
    entry = str(directory)
    added = entry not in sys.path
    if added:
        sys.path.insert(0, entry)
    try:
        yield
    finally:
        if added and entry in sys.path:
            sys.path.remove(entry)


def resolve(reference: str, base_dir: Path) -> Any:
    """The object a ``package.module:attribute`` reference names.

    Raises :class:`PluginError` when the reference is malformed, the module cannot be
    imported (with the import's own reason), or it has no such attribute.
    """
    module_name, sep, attribute = reference.partition(":")
    if not sep or not module_name or not attribute:
        raise PluginError([f"{reference!r} is not a reference: write 'package.module:name'"])
    # Watched: an os._exit on import (or from a thread the import started) is refused and
    # fails the import, where the front end refuses os._exit (evalrunner.process_exit).
    with _importable_from(base_dir), watched() as watch:
        try:
            module = importlib.import_module(module_name)
            if watch.attempts:
                raise ProcessExitAttempt(watch.attempts[0])
        except (Exception, SystemExit, ProcessExitAttempt) as exc:  # user code: theirs to read
            # SystemExit and os._exit too: a module that exits on import must not end the run
            # with its code (exit 0 would read as a green run that ran nothing).
            raise PluginError(
                [f"{reference}: cannot import {module_name}: {_failure(exc)}"]
            ) from None
    target: Any = module
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise PluginError(
                [f"{reference}: module {module_name} has no attribute {attribute!r}"]
            ) from None
    return target


def load_agent_factory(reference: str, base_dir: Path) -> AgentFactory:
    """An agent factory: a callable taking one argument, the :class:`AgentContext`."""
    factory = resolve(reference, base_dir)
    if not callable(factory):
        raise PluginError([f"{reference}: is a {type(factory).__name__}, not a factory"])
    try:
        signature = inspect.signature(factory)
    except ValueError:  # no signature to inspect (a builtin): let the call decide
        return cast(AgentFactory, factory)
    try:
        signature.bind(object())
    except TypeError:
        raise PluginError(
            [
                f"{reference}: the factory must accept exactly one argument, the "
                f"evalrunner.AgentContext; its signature is {_signature(factory)}"
            ]
        ) from None
    return cast(AgentFactory, factory)


def load_tools(
    references: Sequence[str],
    base_dir: Path,
    *,
    include_builtin: bool = True,
    written_at: Mapping[str, str] | None = None,
) -> dict[str, Tool]:
    """The tools to offer the agent, by name: built-in ones (unless excluded), then these.

    Each reference names a :class:`Tool`, or a class or function that returns one when called
    with no arguments. Two tools with one name are an error, as is anything not shaped like a
    tool; every problem is reported at once, prefixed with where the reference is written
    (``written_at``, as :attr:`Config.written_at` keys it) when known.
    """
    tools: dict[str, Tool] = dict(builtin_tools()) if include_builtin else {}
    origin: dict[str, str] = {name: "the built-in tools" for name in tools}
    problems: list[str] = []
    for index, reference in enumerate(references):
        where = written_at.get(f"tools[{index}]") if written_at is not None else None
        blame = "" if where is None else f"{where}: "
        try:
            tool = _as_tool(reference, resolve(reference, base_dir))
        except PluginError as exc:
            problems.extend(blame + problem for problem in exc.problems)
            continue
        if tool.name in tools:
            problems.append(
                f"{blame}{reference}: a tool named {tool.name!r} already comes from "
                f"{origin[tool.name]}"
                + (" (set builtin_tools = false to replace it)" if tool.name == "echo" else "")
            )
            continue
        tools[tool.name] = tool
        origin[tool.name] = reference
    if problems:
        raise PluginError(problems)
    return tools


def _failure(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"it called sys.exit({exc.code!r})"
    if isinstance(exc, ProcessExitAttempt):
        return f"it called os._exit({exc.code!r}), which would have ended the whole run"
    return f"{type(exc).__name__}: {exc}"


def _as_tool(reference: str, found: Any) -> Tool:
    candidate = found
    if inspect.isclass(found) or (callable(found) and not _looks_like_tool(found)):
        try:
            with watched() as watch:
                candidate = found()
            if watch.attempts:
                raise ProcessExitAttempt(watch.attempts[0])
        except (Exception, SystemExit, ProcessExitAttempt) as exc:  # a user's tool: their code
            raise PluginError(
                [f"{reference}: calling it to make the tool failed: {_failure(exc)}"]
            ) from None
    missing = _tool_shape_problems(candidate)
    if missing:
        raise PluginError(
            [
                f"{reference}: not a tool ({'; '.join(missing)}); a tool has name, description, "
                "parameters (a JSON Schema object) and call(arguments) -> str"
            ]
        )
    return cast(Tool, candidate)


def _looks_like_tool(value: Any) -> bool:
    return not _tool_shape_problems(value)


def _tool_shape_problems(value: Any) -> list[str]:
    problems = []
    name = getattr(value, "name", None)
    if not isinstance(name, str) or not name:
        problems.append("name is not a non-empty string")
    if not isinstance(getattr(value, "description", None), str):
        problems.append("description is not a string")
    if not isinstance(getattr(value, "parameters", None), Mapping):
        problems.append("parameters is not a mapping")
    if not callable(getattr(value, "call", None)):
        problems.append("call is not callable")
    return problems


def _signature(value: Any) -> str:
    try:
        return str(inspect.signature(value))
    except (TypeError, ValueError):
        return "(unknown)"


def tool_source(
    references: Sequence[str],
    base_dir: Path,
    *,
    include_builtin: bool = True,
    written_at: Mapping[str, str] | None = None,
) -> Callable[[], dict[str, Tool]]:
    """Like :func:`load_tools`, checked now, but made anew for each case: a reference to a
    class or function gives every case its own tool (one to an object is shared)."""
    # Errors surface here, where they name the config's lines.
    load_tools(references, base_dir, include_builtin=include_builtin, written_at=written_at)

    def make() -> dict[str, Tool]:
        return load_tools(references, base_dir, include_builtin=include_builtin)

    return make


def configured_agent(config: Config) -> tuple[AgentFactory, ToolSource | None]:
    """The agent factory and tools that ``config`` selects.

    ``agent_command`` runs an external agent against the replay endpoint; ``agent`` imports a
    Python factory; otherwise the reference agent runs. Tools: the built-in ones (unless
    ``builtin_tools = false``) plus ``tools``; ``None`` when that is the built-in ones alone,
    as the replay stage takes it (so that a case running only evalrunner's own code is seen to
    be one). An external agent brings its own tools, so the configured ones are offered only
    to Python agents.
    """
    tools: ToolSource | None = None
    if config.tools or not config.builtin_tools:
        tools = tool_source(
            config.tools,
            config.base_dir,
            include_builtin=config.builtin_tools,
            written_at=config.written_at,
        )
    if config.agent_command is not None:
        from evalrunner.agents.command import command_agent_factory

        try:
            cwd = config.command_dir or config.base_dir
            factory = command_agent_factory(
                config.agent_command, cwd=cwd, exit_grace=config.agent_exit_grace_secs
            )
            return factory, tools
        except ValueError as exc:
            raise PluginError([f"agent_command: {exc}"]) from None
    if config.agent is not None:
        try:
            return load_agent_factory(config.agent, config.base_dir), tools
        except PluginError as exc:
            where = config.written_at.get("agent")
            if where is None:
                raise
            # Every refusal reads path:line:col, and names the key it refuses.
            raise PluginError([f"{where}: {p}" for p in exc.problems]) from None
    return reference_agent, tools
