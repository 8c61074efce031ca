"""A real MCP server (the official SDK, stdio) whose tools are named on its command line; each answers with its own
server's name and the tool's, so a test sees which server a call really ran on."""

from __future__ import annotations

import sys

from mcp.server.mcpserver import MCPServer

server_name, *tool_names = sys.argv[1:]
server = MCPServer(server_name)


def answering(tool: str):
    def answer(path: str) -> str:
        return f"{server_name}:{tool}:{path}"

    answer.__name__ = tool
    answer.__doc__ = f"The tool {tool} of {server_name}."
    return answer


for name in tool_names:
    server.tool(name=name)(answering(name))

if __name__ == "__main__":
    server.run()
