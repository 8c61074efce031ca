"""Canary: the installed PySide6 keeps Python's reference counts straight.

PySide6-Essentials 6.12.0 on CPython 3.10/3.11 drops one reference to ``None`` on every void Qt call; after some
thousands of calls (a long streamed reply) Python aborts with ``Fatal Python error: none_dealloc``. Python 3.12+ is
immune (``None`` is immortal there), and pyproject excludes the broken releases on the Pythons they break. This
test keeps them out: it fails on any PySide6 that leaks or over-counts references to ``None`` (or to an object of
ours passed through Qt)."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QObject
from PySide6.QtWidgets import QLabel, QWidget

CALLS = 2000


def _none_refs_after(call) -> int:
    before = sys.getrefcount(None)
    for _ in range(CALLS):
        call()
    return sys.getrefcount(None) - before


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="None is immortal on Python 3.12+: its count says nothing")
def test_void_qt_calls_keep_the_reference_count_of_none(qtbot):
    label = QLabel()
    qtbot.addWidget(label)
    widget = QWidget()
    qtbot.addWidget(widget)
    holder = QObject()
    drift = {
        "QLabel.setText": _none_refs_after(lambda: label.setText("x")),
        "QWidget.setToolTip": _none_refs_after(lambda: widget.setToolTip("tip")),
        "QObject.setObjectName": _none_refs_after(lambda: holder.setObjectName("name")),
        "QWidget.update": _none_refs_after(widget.update),
    }
    # A few references may come or go with Python's own caches; a leak shows as one per call.
    assert {call: d for call, d in drift.items() if abs(d) > CALLS // 100} == {}


def test_objects_passed_through_qt_keep_their_reference_count(qtbot):
    label = QLabel()
    qtbot.addWidget(label)
    text = "a string of ours " * 3
    before = sys.getrefcount(text)
    for _ in range(CALLS):
        label.setText(text)
        label.text()
    assert abs(sys.getrefcount(text) - before) <= 2
