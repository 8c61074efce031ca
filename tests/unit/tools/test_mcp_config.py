"""The ``mcpServers`` JSON other apps use, pasted by the user: read as it is written elsewhere, and every mistake
named (a stranger's text: nothing half-applied)."""

from __future__ import annotations

import json

import pytest

from fara_desktop.tools.mcp_config import McpConfigError, McpServerConfig, bind_to_definitions, parse_mcp_servers

CLAUDE_DESKTOP = {
    "mcpServers": {
        "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Paris"]},
        "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/home/me/notes"],
                  "env": {"TOKEN": "secret-value"}},
        "local": {"url": "http://127.0.0.1:8931/mcp"},
    }
}  # fmt: skip


def test_a_claude_desktop_block_is_read_as_written():
    servers = parse_mcp_servers(json.dumps(CLAUDE_DESKTOP))
    assert [s.name for s in servers] == ["time", "files", "local"]
    assert servers[0] == McpServerConfig("time", "uvx", ("mcp-server-time", "--local-timezone=Europe/Paris"))
    assert servers[1].env == (("TOKEN", "secret-value"),) and "secret-value" not in repr(servers[1])
    assert servers[2].url == "http://127.0.0.1:8931/mcp" and servers[2].summary == servers[2].url
    assert parse_mcp_servers(json.dumps(CLAUDE_DESKTOP["mcpServers"])) == servers  # the bare mapping too
    assert parse_mcp_servers("  ") == []


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ("{not json", "not JSON"),
        ('["a"]', "Expected"),
        (json.dumps({"mcpServers": {"x": {"args": []}}}), "needs a 'command'"),
        (json.dumps({"mcpServers": {"x": {"command": ""}}}), "is empty"),
        (json.dumps({"mcpServers": {"x": {"command": "a", "args": "b"}}}), "'args' must be a list"),
        (json.dumps({"mcpServers": {"x": {"command": "a", "env": {"A": 1}}}}), "'env'['A']"),
        (json.dumps({"mcpServers": {"x": {"url": "https://tools.example.com/mcp"}}}), "on this computer"),
        (json.dumps({"mcpServers": {"x": {"url": "file:///etc/passwd"}}}), "on this computer"),
        (json.dumps({"mcpServers": {"x": {"type": "sse", "url": "http://127.0.0.1/sse"}}}), "SSE"),
        (json.dumps({"mcpServers": {"a/../b": {"command": "a"}}}), "must be 1 to 64"),
        (json.dumps({"mcpServers": {f"s{i}": {"command": "a"} for i in range(65)}}), "At most 64"),
        (json.dumps({"mcpServers": {"x": {"command": "a" * 5000}}}), "at most 4,096"),
        ("[" * 100_000, "not JSON"),
    ],
)
def test_mistakes_are_named(config, said):
    with pytest.raises(McpConfigError, match=said.replace("[", r"\[").replace("(", r"\(")):
        parse_mcp_servers(config)


def test_a_servers_identity_is_its_whole_definition():
    time = McpServerConfig("time", "uvx", ("mcp-server-time",))
    assert time.identity == McpServerConfig("time", "uvx", ("mcp-server-time",)).identity
    assert time.identity.startswith("time#")
    others = [McpServerConfig("time", "uvx", ("evil",)), McpServerConfig("time", "sh", ("mcp-server-time",)),
              McpServerConfig("time", "uvx", ("mcp-server-time",), (("A", "1"),)),
              McpServerConfig("time", url="http://127.0.0.1:1/mcp"),
              McpServerConfig("clock", "uvx", ("mcp-server-time",))]  # fmt: skip
    assert len({time.identity, *(o.identity for o in others)}) == 1 + len(others)
    assert "secret" not in McpServerConfig("t", "x", (), (("TOKEN", "secret"),)).identity


def test_name_only_settings_of_an_earlier_version_are_bound_to_the_definition_saved_with_them():
    text = json.dumps(CLAUDE_DESKTOP)
    time, files, _ = parse_mcp_servers(text)
    enabled, always = bind_to_definitions(text, ("time", "files", "gone"), ("time/get_current_time", "gone/x"))
    assert enabled == (time.identity, files.identity)
    assert always == (f"{time.identity}/get_current_time",)
    assert bind_to_definitions(text, enabled, always) == (enabled, always)  # bound ones are kept as they are
