"""The live provider: each model request sent to a real OpenAI- or Anthropic-compatible API.

:class:`LiveModel` is one run's connection to the model (an HTTP client, the concurrency cap,
the token budget); :class:`LiveProvider` is one case's
:class:`~evalrunner.boundary.provider.ModelProvider`
on it, which keeps every exchange (request and response, in order) so that a recorder can turn
a live run into a fixture. Bodies are written and read by the wire modules
(:mod:`evalrunner.wire.openai_chat`, :mod:`evalrunner.wire.anthropic`), the same code the
replay endpoint and the standard-library client use.

HTTP goes through httpx2, imported only here and only when a live run starts (the
``evalrunner[live]`` extra). Retries: an answer 429 or 5xx, a timeout or a dropped connection
is tried again, up to ``max_retries`` times, after ``Retry-After`` when the answer gives one
(seconds or an HTTP date, capped at :data:`MAX_RETRY_AFTER_SECS`), else after an exponential
backoff; any other 4xx is final. An answer every request would get alike (the key refused
with 401, a redirect, a missing key) stops the run (:attr:`LiveModel.halted`): no further
request is sent.

The API key is read from the environment when a request is sent, and put in its header only.
No message this module writes holds it: every error text is built here, from status codes and
the server's own error message, with the key struck out of that message too.
"""

from __future__ import annotations

import contextlib
import email.utils
import math
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from evalrunner.boundary.provider import ModelProvider
from evalrunner.config import LiveConfig
from evalrunner.model import AnswerNotPassed, JSONValue, ModelRequest, ModelResponse, RunError
from evalrunner.redact import shown_url, strike_key, strike_url_secrets
from evalrunner.text import printable
from evalrunner.wire.client import ClientWire, client_wire
from evalrunner.wire.common import (
    ModelFailed,
    WireResponseError,
    body_json,
    parse_sse,
    wire_json,
)
from evalrunner.wire.params import extra_choices, live_options, over_budget, untranslatable

if TYPE_CHECKING:
    import httpx2

MAX_RETRY_AFTER_SECS = 60.0
"""The longest wait a ``Retry-After`` can ask for; a longer one is cut to this."""
BACKOFF_BASE_SECS = 0.5
"""The wait before the first retry without ``Retry-After``; it doubles on each retry."""
BACKOFF_CAP_SECS = 8.0
MAX_ERROR_CHARS = 300
"""How much of a server's error message a run error quotes."""
MAX_LINE_BYTES = 4 * 1024 * 1024
"""The longest line a streamed answer may send; a longer one is a malformed answer (a stream
that never ends its line would otherwise grow in memory until the deadline)."""
MAX_ANSWER_BYTES = 64 * 1024 * 1024
"""The most bytes one answer (a body or a whole stream) may hold."""

RETRIED_FAILURES = frozenset({"server_error"})
"""The error codes of a failed answer (the Responses API's ``status: "failed"``, or its
stream's ``error`` event) that are the server's own trouble, retried as a 5xx status is."""

REDIRECTS = frozenset({301, 302, 303, 307, 308})
"""The 3xx statuses that redirect a request elsewhere (RFC 9110 §15.4)."""

INSTALL_HINT = (
    "live mode needs the httpx2 HTTP client, which is not installed: pip install 'evalrunner[live]'"
)


def start_live(config: LiveConfig) -> LiveModel | list[str]:
    """The run's live model; or, before anything is sent, what keeps it from starting (no
    model name, the httpx2 extra not installed)."""
    problems = config.problems()
    if problems:
        return problems
    try:
        import httpx2  # noqa: F401  (only to refuse the run now, not at its first request)
    except ImportError:
        return [INSTALL_HINT]
    return LiveModel(config)


STOPPED = "live model: the run was stopped; no further request is sent"
NOT_SENT = "live model: not sent, since an earlier answer stopped the run: "
GIVEN_UP = "live model: the case was given up (it timed out); its request was cut"


class _Connection:
    """An HTTP client made when first needed, and the requests sent on it, that can be given
    up from another thread: :meth:`close` makes each request waiting in :meth:`call` fail at
    once. (Closing an HTTP client does not interrupt a read already blocked on its socket,
    so each request is sent on a thread of its own, and a given-up one is left to end by its
    own timeout, unseen.)

    It also knows every socket its client opened (:meth:`trace`, httpx2's ``trace``
    extension), and sends one request at a time (:attr:`sending`): so an attempt's deadline
    can cut the socket it is on, whether the client opened it for this attempt or reuses a
    kept-alive one, and cut no other request's."""

    def __init__(self, model: LiveModel) -> None:
        self._model = model
        self._lock = threading.Lock()
        self._http: httpx2.Client | None = None
        self._waiting: set[threading.Event] = set()
        self._streams: list[Any] = []
        self.closed = threading.Event()
        self.sending = threading.Lock()
        """Held by the attempt on the wire (a case sends one request at a time anyway)."""
        self.retrying: str | None = None
        """While a request waits to be sent again: why, and how long the wait is."""

    def trace(self, name: str, info: Mapping[str, Any]) -> None:
        """httpx2's ``trace`` callback: a connection the client opened (or wrapped in TLS)
        is kept, to be cut at a deadline."""
        if name.endswith(("connect_tcp.complete", "start_tls.complete")):
            stream = info.get("return_value")
            if stream is not None:
                with self._lock:
                    # A socket closed since (or unwrapped into TLS) is dropped.
                    self._streams = [s for s in self._streams if _open(s)]
                    self._streams.append(stream)

    def streams(self) -> list[Any]:
        """Every connection the client opened that is still open."""
        with self._lock:
            return [stream for stream in self._streams if _open(stream)]

    def client(self) -> httpx2.Client:
        with self._lock:
            if self.closed.is_set():
                raise RunError(GIVEN_UP)
            if self._http is None:
                self._http = self._model._client()
            return self._http

    def call(self, send: Callable[[], LiveExchange]) -> LiveExchange:
        """``send()``'s exchange, or :class:`RunError` as soon as the connection is closed."""
        done = threading.Event()
        with self._lock:
            if self.closed.is_set():
                raise RunError(GIVEN_UP)
            self._waiting.add(done)
        outcome: list[LiveExchange | BaseException] = []

        def work() -> None:
            try:
                outcome.append(send())
            except BaseException as exc:  # handed to the waiting thread, which raises it
                outcome.append(exc)
            finally:
                done.set()

        threading.Thread(target=work, name="evalrunner live request", daemon=True).start()
        try:
            done.wait()
        finally:
            with self._lock:
                self._waiting.discard(done)
        if not outcome:
            raise RunError(STOPPED if self._model.stopped else GIVEN_UP)
        answer = outcome[0]
        if isinstance(answer, BaseException):
            raise answer
        return answer

    def close(self) -> None:
        with self._lock:
            self.closed.set()
            http, self._http = self._http, None
            waiting = list(self._waiting)
        for done in waiting:
            done.set()
        if http is not None:
            http.close()


class ModelUnusable(RunError):
    """An answer that every request of the run would get alike (the key refused with 401, a
    redirect): the run stops at it (:attr:`LiveModel.halted`), and no further request is
    sent."""


class BudgetSpent(RunError):
    """The run's token budget (``max_total_tokens``) is spent: no request is sent."""


class _Uncountable(BudgetSpent, AnswerNotPassed):
    """An answer whose usage cannot be counted (wholly) under a budget: it is not passed on,
    and the run stops; the tokens it does report count."""


class TokenBudget:
    """The run's budget of input + output tokens, shared by every case (thread-safe)."""

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self._spent = 0
        self._blind: str | None = None  # why the budget cannot be enforced, once it cannot
        self._unreported = 0
        self._lock = threading.Lock()

    @property
    def spent(self) -> int:
        """Tokens used so far."""
        with self._lock:
            return self._spent

    @property
    def unreported(self) -> int:
        """How many answers carried no token usage (counted with or without a limit)."""
        with self._lock:
            return self._unreported

    @property
    def blind(self) -> bool:
        """Whether an answer without usage (or with part of it) stopped the budget (it
        cannot be counted)."""
        with self._lock:
            return self._blind is not None

    @property
    def exhausted(self) -> bool:
        """Whether no further request may be sent."""
        with self._lock:
            return self.limit is not None and (self._blind is not None or self._spent >= self.limit)

    def check(self) -> None:
        """Raise :class:`BudgetSpent` when the budget is spent."""
        if self.exhausted:
            raise BudgetSpent(self.message())

    def message(self) -> str:
        """The sentence that says the budget stopped the run."""
        if self._blind is not None:
            return self._blind
        return (
            f"the token budget is spent ({self.spent} of max_total_tokens = {self.limit} "
            "tokens used): no further model request was sent"
        )

    def add(self, response: ModelResponse) -> None:
        """Count a response's usage.

        With a budget set, an answer that reports no usage (no tokens at all) is refused, as
        :class:`BudgetSpent`, and no further request is sent: a budget is a promise about
        spending, and one that silently counts nothing would let a run spend without bound.
        So the run stops as it would with the budget spent, saying why (:data:`NO_USAGE`).
        An answer that gives one count and not the other (``prompt_tokens: null``) is refused
        the same way (:func:`part_usage`): its missing count would be read as 0."""
        tokens = response.input_tokens + response.output_tokens
        with self._lock:
            self._spent += tokens
            if tokens == 0:
                self._unreported += 1
            if self.limit is None:
                return
            if tokens == 0:
                self._blind = NO_USAGE
            elif response.usage_missing is not None:
                self._blind = part_usage(response.usage_missing)
            else:
                return
            said = self._blind
        raise _Uncountable(said, response)


def part_usage(missing: str) -> str:
    """The sentence that says an answer's usage lacks ``missing`` (``usage.prompt_tokens``)."""
    return (
        f"live model: the model's answer gives no {missing} (null or left out) beside its other "
        "token count, so max_total_tokens cannot be fully enforced: no further model request "
        "is sent; use a server that reports usage in full, or remove max_total_tokens from "
        "[eval.live]"
    )


NO_USAGE = (
    "live model: the model's answer carries no token usage, so max_total_tokens cannot be "
    "enforced: no further model request is sent; use a server that reports usage, or remove "
    "max_total_tokens from [eval.live]"
)


@dataclass(frozen=True, slots=True)
class LiveExchange:
    """One request the live model answered, and its answer (for a recorder)."""

    request: ModelRequest
    response: ModelResponse
    sent: Mapping[str, JSONValue] = field(default_factory=dict)
    """The request parameters sent with it (:meth:`LiveModel._options`): the agent's own,
    translated, over ``[eval.live]``'s defaults, as the model received them."""


class _Retry(Exception):
    """This attempt failed in a way worth another (``wait``: what the server asked for)."""

    def __init__(self, reason: str, wait: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.wait = wait


class LiveModel:
    """One run's connection to the live model (see the module docstring).

    ``environ`` is where the key is read from, when each request is sent; ``sleep`` waits
    between retries (default: a wait that :meth:`stop` cuts short; tests pass one that
    records and returns); ``transport`` replaces httpx2's own (tests). Close it when the run
    ends.
    """

    def __init__(
        self,
        config: LiveConfig,
        *,
        budget: TokenBudget | None = None,
        environ: Mapping[str, str] | None = None,
        sleep: Callable[[float], object] | None = None,
        transport: Any = None,
    ) -> None:
        if config.model is None:
            raise ValueError(config.problems()[0])
        self.config = config
        self.model = config.model
        self.wire: ClientWire = client_wire(config.wire)
        self.budget = budget if budget is not None else TokenBudget(config.max_total_tokens)
        self._environ = environ if environ is not None else os.environ
        self._stopped = threading.Event()
        self._sleep = sleep if sleep is not None else self._stopped.wait
        self._transport = transport
        self._slots = threading.BoundedSemaphore(config.max_concurrency)
        self._lock = threading.Lock()
        self._own = _Connection(self)
        self._open: set[_Connection] = set()
        self._halted: str | None = None

    def provider(self) -> LiveProvider:
        """A fresh provider for one case, on a connection of its own (so that giving the
        case up cuts its request in flight, and no other case's)."""
        connection = _Connection(self)
        with self._lock:
            self._open.add(connection)
        return LiveProvider(self, connection)

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped.is_set()

    @property
    def halted(self) -> str | None:
        """The run error that stopped the run (:class:`ModelUnusable`: a refused key, a
        redirect), or ``None``; a run front end stops at it and leaves the cases left unrun."""
        with self._lock:
            return self._halted

    def stop(self) -> None:
        """Refuse every request from now on, and cut those in flight (an interrupted run):
        each fails its case at once, rather than running on to its timeout."""
        self._stopped.set()
        self.close()

    def close(self) -> None:
        """Close every connection (a request in flight on one fails)."""
        with self._lock:
            connections = [self._own, *self._open]
            self._open.clear()
        for connection in connections:
            connection.close()

    def _forget(self, connection: _Connection) -> None:
        with self._lock:
            self._open.discard(connection)
        connection.close()

    def _client(self) -> httpx2.Client:
        try:
            import httpx2  # only a live run pays for importing it
        except ImportError:
            raise RunError(INSTALL_HINT) from None
        return httpx2.Client(
            timeout=httpx2.Timeout(self.config.timeout_secs),
            transport=self._transport,
            trust_env=False,  # no proxy or .netrc from the environment: it goes where
            # base_url says, and nowhere may the key be sent that config did not name
            follow_redirects=False,
            # No connection is kept for a next request: bytes a server sent past the end of
            # one answer (a second response in the same write) would be read as the next
            # request's answer, and an HTTP client cannot tell them from it. A model request
            # takes far longer than opening a connection.
            limits=httpx2.Limits(max_keepalive_connections=0),
        )

    def _key(self) -> str:
        name = self.config.api_key_env
        key = self._environ.get(name, "")
        if not key.strip():
            raise ModelUnusable(
                f"live mode: the environment variable {name} (api_key_env in [eval.live]) is "
                "not set or empty; export the API key there"
            )
        problem = unsendable_key(key)
        if problem is not None:
            raise ModelUnusable(
                f"live mode: the API key in {name} holds {problem}, which no HTTP header can "
                f"carry; nothing was sent: fix the value of {name}"
            )
        return key

    def without_secrets(self, text: str) -> str:
        """``text`` without the key (:func:`evalrunner.redact.strike_key`), when its variable
        is set, and without what ``base_url`` may hold secret (its user, password and query
        values); reports and recordings pass everything a live run put in them through
        this."""
        text = strike_key(text, self._environ.get(self.config.api_key_env, ""))
        return strike_url_secrets(text, self.config.base_url)

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The answer to ``request``, sent on the model's own connection (:meth:`exchange`)."""
        return self.exchange(request).response

    def exchange(
        self, request: ModelRequest, connection: _Connection | None = None
    ) -> LiveExchange:
        """Send ``request`` (retrying as configured) and read the answer; every failure is
        a :class:`RunError` whose text names what went wrong, never the key. ``connection``
        is a case's own (its provider's); without it, the model's."""
        via = connection if connection is not None else self._own
        # The slot is held by the case's thread, not the request's: a case given up frees it
        # at once, though its abandoned request may still be on the wire (its tokens, if it
        # is answered, still count towards the budget).
        with self._slots:
            self._check_running(via)
            halted = self.halted
            if halted is not None:  # another case met it while this one waited
                raise RunError(f"{NOT_SENT}{halted}")
            self.budget.check()  # after the wait for a slot, in which it may have been spent
            try:
                if connection is None:
                    return self._send(request, via)
                return via.call(lambda: self._send(request, via))
            except ModelUnusable as unusable:
                with self._lock:
                    self._halted = self._halted or str(unusable)
                raise

    def _send(self, request: ModelRequest, via: _Connection) -> LiveExchange:
        key = self._key()
        options = self._options(request)
        body = self.wire.request_body(
            request, model=self.model, stream=self.config.stream, options=options
        )
        data = wire_json(body).encode("utf-8")
        headers = {"Content-Type": "application/json", **self.wire.auth_headers(key)}
        attempts = self.config.max_retries + 1
        for attempt in range(1, attempts + 1):
            self._check_running(via)
            try:
                response = self._attempt(via, data, headers, key)
            except _Retry as retry:
                self._check_running(via)
                if attempt == attempts:
                    tried = f" (after {attempts} attempts)" if attempts > 1 else ""
                    raise RunError(f"live model: {retry.reason}{tried}") from None
                wait = _backoff(attempt, retry.wait)
                # Kept while waiting: a case timeout that fires in the wait names its cause.
                via.retrying = f"it was waiting {wait:g}s to retry, after: {retry.reason}"
                try:
                    self._sleep(wait)
                finally:
                    via.retrying = None
                continue
            except Exception:
                self._check_running(via)  # its connection closed under it: say so
                raise
            self.budget.add(response)
            return LiveExchange(request, response, options)
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _struck(self, text: str, key: str) -> str:
        return strike_url_secrets(strike_key(text, key), self.config.base_url)

    def _check_running(self, via: _Connection) -> None:
        if self._stopped.is_set():
            raise RunError(STOPPED)
        if via.closed.is_set():
            raise RunError(GIVEN_UP)

    def _options(self, request: ModelRequest) -> dict[str, JSONValue]:
        """The request's parameters: the agent's own (a command agent's, as it sent them),
        over ``[eval.live]``'s temperature and max_tokens, unless ``pin`` keeps those. An
        output limit that passes through may not exceed the whole token budget: refused, with
        nothing sent (a pinned one is the config's). A parameter the live API cannot carry
        (the agent speaks another API) is refused, with nothing sent: the model would answer
        a request the agent never made."""
        lost = untranslatable(request.parameters, request.api, self.wire.name)
        if lost:
            names = ", ".join(printable(name) for name in lost)
            raise RunError(
                f"live model: the agent's request (on the {request.api} API) sets {names}, "
                f"which the {self.wire.name} API (wire in [eval.live]) has no counterpart for: "
                "nothing was sent, since the model would answer a request the agent never "
                f'made; leave it out of the agent\'s request, or set wire = "{request.api}" '
                "(the API the agent speaks) with a base_url that serves it"
            )
        extra = extra_choices(request.parameters)
        if extra is not None:
            raise RunError(f"live model: {extra}")
        if "max_tokens" not in self.config.pin:
            problem = over_budget(request.parameters, request.api, self.config.max_total_tokens)
            if problem is not None:
                raise RunError(
                    f"live model: {problem.text}: nothing was sent; {problem.fix} in the "
                    "agent, or pin "
                    'it in [eval.live] (pin = ["max_tokens"]) to send [eval.live]\'s '
                    "max_tokens instead"
                )
        return live_options(
            self.wire.name,
            request.parameters,
            request.api,
            temperature=self.config.temperature,
            max_tokens=self.config.max_tokens,
            pin=self.config.pin,
        )

    def _attempt(
        self, via: _Connection, data: bytes, headers: dict[str, str], key: str
    ) -> ModelResponse:
        url = self.wire.request_url(self.config.base_url)
        # httpx2's timeout bounds each phase (connect, each read); a server that trickles
        # bytes would never trip it, so a watchdog cuts the attempt's socket at its deadline
        # (started once the client is made and the connection free: neither is the server's
        # time). The socket may be new or kept alive from an earlier request: the connection
        # knows each socket its client opened, and carries one request at a time, so every
        # one of them is cut.
        client = via.client()
        with via.sending:
            return self._attempt_on(client, via, url, data, headers, key)

    def _attempt_on(
        self,
        client: httpx2.Client,
        via: _Connection,
        url: str,
        data: bytes,
        headers: dict[str, str],
        key: str,
    ) -> ModelResponse:
        import httpx2

        timeout = self.config.timeout_secs
        watchdog = _Watchdog(timeout, via.streams)
        encoding: str | None = None
        try:
            with client.stream(
                "POST", url, content=data, headers=headers, extensions={"trace": via.trace}
            ) as reply:
                watchdog.watch(reply.extensions.get("network_stream"))
                encoding = reply.headers.get("content-encoding")
                status = reply.status_code
                if 300 <= status < 400:  # a redirect, or another 3xx: none is followed
                    raise self._redirect(status, reply.headers.get("location"), key)
                if status >= 400:
                    raw = _body(reply)
                    raise self._status_error(status, raw, reply.headers.get("retry-after"), key)
                kind = reply.headers.get("content-type")
                _check_kind(kind, stream=self.config.stream)
                if self.config.stream:
                    return _read_stream(self.wire, reply, kind)
                return self.wire.read_response(body_json(_body(reply)))
        except (httpx2.TimeoutException, httpx2.RemoteProtocolError, httpx2.ReadError) as exc:
            if watchdog.fired or isinstance(exc, httpx2.TimeoutException):
                raise _Retry(f"no answer within timeout_secs = {timeout:g}") from None
            raise _Retry(f"the connection broke ({type(exc).__name__})") from None
        except httpx2.ConnectError:
            if watchdog.fired:
                raise _Retry(f"no answer within timeout_secs = {timeout:g}") from None
            raise _Retry(f"cannot connect to {shown_url(self.config.base_url)}") from None
        except httpx2.DecodingError:
            if watchdog.fired:
                raise _Retry(f"no answer within timeout_secs = {timeout:g}") from None
            # Not retried: a server that encodes one answer wrongly is likely to do it again.
            raise RunError(
                "live model: the answer's body could not be decoded: it says Content-Encoding: "
                f"{printable(encoding or 'none')}, but its bytes are not data of that encoding "
                "(a proxy or server that compresses wrongly)"
            ) from None
        except httpx2.HTTPError as exc:  # any other transport trouble: named, not quoted
            if watchdog.fired:
                raise _Retry(f"no answer within timeout_secs = {timeout:g}") from None
            raise RunError(f"live model: the request failed ({type(exc).__name__})") from None
        except ModelFailed as failed:
            said = self._struck(printable(failed.message), key)
            code = printable(failed.code or "no code")
            if failed.code in RETRIED_FAILURES:  # the model's own 5xx, told in a 200
                raise _Retry(f"{failed.failure} ({code}): {said}") from None
            raise RunError(f"live model: {failed.failure} ({code}): {said}") from None
        except WireResponseError as exc:
            if watchdog.fired:  # the stream was cut at the deadline, mid-answer
                raise _Retry(f"no answer within timeout_secs = {timeout:g}") from None
            problem = self._struck(str(exc), key)
            raise RunError(f"live model: the answer is malformed: {problem}") from None
        except UnicodeEncodeError:
            # Only the key is not ASCII-checked before this point; the exception holds it.
            raise RunError(
                f"live model: the key in {self.config.api_key_env} holds characters an HTTP "
                "header cannot carry (not ASCII)"
            ) from None
        except UnicodeDecodeError:
            raise RunError("live model: the answer is not UTF-8 text") from None
        finally:
            watchdog.cancel()

    def _redirect(self, status: int, location: str | None, key: str) -> ModelUnusable:
        """A 3xx answer as a run error, named for what its status means: a redirect (its
        target), a choice of answers (300), a cache's answer (304), or neither."""
        fix = f"set base_url in [eval.live] to where the API answers ({self._where()})"
        if status in REDIRECTS:
            return ModelUnusable(
                f"live model: HTTP {status}, a redirect to {self._target(location, key)}; "
                f"redirects are not followed (the key is sent to base_url only): {fix}"
            )
        if status == 300:
            offered = f" (one at {self._target(location, key)})" if location else ""
            return ModelUnusable(
                "live model: HTTP 300 (Multiple Choices): the server offers a choice of "
                f"answers{offered} where the API gives one; nothing is followed: {fix}"
            )
        if status == 304:
            return ModelUnusable(
                "live model: HTTP 304 (Not Modified), which is no answer to a POST (a cache "
                f"or proxy answered, not the API): {fix}"
            )
        return ModelUnusable(
            f"live model: HTTP {status}, a 3xx status that is no redirect evalrunner knows; "
            f"nothing is followed: {fix}"
        )

    def _where(self) -> str:
        return f"now {shown_url(self.config.base_url)}"

    def _target(self, location: str | None, key: str) -> str:
        if not location:
            return "no Location given"
        from urllib.parse import urlsplit

        try:
            urlsplit(location)
        except ValueError:
            return "a Location that is not a valid URL"
        return _quoted(self._struck(shown_url(location), key))

    def _status_error(
        self, status: int, raw: bytes, retry_after: str | None, key: str
    ) -> Exception:
        try:
            message = self.wire.error_message(body_json(raw))
        except WireResponseError:
            message = None
        said = f": {_quoted(self._struck(message, key))}" if message else ""
        if status == 401:
            # Every request carries the same key: each would be refused alike.
            return ModelUnusable(
                f"live model: the API refused the key in {self.config.api_key_env} "
                f"(HTTP 401){said}; check that variable holds a valid key for "
                f"{shown_url(self.config.base_url)}"
            )
        if status == 403:
            # Forbidden may be this request's own (a model, a tool or a size the key may not
            # use), so it fails this case only.
            return RunError(
                f"live model: the API refused the key in {self.config.api_key_env} "
                f"(HTTP 403) for this request{said}; check that the key may use model "
                f"{printable(self.model)} and what the request asks for (only this case fails)"
            )
        if status == 429 or status >= 500:
            return _Retry(f"HTTP {status}{said}", _retry_after(retry_after))
        return RunError(f"live model: HTTP {status}{said} (not retried: a 4xx is final)")


class LiveProvider(ModelProvider):
    """One case's view of the live model: a :class:`~evalrunner.boundary.provider.ModelProvider`
    that keeps every exchange in order (:attr:`exchanges`), for a recorder."""

    def __init__(self, model: LiveModel, connection: _Connection) -> None:
        self._model = model
        self._connection = connection
        self._lock = threading.Lock()
        self._exchanges: list[LiveExchange] = []
        self.stopped_by_budget = False
        """Whether a request of this case was refused because the budget was spent."""

    def complete(self, request: ModelRequest) -> ModelResponse:
        """The live model's answer to ``request``."""
        try:
            exchange = self._model.exchange(request, self._connection)
        except BudgetSpent:
            self.stopped_by_budget = True
            raise
        with self._lock:
            self._exchanges.append(exchange)
        return exchange.response

    @property
    def retrying(self) -> str | None:
        """While this case's request waits to be retried: the wait and the answer that
        caused it (say an HTTP 429), for a case timeout to name; else ``None``."""
        return self._connection.retrying

    @property
    def withheld_variables(self) -> tuple[str, ...]:
        """The variable that holds the key: an agent process is started without it, since
        the key is only ever to be put in the auth header of evalrunner's own requests."""
        return (self._model.config.api_key_env,)

    @property
    def stopped(self) -> bool:
        """Whether the run was stopped (:meth:`LiveModel.stop`): a case still running then
        gives itself up."""
        return self._model.stopped

    def abort(self) -> None:
        """The case is given up (a timeout): its request in flight is cut, and no other is
        sent."""
        self._connection.close()

    def close(self) -> None:
        """The case is over: its connection is closed."""
        self._model._forget(self._connection)

    @property
    def exchanges(self) -> tuple[LiveExchange, ...]:
        """Every request answered so far, with its answer."""
        with self._lock:
            return tuple(self._exchanges)


class _Watchdog:
    """One attempt's deadline: when it passes, every socket of the attempt's connection
    (``streams()``, and the response's ``network_stream``) is shut down, which wakes a read
    blocked on it; :attr:`fired` then tells the failed read from a broken one."""

    def __init__(self, seconds: float, streams: Callable[[], list[Any]]) -> None:
        self._lock = threading.Lock()
        self._known = streams
        self._streams: list[Any] = []
        self._fired = threading.Event()
        self._timer = threading.Timer(seconds, self._fire)
        self._timer.daemon = True
        self._timer.start()

    @property
    def fired(self) -> bool:
        """Whether the deadline passed."""
        return self._fired.is_set()

    def watch(self, stream: Any) -> None:
        """Cut ``stream`` at the deadline too (at once if it has passed)."""
        if stream is None:
            return
        with self._lock:
            self._streams.append(stream)
        if self.fired:
            _cut(stream)

    def cancel(self) -> None:
        """The attempt is over."""
        self._timer.cancel()

    def _fire(self) -> None:
        self._fired.set()
        with self._lock:
            streams = [*self._streams, *self._known()]
        for stream in streams:
            _cut(stream)


def _cut(stream: Any) -> None:
    sock = stream.get_extra_info("socket")
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):
            # The plain socket's shutdown, also for a TLS one: it wakes the blocked read
            # without touching the TLS state that read is using.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


def _open(stream: Any) -> bool:
    """Whether ``stream``'s socket is still open."""
    sock = stream.get_extra_info("socket")
    return isinstance(sock, socket.socket) and sock.fileno() != -1


def _check_kind(content_type: str | None, *, stream: bool) -> None:
    """Refuse an answer of the other kind than the one asked for (a JSON body where
    ``stream = true`` asked for an event stream, or the reverse), as its ``Content-Type``
    says: read as the other, it would only say that it ended too soon. An answer that gives
    no type, or another one, is read as asked."""
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if stream and (kind == "application/json" or kind.endswith("+json")):
        raise WireResponseError(
            "an event stream (text/event-stream) was expected, since stream = true in "
            f"[eval.live], but the server answered {printable(kind)}; set stream = false, or "
            "use a server that streams"
        )
    if not stream and kind == "text/event-stream":
        raise WireResponseError(
            "a JSON body (application/json) was expected, since stream = false in "
            "[eval.live], but the server answered text/event-stream; set stream = true, or "
            "use a server that answers in one body"
        )


def _read_stream(wire: ClientWire, reply: Any, kind: str | None) -> ModelResponse:
    """The streamed answer, read by ``wire``; an answer that holds no event at all (an HTML
    page, plain text) is named for what it is, not taken for a stream cut short."""
    opening = _Opening()
    try:
        return wire.read_stream(parse_sse(opening.lines(_lines(reply))))
    except WireResponseError:
        if opening.events or not opening.ended:  # a stream, or an answer refused mid-read
            raise
        shown = printable((kind or "").split(";", 1)[0].strip()) or "no Content-Type"
        start = f"it begins {printable(repr(opening.text))}" if opening.text else "it is empty"
        raise WireResponseError(
            f"the answer is not an event stream (stream = true in [eval.live]): the server "
            f"answered {shown}, without one server-sent event (no data: line); {start}"
        ) from None


class _Opening:
    """What a streamed answer began with: its first characters, and whether any line was a
    server-sent event's (``data:``, ``event:``, ``id:``, ``retry:``) or a comment."""

    SHOWN = 60

    def __init__(self) -> None:
        self.text = ""
        self.events = False
        self.ended = False
        """Whether the answer was read to its end."""

    def lines(self, lines: Iterator[str]) -> Iterator[str]:
        for line in lines:
            if len(self.text) < self.SHOWN:
                self.text = (self.text + line)[: self.SHOWN]
            if not self.events and line.startswith(_SSE_FIELDS):
                self.events = True
            yield line
        self.ended = True


_SSE_FIELDS = ("data:", "event:", "id:", "retry:", ":")


def _lines(reply: Any) -> Iterator[str]:
    """The lines of a streamed answer, read as bytes arrive so that a line that never ends is
    still cut at the deadline, and refused past :data:`MAX_LINE_BYTES`. A line ends in CRLF,
    LF or CR, as server-sent events allow; each is yielded ending in LF."""
    parts: list[bytes] = []  # the line being read, in the pieces it came in
    size = total = 0
    after_cr = False  # the last chunk ended in CR: an LF opening this one belongs to it
    for chunk in reply.iter_bytes():
        total += len(chunk)
        if total > MAX_ANSWER_BYTES:
            raise WireResponseError(f"the stream is longer than {MAX_ANSWER_BYTES} bytes")
        if after_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        after_cr = chunk.endswith(b"\r")
        start = 0
        for end in _LINE_END.finditer(chunk):
            if size + end.start() - start > MAX_LINE_BYTES:
                raise WireResponseError(_LONG_LINE)
            parts.append(chunk[start : end.start()])
            yield b"".join(parts).decode("utf-8") + "\n"
            parts, size, start = [], 0, end.end()
        parts.append(chunk[start:])
        size += len(chunk) - start
        if size > MAX_LINE_BYTES:
            raise WireResponseError(_LONG_LINE)
    if size:
        yield b"".join(parts).decode("utf-8")


_LINE_END = re.compile(rb"\r\n|\r|\n")
_LONG_LINE = f"a line of the stream is longer than {MAX_LINE_BYTES} bytes (the most one may hold)"


def _body(reply: Any) -> bytes:
    chunks = []
    total = 0
    for chunk in reply.iter_bytes():
        total += len(chunk)
        if total > MAX_ANSWER_BYTES:
            raise WireResponseError(
                f"the response body is longer than {MAX_ANSWER_BYTES} bytes (the most one may hold)"
            )
        chunks.append(chunk)
    return b"".join(chunks)


def unsendable_key(key: str) -> str | None:
    """What in ``key`` no HTTP header value can carry, as a class of character (never the
    key or the character itself); ``None`` when it can be sent."""
    for char in key:
        if char in "\r\n":
            return (
                "a line break (\\r or \\n: a CRLF line end from an env file or a copy leaves one)"
            )
        if char == " " or char == "\t":
            continue
        if ord(char) < 0x20 or ord(char) == 0x7F:
            return "a control character"
        if not char.isascii():
            return "a character outside ASCII"
    if key != key.strip(" \t"):
        return "a space or tab at its start or end"
    return None


def _backoff(attempt: int, asked: float | None) -> float:
    """The wait before retry ``attempt`` (1-based): what the server asked for, else
    exponential."""
    if asked is not None:
        return asked
    return float(min(BACKOFF_CAP_SECS, BACKOFF_BASE_SECS * 2 ** (attempt - 1)))


def _retry_after(value: str | None, now: Callable[[], datetime] | None = None) -> float | None:
    """A ``Retry-After`` header as seconds to wait, capped; ``None`` when absent or unreadable.

    It is either a number of seconds or an HTTP date (RFC 9110 §10.2.3).
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.replace(".", "", 1).isdigit():
        seconds = float(text)
    else:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        current = now() if now is not None else datetime.now(UTC)
        seconds = (when - current).total_seconds()
    if not math.isfinite(seconds):
        return None
    return min(MAX_RETRY_AFTER_SECS, max(0.0, seconds))


def _quoted(text: str) -> str:
    shown = text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."
    return printable(shown)
