"""A server's failures in words a person reads: a transport failure (TLS, DNS, a timeout, nothing listening) and
an HTTP error status with the server's own message; and how long the app waits for a server."""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass

import httpx

from fara_desktop.text.untrusted import one_line


@dataclass(frozen=True)
class Timeouts:
    """How long the app waits for a server: to connect, and for each piece of a reply (the first one included:
    a long prompt on a busy server takes time)."""

    connect_s: float = 10.0
    read_s: float = 120.0
    retries: int = 3  # attempts for idempotent requests (listing models) answered 429 or 5xx
    backoff_s: float = 0.5  # doubled after each attempt; a Retry-After header (up to 10 s) wins


DEFAULT_TIMEOUTS = Timeouts()


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def describe_failure(exc: BaseException, server: str, url: str, timeouts: Timeouts) -> str:
    """A transport failure as a person reads it."""
    chain = _cause_chain(exc)
    if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
        return (
            f"The server {server} ({url}) presented a TLS certificate this computer does not trust, so nothing was "
            "sent. Check the address, or install the server's certificate authority."
        )
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return f"The secure (TLS) connection to {server} ({url}) failed: {one_line(str(exc), 160)}."
    if any(isinstance(e, socket.gaierror) for e in chain) or "Name or service not known" in str(exc):
        return f"The name of the server {server} ({httpx.URL(url).host}) could not be found (DNS). Check the address."
    if isinstance(exc, httpx.ConnectTimeout):
        return f"The server {server} ({url}) did not accept a connection within {timeouts.connect_s:.0f} s."
    if isinstance(exc, httpx.ReadTimeout):
        return f"The server {server} sent nothing for {timeouts.read_s:g} s, so the app stopped waiting."
    if isinstance(exc, httpx.ConnectError):
        return f"The server {server} ({url}) cannot be reached: is it running, and is the address right?"
    return f"The connection to the server {server} failed: {one_line(str(exc) or type(exc).__name__, 160)}."


def server_message(body: bytes) -> str:
    """The error message in a server's JSON answer ("" when it has none)."""
    try:
        data = json.loads(body)
    except ValueError:
        return one_line(body.decode("utf-8", errors="replace"), 200)
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and isinstance(error.get("message"), str):
            return one_line(error["message"], 200)
        if isinstance(error, str):
            return one_line(error, 200)
        if isinstance(data.get("message"), str):
            return one_line(data["message"], 200)
    return ""


def describe_status(status: int, body: bytes, server: str, model: str | None) -> str:
    said = server_message(body)
    detail = f' The server said: "{said}"' if said else ""
    if status in (401, 403):
        return f"The server {server} refused the API key ({status}). Check the key in Settings ▸ Servers.{detail}"
    if status == 404:
        what = f"the model {model!r}" if model else "this address"
        return f"The server {server} does not know {what} (404). Check the address and the model list.{detail}"
    if status == 429:
        return f"The server {server} is busy or over its rate limit (429). Try again in a moment.{detail}"
    if status >= 500:
        return f"The server {server} failed ({status}).{detail}"
    return f"The server {server} refused the request ({status}).{detail}"
