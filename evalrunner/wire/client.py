"""A model provider that talks to an OpenAI- or Anthropic-compatible endpoint over HTTP.

The request bodies it writes and the answers it reads (a JSON body, or a server-sent event
stream) are the client side of :mod:`evalrunner.wire.openai_chat`,
:mod:`evalrunner.wire.openai_responses` and :mod:`evalrunner.wire.anthropic`, the same code the
live provider (:mod:`evalrunner.live.provider`) uses. Standard library only, so that an agent
command built on it (the mutants run as command agents, :mod:`evalrunner.mutation.mutants`) starts
fast.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import IO, Protocol

from evalrunner.boundary.provider import ModelProvider
from evalrunner.model import JSONValue, ModelRequest, ModelResponse, RunError
from evalrunner.wire.common import (
    SseEvent,
    WireResponseError,
    body_json,
    parse_sse,
    wire_json,
)

TIMEOUT_SECS = 60.0


class ClientWire(Protocol):
    """The client side of one model API: where requests go, how they are written, and how
    answers are read back."""

    @property
    def name(self) -> str:
        """The API's name (``openai``, ``openai-responses``, ``anthropic``)."""
        ...

    def request_url(self, base_url: str) -> str:
        """The URL a request is POSTed to."""
        ...

    def auth_headers(self, key: str) -> dict[str, str]:
        """The headers that carry ``key`` (and any version header the API needs)."""
        ...

    def request_body(
        self, request: ModelRequest, *, model: str, stream: bool, options: dict[str, JSONValue]
    ) -> dict[str, JSONValue]:
        """``request`` as this API's body."""
        ...

    def read_response(self, body: JSONValue) -> ModelResponse:
        """A JSON body as a response; raises :class:`WireResponseError`."""
        ...

    def read_stream(self, events: Iterator[SseEvent]) -> ModelResponse:
        """A stream as one response; raises :class:`WireResponseError`."""
        ...

    def error_message(self, body: JSONValue) -> str | None:
        """The message of an error body, if ``body`` is one."""
        ...


def client_wire(api: str) -> ClientWire:
    """The client side of ``api``; ``ValueError`` for an API evalrunner does not speak."""
    if api == "openai":
        from evalrunner.wire.openai_chat import OpenAIChat

        return OpenAIChat()
    if api == "openai-responses":
        from evalrunner.wire.openai_responses import OpenAIResponses

        return OpenAIResponses()
    if api == "anthropic":
        from evalrunner.wire.anthropic import AnthropicMessages

        return AnthropicMessages()
    raise ValueError(f"unknown api {api!r}: openai, openai-responses or anthropic")


class WireClient(ModelProvider):
    """A :class:`~evalrunner.boundary.provider.ModelProvider` over HTTP.

    ``api`` is one of :data:`~evalrunner.wire.common.WIRES`; ``base_url`` is what the
    API's SDK takes (``.../v1`` for both OpenAI APIs, the host root for Anthropic). The whole
    conversation is sent with every request (on the Responses API with ``store`` false).
    """

    def __init__(self, api: str, base_url: str, *, stream: bool = False, model: str = "m") -> None:
        self.wire = client_wire(api)
        self.api = api
        self.base_url = base_url.rstrip("/")
        self.stream = stream
        self.model = model

    def complete(self, request: ModelRequest) -> ModelResponse:
        """Send ``request``; an error status or a malformed answer becomes a
        :class:`RunError` with its message."""
        body = self.wire.request_body(request, model=self.model, stream=self.stream, options={})
        headers = {"Content-Type": "application/json", **self.wire.auth_headers("no-key")}
        http = urllib.request.Request(
            self.wire.request_url(self.base_url),
            data=wire_json(body).encode("utf-8"),
            headers=headers,
        )
        try:
            with urllib.request.urlopen(http, timeout=TIMEOUT_SECS) as reply:
                if self.stream:
                    return self.wire.read_stream(parse_sse(_lines(reply)))
                return self.wire.read_response(body_json(reply.read()))
        except urllib.error.HTTPError as exc:
            raise RunError(f"the model endpoint answered {exc.code}: {self._error(exc)}") from None
        except WireResponseError as exc:
            raise RunError(f"the model endpoint's answer is malformed: {exc}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RunError(f"the model endpoint could not be read: {exc}") from None

    def _error(self, exc: urllib.error.HTTPError) -> str:
        try:
            message = self.wire.error_message(body_json(exc.read()))
        except (WireResponseError, OSError):
            message = None
        if message is not None:
            return message
        return exc.reason if isinstance(exc.reason, str) else "error"


def _lines(reply: IO[bytes]) -> Iterator[str]:
    for raw in reply:
        yield raw.decode("utf-8")
