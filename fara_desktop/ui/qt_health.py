"""Is the PySide6 in use sound? A known release drops a reference to ``None`` per void Qt call, which aborts
CPython 3.10/3.11 after a long session (see pyproject). The smoke check (and the frozen build's) measures it."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QLabel

PROBE_CALLS = 2000


def none_refcount_drift(calls: int = PROBE_CALLS) -> int | None:
    """How far ``None``'s reference count moves over ``calls`` void Qt calls (about ``-calls`` on a broken
    PySide6, about 0 on a sound one); None on Pythons where None is immortal and the count means nothing."""
    if sys.version_info >= (3, 12):
        return None
    label = QLabel()
    try:
        before = sys.getrefcount(None)
        for _ in range(calls):
            label.setText("")
        return sys.getrefcount(None) - before
    finally:
        label.deleteLater()


def refcount_problem(calls: int = PROBE_CALLS) -> str | None:
    """A sentence for the user when this PySide6 leaks references (the app would abort later), else None."""
    drift = none_refcount_drift(calls)
    if drift is None or abs(drift) <= calls // 100:
        return None
    import PySide6

    return (
        f"PySide6 {PySide6.__version__} miscounts references ({drift:+,} over {calls:,} calls) and would stop this "
        "Python during a long session; install another release:  pip install 'PySide6-Essentials<6.12'"
    )
