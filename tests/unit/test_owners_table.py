"""Issue 61, "the table is the code": every name the code gives a thread or a child process is in
docs/development.md's table of threads and processes, and every name there is one the code gives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NAMED = re.compile(r'(?:name|thread_name_prefix)(?:: str)? ?= ?"(fara-[a-z-]+)"')
LISTED = re.compile(r"^\| `(fara-[a-z-]+)`", re.MULTILINE)


def test_every_thread_and_process_the_code_names_has_a_row_and_every_row_a_thread():
    in_code = {m for file in (ROOT / "fara_desktop").rglob("*.py") for m in NAMED.findall(file.read_text("utf-8"))}
    in_table = set(LISTED.findall((ROOT / "docs" / "development.md").read_text("utf-8")))
    assert len(in_code) >= 15
    assert sorted(in_code - in_table) == [], "named in the code, missing from the owners' table"
    assert sorted(in_table - in_code) == [], "in the table, named nowhere in the code"


JOB_IN_CODE = re.compile(r'\.(?:begin|service)\(\s*"([^"]+)",\s*Stage\.([A-Z]+)')
JOB_ROW = re.compile(r'^\| "([^"]+)"[^|]*?\(([A-Z]+)[;)]', re.MULTILINE)


def test_every_job_the_code_begins_has_a_row_in_its_stage_and_every_row_a_job():
    """The jobs table against the code: each job begun or served by name is in the table, in the stage it is
    begun in (the order of quitting), and each job the table names by name is begun so."""
    in_code = {
        m for file in (ROOT / "fara_desktop").rglob("*.py") for m in JOB_IN_CODE.findall(file.read_text("utf-8"))
    }
    in_table = set(JOB_ROW.findall((ROOT / "docs" / "development.md").read_text("utf-8")))
    assert len(in_code) >= 8
    assert sorted(in_code - in_table) == [], "begun in the code, missing from the jobs table (or in another stage)"
    assert sorted(in_table - in_code) == [], "in the jobs table, begun nowhere in the code in that stage"
