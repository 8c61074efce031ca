"""How numbers are written for people: one way to write a size, a rate and a parameter count, used everywhere.

Sizes are in binary units labelled as such (KiB, MiB, GiB): RAM is sold and reported by the OS in them, and one
convention means Settings, Get models, the hardware panel and the command line show the same figure for one file.
"""

from __future__ import annotations

from fara_desktop.untrusted import one_line

KIB = 1024
MIB = 1024**2
GIB = 1024**3


def format_size(count: float | None) -> str:
    """``512 B``, ``12 KiB``, ``93.8 MiB``, ``1.02 GiB``, ``24.0 GiB``; ``unknown`` for None."""
    if count is None:
        return "unknown"
    magnitude = abs(count)
    if magnitude < KIB:
        return f"{count:.0f} B"
    if magnitude < MIB:
        return f"{count / KIB:.0f} KiB"
    if magnitude < GIB:
        return f"{count / MIB:.1f} MiB"
    return f"{count / GIB:.2f} GiB" if magnitude < 10 * GIB else f"{count / GIB:.1f} GiB"


def format_rate(bytes_per_s: float) -> str:
    """A transfer speed: ``format_size`` per second."""
    return f"{format_size(bytes_per_s)}/s"


def format_parameters(count: int) -> str:
    """A model's parameter count the way model names write it: ``135M``, ``1.7B``."""
    return f"{count / 1e9:.1f}B" if count >= 1e9 else f"{count / 1e6:.0f}M"


def format_bandwidth(bytes_per_s: float) -> str:
    """Memory bandwidth in decimal GB/s, as CPU and memory makers and STREAM quote it: ``38.2 GB/s``."""
    return f"{bytes_per_s / 1e9:.1f} GB/s"


def format_duration(seconds: float | None) -> str:
    """Time left, as a progress line says it: ``40 s left``, ``12 min left``, ``1.5 h left``."""
    if seconds is None:
        return "estimating time left"
    if seconds < 90:
        return f"{seconds:.0f} s left"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min left"
    return f"{seconds / 3600:.1f} h left"


def format_location(path: str, page: int | None, line_start: int | None, line_end: int | None) -> str:
    """Where a passage is, as a citation says it: ``manual.pdf, page 2``, ``server.log, lines 240–260``."""
    name = one_line(path.replace("\\", "/").rsplit("/", 1)[-1], 120)  # a stranger's name goes into prompts
    if page is not None:
        return f"{name}, page {page}"
    if line_start is not None:
        end = f"–{line_end}" if line_end and line_end != line_start else ""
        return f"{name}, line{'s' if end else ''} {line_start}{end}"
    return name
