"""Open and read files that someone else may have put in our way, without hanging and without surprises.

A path that should hold a file can hold a FIFO (opening it for reading blocks until a writer appears: forever),
a device (``/dev/zero`` never ends) or a socket. Everything here opens without blocking, refuses anything that is
not a regular file, and reads at most a stated number of bytes.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path


class NotARegularFileError(OSError):
    """The path exists but is a pipe, device, socket or folder, or is larger than the caller allows."""


class LinkRefusedError(NotARegularFileError):
    """The path is a symbolic link where a file was listed (it was swapped for one after it was listed)."""


def open_regular(path: Path | str, follow_links: bool = True) -> int:
    """A read-only descriptor for ``path`` if it is a regular file (O_NONBLOCK: a FIFO does not wait).
    ``follow_links=False``: a symbolic link is refused (``O_NOFOLLOW``) rather than followed somewhere else."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    if not follow_links:
        flags |= getattr(os, "O_NOFOLLOW", 0)
        if not hasattr(os, "O_NOFOLLOW") and os.path.islink(path):  # Windows: checked, not atomic
            raise LinkRefusedError(f"{Path(path).name} is a link")
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if not follow_links and exc.errno == errno.ELOOP:
            raise LinkRefusedError(f"{Path(path).name} is a link") from exc
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotARegularFileError(f"{Path(path).name} is not a regular file (a pipe, device or socket)")
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: Path | str, limit: int) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes."""
    fd = open_regular(path)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise NotARegularFileError(f"{Path(path).name} is {size:,} bytes; at most {limit:,} are read")
        with os.fdopen(fd, "rb", closefd=False) as handle:
            data = handle.read(limit + 1)
    finally:
        os.close(fd)
    if len(data) > limit:
        raise NotARegularFileError(f"{Path(path).name} grew past {limit:,} bytes while it was read")
    return data


def read_regular_text(path: Path | str, limit: int) -> str:
    """``read_regular`` decoded as UTF-8 (a decoding error is a ``ValueError``)."""
    return read_regular(path, limit).decode("utf-8")
