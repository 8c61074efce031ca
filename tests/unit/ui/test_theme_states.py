"""Issue 64, item 11: in the dark theme spin boxes' arrows were invisible, a disabled menu item looked enabled and a
check box was a black square. The contrast check extended to these states — arrows, indicators, disabled items —
in both themes, on the widgets as drawn."""

from __future__ import annotations

from collections import Counter

import pytest
from PySide6.QtCore import QRect
from PySide6.QtWidgets import (
    QApplication,
    QCheckBox,
    QMenu,
    QSpinBox,
    QStyle,
    QStyleOptionButton,
    QStyleOptionSpinBox,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.ui.theme import apply_appearance
from tests.helpers.visual_check import luminance


def contrast(widget: QWidget, rect: QRect) -> float:
    """The contrast ratio between the commonest pixel of ``rect`` (its background) and the one farthest from it."""
    image = widget.grab(rect).toImage()
    lum = [luminance(*image.pixelColor(x, y).getRgb()[:3]) for y in range(image.height()) for x in range(image.width())]
    background = Counter(round(v, 3) for v in lum).most_common(1)[0][0]
    far = max(lum, key=lambda v: abs(v - background))
    return (max(background, far) + 0.05) / (min(background, far) + 0.05)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_arrows_indicators_and_disabled_items_are_seen(qtbot, theme, restore_appearance):
    app = QApplication.instance()
    apply_appearance(app, theme, 0)  # type: ignore[arg-type]
    host = QWidget()
    qtbot.addWidget(host)
    layout = QVBoxLayout(host)
    spin, box = QSpinBox(), QCheckBox("A server")
    spin.setValue(5)
    layout.addWidget(spin)
    layout.addWidget(box)
    host.resize(260, 100)
    host.show()
    qtbot.waitExposed(host)
    option = QStyleOptionSpinBox()
    spin.initStyleOption(option)
    for control in (QStyle.SubControl.SC_SpinBoxUp, QStyle.SubControl.SC_SpinBoxDown):
        arrow = spin.style().subControlRect(QStyle.ComplexControl.CC_SpinBox, option, control, spin)
        assert contrast(spin, arrow) >= 3.0, (theme, control)
    check = QStyleOptionButton()
    box.initStyleOption(check)
    indicator = box.style().subElementRect(QStyle.SubElement.SE_CheckBoxIndicator, check, box)
    assert contrast(box, indicator.adjusted(-1, -1, 1, 1)) >= 3.0, theme  # its edge, unchecked

    menu = QMenu()
    qtbot.addWidget(menu)
    enabled, disabled = menu.addAction("Enabled item"), menu.addAction("Disabled item")
    disabled.setEnabled(False)
    menu.show()
    qtbot.waitExposed(menu)
    on = contrast(menu, menu.actionGeometry(enabled))
    off = contrast(menu, menu.actionGeometry(disabled))
    assert on >= 4.5 and off >= 1.5 and on / off >= 1.8, (theme, on, off)  # readable, and plainly not enabled
