"""Which exceptions escaping a call leave its outcome unknown: sans-IO.

A tool that talks to a service over a network can fail in two ways that look alike in Python
and mean opposite things for an effect:

* the service **answered** with an error (HTTP 409 "order not pending", a validation error):
  the outcome is known, the effect failed, and the journal records that failure for good;
* the **connection** failed (reset while the answer was on its way, a read timeout, a TLS
  record cut short): the request may have reached the service and been carried out. The
  outcome is unknown, exactly as if the subtask had been killed during the call.

`leaves_outcome_unknown` tells the second kind apart, so that the effect driver treats it as
the crash it resembles: no ``done`` is written, the step is retried later, and the tool's
``on_unknown`` settles the effect (``lookup`` asks the service, ``retry`` calls again with the
same key, ``fail`` fails the run closed). Before this, a connection reset escaping a tool was
recorded as a permanent failure, and a run whose write had happened finished without it.

The transport errors recognised are the standard library's (`ConnectionError`,
`TimeoutError`, `ssl.SSLError`, `http.client.HTTPException` for a broken response,
`urllib.error.URLError` except `urllib.error.HTTPError`, which is an answer) and httpx's
``TransportError`` (the client of the MCP tools and of the model clients). A tool using
another client should raise :class:`~operators.exceptions.RetryableError` from its transport
errors (docs/agents-in-pipelines.md). A refused connection is counted as unknown too: the
request was not sent, but telling that apart for every client is not worth a lost write, and
the cost of the caution is one lookup or one retry with the same key.
"""

from __future__ import annotations

import http.client
import ssl
import sys
import urllib.error

__all__ = ["leaves_outcome_unknown"]

_STANDARD: tuple[type[BaseException], ...] = (
    ConnectionError,
    TimeoutError,
    ssl.SSLError,
    http.client.HTTPException,
    urllib.error.URLError,
)


def leaves_outcome_unknown(exc: BaseException) -> bool:
    """Whether ``exc``, escaping a call, means the call may or may not have happened."""
    if isinstance(exc, urllib.error.HTTPError):
        return False  # the service answered: a known failure
    if isinstance(exc, _STANDARD):
        return True
    httpx = sys.modules.get("httpx")  # not loaded: no exception can be one of its errors
    return httpx is not None and isinstance(exc, httpx.TransportError)
