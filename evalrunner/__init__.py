"""evalrunner: CI tests for LLM agent machinery.

Fixtures script what the model says; evalrunner replays them through a real agent loop, records
what crossed the tool boundary, and grades the run against declarative expectations. The
pipeline is ``load → admit → replay → grade → report``, one module each.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalrunner.agents.command import command_agent_factory
    from evalrunner.agents.reference import (
        Agent,
        AgentContext,
        AgentFactory,
        ReferenceAgent,
        reference_agent,
    )
    from evalrunner.boundary.conformance import ConversationMonitor
    from evalrunner.boundary.observer import Observer, RecordingObserver
    from evalrunner.boundary.provider import ModelProvider, ReplayProvider
    from evalrunner.boundary.tools import EchoTool, Tool, dispatch
    from evalrunner.config import Config, ConfigError, load_config
    from evalrunner.execution import RunSettings
    from evalrunner.expectations import KINDS, grade
    from evalrunner.fixture.admit import Admission, admit, admit_suite
    from evalrunner.fixture.load import (
        LoadedSuite,
        RawDocument,
        load_document,
        load_paths,
        load_suite,
    )
    from evalrunner.model import (
        AdmissionError,
        Case,
        CaseReport,
        Expectations,
        GradeResult,
        Message,
        ModelRequest,
        ModelResponse,
        PayloadNeedle,
        RunError,
        RunRecord,
        RunRefused,
        SuiteReport,
        TextResponse,
        ToolCall,
        ToolCallRecord,
        ToolCallsResponse,
        ToolSpec,
        Turn,
    )
    from evalrunner.plugins import PluginError, configured_agent
    from evalrunner.replay import run_case
    from evalrunner.report import exit_code, render_github, render_json, render_junit, render_table
    from evalrunner.session import case_verdict, evaluate_case, run_suite, settings_from_config
    from evalrunner.wire.endpoint import ReplayEndpoint

__version__ = "0.1.0"

__all__ = [
    "KINDS",
    "Admission",
    "AdmissionError",
    "Agent",
    "AgentContext",
    "AgentFactory",
    "Case",
    "CaseReport",
    "Config",
    "ConfigError",
    "ConversationMonitor",
    "EchoTool",
    "Expectations",
    "GradeResult",
    "LoadedSuite",
    "Message",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "Observer",
    "PayloadNeedle",
    "PluginError",
    "RawDocument",
    "RecordingObserver",
    "ReferenceAgent",
    "ReplayEndpoint",
    "ReplayProvider",
    "RunError",
    "RunRecord",
    "RunRefused",
    "RunSettings",
    "SuiteReport",
    "TextResponse",
    "Tool",
    "ToolCall",
    "ToolCallRecord",
    "ToolCallsResponse",
    "ToolSpec",
    "Turn",
    "__version__",
    "admit",
    "admit_suite",
    "case_verdict",
    "command_agent_factory",
    "configured_agent",
    "dispatch",
    "evaluate_case",
    "exit_code",
    "grade",
    "load_config",
    "load_document",
    "load_paths",
    "load_suite",
    "reference_agent",
    "render_github",
    "render_json",
    "render_junit",
    "render_table",
    "run_case",
    "run_suite",
    "settings_from_config",
]

_EXPORTS: dict[str, str] = {
    "Admission": "evalrunner.fixture.admit",
    "AdmissionError": "evalrunner.model",
    "Agent": "evalrunner.agents.reference",
    "AgentContext": "evalrunner.agents.reference",
    "AgentFactory": "evalrunner.agents.reference",
    "Case": "evalrunner.model",
    "CaseReport": "evalrunner.model",
    "Config": "evalrunner.config",
    "ConfigError": "evalrunner.config",
    "ConversationMonitor": "evalrunner.boundary.conformance",
    "EchoTool": "evalrunner.boundary.tools",
    "Expectations": "evalrunner.model",
    "GradeResult": "evalrunner.model",
    "KINDS": "evalrunner.expectations",
    "LoadedSuite": "evalrunner.fixture.load",
    "Message": "evalrunner.model",
    "ModelProvider": "evalrunner.boundary.provider",
    "ModelRequest": "evalrunner.model",
    "ModelResponse": "evalrunner.model",
    "Observer": "evalrunner.boundary.observer",
    "PayloadNeedle": "evalrunner.model",
    "PluginError": "evalrunner.plugins",
    "RawDocument": "evalrunner.fixture.load",
    "RecordingObserver": "evalrunner.boundary.observer",
    "ReferenceAgent": "evalrunner.agents.reference",
    "ReplayEndpoint": "evalrunner.wire.endpoint",
    "ReplayProvider": "evalrunner.boundary.provider",
    "RunError": "evalrunner.model",
    "RunRecord": "evalrunner.model",
    "RunRefused": "evalrunner.model",
    "RunSettings": "evalrunner.execution",
    "SuiteReport": "evalrunner.model",
    "TextResponse": "evalrunner.model",
    "Tool": "evalrunner.boundary.tools",
    "ToolCall": "evalrunner.model",
    "ToolCallRecord": "evalrunner.model",
    "ToolCallsResponse": "evalrunner.model",
    "ToolSpec": "evalrunner.model",
    "Turn": "evalrunner.model",
    "admit": "evalrunner.fixture.admit",
    "admit_suite": "evalrunner.fixture.admit",
    "case_verdict": "evalrunner.session",
    "command_agent_factory": "evalrunner.agents.command",
    "configured_agent": "evalrunner.plugins",
    "dispatch": "evalrunner.boundary.tools",
    "evaluate_case": "evalrunner.session",
    "exit_code": "evalrunner.report",
    "grade": "evalrunner.expectations",
    "load_config": "evalrunner.config",
    "load_document": "evalrunner.fixture.load",
    "load_paths": "evalrunner.fixture.load",
    "load_suite": "evalrunner.fixture.load",
    "reference_agent": "evalrunner.agents.reference",
    "render_github": "evalrunner.report",
    "render_json": "evalrunner.report",
    "render_junit": "evalrunner.report",
    "render_table": "evalrunner.report",
    "run_case": "evalrunner.replay",
    "run_suite": "evalrunner.session",
    "settings_from_config": "evalrunner.session",
}
"""Where each public name lives. Imported on first use, so that ``evalrunner --version`` and
an agent command built on :mod:`evalrunner.mutation.mutants` do not pay for schemas, YAML and
HTTP."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evalrunner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
