"""Tools a model may call: MCP servers the user configured, and the rules around every call."""
