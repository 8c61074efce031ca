"""Real documents of every supported format for the document tests: PDFs written by reportlab (one of them
encrypted by pypdf, one cut short), a DOCX by python-docx, HTML, Markdown, code and plain text."""

from __future__ import annotations

from pathlib import Path


def write_pdf(path: Path, pages: list[str]) -> Path:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    for text in pages:
        y = 800
        for line in text.splitlines():
            pdf.drawString(50, y, line)
            y -= 14
        pdf.showPage()
    pdf.save()
    return path


def write_encrypted_pdf(path: Path, source: Path, password: str = "secret") -> Path:
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for page in PdfReader(str(source)).pages:
        writer.add_page(page)
    writer.encrypt(password)
    with open(path, "wb") as handle:
        writer.write(handle)
    return path


def write_docx(path: Path, paragraphs: list[str]) -> Path:
    from docx import Document

    document = Document()
    for text in paragraphs:
        document.add_paragraph(text)
    document.save(str(path))
    return path


def write_mixed_folder(folder: Path) -> dict[str, Path]:
    """One file per format, each with a word found nowhere else."""
    folder.mkdir(parents=True, exist_ok=True)
    files = {
        "pdf": write_pdf(
            folder / "manual.pdf",
            [
                "Chapter one\nThe pump must be primed before use.",
                "Chapter two\nThe aquamarine valve controls the pressure.",
                "Chapter three\nStore the pump in a dry place.",
            ],
        ),
        "docx": write_docx(folder / "minutes.docx", ["Meeting minutes", "We agreed to repaint the heliotrope barn."]),
    }
    (folder / "notes.md").write_text("# Notes\n\nThe *tangerine* protocol starts on Mondays.\n", encoding="utf-8")
    (folder / "page.html").write_text(
        "<html><head><style>.x{color:red}</style><script>var hidden = 'scriptword';</script></head>"
        "<body><h1>Guide</h1><p>The <b>marzipan</b> recipe needs almonds.</p></body></html>",
        encoding="utf-8",
    )
    (folder / "tool.py").write_text("def frobnicate(x):\n    '''Frobnicate the quokka.'''\n    return x\n")
    lines = [f"Line {n} of the log, nothing to see." for n in range(1, 300)]
    lines[256] = "Line 257 mentions the zeppelin exactly once."
    (folder / "server.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    files.update(md=folder / "notes.md", html=folder / "page.html", code=folder / "tool.py", log=folder / "server.log")
    return files
