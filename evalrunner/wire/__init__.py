"""HTTP: the replay endpoint, the wire formats it speaks, and the clients that speak them.

- :mod:`~evalrunner.wire.common`: the :class:`~evalrunner.wire.common.WireAPI` protocol and
  the path-carrying helpers every wire format uses;
- :mod:`~evalrunner.wire.openai_chat`, :mod:`~evalrunner.wire.openai_responses`,
  :mod:`~evalrunner.wire.anthropic`: one module per wire format, both directions;
- :mod:`~evalrunner.wire.endpoint`: the replay endpoint a command agent talks to;
- :mod:`~evalrunner.wire.serve`: ``evalrunner serve``, the endpoint on its own;
- :mod:`~evalrunner.wire.client`: a standard-library client for all three wires;
- :mod:`~evalrunner.live.provider`: live mode's provider, on httpx2 (the ``live`` extra).

Nothing here knows about grading. Importing the package imports none of its modules, so an
agent command that needs only the client starts fast.
"""

# The names alone live here, so that the configuration can check a wire's name without
# importing any wire module.
ANTHROPIC = "anthropic"
OPENAI = "openai"
OPENAI_RESPONSES = "openai-responses"
WIRES = (OPENAI, OPENAI_RESPONSES, ANTHROPIC)
"""Every wire's name (:attr:`~evalrunner.wire.common.WireAPI.name`,
:attr:`~evalrunner.model.ModelRequest.api`)."""

__all__ = ["ANTHROPIC", "OPENAI", "OPENAI_RESPONSES", "WIRES"]
