"""A stand-in for a real model API, for live-mode tests: a loopback HTTP server (127.0.0.1, a
free port) that answers each POST with the next of a list of scripted replies, and records
every request it got (path, headers, body).

Replies are written by the wire modules' own server side (``response_body``,
``stream_events``) or given raw (an error status, malformed JSON, a stream cut short, a hang).
The server stops by itself: a hang waits at most :data:`HANG_LIMIT_SECS`, and the server shuts
down after :data:`LIFETIME_SECS` even if a test forgets to close it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from evalrunner.model import ModelResponse
from evalrunner.wire.anthropic import AnthropicMessages
from evalrunner.wire.openai_chat import OpenAIChat
from evalrunner.wire.openai_responses import OpenAIResponses

HANG_LIMIT_SECS = 10.0
LIFETIME_SECS = 120.0
WIRES = {
    "openai": OpenAIChat(),
    "openai-responses": OpenAIResponses(),
    "anthropic": AnthropicMessages(),
}


@dataclass(frozen=True)
class Reply:
    """One scripted answer. ``response`` is encoded in the request's wire (as a stream when
    the request asks for one); otherwise ``status``, ``headers`` and ``raw`` are sent as they
    are. ``hang`` holds the answer back until the server closes."""

    response: ModelResponse | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes = b""
    hang: bool = False
    trickle: bool = False
    """Send a keep-alive comment line every few milliseconds, and never the answer."""
    trickle_line: bool = False
    """Send one line that never ends, a byte every few milliseconds."""
    trickle_head: bool = False
    """Keep the connection open (HTTP/1.1 keep-alive) and send the status line and one header
    line that never ends, a byte every few milliseconds."""
    trickle_body: bool = False
    """Send the headers of a JSON body at once (keep-alive), then the body a byte every few
    milliseconds, never all of it."""


@dataclass(frozen=True)
class Seen:
    """One request the server received."""

    path: str
    headers: dict[str, str]
    body: Any
    peer: Any = None
    """The client's address (host, port): two requests with one peer came on one connection."""


class ModelServer:
    """Serves ``replies`` in order to requests on ``wire``'s path (see the module docstring)."""

    def __init__(self, wire: str, replies: Sequence[Reply], *, gate: int = 0) -> None:
        self.wire = wire
        self._replies = list(replies)
        # The first `gate` requests are each held until all of them have arrived: a test of
        # concurrent cases passes only if that many requests are in flight at once.
        self._gate = threading.Barrier(gate) if gate > 1 else None
        self._gated = gate
        self.seen: list[Seen] = []
        self.given_up = threading.Event()
        """Set when the client cut a trickled answer off (before the server's own limit)."""
        self._lock = threading.Lock()
        self._closed = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                headers = {k.lower(): v for k, v in self.headers.items()}
                with server._lock:
                    server.seen.append(Seen(self.path, headers, body, self.client_address))
                    number = len(server.seen)
                    reply = server._replies.pop(0) if server._replies else Reply(status=599)
                if server._gate is not None and number <= server._gated:
                    try:
                        server._gate.wait(HANG_LIMIT_SECS)
                    except threading.BrokenBarrierError:
                        reply = Reply(status=599)
                server._answer(self, reply, body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._http.daemon_threads = True
        self._thread = threading.Thread(
            target=self._http.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        self._timer = threading.Timer(LIFETIME_SECS, self.close)
        self._timer.daemon = True
        self._timer.start()

    @property
    def base_url(self) -> str:
        """The base URL in the wire's SDK convention (OpenAI's includes ``/v1``)."""
        root = f"http://127.0.0.1:{self._http.server_address[1]}"
        return root + "/v1" if self.wire.startswith("openai") else root

    def close(self) -> None:
        """Release any hung answer and stop serving."""
        self._closed.set()
        self._timer.cancel()
        self._http.shutdown()
        self._http.server_close()

    def __enter__(self) -> ModelServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply, body: Any) -> None:
        if reply.hang:
            self._closed.wait(HANG_LIMIT_SECS)
            handler.close_connection = True
            return
        if reply.trickle_head or reply.trickle_body:
            events = isinstance(body, dict) and bool(body.get("stream"))
            self._trickle_kept_alive(handler, head=reply.trickle_head, events=events)
            return
        if reply.trickle or reply.trickle_line:
            events = isinstance(body, dict) and bool(body.get("stream"))
            handler.send_response(200)
            handler.send_header("Content-Type", "text/event-stream" if events else "text/plain")
            handler.send_header("Connection", "close")
            handler.end_headers()
            handler.close_connection = True
            for _ in range(int(HANG_LIMIT_SECS / 0.005)):
                if self._closed.wait(0.005):
                    return
                try:
                    handler.wfile.write(b"x" if reply.trickle_line else b": ping\n")
                    handler.wfile.flush()
                except OSError:  # the client gave up
                    self.given_up.set()
                    return
            return
        if reply.response is None:
            self._send(handler, reply.status, reply.headers, reply.raw)
            return
        wire = WIRES[self.wire]
        if isinstance(body, dict) and body.get("stream"):
            frames = wire.stream_events(
                reply.response, response_id="r1", model="m", usage=True
            )
            # Sized, so that the connection stays open for the next request (keep-alive).
            self._send(
                handler, 200, {"Content-Type": "text/event-stream"}, "".join(frames).encode()
            )
            return
        data = json.dumps(wire.response_body(reply.response, response_id="r1", model="m"))
        self._send(handler, 200, {"Content-Type": "application/json"}, data.encode("utf-8"))

    def _trickle_kept_alive(
        self, handler: BaseHTTPRequestHandler, *, head: bool, events: bool
    ) -> None:
        kind = b"text/event-stream" if events else b"application/json"
        if head:
            opening = b"HTTP/1.1 200 OK\r\nX-Slow: "
        else:
            opening = (
                b"HTTP/1.1 200 OK\r\nContent-Type: " + kind + b"\r\n"
                b"Content-Length: 1000000\r\n\r\n"
            )
        try:
            handler.wfile.write(opening)
            handler.wfile.flush()
        except OSError:
            self.given_up.set()
            return
        for _ in range(int(HANG_LIMIT_SECS / 0.005)):
            if self._closed.wait(0.005):
                return
            try:
                handler.wfile.write(b"x" if head else b" ")
                handler.wfile.flush()
            except OSError:  # the client gave up
                self.given_up.set()
                return
        handler.close_connection = True

    @staticmethod
    def _send(
        handler: BaseHTTPRequestHandler, status: int, headers: dict[str, str], raw: bytes
    ) -> None:
        handler.send_response(status)
        for name, value in headers.items():
            handler.send_header(name, value)
        handler.send_header("Content-Length", str(len(raw)))
        handler.end_headers()
        handler.wfile.write(raw)


def cut_stream(wire: str, response: ModelResponse, keep: int) -> bytes:
    """The first ``keep`` frames of ``response``'s stream: a stream that breaks off."""
    frames = WIRES[wire].stream_events(response, response_id="r1", model="m", usage=True)
    return "".join(frames[:keep]).encode("utf-8")
