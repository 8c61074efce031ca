"""How a picture is named wherever it is referred to: the sha256 of its file in the picture store."""

from __future__ import annotations

import re

PICTURE_DIGEST = re.compile(r"[0-9a-f]{64}")
