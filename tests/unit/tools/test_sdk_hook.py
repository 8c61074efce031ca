"""Canary for the one place the app reaches into the ``mcp`` SDK (tools/bounded_lines.py): its stdio client still
wraps a server's stdout in the ``TextReceiveStream`` we replace, with the constructor we copy. When an SDK upgrade
changes either, this fails (and the bound on a server's lines would silently stop applying)."""

from __future__ import annotations

import inspect


def test_the_sdks_stdio_client_still_reads_through_the_stream_we_replace():
    import anyio.streams.text as text
    import mcp.client.stdio as stdio

    from fara_desktop.tools.bounded_lines import BoundedLines, bound_the_sdks_stdio_reader

    assert "TextReceiveStream(" in inspect.getsource(stdio.stdio_client), "stdio_client no longer uses it"
    wanted = list(inspect.signature(text.TextReceiveStream).parameters)
    assert list(inspect.signature(BoundedLines).parameters) == wanted == ["transport_stream", "encoding", "errors"]
    bound_the_sdks_stdio_reader()
    assert stdio.TextReceiveStream is BoundedLines
