"""Fields of the settings dialog built from the one description of each setting (``settings.fields``): the range,
step and unit, the label, and the help line (the tooltip of the label and the field, and their accessible
description), so the dialog and the settings file never disagree on a range."""

from __future__ import annotations

from PySide6.QtWidgets import QAbstractSpinBox, QCheckBox, QDoubleSpinBox, QFormLayout, QLabel, QSpinBox, QWidget

from fara_desktop.settings.fields import SettingField, described
from fara_desktop.ui.widgets.plain_text import plain_label, plain_tooltip


def _describe(widget: QWidget, item: SettingField) -> None:
    widget.setAccessibleName(item.label)
    widget.setAccessibleDescription(item.help)
    widget.setToolTip(plain_tooltip(item.help))


def whole_spin(key: str, name: str, auto_text: str | None = None) -> QSpinBox:
    """A whole number within the setting's range. A setting that may be unset starts at 0 (or -1 when 0 is a value)
    shown as ``auto_text`` or the field's own word for it; a value typed below the range is brought up to it when
    the settings are validated."""
    item = described(key)
    spin = QSpinBox()
    spin.setObjectName(name)
    low, high = int(item.low or 0), int(item.high or 0)
    if item.auto:
        low = unset_value(item)
        spin.setSpecialValueText(auto_text or item.auto)
    spin.setRange(low, high)
    spin.setSingleStep(int(item.step))
    if item.unit:
        spin.setSuffix(f" {item.unit}")
    spin.setCorrectionMode(QAbstractSpinBox.CorrectionMode.CorrectToNearestValue)
    _describe(spin, item)
    return spin


def unset_value(item: SettingField) -> int:
    """The spin box value that means "unset" (auto, random, no limit)."""
    return -1 if (item.low or 0) <= 0 else 0


def spin_value(spin: QSpinBox, key: str) -> int | None:
    """The spin box's value, None for its unset value."""
    item = described(key)
    return None if item.auto and spin.value() <= unset_value(item) else spin.value()


def show_value(spin: QSpinBox, key: str, value: int | None) -> None:
    spin.setValue(unset_value(described(key)) if value is None else value)


def decimal_spin(key: str, name: str) -> QDoubleSpinBox:
    item = described(key)
    spin = QDoubleSpinBox()
    spin.setObjectName(name)
    spin.setDecimals(item.decimals)
    spin.setRange(float(item.low or 0), float(item.high or 0))
    spin.setSingleStep(item.step)
    if item.unit:
        spin.setSuffix(f" {item.unit}")
    _describe(spin, item)
    return spin


def check_box(key: str, name: str) -> QCheckBox:
    item = described(key)
    box = QCheckBox(item.label)
    box.setObjectName(name)
    _describe(box, item)
    return box


def add_row(form: QFormLayout, key: str, widget: QWidget) -> QLabel:
    """The setting's label (with its help as tooltip) and its field, as one row of ``form``."""
    item = described(key)
    label = plain_label(item.label)
    label.setToolTip(plain_tooltip(item.help))
    label.setBuddy(widget)
    if not widget.toolTip():
        _describe(widget, item)
    form.addRow(label, widget)
    return label
