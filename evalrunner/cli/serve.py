"""``evalrunner serve``: one case's script as a live endpoint, for driving an agent by hand."""

# No ``from __future__ import annotations``: typer reads every command's annotations at each
# start, and string annotations would make it compile each of them again.

from pathlib import Path
from typing import Annotated

import typer

from evalrunner.cli.common import fail
from evalrunner.fixture.load import relative_to_cwd
from evalrunner.text import printable_path


def serve(
    case_file: Annotated[Path, typer.Option("--case", help="The fixture whose script to serve.")],
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port on 127.0.0.1 (0: a free one).")
    ] = 0,
) -> None:
    """Serve one case's script as an OpenAI- and Anthropic-compatible endpoint on 127.0.0.1,
    for driving an agent by hand.

    Prints the URLs and the environment to give the agent, then logs each request and any
    run error to stderr. A new user message opens the next turn. It stops by itself once the
    script is consumed (every response served, every tool result back), at the first run error
    (after answering it), or on Ctrl-C; then it prints the tool calls recorded. Exit 0, or 1
    after a run error; 2 if the fixture is refused or the port cannot be bound.
    """
    from evalrunner.wire.endpoint import Exchange, ReplayEndpoint
    from evalrunner.wire.serve import exchange_line, load_case, outcome_lines, serve_case

    case = load_case(relative_to_cwd(case_file))
    if isinstance(case, list):
        raise fail([str(e) for e in case], "the fixture is not admitted; nothing served")

    def ready(endpoint: ReplayEndpoint) -> None:
        source = printable_path(case.source)
        typer.echo(f"serving {case.name!r} from {source} on {endpoint.base_url}")
        typer.echo(f"  OpenAI chat completions: POST {endpoint.openai_base_url}/chat/completions")
        typer.echo(f"  OpenAI Responses:        POST {endpoint.openai_base_url}/responses")
        typer.echo(f"  Anthropic messages:      POST {endpoint.base_url}/v1/messages")
        typer.echo("environment for the agent:")
        for key, value in endpoint.agent_environment().items():
            typer.echo(f"  export {key}={value}")
        if case.expects.all_tools_succeeded is not None:
            typer.echo(
                "note: this case asserts all_tools_succeeded; neither OpenAI wire carries a "
                "tool result's error flag, so `run` grades it there from the dispatches a "
                'command agent reports ("tool_calls" in its reply line). serve grades nothing',
                err=True,
            )
        typer.echo("stops once the script is consumed, at a run error, or on Ctrl-C", err=True)

    def logged(exchange: Exchange) -> None:
        typer.echo(exchange_line(exchange), err=True)

    try:
        outcome = serve_case(case, port=port, on_ready=ready, on_exchange=logged)
    except OSError as exc:
        raise fail([f"cannot listen on 127.0.0.1:{port}: {exc.strerror or exc}"]) from None
    for line in outcome_lines(outcome):
        typer.echo(line, err=True)
    raise typer.Exit(1 if outcome.error is not None else 0)
