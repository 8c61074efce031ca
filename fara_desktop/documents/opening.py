"""What *Open the file* may hand to the desktop: a document, never a program.

The desktop's default application for a file runs it when the file is a program or a script (a ``.js`` file runs in
Windows Script Host, a ``.desktop`` file launches what it names, a ``.sh`` may run in a terminal), and an indexed
folder is somebody else's downloads. So only document types are opened; for anything else — a script, source code,
HTML (its scripts would run in the browser), a link — the folder that holds it is shown instead.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from fara_desktop.text.untrusted import one_line

OPENABLE_SUFFIXES = frozenset(
    {".pdf", ".docx", ".txt", ".md", ".markdown", ".rst", ".org", ".tex", ".csv", ".tsv", ".log"}
)


@dataclass(frozen=True)
class OpenChoice:
    """What to open (``target``) and why: the file itself, its folder instead, or nothing (it is gone)."""

    kind: Literal["file", "folder", "missing"]
    target: Path
    note: str


def how_to_open(path: Path) -> OpenChoice:
    name = one_line(path.name, 80)
    try:
        found = os.lstat(path)
    except OSError:
        return OpenChoice("missing", path, f"{name} is no longer there.")
    if stat.S_ISREG(found.st_mode) and path.suffix.lower() in OPENABLE_SUFFIXES:
        return OpenChoice("file", path, "")
    kind = "a link" if stat.S_ISLNK(found.st_mode) else "not a document type Fara Desktop opens"
    return OpenChoice(
        "folder", path.parent, f"{name} is {kind}, so its folder is shown instead (opening it could run it)."
    )


def nothing_opens(choice: OpenChoice) -> str:
    """What to tell the user when the desktop has no application for the target."""
    what = "this folder" if choice.kind == "folder" else f"{choice.target.suffix.lower() or 'these'} files"
    return f"Nothing on this computer opens {what}. It is at: {one_line(str(choice.target), 500)}"
