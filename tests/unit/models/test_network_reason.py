"""Offline, the hub's errors said "[Errno -2] Name or service not known" (issue 29, item 12): each failure is
named as a person reads it, whichever library raised it."""

from __future__ import annotations

import socket
import urllib.error

import httpx
import pytest

from fara_desktop.models import hub
from fara_desktop.models.hub import DownloadInterruptedError, network_reason


def wrapped(inner: BaseException, outer: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:
        return caught


@pytest.mark.parametrize(
    ("error", "says"),
    [
        (urllib.error.URLError(socket.gaierror(-2, "Name or service not known")), "seems to be offline"),
        (wrapped(socket.gaierror(-3, "Temporary failure in name resolution"), httpx.ConnectError("x")), "offline"),
        (httpx.ConnectError("[Errno -2] Name or service not known"), "seems to be offline"),
        (urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")), "refused the connection"),
        (wrapped(TimeoutError("timed out"), httpx.ReadTimeout("read")), "did not answer in time"),
        (ConnectionResetError(104, "reset"), "closed the connection"),
        (ValueError("something else"), "could not be reached (something else)"),
    ],
)
def test_each_network_failure_is_named(error: BaseException, says: str):
    reason = network_reason(error, "huggingface.co")
    assert reason.startswith("huggingface.co") and says in reason
    assert "Errno" not in reason


def test_searching_offline_says_so(monkeypatch):
    def no_dns(*_args, **_kwargs):
        raise socket.gaierror(-2, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)  # as on a laptop with no network: nothing leaves
    with pytest.raises(DownloadInterruptedError) as failed:
        hub.search_hub("qwen", endpoint="https://hub.example")
    assert str(failed.value) == (
        "Searching failed: hub.example cannot be found: this computer seems to be offline (or its name cannot be "
        "looked up)"
    )
    with pytest.raises(DownloadInterruptedError, match=r"hub\.example cannot be found: this computer seems"):
        hub.list_gguf_files("org/model", endpoint="https://hub.example")
