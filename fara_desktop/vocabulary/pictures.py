"""How a picture is named wherever it is referred to: the sha256 of its file in the picture store."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

PICTURE_DIGEST = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class AttachedPicture:
    """A picture a message carries: its digest, and its file in the picture store (a PNG this app wrote)."""

    digest: str
    path: Path
