"""Who may use the local API: programs on this computer, never a web page the user happens to have open.

A browser lets any page send requests to 127.0.0.1. Three doors are closed here, before a request reaches the
model (the way Ollama and LM Studio close them):
- **Host**: a page can make its own domain resolve to 127.0.0.1 (DNS rebinding) and then read the answers as
  same-origin. Such a request names the page's domain in ``Host``; only the loopback names with this server's port
  are accepted (when the user has the API listen on the network, an API key guards it instead).
- **Origin**: a browser names the page in ``Origin`` on every cross-site request (and on every POST). Requests
  from pages are refused unless their origin is in the user's allowed list (empty by default). Programs (the
  ``openai`` client, curl, editors' HTTP clients) send no ``Origin``.
- **Content type**: a page may POST ``text/plain`` without a CORS preflight. The API reads only
  ``application/json``, which no page can send cross-site without the preflight that the Origin check refuses.

Starlette's ``TrustedHostMiddleware`` is not used: it compares the host name only, cuts an IPv6 literal at its
first colon, and cannot require the port. ``CORSMiddleware`` answers allowed origins (see ``local_api``), but on
its own it only withholds headers: a ``text/plain`` request from any page would still run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


@dataclass(frozen=True)
class Refusal:
    """Why a request was not admitted: an HTTP status and a message for the client."""

    status: int
    message: str


def loopback_hosts(port: int) -> frozenset[str]:
    """The ``Host`` values a request to a loopback-bound server on ``port`` can carry."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


def admit(
    headers: Mapping[str, str],
    method: str,
    allowed_hosts: frozenset[str] | None,
    allowed_origins: Iterable[str],
) -> Refusal | None:
    """None when the request may go on; ``allowed_hosts`` None means any host (the API listens on the network and
    an API key is required)."""
    host = headers.get("host", "").strip().lower()
    if allowed_hosts is not None and host not in allowed_hosts:
        return Refusal(403, "This server answers only requests addressed to 127.0.0.1 or localhost on its own port.")
    origin = headers.get("origin")
    if origin is not None and origin not in set(allowed_origins):
        return Refusal(
            403,
            "Requests from web pages are refused. To let a page use the local API, add its origin to the allowed "
            "origins (Settings ▸ Servers ▸ Local API ▸ Web pages allowed).",
        )
    if method == "POST":
        media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
        if media != "application/json":
            return Refusal(415, "The request body must be JSON, sent with 'Content-Type: application/json'.")
    return None
