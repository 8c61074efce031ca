"""Which user of this computer opened a TCP connection to us: on Linux, the kernel's socket table
(``/proc/net/tcp``, ``/proc/net/tcp6``) names each socket's owner. With no API key, the local API keeps each user's
programs apart by it (``serving.principals``): two programs that cannot read each other's files never share a
prompt cache, where one could tell from the time to its first token what the other sent."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

TABLES = (Path("/proc/net/tcp"), Path("/proc/net/tcp6"))
MAX_TABLE_BYTES = 64 * 1024 * 1024  # a machine with a million sockets: read no further


def _proc_address(host: str, port: int) -> str | None:
    """``host:port`` as the kernel's table writes it (each 32-bit word of the address in the host's byte order)."""
    try:
        raw = socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
    except OSError:
        return None
    words = [raw[i : i + 4] for i in range(0, len(raw), 4)]
    if sys.byteorder == "little":
        words = [w[::-1] for w in words]
    return f"{b''.join(words).hex().upper()}:{port:04X}"


def connection_owner(client: tuple[str, int], server: tuple[str, int]) -> int | None:
    """The user id owning the client's end of the connection ``client`` → ``server`` (both on this computer);
    None where the table cannot tell (another system, a connection already gone, an address from elsewhere)."""
    local, remote = _proc_address(*client), _proc_address(*server)
    if local is None or remote is None:
        return None
    for table in TABLES:
        try:
            with open(table, encoding="ascii", errors="replace") as lines:
                next(lines, None)  # the header
                read = 0
                for line in lines:
                    read += len(line)
                    if read > MAX_TABLE_BYTES:
                        break
                    fields = line.split()
                    if len(fields) > 7 and fields[1] == local and fields[2] == remote:
                        return int(fields[7]) if fields[7].isdigit() else None
        except OSError:
            continue
    return None
