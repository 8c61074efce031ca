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
    QPushButton,
    QSpinBox,
    QStyle,
    QStyleOptionButton,
    QStyleOptionSpinBox,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.ui.theme import apply_appearance
from tests.helpers.screenshots import keep_screenshot
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
    keep_screenshot(host, f"issue64-11-spin-box-and-check-box-{theme}")
    keep_screenshot(menu, f"issue64-11-disabled-menu-item-{theme}")


def lowest_ink_row(widget: QWidget, text_far_from: float) -> int:
    """The lowest row of ``widget``'s drawing (inside its 4-pixel frame) with a pixel of the text's luminance far
    from the background's: where the text's descenders end."""
    image = widget.grab().toImage()
    rows = [
        y
        for y in range(4, image.height() - 4)
        for x in range(6, image.width() - 6)
        if abs(luminance(*image.pixelColor(x, y).getRgb()[:3]) - text_far_from) > 0.15
    ]
    return max(rows, default=-1)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_the_focus_ring_keeps_the_underscores_and_descenders(qtbot, theme, restore_appearance):
    """Issue 64, item 13: the focused "Download Q4_K_M instead" button lost its underscores: the focus ring's wider
    border took the height of the text's line. A button's and a tool button's descenders stand focused as not."""
    app = QApplication.instance()
    apply_appearance(app, theme, 0)  # type: ignore[arg-type]
    host = QWidget()
    qtbot.addWidget(host)
    layout = QVBoxLayout(host)
    buttons = [QPushButton("Download Q4_K_M instead"), QToolButton()]
    buttons[1].setText("Copy_jpg")
    for button in buttons:
        layout.addWidget(button)
    host.show()
    host.activateWindow()
    qtbot.waitActive(host)
    for button in buttons:
        background = luminance(*button.grab().toImage().pixelColor(button.width() // 2, 3).getRgb()[:3])
        unfocused = lowest_ink_row(button, background)
        button.setFocus()
        qtbot.waitUntil(button.hasFocus)
        assert lowest_ink_row(button, background) >= unfocused > 0, (theme, button.text())
