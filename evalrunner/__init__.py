"""evalrunner: CI tests for LLM agent machinery.

Fixtures script what the model says; evalrunner replays them through a real agent loop, records
what crossed the tool boundary, and grades the run against declarative expectations. The
pipeline is ``load → admit → replay → grade → report``, one module each.
"""

from evalrunner.admit import Admission, admit, admit_suite
from evalrunner.agent import Agent, AgentContext, AgentFactory, ReferenceAgent, reference_agent
from evalrunner.command_agent import command_agent_factory
from evalrunner.config import Config, ConfigError, load_config
from evalrunner.endpoint import ReplayEndpoint
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
from evalrunner.pipeline import evaluate_case, run_suite
from evalrunner.plugins import PluginError, configured_agent
from evalrunner.provider import ModelProvider, ReplayProvider
from evalrunner.replay import run_case
from evalrunner.report import exit_code, render_json, render_table
from evalrunner.tools import EchoTool, Tool, dispatch

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
]
