"""Canary for the one place the app subclasses uvicorn (serving/http_protocol.py): the h11 protocol still has the
methods we extend and the attributes we read. When a uvicorn upgrade changes them, this fails naming what moved
(and the header deadline would silently stop closing slow connections; tests/integration/serving/test_load.py
measures that deadline itself)."""

from __future__ import annotations

import inspect


def test_uvicorns_h11_protocol_still_has_what_the_header_deadline_extends():
    from uvicorn.protocols.http.h11_impl import H11Protocol

    from fara_desktop.serving.http_protocol import HeaderDeadlineProtocol

    source = inspect.getsource(H11Protocol)
    for method in ("connection_made", "data_received", "on_response_complete", "connection_lost"):
        assert callable(getattr(H11Protocol, method, None)), f"H11Protocol.{method} is gone"
        assert method in vars(HeaderDeadlineProtocol)
    for attribute in ("self.cycle", "self.loop", "self.transport"):
        assert attribute in source, f"H11Protocol no longer keeps {attribute}"
    assert issubclass(HeaderDeadlineProtocol, H11Protocol)
