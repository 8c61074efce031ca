"""The user guide's table of settings (docs/guide.md), written from their one description (``settings.fields``)."""

from __future__ import annotations

from fara_desktop.settings.fields import FIELDS
from fara_desktop.settings.values import default_of


def settings_table() -> str:
    """The user guide's table of settings (Markdown), written from ``FIELDS``."""
    rows = ["| Setting | Range | Default | What it does |", "|---|---|---|---|"]
    for item in FIELDS:
        default = default_of(item.key)
        if default is None:
            shown = item.auto
        elif isinstance(default, bool):
            shown = "on" if default else "off"
        elif item.choices:
            shown = item.choices[default] if isinstance(default, int) else str(default)
        else:
            shown = f"{default:,.{item.decimals}f}" + (f" {item.unit}" if item.unit else "")
        rows.append(f"| {item.label} | {item.range_text()} | {shown} | {item.help} |")
    return "\n".join(rows)
