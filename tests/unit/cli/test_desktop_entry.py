"""The launcher entry's text: Exec quoting."""

from __future__ import annotations

from fara_desktop.cli.desktop_entry import render_entry


def test_exec_line_quotes_reserved_characters():
    text = render_entry(['/opt/My "Apps"/Fara$1/FaraDesktop'])
    assert 'Exec="/opt/My \\"Apps\\"/Fara\\$1/FaraDesktop"' in text
