"""The bounded line reader the MCP SDK's stdio client reads a server's stdout through: whole lines whatever the
chunk sizes (UTF-8 split across chunks included), and an oversized message replaced by an error for its request."""

from __future__ import annotations

import json

import anyio
import pytest

from fara_desktop.tools import bounded_lines
from fara_desktop.tools.bounded_lines import OVERSIZE_CODE, BoundedLines


class _Chunks:
    def __init__(self, data: bytes, size: int) -> None:
        self._pieces = [data[i : i + size] for i in range(0, len(data), size)]

    def __aiter__(self):
        return self._gen()

    async def _gen(self):
        for piece in self._pieces:
            yield piece


def _read(data: bytes, size: int) -> list[str]:
    async def collect() -> list[str]:
        return [line async for line in BoundedLines(_Chunks(data, size))]

    return anyio.run(collect)


@pytest.mark.parametrize("size", [1, 2, 3, 7, 64, 10_000])
def test_lines_come_whole_whatever_the_chunks(size):
    data = '{"id": 1, "result": "東京"}\n{"id": 2}\ntail'.encode()
    assert _read(data, size) == ['{"id": 1, "result": "東京"}\n', '{"id": 2}\n', "tail"]


def test_an_oversized_message_becomes_an_error_for_its_request(monkeypatch):
    monkeypatch.setattr(bounded_lines, "MAX_MESSAGE_CHARS", 100)
    big = json.dumps({"jsonrpc": "2.0", "id": "req-7", "result": {"text": "x" * 1000}})
    note = json.dumps({"jsonrpc": "2.0", "method": "log", "params": {"text": "y" * 1000}})
    lines = _read(f'{big}\n{note}\n{{"id": 3}}\n'.encode(), 64)
    error = json.loads(lines[0])
    assert error["id"] == "req-7" and error["error"]["code"] == OVERSIZE_CODE and "1,0" in error["error"]["message"]
    assert lines[1:] == ['{"id": 3}\n']  # the oversized notification (no id) is dropped
