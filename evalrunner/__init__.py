"""evalrunner: CI tests for LLM agent machinery.

Fixtures script what the model says; evalrunner replays them through a real agent loop, records
what crossed the tool boundary, and grades the run against declarative expectations. The
pipeline is ``load → admit → replay → grade → report``, one module each.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evalrunner.admit import Admission, admit, admit_suite
    from evalrunner.agent import Agent, AgentContext, AgentFactory, ReferenceAgent, reference_agent
    from evalrunner.command_agent import command_agent_factory
    from evalrunner.config import Config, ConfigError, load_config
    from evalrunner.conformance import ConversationMonitor
    from evalrunner.execution import RunSettings
    from evalrunner.grade import KINDS, grade
    from evalrunner.load import LoadedSuite, RawDocument, load_document, load_paths, load_suite
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
    from evalrunner.observer import Observer, RecordingObserver
    from evalrunner.plugins import PluginError, configured_agent
    from evalrunner.provider import ModelProvider, ReplayProvider
    from evalrunner.replay import run_case
    from evalrunner.report import exit_code, render_json, render_table
    from evalrunner.session import case_verdict, evaluate_case, run_suite, settings_from_config
    from evalrunner.tools import EchoTool, Tool, dispatch
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
    "render_json",
    "render_table",
    "run_case",
    "run_suite",
    "settings_from_config",
]

_EXPORTS: dict[str, str] = {
    "Admission": "evalrunner.admit",
    "AdmissionError": "evalrunner.model",
    "Agent": "evalrunner.agent",
    "AgentContext": "evalrunner.agent",
    "AgentFactory": "evalrunner.agent",
    "Case": "evalrunner.model",
    "CaseReport": "evalrunner.model",
    "Config": "evalrunner.config",
    "ConfigError": "evalrunner.config",
    "ConversationMonitor": "evalrunner.conformance",
    "EchoTool": "evalrunner.tools",
    "Expectations": "evalrunner.model",
    "GradeResult": "evalrunner.model",
    "KINDS": "evalrunner.grade",
    "LoadedSuite": "evalrunner.load",
    "Message": "evalrunner.model",
    "ModelProvider": "evalrunner.provider",
    "ModelRequest": "evalrunner.model",
    "ModelResponse": "evalrunner.model",
    "Observer": "evalrunner.observer",
    "PayloadNeedle": "evalrunner.model",
    "PluginError": "evalrunner.plugins",
    "RawDocument": "evalrunner.load",
    "RecordingObserver": "evalrunner.observer",
    "ReferenceAgent": "evalrunner.agent",
    "ReplayEndpoint": "evalrunner.wire.endpoint",
    "ReplayProvider": "evalrunner.provider",
    "RunError": "evalrunner.model",
    "RunRecord": "evalrunner.model",
    "RunRefused": "evalrunner.model",
    "RunSettings": "evalrunner.execution",
    "SuiteReport": "evalrunner.model",
    "TextResponse": "evalrunner.model",
    "Tool": "evalrunner.tools",
    "ToolCall": "evalrunner.model",
    "ToolCallRecord": "evalrunner.model",
    "ToolCallsResponse": "evalrunner.model",
    "ToolSpec": "evalrunner.model",
    "Turn": "evalrunner.model",
    "admit": "evalrunner.admit",
    "admit_suite": "evalrunner.admit",
    "case_verdict": "evalrunner.session",
    "command_agent_factory": "evalrunner.command_agent",
    "configured_agent": "evalrunner.plugins",
    "dispatch": "evalrunner.tools",
    "evaluate_case": "evalrunner.session",
    "exit_code": "evalrunner.report",
    "grade": "evalrunner.grade",
    "load_config": "evalrunner.config",
    "load_document": "evalrunner.load",
    "load_paths": "evalrunner.load",
    "load_suite": "evalrunner.load",
    "reference_agent": "evalrunner.agent",
    "render_json": "evalrunner.report",
    "render_table": "evalrunner.report",
    "run_case": "evalrunner.replay",
    "run_suite": "evalrunner.session",
    "settings_from_config": "evalrunner.session",
}
"""Where each public name lives. Imported on first use, so that ``evalrunner --version`` and
an agent command built on :mod:`evalrunner.mutants` do not pay for schemas, YAML and HTTP."""


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'evalrunner' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
