"""The ``mcpServers`` JSON other apps use (Claude Desktop, Cursor, LM Studio, Jan), read as a stranger's text.

A server is a command this computer runs (``command``, ``args``, ``env``) or a streamable-HTTP address on this
computer (``url``). A user can paste the block they already have; every field is checked and a mistake is named
(``McpConfigError``), never half-applied. Whether a server runs is the user's separate choice in Settings ▸ Tools,
not the pasted text's, and that choice (and every *Always for this tool*) belongs to the server's whole definition
(``McpServerConfig.identity``): pasting another program under a name already switched on gives a new server, off,
with no permissions.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from fara_desktop.vocabulary.errors import FaraError

MAX_CONFIG_CHARS = 1024 * 1024
MAX_SERVERS = 64
MAX_ARGS = 256
MAX_FIELD_CHARS = 4096
SERVER_NAME = re.compile(r"[\w .@-]{1,64}")
LOCAL_HOSTS = {"127.0.0.1", "localhost", "::1"}


class McpConfigError(FaraError):
    """The ``mcpServers`` text cannot be used as written; the message names the server and the field."""


@dataclass(frozen=True)
class McpServerConfig:
    """One server: a command to run (stdio) or a local streamable-HTTP ``url``. ``env`` may hold secrets: it is
    never shown in a repr or a log line."""

    name: str
    command: str = ""
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    url: str = ""

    @property
    def summary(self) -> str:
        """What the user sees in the list: the command line or the address."""
        return self.url or " ".join([self.command, *self.args])

    @property
    def identity(self) -> str:
        """``name#digest`` of the whole definition (name, command, arguments, environment, address): what being
        switched on and *Always* permissions are bound to. A changed definition is another server."""
        whole = json.dumps([self.name, self.command, list(self.args), sorted(self.env), self.url])
        return f"{self.name}#{hashlib.sha256(whole.encode()).hexdigest()[:16]}"


IDENTITY_MARK = "#"  # never in a server's name (``SERVER_NAME``)


def bind_to_definitions(
    servers_json: str, enabled: Sequence[str], always: Sequence[str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Settings written before identities named servers by their name alone: each such entry is bound to the
    definition saved with it in the same file (once, when the settings are read), so an upgrade keeps what the
    user switched on, and nothing pasted later inherits it. Entries already bound are kept as they are."""
    if all(IDENTITY_MARK in e for e in enabled) and all(IDENTITY_MARK in a.split("/", 1)[0] for a in always):
        return tuple(enabled), tuple(always)
    try:
        identities = {s.name: s.identity for s in parse_mcp_servers(servers_json)}
    except McpConfigError:
        identities = {}

    def bound(name: str) -> str | None:
        return name if IDENTITY_MARK in name else identities.get(name)

    kept_enabled = tuple(b for e in enabled if (b := bound(e)) is not None)
    kept_always = []
    for key in always:
        server, _, tool = key.partition("/")
        if tool and (b := bound(server)) is not None:
            kept_always.append(f"{b}/{tool}")
    return kept_enabled, tuple(kept_always)


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_FIELD_CHARS or "\x00" in value:
        raise McpConfigError(f"{where} must be text of at most {MAX_FIELD_CHARS:,} characters.")
    return value


def _server(name: str, spec: Any) -> McpServerConfig:
    where = f"The server {name!r}:"
    if not isinstance(spec, dict):
        raise McpConfigError(f'{where} its settings must be an object ({{"command": …}} or {{"url": …}}).')
    kind = spec.get("type", spec.get("transport"))
    if kind in ("sse",):
        raise McpConfigError(f"{where} the old SSE transport is not supported; use its streamable-HTTP address.")
    url = spec.get("url", spec.get("serverUrl"))
    if url is not None:
        url = _text(url, f"{where} 'url'")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or (parts.hostname or "") not in LOCAL_HOSTS:
            raise McpConfigError(
                f"{where} 'url' must be an http(s) address on this computer (127.0.0.1, localhost or [::1]); "
                "servers elsewhere are not reached from here."
            )
        return McpServerConfig(name, url=url)
    command = spec.get("command")
    if command is None:
        raise McpConfigError(f"{where} it needs a 'command' to run or a 'url' to reach.")
    command = _text(command, f"{where} 'command'").strip()
    if not command:
        raise McpConfigError(f"{where} 'command' is empty.")
    args = spec.get("args", [])
    if not isinstance(args, list) or len(args) > MAX_ARGS:
        raise McpConfigError(f"{where} 'args' must be a list of at most {MAX_ARGS} strings.")
    env = spec.get("env", {})
    if env is None:
        env = {}
    if not isinstance(env, dict) or len(env) > MAX_ARGS:
        raise McpConfigError(f"{where} 'env' must be an object of names and text values.")
    pairs = tuple((_text(k, f"{where} an 'env' name"), _text(v, f"{where} 'env'[{k!r}]")) for k, v in env.items())
    return McpServerConfig(name, command, tuple(_text(a, f"{where} each of 'args'") for a in args), pairs)


def parse_mcp_servers(text: str) -> list[McpServerConfig]:
    """The servers of ``{"mcpServers": {...}}`` (or of the bare mapping); empty text is no servers."""
    if not text.strip():
        return []
    if len(text) > MAX_CONFIG_CHARS:
        raise McpConfigError(f"The text is longer than {MAX_CONFIG_CHARS // 1024} KiB.")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise McpConfigError(f"This is not JSON: {exc}.") from exc
    if isinstance(data, dict) and isinstance(data.get("mcpServers", data.get("servers")), dict):
        data = data.get("mcpServers", data.get("servers"))
    if not isinstance(data, dict):
        raise McpConfigError('Expected {"mcpServers": {"name": {"command": …, "args": […]}}}.')
    if len(data) > MAX_SERVERS:
        raise McpConfigError(f"At most {MAX_SERVERS} servers can be configured.")
    servers = []
    looks: dict[str, str] = {}  # each name as it looks (``_skeletons``): two servers must not look alike
    for name, spec in data.items():
        if not SERVER_NAME.fullmatch(name):
            raise McpConfigError(f"The server name {name[:80]!r} must be 1 to 64 letters, digits, spaces, '.', '-'.")
        scripts = _scripts(name)
        if len(scripts) > 1:
            raise McpConfigError(
                f"The server name {name!r} mixes {' and '.join(sorted(scripts))} letters, which "
                "can look alike: write it in one script."
            )
        twin = next((looks[key] for key in _skeletons(name) if key in looks), None)
        if twin is not None:
            raise McpConfigError(f"The server name {name!r} looks like the server {twin!r}: give it another name.")
        looks.update({key: name for key in _skeletons(name)})
        servers.append(_server(name, spec))
    return servers


def _scripts(name: str) -> set[str]:
    """The scripts of a name's letters (LATIN, CYRILLIC, GREEK…), as Unicode names them."""
    return {unicodedata.name(c, "UNKNOWN").split(" ")[0] for c in name if c.isalpha()}


@functools.cache
def _look_of() -> dict[str, str]:
    """Each character of Unicode's confusables (UTS #39's data, from ``confusable_homoglyphs``) mapped to one
    character of all those it can be taken for: Cyrillic "М", Latin "M", fullwidth "Ｍ" and the mathematical
    "𝐌" look alike, so all four map to the same one."""
    from confusable_homoglyphs.confusables import confusables_data

    parent: dict[str, str] = {}

    def root(c: str) -> str:
        while parent.setdefault(c, c) != c:
            parent[c] = parent[parent[c]]
            c = parent[c]
        return c

    for character, homoglyphs in confusables_data.items():
        for homoglyph in homoglyphs:
            a, b = root(character), root(homoglyph["c"])
            if a != b:
                parent[max(a, b)] = min(a, b)  # the lowest code point stands for the class: Latin where there is one
    return {c: root(c) for c in parent if len(c) == 1}


def _skeletons(name: str) -> set[str]:
    """How a name looks (UTS #39's skeleton, closed over every confusable pair), compatibility forms folded and
    case ignored — taken both ways, as letters are confused before or after their case: "МСР" (Cyrillic) and
    "MCP", "ꓖꓲꓔ" (Lisu) and "GIT", "git" and "GIT" share one."""
    looks = _look_of()

    def look(text: str) -> str:
        return "".join(looks.get(c, c) for c in unicodedata.normalize("NFKC", text))

    return {look(look(name).casefold()), look(look(name.casefold()).casefold())}
