"""Files made by an adversary, for the tests that hold the readers to their budgets: each is small on disk and
was measured to cost minutes or gigabytes before the fix it tests (the numbers are in issue 27)."""

from __future__ import annotations

import zipfile
import zlib
from pathlib import Path

MB = 1024 * 1024


def write_docx_bomb(path: Path, inflated_mb: int = 600) -> Path:
    """A DOCX whose document part inflates to ``inflated_mb`` MB of paragraphs (a few hundred KB on disk)."""
    from tests.helpers.documents import write_docx

    source = write_docx(path.with_suffix(".source.docx"), ["A real first paragraph."])
    paragraph = b"<w:p><w:r><w:t>boom</w:t></w:r></w:p>" * 4096
    with zipfile.ZipFile(source) as original, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as bomb:
        for item in original.infolist():
            data = original.read(item)
            if item.filename != "word/document.xml":
                bomb.writestr(item, data)
                continue
            head, tail = data.split(b"<w:body>", 1)
            info = zipfile.ZipInfo(item.filename)
            info.compress_type = zipfile.ZIP_DEFLATED
            with bomb.open(info, "w", force_zip64=True) as part:
                part.write(head + b"<w:body>")
                for _ in range(inflated_mb * MB // len(paragraph)):
                    part.write(paragraph)
                part.write(tail)
    source.unlink()
    return path


def write_shared_stream_pdf(path: Path, pages: int = 20, stream_kb: int = 2048, word: str = "heliotrope") -> Path:
    """A PDF whose ``pages`` pages all draw one content stream of ``stream_kb`` KB (deflated to a few KB)."""
    line = f"({word} {word} {word}) Tj 0 -1 Td\n".encode()
    content = b"BT /F1 1 Tf 10 780 Td\n" + line * (stream_kb * 1024 // len(line)) + b"ET\n"
    packed = zlib.compress(content, 9)
    first_page = 5
    kids = " ".join(f"{first_page + n} 0 R" for n in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>".encode(),
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
        f"<< /Length {len(packed)} /Filter /FlateDecode >>\nstream\n".encode() + packed + b"\nendstream",
    ]
    page = b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> " \
           b"/Contents 4 0 R >>"  # fmt: skip
    objects += [page] * pages
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def write_tag_flood_html(path: Path, size_mb: int = 20) -> Path:
    """HTML of unclosed ``<b>`` tags, each around one letter: ``size_mb`` MB."""
    path.write_bytes(b"<html><body><p>flood</p>" + b"<b>x" * (size_mb * MB // 4))
    return path


def write_one_line_text(path: Path, size_mb: int = 32) -> Path:
    """A text file of one line (like a minified script)."""
    path.write_bytes(b"var a=1;" * (size_mb * MB // 8))
    return path
