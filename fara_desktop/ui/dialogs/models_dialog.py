""" "Get models": the curated catalog judged for this machine, hub search, paste-a-link, and the downloads.

Nothing here touches the network until the user clicks Search, Get or Download.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QKeyEvent
from PySide6.QtWidgets import (
    QDialog,
    QDialogButtonBox,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QMessageBox,
    QPushButton,
    QScrollArea,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.models.catalog import CatalogEntry
from fara_desktop.models.hub import (
    DownloadError,
    HubModel,
    RemoteFile,
    configured_endpoint,
    host_of,
    is_configured_hub,
    list_gguf_files,
    parse_model_reference,
    resolve_remote_file,
    resolve_with_projector,
    search_hub,
)
from fara_desktop.planning.catalog_fit import CatalogAssessment, CatalogOption, trade_off_words
from fara_desktop.planning.tuning import VERDICT_LABELS, architecture_reasons, verdict_kind
from fara_desktop.text.format import format_bandwidth, format_size
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.download_task import DownloadTask
from fara_desktop.ui.theme import RECOMMENDED_ROW, VERDICT_COLORS, theme_in_use
from fara_desktop.ui.widgets.download_row import DownloadRow
from fara_desktop.ui.widgets.plain_text import plain_label, plain_message_box, plain_tooltip
from fara_desktop.ui.window_state import fit_to_screen

COLUMNS = ["Model", "Download size", "On this machine", "Speed here", "License", ""]


def _field_with_button(
    layout: QVBoxLayout, name: str, placeholder: str, label: str, action: Callable[[], None]
) -> tuple[QLineEdit, QPushButton]:
    """A line edit with its button on one row; Enter in the field does what the button does."""
    row = QHBoxLayout()
    edit = QLineEdit()
    edit.setObjectName(f"{name}Edit")
    edit.setPlaceholderText(placeholder)
    edit.returnPressed.connect(action)
    button = QPushButton(label)
    button.setObjectName(f"{name}Button")
    button.clicked.connect(action)
    row.addWidget(edit, 1)
    row.addWidget(button)
    layout.addLayout(row)
    return edit, button


def context_words(n_ctx: int) -> str:
    """ "8k context"; a model too big for any useful context is estimated at a few hundred tokens: said so."""
    return f"{n_ctx // 1024}k context" if n_ctx >= 1024 else f"a context of only {n_ctx} tokens"


def entry_tags(entry: CatalogEntry) -> str:
    """What kind of model it is, in a few words after its name: " · mixture of experts · hybrid · thinks"."""
    tags = []
    if entry.n_expert:
        tags.append("mixture of experts")
    if entry.kv_layers is not None:
        tags.append("hybrid")
    if entry.tools:
        tags.append("calls tools")
    if entry.reasoning:
        tags.append("thinks first" if entry.reasoning == "always" else "thinking on/off")
    if entry.vision:
        tags.append("sees pictures")
    if entry.released:
        tags.append(str(entry.released))
    return "".join(f" · {tag}" for tag in tags)


class GetModelsDialog(QDialog):
    """The catalog with verdicts for this machine, hub search and paste, and the running downloads."""

    modelReady = Signal(object)  # Path of a verified download the user wants to use
    downloaded = Signal(object)  # Path of a verified download: the models here changed

    def __init__(
        self,
        assess: Callable[[], CatalogAssessment],
        parent: QWidget | None = None,
        endpoint: str | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("getModelsDialog")
        self.setWindowTitle("Get models")
        fit_to_screen(self, QSize(980, 680))
        self.endpoint = endpoint
        self.cache_dir = cache_dir
        self._assess = assess
        self.assessment: CatalogAssessment | None = None
        self.recommended_item: QTreeWidgetItem | None = None
        self._calls: set[BackgroundCall] = set()
        self.rows: list[DownloadRow] = []

        layout = QVBoxLayout(self)
        self.summary = plain_label("Judging each model for this machine…")
        self.summary.setObjectName("catalogSummary")
        self.summary.setWordWrap(True)
        self.recommendation = plain_label()
        self.recommendation.setObjectName("catalogRecommendation")
        strong = QFont(self.recommendation.font())
        strong.setBold(True)
        self.recommendation.setFont(strong)
        self.recommendation.setWordWrap(True)
        self.recommendation.hide()
        self.faster_button = QPushButton()  # the pick's faster, smaller file, one click away beside it
        self.faster_button.setObjectName("fasterChoiceButton")
        self.faster_button.hide()
        self.faster_button.clicked.connect(lambda: self.download_option(self.faster) if self.faster else None)
        self.faster: CatalogOption | None = None
        picked = QHBoxLayout()
        picked.addWidget(self.recommendation, 1)
        picked.addWidget(self.faster_button, 0, Qt.AlignmentFlag.AlignTop)
        layout.addWidget(self.summary)
        layout.addLayout(picked)

        self.tabs = QTabWidget()
        self.tabs.setObjectName("modelSourceTabs")
        self.tree = QTreeWidget()
        self.tree.setObjectName("catalogTree")
        self.tree.setAccessibleName("Model catalog")
        self.tree.setColumnCount(len(COLUMNS))
        self.tree.setHeaderLabels(COLUMNS)
        self.tree.setRootIsDecorated(False)
        self.tree.setUniformRowHeights(False)
        header = self.tree.header()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(5, QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(False)
        self.tabs.addTab(self.tree, "Recommended models")
        self.tabs.addTab(self._build_search_tab(), "Search the hub")
        layout.addWidget(self.tabs, 1)

        self.paste_edit, self.paste_button = _field_with_button(
            layout,
            "pasteModel",
            "Paste a repository id (owner/name) or the address of a .gguf file",
            "Get",
            self.get_pasted,
        )

        self.downloads = QWidget()
        self.downloads.setObjectName("downloadsArea")
        self.downloads_layout = QVBoxLayout(self.downloads)
        self.downloads_layout.setContentsMargins(0, 0, 0, 0)
        scroll = QScrollArea()
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QFrame.Shape.NoFrame)
        scroll.setWidget(self.downloads)
        scroll.setMaximumHeight(220)
        scroll.hide()  # shown with the first download
        self.downloads_scroll = scroll
        layout.addWidget(scroll)

        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.close)
        layout.addWidget(buttons)
        self._run(assess, self.show_assessment, lambda exc: self.summary.setText(f"The catalog is unavailable: {exc}"))

    # ------------------------------------------------------------------ plumbing

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Enter in a search or repository box searches (the box's own ``returnPressed``) and nothing else: a
        dialog's Enter also pressed its default button, the recommended model's Download (2.6 GiB)."""
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and isinstance(self.focusWidget(), QLineEdit):
            event.accept()
            return
        super().keyPressEvent(event)

    def _run(self, fn: Callable[[], Any], done: Callable[[Any], None], failed: Callable[[Exception], None]) -> None:
        call = BackgroundCall(fn, self)
        call.done.connect(done)
        call.failed.connect(failed)
        for signal in (call.done, call.failed):
            signal.connect(lambda _result, c=call: self._calls.discard(c))
        self._calls.add(call)
        call.start()

    # ------------------------------------------------------------------ catalog

    def show_assessment(self, assessment: CatalogAssessment) -> None:
        self.assessment = assessment
        self.summary.setText(
            f"This machine has {format_size(assessment.available_bytes)} of memory free and reads memory at "
            f"{format_bandwidth(assessment.bandwidth_bytes_per_s)}. Sizes are estimates until the download starts; "
            "speeds are what the tuning model expects here. Nothing is downloaded until you click."
        )
        best, faster = assessment.recommended, assessment.faster_choice
        if best is not None:
            self.recommendation.setText(f"★ Worth downloading for this machine: {trade_off_words(best, faster)}")
            why = [
                *architecture_reasons(best.entry.metadata(best.quant)),
                "The best quality that fits with room for a useful context and writes faster than you read.",
            ]
            self.recommendation.setToolTip(plain_tooltip("\n".join(why)))
            self.recommendation.show()
        self.faster = faster
        self.faster_button.setVisible(faster is not None)
        if faster is not None:
            self.faster_button.setText(f"Download {faster.quant.quant} instead")
        self.tree.clear()
        self.recommended_item = None
        bold = QFont(self.tree.font())
        bold.setBold(True)
        current: QTreeWidgetItem | None = None
        for option in assessment.options:
            if current is None or current.data(0, Qt.ItemDataRole.UserRole) != option.entry.id:
                current = QTreeWidgetItem(
                    self.tree, [f"{option.entry.name}{entry_tags(option.entry)} — {option.entry.description}"]
                )
                current.setData(0, Qt.ItemDataRole.UserRole, option.entry.id)
                current.setToolTip(0, plain_tooltip(f"{option.entry.name}: {option.entry.description}"))  # cut to fit
                current.setFont(0, bold)
                current.setFirstColumnSpanned(True)
                current.setFlags(Qt.ItemFlag.ItemIsEnabled)
            self._add_option(current, option)
        self.tree.expandAll()
        self._scroll_to_recommended()

    def _scroll_to_recommended(self) -> None:
        if self.recommended_item is not None:
            self.tree.scrollToItem(self.recommended_item, QTreeWidget.ScrollHint.PositionAtCenter)

    def _add_option(self, parent: QTreeWidgetItem, option: CatalogOption) -> None:
        verdict = option.verdict
        pair = self.assessment.pairs.get(option.key) if self.assessment is not None else None
        kind = verdict_kind(option.verdict.verdict, option.expected_tok_per_s)
        label = f"    {option.quant.quant}" + ("  ★ worth downloading" if option.recommended else "")
        item = QTreeWidgetItem(
            parent,
            [
                label,
                f"≈ {format_size(option.quant.estimated_bytes)}",
                f"{VERDICT_LABELS[kind]} · needs ≈ {format_size(option.memory_bytes)} "
                f"({context_words(option.cost.memory.n_ctx)})" + (f" · draft ×{pair.gain:.1f}" if pair else ""),
                f"≈ {option.expected_tok_per_s:.0f} tokens/s",
                option.entry.license,
                "",
            ],
        )
        item.setData(0, Qt.ItemDataRole.UserRole, option.key)
        item.setData(2, Qt.ItemDataRole.UserRole, kind)
        theme = theme_in_use()
        item.setForeground(2, QColor(VERDICT_COLORS[theme][kind]))
        if option.recommended:
            for column in range(len(COLUMNS)):
                background, text = RECOMMENDED_ROW[theme]
                item.setBackground(column, QColor(background))
                if column != 2:  # the verdict keeps its colour
                    item.setForeground(column, QColor(text))
            self.recommended_item = item
        here = f"On this machine it {option.cost.summary()}."
        why = architecture_reasons(option.entry.metadata(option.quant))
        if option.differences:
            item.setText(0, label + "  ⚠ the file differs")
            differs = "The file on disk differs from the catalog: " + "; ".join(option.differences)
            item.setToolTip(0, plain_tooltip(differs))
        paired = [pair.words()] if pair else []
        item.setToolTip(2, plain_tooltip("\n".join([here, *why, verdict.message, *verdict.suggestions, *paired])))
        item.setToolTip(3, plain_tooltip(here + (f"\n{pair.words()}" if pair else "")))
        if option.lacks_projector:
            button = QPushButton("Get its projector")
            button.setToolTip(
                plain_tooltip(
                    f"Installed, but without the file that lets it see pictures: "
                    f"{option.entry.repo} · {option.entry.projector}"
                )
            )
            button.clicked.connect(lambda _=False, o=option: self.download_projector(o))
        elif option.installed:
            button = QPushButton("Installed ✓")
            button.setEnabled(False)
        else:
            button = QPushButton("Download")
            files = (
                f"{option.quant.file_name} and its projector {option.entry.projector} (the file that lets it "
                "see pictures)"
                if option.entry.projector
                else option.quant.file_name
            )
            button.setToolTip(plain_tooltip(f"{option.entry.repo} · {files}"))
            button.clicked.connect(lambda _=False, o=option: self.download_option(o))
        button.setObjectName(f"download:{option.key}")
        self.tree.setItemWidget(item, 5, button)

    def download_option(self, option: CatalogOption) -> DownloadRow:
        """The model, and for one that sees, its projector after it: one row, one folder (the repository's)."""
        entry, quant = option.entry, option.quant
        return self._download(
            f"{entry.name} {quant.quant}",
            lambda: resolve_with_projector(entry.repo, quant.file_name, quant.quant, entry.projector, self.endpoint),
        )

    def download_projector(self, option: CatalogOption) -> DownloadRow:
        """An installed model that sees gets its projector beside it, named after it (``mmproj-<model>.gguf``:
        unsloth names every size's projector alike, and two sizes may share a folder)."""
        entry, installed = option.entry, option.installed
        assert installed is not None and entry.projector is not None
        beside = installed.parent / f"mmproj-{installed.stem}.gguf"
        quant = option.quant

        def projector_only() -> list[RemoteFile]:
            return resolve_with_projector(
                entry.repo, quant.file_name, quant.quant, entry.projector, self.endpoint, model=False
            )

        return self._download(f"{entry.name}: its projector", projector_only, beside)

    # ------------------------------------------------------------------ search and paste

    def _build_search_tab(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        self.search_edit, self.search_button = _field_with_button(
            layout,
            "hubSearch",
            "Search GGUF models on the hub by name, e.g. qwen2.5 1.5b instruct",
            "Search",
            self.search,
        )
        self.search_status = plain_label("Searching needs the network; nothing is sent until you press Search.")
        self.search_status.setObjectName("hubSearchStatus")
        self.search_status.setWordWrap(True)
        self.search_retry = QPushButton("Retry")
        self.search_retry.setObjectName("hubRetry")
        self.search_retry.setAutoDefault(False)
        self.search_retry.setVisible(False)
        self.search_retry.clicked.connect(lambda: self._last_request and self._last_request())
        self._last_request: Callable[[], None] | None = None
        status_row = QHBoxLayout()
        status_row.addWidget(self.search_status, 1)
        status_row.addWidget(self.search_retry, 0, Qt.AlignmentFlag.AlignTop)
        layout.addLayout(status_row)
        lists = QHBoxLayout()
        self.results = QListWidget()
        self.results.setObjectName("hubResults")
        self.results.currentItemChanged.connect(self._result_chosen)
        self.files = QListWidget()
        self.files.setObjectName("hubFiles")
        self.files.itemDoubleClicked.connect(lambda item: self.download_remote(item.data(256)))
        lists.addWidget(self.results, 1)
        lists.addWidget(self.files, 1)
        layout.addLayout(lists, 1)
        self.file_download_button = QPushButton("Download the selected file")
        self.file_download_button.setObjectName("hubFileDownloadButton")
        self.file_download_button.clicked.connect(
            lambda: self.files.currentItem() and self.download_remote(self.files.currentItem().data(256))
        )
        layout.addWidget(self.file_download_button, 0, Qt.AlignmentFlag.AlignRight)
        return page

    def search(self) -> None:
        query = self.search_edit.text().strip()
        if not query:
            return
        self.search_status.setText(f"Searching for “{query}”…")
        self._last_request = self.search
        self.search_retry.setVisible(False)
        self.results.clear()
        self.files.clear()
        self._run(lambda: search_hub(query, self.endpoint), self._show_results, self._search_failed)

    def _show_results(self, models: list[HubModel]) -> None:
        self.search_status.setText(f"{len(models)} repositories with GGUF files" if models else "Nothing found.")
        for model in models:
            item = QListWidgetItem(f"{model.repo_id}   ·   {model.downloads:,} downloads")
            item.setData(256, model.repo_id)
            self.results.addItem(item)

    def _search_failed(self, error: Exception) -> None:
        text = str(error)
        self.search_status.setText(text[:1].upper() + text[1:] + ("" if text.endswith(".") else "."))
        self.search_retry.setVisible(self._last_request is not None)

    def _result_chosen(self, item: QListWidgetItem | None, _previous: QListWidgetItem | None) -> None:
        if item is not None:
            self.show_repo_files(item.data(256))

    def show_repo_files(self, repo_id: str, revision: str | None = None) -> None:
        self.files.clear()
        self.search_status.setText(f"Reading the file list of {repo_id}…")
        self._last_request = lambda: self.show_repo_files(repo_id, revision)
        self.search_retry.setVisible(False)
        self._run(lambda: list_gguf_files(repo_id, revision, self.endpoint), self._show_files, self._search_failed)

    def _show_files(self, files: list[RemoteFile]) -> None:
        budget = self.assessment.available_bytes if self.assessment else None
        for remote in files:
            fits = "" if budget is None else ("  · fits in memory" if remote.size * 1.25 < budget else "  · too big")
            item = QListWidgetItem(f"{remote.filename}   ·   {format_size(remote.size)}{fits}")
            item.setData(256, remote)
            self.files.addItem(item)
        name = files[0].repo_id if files else "this repository"
        self.search_status.setText(
            f"{len(files)} GGUF files in {name}; pick one and press Download." if files else f"No GGUF files in {name}."
        )

    def get_pasted(self) -> None:
        text = self.paste_edit.text().strip()
        if not text:
            return
        try:
            ref = parse_model_reference(text)
        except DownloadError as exc:
            row = self._new_row(text)
            row.fail_before_start(str(exc))
            return
        if (
            ref.endpoint
            and not is_configured_hub(ref.endpoint, self.endpoint)
            and not self.confirm_host(host_of(ref.endpoint))
        ):
            return
        if ref.filename is None:  # a whole repository: show its files to choose from
            self.tabs.setCurrentIndex(1)
            self.show_repo_files(ref.repo_id, ref.revision)
            return
        self._download(
            f"{ref.repo_id} · {ref.filename}",
            lambda: resolve_remote_file(ref.repo_id, ref.filename, None, ref.revision, ref.endpoint or self.endpoint),
        )

    def confirm_host(self, host: str) -> bool:
        """A pasted link to another server than the configured hub: say so, and download only if the user agrees.
        (Tests replace this method; the box is modal.)"""
        box = plain_message_box(
            QMessageBox.Icon.Question,
            "Download from another server?",
            f"This link points at {host}, not at {host_of(self.endpoint or configured_endpoint())}. Files from it "
            "are still checked against the sha256 that server publishes, but only you can judge whether you trust it. "
            "Your "
            f"Hugging Face token is not sent to {host}.\n\nDownload from {host}?",
            self,
        )
        box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        box.setDefaultButton(QMessageBox.StandardButton.No)
        return box.exec() == QMessageBox.StandardButton.Yes

    # ------------------------------------------------------------------ downloads

    def _new_row(self, title: str) -> DownloadRow:
        row = DownloadRow(title)
        row.useRequested.connect(self._use)
        self.downloads_layout.addWidget(row)
        self.downloads_scroll.setMinimumHeight(min(220, 90 * (len(self.rows) + 1)))
        self.downloads_scroll.show()
        self.rows.append(row)
        row.destroyed.connect(lambda _=None, r=row: self.rows.remove(r) if r in self.rows else None)
        return row

    def _download(
        self, title: str, resolve: Callable[[], RemoteFile | list[RemoteFile]], publish_as: Path | None = None
    ) -> DownloadRow:
        row = self._new_row(title)
        self._run(
            resolve, lambda remotes: self._start(row, remotes, publish_as), lambda exc: row.fail_before_start(str(exc))
        )
        return row

    def download_remote(self, remote: RemoteFile) -> DownloadRow:
        row = self._new_row(f"{remote.repo_id} · {remote.filename}")
        self._start(row, remote)
        return row

    def _start(self, row: DownloadRow, remotes: RemoteFile | list[RemoteFile], publish_as: Path | None = None) -> None:
        try:
            task = DownloadTask(remotes, self.cache_dir, self, publish_as)
        except DownloadError as exc:  # a listing's name that would land outside the cache
            row.fail_before_start(str(exc))
            return
        row.attach(task)
        task.finished.connect(self._downloaded)

    def _downloaded(self, path: Path) -> None:
        """A download is verified: its model shows as installed here at once (and wherever models are listed)."""
        self.downloaded.emit(path)
        self._run(self._assess, self.show_assessment, lambda _exc: None)

    def _use(self, path: Path) -> None:
        self.modelReady.emit(path)
        self.close()

    def pause_all(self) -> None:
        """The app is closing: stop every transfer and keep the partial files for next time."""
        for row in list(self.rows):
            if row.task is not None and row.task.running:
                row.task.pause()
                row.task.wait(5.0)
