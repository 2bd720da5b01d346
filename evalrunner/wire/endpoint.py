"""The replay endpoint: a case's script served over HTTP, so agents in any language can be replayed.

A loopback server (127.0.0.1 only, a free port by default) that speaks OpenAI chat completions
(``POST /v1/chat/completions``), the OpenAI Responses API (``POST /v1/responses``) and
Anthropic messages (``POST /v1/messages``), streaming or not. It only translates: each request
is decoded into a neutral :class:`~evalrunner.model.ModelRequest` and handed to the case's
:class:`~evalrunner.boundary.conformance.ConversationMonitor`, which checks it against the run so
far
and answers it from the script (the same per-turn queues, run errors, ids and argument text as
in-process) or, in live mode, from the live model it forwards the request to. The monitor
keeps every request and the evidence: results fed back, with Anthropic's ``is_error`` as their
failure flag (the OpenAI wires have none).

The one state the endpoint keeps itself is what the Responses API keeps server-side: the
conversation of each response it served in the current case, so that a request naming one in
``previous_response_id`` is read as that conversation followed by its own input (and the
monitor checks the whole). Response ids are numbered over the endpoint's life, so an id from
a finished case (a persistent agent's) never names a response of the current one; such an id,
an id never served, or one served with ``store: false`` is refused (400) with what to send
instead.

A run error (script exhausted or left over, a conformance violation, a request the endpoint
cannot read, ...) is kept by the monitor (the first one) and answered with the API's error
body, status 500 (400 for an unreadable request, 404 for a POST to an unknown path) and
``x-should-retry: false`` so that SDKs do not retry. Once the run has failed, every later model
request is refused with the same error: the script is not served past a failure.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import selectors
import socket
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from email.message import Message as HeaderFields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Final, cast
from urllib.parse import urlsplit

from evalrunner.boundary.conformance import ConversationMonitor
from evalrunner.model import (
    JSONValue,
    Message,
    ModelRequest,
    ModelResponse,
    RunError,
    TextResponse,
    ToolCall,
)
from evalrunner.text import json_reason
from evalrunner.wire.anthropic import AnthropicMessages
from evalrunner.wire.common import WireAPI, WireRequest, WireRequestError, wire_json
from evalrunner.wire.openai_chat import OpenAIChat
from evalrunner.wire.openai_responses import OpenAIResponses

LOOPBACK: Final = "127.0.0.1"
"""The only address the endpoint binds to: a replayed agent runs on the same machine."""

MAX_BODY_BYTES: Final = 32 * 1024 * 1024
"""Request bodies larger than this are refused (413) before they are read."""

DUMMY_API_KEY: Final = "evalrunner-replay-no-key-needed"
"""The API key an agent is given: SDKs insist on one; the endpoint ignores it."""

DEFAULT_MODEL: Final = "evalrunner-replay"
"""The model name a response carries when the request named none."""

MAX_STRAYS: Final = 16
"""How many refusals made while no case is attached are kept (see ReplayEndpoint.detach)."""

NO_CASE: Final = (
    "no case is running: the agent had ended its case, so this request can only come from a "
    "finished case"
)
"""Why a model request is refused between the cases of a persistent agent command."""

ROUTES: Final[dict[str, WireAPI]] = {
    "/v1/chat/completions": OpenAIChat(),
    "/v1/responses": OpenAIResponses(),
    "/v1/messages": AnthropicMessages(),
}
"""Request path → the API spoken there."""


@dataclass(frozen=True, slots=True)
class Exchange:
    """One HTTP request the endpoint answered, for logs: what was asked and what was served.

    ``api`` is ``None`` for a path the endpoint does not serve; ``summary`` says what was
    served (``tool_calls: ...`` or ``text: ...``) or why the request was refused.
    """

    method: str
    path: str
    status: int
    summary: str
    api: str | None = None
    stream: bool = False


@dataclass(frozen=True, slots=True)
class _Reply:
    """An answer ready to be written: a JSON body, or event frames for a stream."""

    status: int
    summary: str
    body: JSONValue = None
    events: tuple[str, ...] | None = None
    stream: bool = False


class ReplayEndpoint:
    """Serves one case's script over HTTP to an agent (see the module docstring).

    Every decoded request goes to the case's :class:`ConversationMonitor`, which checks it,
    answers it from the script and keeps the evidence; the endpoint only translates between
    the wire formats and the neutral values. The runner brackets turns on the monitor. With
    ``infer_turns`` (``evalrunner serve``) the endpoint does it instead: a request whose last
    message is a new user message ends the current turn (leftover responses are a run error)
    and begins the next.

    Usable as a context manager (started on entry, closed on exit). ``on_exchange``, if
    given, is called from the serving thread after each HTTP request has been answered; it
    must not call :meth:`close`.
    """

    def __init__(
        self,
        monitor: ConversationMonitor,
        *,
        infer_turns: bool = False,
        host: str = LOOPBACK,
        port: int = 0,
        on_exchange: Callable[[Exchange], None] | None = None,
    ) -> None:
        if host != LOOPBACK:
            raise ValueError(f"the replay endpoint binds to {LOOPBACK} only, not {host!r}")
        self._monitor: ConversationMonitor | None = monitor
        self._strays: list[str] = []  # refusals while no case was attached
        # A case attached to begin once its condition holds (see attach).
        self._waiting: tuple[ConversationMonitor, Callable[[], bool]] | None = None
        self._infer_turns = infer_turns
        self._host = host
        self._port = port
        self._on_exchange = on_exchange
        self._lock = threading.Lock()  # one model request at a time: the script is a sequence
        self._turn = -1  # the turn begun by inference; -1 before the first
        self._served = 0  # responses served over the endpoint's life: numbers response ids
        # Responses API state, for the case attached: response id -> its conversation (None
        # for a response served with store false, which cannot be continued).
        self._conversations: dict[str, tuple[Message, ...] | None] = {}
        self._server: _LoopbackServer | None = None
        self._thread: threading.Thread | None = None
        self._wake: socket.socket | None = None
        self._closed = False
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Bind to 127.0.0.1 and serve in a daemon thread. An endpoint starts once."""
        if self._server is not None or self._closed:
            raise RuntimeError("a replay endpoint can be started once only")
        server = _LoopbackServer((self._host, self._port), _Handler)
        server.endpoint = self
        self._server = server
        self._wake, wake = socket.socketpair()
        self._thread = threading.Thread(
            target=server.serve_until_woken,
            args=(wake,),
            name=f"evalrunner replay endpoint :{server.server_address[1]}",
            daemon=True,
        )
        self._thread.start()

    def close(self) -> None:
        """Stop serving and release the port; connections still open are cut. Idempotent."""
        if self._closed:
            return
        self._closed = True
        server, thread, wake = self._server, self._thread, self._wake
        if server is None or thread is None or wake is None:
            return
        wake.send(b"\0")
        thread.join()
        wake.close()
        with self._connections_lock:
            open_connections = list(self._connections)
        for connection in open_connections:
            # A client holding a connection open must not keep a serving thread alive.
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        server.server_close()  # also joins the threads that were answering requests

    def __enter__(self) -> ReplayEndpoint:
        if self._server is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        """The port bound (after :meth:`start`)."""
        if self._server is None:
            raise RuntimeError("the replay endpoint has not been started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``: what ``ANTHROPIC_BASE_URL`` is set to."""
        return f"http://{self._host}:{self.port}"

    @property
    def openai_base_url(self) -> str:
        """``base_url`` + ``/v1``: what ``OPENAI_BASE_URL`` is set to."""
        return self.base_url + "/v1"

    def agent_environment(self) -> dict[str, str]:
        """The environment variables that point the OpenAI and Anthropic SDKs (and most
        agents built on them) at this endpoint, with dummy keys."""
        return {
            "OPENAI_BASE_URL": self.openai_base_url,
            "OPENAI_API_KEY": DUMMY_API_KEY,
            "ANTHROPIC_BASE_URL": self.base_url,
            "ANTHROPIC_API_KEY": DUMMY_API_KEY,
        }

    # --- one endpoint for many cases (a persistent agent command) ---------------------------

    def attach(
        self, monitor: ConversationMonitor, *, when: Callable[[], bool] | None = None
    ) -> tuple[str, ...]:
        """Serve ``monitor``'s case from now on; with ``when``, from the first request that
        arrives once ``when()`` is true (until then a request is refused as one arriving
        while no case is attached). Returns why each model request that arrived while no
        case was attached (see :meth:`detach`) was refused, and forgets them."""
        with self._lock:
            self._monitor, self._waiting = (None, (monitor, when)) if when else (monitor, None)
            self._conversations = {}  # a new case continues none of the last one's responses
            strays, self._strays = tuple(self._strays), []
            return strays

    def take_strays(self) -> tuple[str, ...]:
        """Why each model request refused while no case was attached was refused; they
        are forgotten."""
        with self._lock:
            strays, self._strays = tuple(self._strays), []
            return strays

    def detach(self) -> None:
        """Serve no case until the next :meth:`attach`: between the cases of a persistent
        agent, a model request can only be a leak from a finished case; it is refused and
        kept (see :meth:`attach`), the address staying the same for the next case."""
        with self._lock:
            self._monitor = self._waiting = None
            self._conversations = {}

    def _current(self) -> ConversationMonitor | None:
        """The case served now (called under the lock): one attached with ``when`` begins
        with the first request that finds ``when()`` true."""
        if self._waiting is not None and self._waiting[1]():
            self._monitor, self._waiting = self._waiting[0], None
        return self._monitor

    # --- what the runner reads ---------------------------------------------------------------

    @property
    def error(self) -> str | None:
        """The case's first run error (the monitor's, sticky), or ``None``."""
        monitor = self._monitor
        return monitor.error if monitor is not None else None

    @property
    def requests(self) -> tuple[ModelRequest, ...]:
        """Every model request received and decoded, in order, as neutral requests."""
        monitor = self._monitor
        return monitor.requests if monitor is not None else ()

    def unresolved_calls(self) -> list[ToolCall]:
        """Tool calls handed to the agent whose result has not come back (yet)."""
        monitor = self._monitor
        return list(monitor.pending_calls) if monitor is not None else []

    @property
    def responses_served(self) -> int:
        """How many scripted responses have been sent to the agent."""
        monitor = self._monitor
        return monitor.responses_served if monitor is not None else 0

    # --- answering requests (called from the serving threads) ----------------------------------

    def _answer(self, wire: WireAPI, raw: bytes) -> _Reply:
        with self._lock:
            if self._current() is None:
                return self._fail(wire, 500, NO_CASE)
            if self.error is not None:
                return self._refuse(wire, 500, f"the run has already failed: {self.error}")
            try:
                return self._answer_model_request(wire, raw)
            except Exception as exc:  # a bug here must fail the case, not leave the agent hanging
                message = f"the replay endpoint failed: {type(exc).__name__}: {exc}"
                return self._fail(wire, 500, message)

    def _answer_model_request(self, wire: WireAPI, raw: bytes) -> _Reply:
        try:
            body = json.loads(raw.decode("utf-8"))
        except json.JSONDecodeError as exc:
            return self._fail(wire, 400, f"the request body is not JSON: {json_reason(exc)}")
        except (UnicodeDecodeError, RecursionError) as exc:
            reason = str(exc) or type(exc).__name__
            return self._fail(wire, 400, f"the request body is not JSON: {reason}")
        except ValueError as exc:  # e.g. an integer of more digits than Python converts
            return self._fail(wire, 400, f"the request body cannot be read: {exc}")
        try:
            incoming = wire.read_request(body)
        except WireRequestError as exc:
            return self._fail(wire, 400, f"not a valid {wire.name} request: {exc}")
        except RecursionError:
            return self._fail(wire, 400, f"not a valid {wire.name} request: nested too deeply")
        stream = incoming.request.stream
        request = self._continued(incoming)
        if isinstance(request, str):
            return self._fail(wire, 400, f"not a valid {wire.name} request: {request}")
        monitor = self._monitor
        assert monitor is not None  # checked by _answer, under the same lock
        try:
            if self._infer_turns and incoming.user_text is not None:
                self._next_turn(monitor)
            response = monitor.complete(request, unservable=wire.unservable)
        except RunError as exc:
            return self._fail(wire, 500, str(exc), stream=stream)
        self._served += 1
        response_id = wire.response_id(self._served)
        if wire.continues_responses:
            self._conversations[response_id] = (
                _conversation_after(request, response) if incoming.store else None
            )
        model = request.model or DEFAULT_MODEL
        if stream:
            events = wire.stream_events(
                response, response_id=response_id, model=model, usage=incoming.stream_usage
            )
            return _Reply(200, _summary(response), events=tuple(events), stream=True)
        body = wire.response_body(response, response_id=response_id, model=model)
        return _Reply(200, _summary(response), body=body)

    def _continued(self, incoming: WireRequest) -> ModelRequest | str:
        """The request with the conversation of the response it continues put before its
        own messages (after its system prompt, which is never carried over); or why the
        response it names cannot be continued."""
        request = incoming.request
        previous = incoming.previous_response_id
        if previous is None:
            return request
        if previous not in self._conversations:
            served = list(self._conversations)  # in the order served
            known = (
                "it has served none yet in this case"
                if not served
                else "it has served "
                + ", ".join(json.dumps(i) for i in served[-5:])
                + (" (latest ones)" if len(served) > 5 else "")
            )
            return (
                f"previous_response_id {json.dumps(previous[:80])} names no response the replay "
                f"endpoint served in this case ({known}); continue one of this case's "
                "responses, or send the whole conversation in input without "
                "previous_response_id"
            )
        history = self._conversations[previous]
        if history is None:
            return (
                f"previous_response_id {json.dumps(previous)} names a response requested with "
                "store: false, which is not kept (the real API would not find it either); "
                "leave store out (or true) to continue it, or send the whole conversation in "
                "input"
            )
        own = request.messages
        lead = 0
        while lead < len(own) and own[lead].role == "system":
            lead += 1
        return replace(request, messages=own[:lead] + history + own[lead:])

    def _next_turn(self, monitor: ConversationMonitor) -> None:
        if self._turn >= 0:
            monitor.end_turn(None)
        self._turn += 1
        monitor.begin_turn(self._turn)

    def _fail(self, wire: WireAPI, status: int, message: str, *, stream: bool = False) -> _Reply:
        """A run error: kept by the monitor (the first one stays the case's error) and
        answered. With no case attached, it is kept as a stray instead."""
        self._refused(message)
        return self._refuse(wire, status, message, stream=stream)

    def _refused(self, message: str) -> None:
        monitor = self._current()
        if monitor is not None:
            monitor.refuse(message)
        elif len(self._strays) < MAX_STRAYS:  # a flood of leaks must not grow memory
            self._strays.append(message)

    def _refuse(self, wire: WireAPI, status: int, message: str, *, stream: bool = False) -> _Reply:
        return _Reply(status, message, body=wire.error_body(status, message), stream=stream)

    def _unknown_path(self, method: str, path: str, wire: WireAPI) -> _Reply:
        routes = [f"POST {route}" for route in ROUTES]
        served = ", ".join(routes[:-1]) + " and " + routes[-1]
        message = f"{method} {path} is not served by the replay endpoint (it serves {served})"
        if path.rstrip("/") in ("/chat/completions", "/responses"):
            message += "; OPENAI_BASE_URL must end in /v1"
        if method != "POST":
            return self._refuse(wire, 404, message)
        with self._lock:
            # A POST elsewhere asks for a model response the script cannot give (another API,
            # or a base URL set wrong): the case cannot be replayed faithfully.
            return self._fail(wire, 404, message)

    def _refuse_unread(self, wire: WireAPI, status: int, message: str) -> _Reply:
        with self._lock:
            return self._fail(wire, status, message)

    def _report(self, exchange: Exchange) -> None:
        if self._on_exchange is not None:
            self._on_exchange(exchange)

    def _connection_opened(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.add(connection)

    def _connection_closed(self, connection: socket.socket) -> None:
        with self._connections_lock:
            self._connections.discard(connection)


@dataclass(frozen=True, slots=True)
class _Unread:
    """Why a request body was not read: answered with ``status``. ``sticky`` refusals fail
    the case (the agent sent a request it should not have); a body cut short does not, since
    it is what closing the connections at the end of a case looks like."""

    status: int
    message: str
    sticky: bool = True


_DIGITS = re.compile(r"[0-9]{1,15}")
_HEX = re.compile(rb"[0-9A-Fa-f]{1,15}")


def _truncated(received: int, expected: int | None) -> _Unread:
    of = f" of {expected}" if expected is not None else ""
    return _Unread(400, f"the request body ended after {received}{of} bytes", sticky=False)


def _conversation_after(request: ModelRequest, response: ModelResponse) -> tuple[Message, ...]:
    """The conversation a served response ends: the request's (system prompts left out, as
    the Responses API does not carry instructions over) and the response's output."""
    if isinstance(response, TextResponse):
        answer = Message("assistant", response.content)
    else:
        answer = Message("assistant", "", tool_calls=response.tool_calls)
    return (*(m for m in request.messages if m.role != "system"), answer)


def _summary(response: ModelResponse) -> str:
    if isinstance(response, TextResponse):
        shown = response.content if len(response.content) <= 60 else response.content[:57] + "..."
        return "text: " + json.dumps(shown, ensure_ascii=False)
    return "tool_calls: " + ", ".join(f"{call.id} {call.name}" for call in response.tool_calls)


def _guess_api(path: str, headers: HeaderFields) -> WireAPI:
    """Which API's error shape fits a request to a path the endpoint does not serve."""
    anthropic = path.startswith("/v1/messages") or headers.get("anthropic-version") is not None
    return ROUTES["/v1/messages" if anthropic else "/v1/chat/completions"]


class _LoopbackServer(ThreadingHTTPServer):
    """The HTTP server, pointing back at its endpoint."""

    # Serving threads are joined on close (daemon_threads False, block_on_close True): none
    # outlives the endpoint.
    daemon_threads = False
    block_on_close = True
    endpoint: ReplayEndpoint

    def serve_until_woken(self, wake: socket.socket) -> None:
        """Accept connections until ``wake`` becomes readable (its peer writes or closes).

        Used instead of ``serve_forever``, which notices a shutdown only at its next poll:
        close() takes effect at once, which counts when every case starts its own endpoint.
        """
        with selectors.DefaultSelector() as selector, wake:
            selector.register(self, selectors.EVENT_READ)
            selector.register(wake, selectors.EVENT_READ)
            while True:
                ready = [key.fileobj for key, _ in selector.select()]
                if wake in ready:
                    return
                self.handle_request()  # the listening socket is readable: accept and hand off

    def process_request(self, request: Any, client_address: Any) -> None:
        # Registered here, in the serving loop, before the connection's thread starts: once
        # shutdown() has returned, every accepted connection is known to close().
        self.endpoint._connection_opened(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        self.endpoint._connection_closed(request)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A bug while serving must fail the case with a message, not print a traceback.
        error = sys.exc_info()[1]
        if error is not None and not isinstance(error, OSError):
            with self.endpoint._lock:
                self.endpoint._refused(
                    f"the replay endpoint failed: {type(error).__name__}: {error}"
                )


class _EndAware:
    """A connection's input that notes when a line was cut by the end of the stream.

    The standard library reads a request's header lines until a blank line *or* the end of
    the stream, so a request cut inside its headers (a connection closed as the endpoint
    shuts down) would otherwise pass for a whole request without a body.
    """

    def __init__(self, raw: io.BufferedIOBase) -> None:
        self._raw = raw
        self.cut = False

    def readline(self, limit: int = -1) -> bytes:
        line = self._raw.readline(limit)
        if not line.endswith(b"\n") and (limit < 0 or len(line) < limit):
            self.cut = True
        return line

    def read(self, size: int = -1) -> bytes:
        return self._raw.read(size)

    def close(self) -> None:
        self._raw.close()


class _Handler(BaseHTTPRequestHandler):
    """One connection. Every response closes it: a client's idle keep-alive connection would
    otherwise hold a serving thread until the client lets go."""

    protocol_version = "HTTP/1.1"
    server_version = "evalrunner-replay"

    def setup(self) -> None:
        super().setup()
        self._input = _EndAware(self.rfile)
        self.rfile = cast(io.BufferedIOBase, self._input)

    @property
    def _endpoint(self) -> ReplayEndpoint:
        return cast(_LoopbackServer, self.server).endpoint

    def do_POST(self) -> None:
        self.close_connection = True
        path = urlsplit(self.path).path
        wire = ROUTES.get(path)
        if wire is None:
            reply = self._endpoint._unknown_path("POST", path, _guess_api(path, self.headers))
        else:
            raw: bytes | _Unread
            if self._input.cut:  # its headers never ended: no request, whatever was parsed
                raw = _Unread(400, "the request ended inside its headers", sticky=False)
            else:
                raw = self._read_body()
            if isinstance(raw, bytes):
                reply = self._endpoint._answer(wire, raw)
            elif raw.sticky:
                reply = self._endpoint._refuse_unread(wire, raw.status, raw.message)
            else:
                reply = self._endpoint._refuse(wire, raw.status, raw.message)
        self._send(reply)
        api = wire.name if wire is not None else None
        exchange = Exchange("POST", path, reply.status, reply.summary, api, reply.stream)
        self._endpoint._report(exchange)

    def _other_method(self) -> None:
        self.close_connection = True
        path = urlsplit(self.path).path
        wire = ROUTES.get(path)
        if wire is not None:
            message = f"{self.command} {path}: only POST is served here"
            reply = self._endpoint._refuse(wire, 405, message)
        else:
            reply = self._endpoint._unknown_path(self.command, path, _guess_api(path, self.headers))
        self._send(reply)
        self._endpoint._report(Exchange(self.command, path, reply.status, reply.summary))

    do_GET = _other_method
    do_PUT = _other_method
    do_DELETE = _other_method
    do_PATCH = _other_method

    def _read_body(self) -> bytes | _Unread:
        """The request body, or why it is refused. The size cap holds on every framing."""
        encoding = self.headers.get("Transfer-Encoding")
        length = self.headers.get("Content-Length")
        if encoding is not None:
            if length is not None:
                return _Unread(
                    400, "a request may not have both Transfer-Encoding and Content-Length"
                )
            if encoding.strip().lower() != "chunked":
                return _Unread(
                    400,
                    f"Transfer-Encoding {encoding!r} is not supported; send "
                    "chunked or a Content-Length",
                )
            return self._read_chunked()
        if length is None:
            return b""  # answered as "not JSON"
        if not _DIGITS.fullmatch(length.strip()):
            return _Unread(400, f"Content-Length is not a byte count: {length[:40]!r}")
        size = int(length.strip())
        if size > MAX_BODY_BYTES:
            return _Unread(413, f"the request body ({size} bytes) is over {MAX_BODY_BYTES} bytes")
        data = self.rfile.read(size)
        if len(data) < size:
            return _truncated(len(data), size)
        return data

    def _read_chunked(self) -> bytes | _Unread:
        body = bytearray()
        while True:
            line = self.rfile.readline(1024)
            if not line.endswith(b"\n"):
                if not line or len(line) < 1024:
                    return _truncated(len(body), None)
                return _Unread(400, "malformed chunked request body: a chunk-size line is too long")
            token = line.split(b";", 1)[0].strip()
            if not _HEX.fullmatch(token):
                return _Unread(
                    400, f"malformed chunked request body: chunk size {token[:20]!r} is not hex"
                )
            size = int(token, 16)
            if size == 0:
                trailer = self.rfile.readline(1024)
                for _ in range(64):  # trailer fields: none matter here, and only a few are read
                    if not trailer.strip():
                        return bytes(body)
                    trailer = self.rfile.readline(1024)
                return _Unread(400, "malformed chunked request body: too many trailer fields")
            if len(body) + size > MAX_BODY_BYTES:
                return _Unread(413, f"the request body is over {MAX_BODY_BYTES} bytes")
            chunk = self.rfile.read(size)
            if len(chunk) < size:
                return _truncated(len(body) + len(chunk), None)
            body += chunk
            if self.rfile.readline(8) not in (b"\r\n", b"\n"):
                return _Unread(400, "malformed chunked request body: a chunk does not end in CRLF")

    def _send(self, reply: _Reply) -> None:
        # An agent that hangs up early loses only its answer: what it asked for has been
        # accounted for already.
        with contextlib.suppress(OSError):
            self._write(reply)

    def _write(self, reply: _Reply) -> None:
        self.send_response(reply.status)
        if reply.events is not None:
            self.send_header("Content-Type", "text/event-stream; charset=utf-8")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            for frame in reply.events:
                self.wfile.write(frame.encode("utf-8"))
            return
        data = wire_json(reply.body).encode("utf-8")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        if reply.status >= 400:
            # An error is the run's verdict, not a glitch: retrying cannot change it.
            self.send_header("x-should-retry", "false")
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        """Silent: requests are reported through ``on_exchange`` instead of stderr."""
