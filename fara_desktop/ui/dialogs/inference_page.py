"""Settings ▸ Inference: each value tuned for this machine and model ("auto"), or pinned by the user."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItemModel
from PySide6.QtWidgets import QComboBox, QFormLayout, QHBoxLayout, QPushButton, QSpinBox, QWidget

from fara_desktop.machine.kernels import known_verdicts
from fara_desktop.planning.params import TunedParams
from fara_desktop.planning.tuning import KV_TYPES
from fara_desktop.settings import InferenceOverrides
from fara_desktop.settings.fields import KERNEL_PATHS, described
from fara_desktop.ui.widgets.plain_text import plain_label, plain_tooltip
from fara_desktop.ui.widgets.setting_fields import add_row, show_value, spin_value, whole_spin


def _auto_spin(key: str, name: str, tuned: int | None, value: int | None) -> QSpinBox:
    """A spin box whose lowest value means "auto": it then shows the tuned value."""
    spin = whole_spin(key, name, f"auto (= {tuned:,})" if tuned else "auto")
    show_value(spin, key, value)
    return spin


def _tri_state(key: str, name: str, tuned: bool | None, value: bool | None) -> QComboBox:
    combo = QComboBox()
    combo.setObjectName(name)
    item = described(key)
    combo.setAccessibleName(item.label)
    combo.setAccessibleDescription(item.help)
    combo.setToolTip(plain_tooltip(item.help))
    combo.addItem(f"auto (= {'on' if tuned else 'off'})", None)
    combo.addItem("on", True)
    combo.addItem("off", False)
    combo.setCurrentIndex(0 if value is None else 1 if value else 2)
    return combo


def _with_auto_button(field: QSpinBox | QComboBox, label: str) -> QWidget:
    """The field and an "Auto" button that gives the choice back to the tuning (a spin box went back to auto only
    by stepping down to its lowest value); the button is enabled while the field holds an override."""
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    button = QPushButton("Auto")
    button.setObjectName(f"{field.objectName()}Auto")
    button.setAccessibleName(f"{label}: back to auto")
    button.setToolTip("Use the value tuned for this machine and model")
    button.setAutoDefault(False)
    layout.addWidget(field, 1)
    layout.addWidget(button, 0)
    if isinstance(field, QSpinBox):
        button.clicked.connect(lambda: field.setValue(field.minimum()))
        field.valueChanged.connect(lambda value: button.setEnabled(value != field.minimum()))
        button.setEnabled(field.value() != field.minimum())
    else:
        button.clicked.connect(lambda: field.setCurrentIndex(0))
        field.currentIndexChanged.connect(lambda index: button.setEnabled(index != 0))
        button.setEnabled(field.currentIndex() != 0)
    return row


# What the tuning's reasons are about, in the words of the page (not n_ctx, kv_type, n_threads_batch).
TUNING_LABELS = {
    "n_ctx": "Context length",
    "n_threads": "Generation threads",
    "n_threads_batch": "Prompt threads",
    "n_batch": "Batch size",
    "n_ubatch": "Micro-batch size",
    "kv_type": "KV cache",
    "flash_attn": "Flash attention",
    "use_mmap": "Memory-map weights",
    "use_mlock": "Lock weights in RAM",
}


class InferencePage(QWidget):
    """The Inference page's fields; ``overrides`` reads them back."""

    def __init__(self, tuned: TunedParams | None, chosen: InferenceOverrides) -> None:
        super().__init__()
        form = QFormLayout(self)
        self.ctx = _auto_spin("inference.n_ctx", "contextLength", tuned.n_ctx if tuned else None, chosen.n_ctx)
        self.threads = _auto_spin(
            "inference.n_threads", "threads", tuned.n_threads if tuned else None, chosen.n_threads
        )
        self.threads_batch = _auto_spin(
            "inference.n_threads_batch",
            "promptThreads",
            tuned.n_threads_batch if tuned else None,
            chosen.n_threads_batch,
        )
        self.batch = _auto_spin("inference.n_batch", "batchSize", tuned.n_batch if tuned else None, chosen.n_batch)
        self.kv = QComboBox()
        self.kv.setObjectName("kvCacheType")
        kv_field = described("inference.kv_type")
        self.kv.setAccessibleName(kv_field.label)
        self.kv.setToolTip(plain_tooltip(kv_field.help))
        self.kv.addItem(f"auto (= {tuned.kv_type if tuned else 'f16'})", None)
        for name in KV_TYPES:
            self.kv.addItem(name, name)
        self.kv.setCurrentIndex(self.kv.findData(chosen.kv_type) if chosen.kv_type else 0)
        self.flash = _tri_state(
            "inference.flash_attn", "flashAttention", tuned.flash_attn if tuned else False, chosen.flash_attn
        )
        self.mmap = _tri_state("inference.use_mmap", "memoryMap", tuned.use_mmap if tuned else True, chosen.use_mmap)
        self.mlock = _tri_state(
            "inference.use_mlock", "lockInMemory", tuned.use_mlock if tuned else False, chosen.use_mlock
        )
        self.parallel = _auto_spin(
            "inference.parallel", "parallelConversations", tuned.parallel if tuned else 1, chosen.parallel
        )
        self.speculation = _tri_state("inference.speculation", "speculation", True, chosen.speculation)
        self.draft = _tri_state("inference.draft_model", "draftModel", True, chosen.draft_model)
        self.kernel = _kernel_paths(chosen.kernel_path)
        fields: tuple[tuple[str, QSpinBox | QComboBox], ...] = (
            ("n_ctx", self.ctx),
            ("n_threads", self.threads),
            ("n_threads_batch", self.threads_batch),
            ("n_batch", self.batch),
            ("kv_type", self.kv),
            ("flash_attn", self.flash),
            ("use_mmap", self.mmap),
            ("use_mlock", self.mlock),
            ("parallel", self.parallel),
            ("speculation", self.speculation),
            ("draft_model", self.draft),
            ("kernel_path", self.kernel),
        )
        for key, field in fields:
            add_row(form, f"inference.{key}", _with_auto_button(field, field.accessibleName()))
        note = plain_label(
            "“auto” is tuned for this machine and model. Changes here reload the model when you press OK."
        )
        note.setObjectName("reloadNote")
        note.setWordWrap(True)
        form.addRow(note)
        if tuned:
            why = plain_label(
                "\n".join(f"• {TUNING_LABELS.get(key, key)}: {reason}" for key, reason in tuned.reasons.items())
            )
            why.setObjectName("tuningReasons")
            why.setWordWrap(True)
            form.addRow(why)

    def overrides(self) -> InferenceOverrides:
        return InferenceOverrides(
            n_ctx=spin_value(self.ctx, "inference.n_ctx"),
            n_threads=spin_value(self.threads, "inference.n_threads"),
            n_threads_batch=spin_value(self.threads_batch, "inference.n_threads_batch"),
            n_batch=spin_value(self.batch, "inference.n_batch"),
            kv_type=self.kv.currentData(),
            flash_attn=self.flash.currentData(),
            use_mmap=self.mmap.currentData(),
            use_mlock=self.mlock.currentData(),
            kernel_path=self.kernel.currentData(),
            parallel=spin_value(self.parallel, "inference.parallel"),
            speculation=self.speculation.currentData(),
            draft_model=self.draft.currentData(),
        ).validated()


def _kernel_paths(pinned: str | None) -> QComboBox:
    """auto, then each path; one that failed this machine's check is shown with why, and cannot be chosen."""
    combo = QComboBox()
    combo.setObjectName("kernelPath")
    item = described("inference.kernel_path")
    combo.setAccessibleName(item.label)
    combo.setToolTip(plain_tooltip(item.help))
    combo.addItem("auto (the fastest correct here)", None)
    verdicts = known_verdicts()
    for key in KERNEL_PATHS:
        verdict = verdicts.get(key)
        combo.addItem(key if verdict is None or verdict.usable else f"{key} — unusable here", key)
        if verdict is not None and not verdict.usable:
            combo.setItemData(combo.count() - 1, plain_tooltip(verdict.reason), Qt.ItemDataRole.ToolTipRole)
            model = combo.model()
            if isinstance(model, QStandardItemModel):
                model.item(combo.count() - 1).setEnabled(False)
    index = combo.findData(pinned) if pinned else 0
    combo.setCurrentIndex(max(index, 0))
    return combo
