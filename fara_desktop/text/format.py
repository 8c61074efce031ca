"""How numbers are written for people: one way to write a size, a rate and a parameter count, used everywhere.

Sizes are in binary units labelled as such (KiB, MiB, GiB): RAM is sold and reported by the OS in them, and one
convention means Settings, Get models, the hardware panel and the command line show the same figure for one file.
"""

from __future__ import annotations

import time

from fara_desktop.text.untrusted import one_line

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
    return f"{count / 1e9:.1f}B" if count >= 999.5e6 else f"{count / 1e6:.0f}M"  # never "1000M"


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


def format_plan_duration(seconds: float) -> str:
    """A long wait in the words a person plans by: ``a few minutes``, ``about 25 min``, ``about 1.5 h``,
    ``about 4 h`` — rounded coarser as it grows, so a changing estimate does not flicker."""
    minutes = seconds / 60
    if minutes < 1:
        return "less than a minute"
    if minutes < 5:
        return "a few minutes"
    if minutes < 60:
        return f"about {max(5, round(minutes / 5) * 5):.0f} min"
    hours = minutes / 60
    if hours < 3:
        return f"about {round(hours * 2) / 2:g} h"
    return f"about {round(hours):.0f} h" if hours < 12 else "more than half a day"


def format_location(path: str, page: int | None, line_start: int | None, line_end: int | None) -> str:
    """Where a passage is, as a citation says it: ``manual.pdf, page 2``, ``server.log, lines 240–260``."""
    name = one_line(path.replace("\\", "/").rsplit("/", 1)[-1], 120)  # a stranger's name goes into prompts
    if page is not None:
        return f"{name}, page {page}"
    if line_start is not None:
        end = f"–{line_end}" if line_end and line_end != line_start else ""
        return f"{name}, line{'s' if end else ''} {line_start}{end}"
    return name


def format_when(timestamp: float, with_time: bool = True, always_date: bool = False, now: float | None = None) -> str:
    """A moment as people read it: ``16:26`` today (unless ``always_date``), ``29 May 16:26`` this year,
    ``29 May 2024 16:26`` another year (imported history goes back years); without ``with_time`` only the date."""
    moment, today = time.localtime(timestamp), time.localtime(time.time() if now is None else now)
    clock = time.strftime("%H:%M", moment)
    same_day = (moment.tm_year, moment.tm_yday) == (today.tm_year, today.tm_yday)
    if same_day and with_time and not always_date:
        return clock
    day = f"{moment.tm_mday} {time.strftime('%b', moment)}"
    if moment.tm_year != today.tm_year:
        day += f" {moment.tm_year}"
    return f"{day} {clock}" if with_time else day


def format_count(count: int, noun: str, plural: str | None = None) -> str:
    """``1 message``, ``2 messages``, ``10,000 files``."""
    return f"{count:,} {noun if count == 1 else (plural or noun + 's')}"
