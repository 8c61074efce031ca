"""Settings: model choice, inference overrides ("auto (= tuned value)"), sampling, appearance."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QListWidget,
    QPushButton,
    QScrollArea,
    QStackedWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from fara_desktop.engine.kv_disk import KVDiskStore
from fara_desktop.engine.remote_backend import NOT_SENT_TO_SERVERS
from fara_desktop.models.discovery import DiscoveredModel
from fara_desktop.models.naming import model_display_name
from fara_desktop.planning.planner import StartupPlan
from fara_desktop.planning.tuning import VERDICT_LABELS, verdict_kind
from fara_desktop.serving.principals import ClientUse
from fara_desktop.settings import THEMES, RemoteChoice, SamplingSettings, Settings
from fara_desktop.settings.fields import described
from fara_desktop.system.api_keys import ApiKeyStore
from fara_desktop.text.format import format_count, format_size
from fara_desktop.text.untrusted import one_line
from fara_desktop.tools.mcp_hub import ServerState
from fara_desktop.ui.dialogs.folder_models import FolderModels
from fara_desktop.ui.dialogs.guide_dialog import GuideDialog
from fara_desktop.ui.dialogs.inference_page import InferencePage
from fara_desktop.ui.dialogs.local_api_page import LocalApiPage
from fara_desktop.ui.dialogs.prompts_page import PromptsPage
from fara_desktop.ui.dialogs.servers_page import ServersPage
from fara_desktop.ui.dialogs.tools_page import ToolsPage
from fara_desktop.ui.widgets.file_dialogs import FolderMemory
from fara_desktop.ui.widgets.focused_help import FocusedHelp
from fara_desktop.ui.widgets.plain_text import plain_label, plain_tooltip
from fara_desktop.ui.widgets.setting_fields import add_row, decimal_spin, show_value, spin_value, whole_spin
from fara_desktop.ui.window_state import fit_to_screen


def _scrolling(page: QWidget) -> QScrollArea:
    """A tall page scrolls on a short screen instead of making the dialog taller than it."""
    area = QScrollArea()
    area.setObjectName("settingsPageScroll")  # the themes paint its viewport and page (dark: not the light default)
    area.setWidget(page)
    area.setWidgetResizable(True)
    area.setFrameShape(QFrame.Shape.NoFrame)
    return area


class SettingsDialog(QDialog):
    """Edits a copy of the settings; ``settings()`` returns the result, ``chosen_model()`` a picked model."""

    def __init__(
        self,
        settings: Settings,
        plan: StartupPlan | None,
        keys: ApiKeyStore,
        parent: QWidget | None = None,
        chat_states: KVDiskStore | None = None,
        conversation: int | None = None,
        tool_states: Callable[[], dict[str, ServerState]] | None = None,
        restart_tool_server: Callable[[str], None] | None = None,
        tools_note: str = "",
        folders: FolderMemory | None = None,
        forget_states: Callable[[], None] | None = None,
        api_clients: Callable[[], Sequence[ClientUse] | None] = lambda: None,
        scan_folder: Callable[[Path], list[DiscoveredModel]] | None = None,
    ) -> None:
        """``chat_states``: the chats' saved KV states, whose size the Prompts page shows (for ``conversation``),
        ``forget_states`` deletes them all (the core's intent); ``api_clients``: what the running local API's
        clients used; ``scan_folder`` finds the models of a folder added on the Model page (listed at once);
        ``tools_note``: what the Tools page says first (the model in use cannot call tools)."""
        super().__init__(parent)
        self.setObjectName("settingsDialog")
        self.setWindowTitle("Settings")
        fit_to_screen(self, QSize(860, 560))
        self._settings = settings
        self._folders_memory = folders or FolderMemory()
        self._plan = plan
        self._chosen: str | None = None
        self._projectors = dict(settings.projectors)  # model path → the projector chosen for it ("": none)
        self._folders = list(settings.extra_model_folders)
        self.folder_models = FolderModels(self, scan_folder, lambda: self._folders, self._folder_models_found)
        self.nav = QListWidget()
        self.nav.setObjectName("settingsNav")
        self.nav.setAccessibleName("Settings pages")
        self.nav.setFixedWidth(150)
        self.pages = QStackedWidget()
        self.servers_page = ServersPage(settings, keys)
        self.servers_page.modelActivated.connect(self.accept)  # a double-clicked server model: chat with it now
        self.local_api_page = LocalApiPage(
            settings.local_api, keys, lambda: {server.name for server in self.servers_page.servers}, clients=api_clients
        )
        self.prompts_page = PromptsPage(settings.prompts, chat_states, conversation, forget_states=forget_states)
        self.tools_page = ToolsPage(settings.tools, tool_states, restart_tool_server, tools_note)
        for title, page in (
            ("Model", self._model_page()),
            ("Servers", _scrolling(self.servers_page)),
            ("Local API", _scrolling(self.local_api_page)),
            ("Inference", _scrolling(self._inference_page())),
            ("Sampling", self._sampling_page()),
            ("Prompts", _scrolling(self.prompts_page)),
            ("Tools", self.tools_page),
            ("Appearance", self._appearance_page()),
        ):
            self.nav.addItem(title)
            self.pages.addWidget(page)
        self.nav.currentRowChanged.connect(self.pages.setCurrentIndex)
        self.nav.setCurrentRow(0)
        standard = QDialogButtonBox.StandardButton
        buttons = QDialogButtonBox(standard.Ok | standard.Cancel | standard.Help)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        buttons.helpRequested.connect(self.open_guide)
        body = QHBoxLayout()
        body.addWidget(self.nav)
        body.addWidget(self.pages, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(body, 1)
        layout.addWidget(buttons)

    def show_page(self, title: str) -> None:
        for row in range(self.nav.count()):
            if self.nav.item(row).text() == title:
                self.nav.setCurrentRow(row)

    # ------------------------------------------------------------------ model page

    def _model_page(self) -> QWidget:
        page = QWidget()
        layout = QVBoxLayout(page)
        intro = plain_label(
            "Models found on this machine. ★ marks the best of the models you have; for ones worth downloading, see "
            "Model ▸ Get models…; your choice is remembered."
        )
        intro.setWordWrap(True)
        self.models = QTableWidget(0, 6)
        self.models.setObjectName("modelTable")
        self.models.setAccessibleName("Models")
        self.models.setHorizontalHeaderLabels(["", "Name", "Size", "Quant", "Found in", "Fit"])
        self.models.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.models.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.models.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.models.verticalHeader().hide()
        header = self.models.horizontalHeader()
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        for column in (0, 2, 3, 5):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.Interactive)
        header.resizeSection(4, 110)
        self.models.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        # One line per model, the name taking what the short columns leave; the whole name is in its tooltip.
        self.models.setWordWrap(False)
        self.models.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.embedders = plain_label()
        self.embedders.setObjectName("embeddingModels")
        self.embedders.setWordWrap(True)
        self.projector_choice = QComboBox()
        self.projector_choice.setObjectName("projectorChoice")
        self.projector_choice.setAccessibleName("Vision projector of the selected model")
        self.projector_choice.setToolTip(
            plain_tooltip(
                "The vision projector (mmproj) that lets the selected model see pictures: the one found beside it, "
                "another from its folder, or none (text only, and the memory it would take left free)."
            )
        )
        self.projector_choice.setEnabled(False)
        self.projector_choice.activated.connect(self._projector_chosen)
        self.models.itemSelectionChanged.connect(self._fill_projectors)
        self._fill_models()
        use = QPushButton("Use selected model")
        use.setObjectName("useModelButton")
        use.clicked.connect(self._use_selected)
        add_file = QPushButton("Add file…")
        add_file.setObjectName("addModelFileButton")
        add_file.clicked.connect(self._add_file)
        self.status = plain_label()
        self.status.setObjectName("modelChoiceStatus")
        row = QHBoxLayout()
        row.addWidget(use)
        row.addWidget(add_file)
        row.addStretch(1)
        row.addWidget(self.status)
        folders_label = plain_label("Extra folders searched for models:")
        self.folder_list = QListWidget()
        self.folder_list.setObjectName("modelFolders")
        self.folder_list.setAccessibleName("Extra model folders")
        self.folder_list.setMaximumHeight(80)
        self.folder_list.addItems(self._folders)
        add_folder = QPushButton("Add folder…")
        add_folder.setObjectName("addFolderSettingsButton")
        add_folder.clicked.connect(self._add_folder)
        remove_folder = QPushButton("Remove folder")
        remove_folder.setObjectName("removeFolderButton")
        remove_folder.clicked.connect(self._remove_folder)
        folder_row = QHBoxLayout()
        folder_row.addWidget(add_folder)
        folder_row.addWidget(remove_folder)
        folder_row.addStretch(1)
        layout.addWidget(intro)
        layout.addWidget(self.models, 1)
        projector_row = QHBoxLayout()
        projector_label = plain_label("Vision projector:")
        projector_label.setBuddy(self.projector_choice)
        projector_row.addWidget(projector_label)
        projector_row.addWidget(self.projector_choice, 1)
        layout.addLayout(projector_row)
        layout.addWidget(self.embedders)
        layout.addLayout(row)
        layout.addWidget(folders_label)
        layout.addWidget(self.folder_list)
        layout.addLayout(folder_row)
        return page

    def _fill_models(self) -> None:
        plan = self._plan
        found = self._found()
        if plan and plan.model and all(m.path != plan.model.path for m in found):
            found.insert(0, plan.model)  # opened from elsewhere (Ctrl+O): in use, so listed
        # Embedding models serve document search, not chats: named apart, never as "unusable" chat models.
        embedders = [m for m in found if m.metadata is not None and m.metadata.embedding]
        projectors = [m for m in found if m.is_projector]
        models = [m for m in found if m not in embedders and m not in projectors]
        apart = []
        if embedders:
            apart.append(
                "For document search (not chat models): " + ", ".join(one_line(m.display_name, 60) for m in embedders)
            )
        if projectors:  # a model's projector: paired with the model beside it, loaded with it
            apart.append(
                "Vision projectors: "
                + "; ".join(
                    one_line(m.display_name, 60)
                    + (
                        f" ({one_line(m.problem.split(' for ', 1)[1].split(', not', 1)[0], 60)})"
                        if m.problem and " for " in m.problem
                        else " (no model beside it)"
                    )
                    for m in projectors
                )
            )
        self.embedders.setText("\n".join(apart))
        self.embedders.setVisible(bool(apart))
        verdicts = {rec.path: rec for rec in plan.ranked} if plan else {}
        best = plan.recommendation.path if plan and plan.recommendation else None
        current = plan.model.path if plan and plan.model else None
        self.models.setRowCount(len(models))
        for row, model in enumerate(models):
            meta = model.metadata
            rec = verdicts.get(model.path)
            if rec:
                fit = VERDICT_LABELS[verdict_kind(rec.verdict.verdict, rec.expected_tok_per_s)]
            elif model in self.folder_models.models:
                fit = "Judged after OK" if model.usable else "Cannot be used"
            elif model.usable:  # opened from its own folder: not among the models ranked here
                fit = "In use" if model.path == current else "Not ranked"
            else:
                fit = "Cannot be used"  # the reason is the row's tooltip
            cells = [
                "★" if model.path == best else ("●" if model.path == current else ""),
                model.display_name,
                format_size(meta.file_bytes) if meta else "—",
                meta.quantization if meta else "—",
                model.source,
                fit,
            ]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setData(Qt.ItemDataRole.UserRole, model.path)
                about = self._model_note(model.path, rec.reason if rec else None) or model.problem
                if model.projector:
                    seen = f"Can see pictures with {Path(model.projector).name}."
                    about = f"{about}\n{seen}" if about else seen
                what = f"{model.display_name} ({meta.architecture})" if meta else model.display_name
                item.setToolTip(plain_tooltip(f"{what}\n{model.path}" + (f"\n{about}" if about else "")))
                if not model.usable:
                    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsSelectable)
                    item.setForeground(Qt.GlobalColor.gray)
                self.models.setItem(row, column, item)
        in_use = next((row for row, model in enumerate(models) if model.path == current), None)
        if in_use is not None and not self.models.selectedItems():  # its projector shows at once
            self.models.selectRow(in_use)

    def _selected_model(self) -> DiscoveredModel | None:
        items = self.models.selectedItems()
        path = items[0].data(Qt.ItemDataRole.UserRole) if items else None
        return next((m for m in self._found() if m.path == path and m.usable and not m.is_projector), None)

    def _found(self) -> list[DiscoveredModel]:
        """The plan's models, then those of the folders added here (each once)."""
        found: list[DiscoveredModel] = list(self._plan.scan.models) if self._plan else []
        known = {m.path for m in found}
        return found + [m for m in self.folder_models.models if m.path not in known]

    def _fill_projectors(self) -> None:
        """The selected model's choices: the projector found beside it (automatic), none, or another from its
        folder that llama.cpp can load safely."""
        combo, model = self.projector_choice, self._selected_model()
        combo.clear()
        combo.setEnabled(model is not None)
        if model is None or self._plan is None:
            return
        found = Path(model.projector).name if model.projector else None
        combo.addItem(f"Found beside it: {one_line(found, 80)}" if found else "Automatic (none found beside it)", None)
        combo.addItem("None: text only", "")
        beside = [
            m.path
            for m in self._plan.scan.models
            if m.is_projector and not m.projector_refused and Path(m.path).parent == Path(model.path).parent
        ]
        for path in beside:
            combo.addItem(one_line(Path(path).name, 100), path)
        chosen = self._projectors.get(model.path)
        index = combo.findData(chosen) if chosen is not None else 0
        combo.setCurrentIndex(max(index, 0))

    def _projector_chosen(self, index: int) -> None:
        model = self._selected_model()
        if model is None:
            return
        choice = self.projector_choice.itemData(index)
        if choice is None:
            self._projectors.pop(model.path, None)
        else:
            self._projectors[model.path] = choice

    def _model_note(self, path: str, reason: str | None) -> str | None:
        """What the model would cost here (memory at the context it would load with, reply speed, the wait for
        a 1,000-token message) and why it ranks where it does."""
        cost = self._plan.costs.get(path) if self._plan else None
        parts = [f"Here it {cost.summary()}." if cost else None, reason]
        return "\n".join(part for part in parts if part) or None

    def _use_selected(self) -> None:
        items = self.models.selectedItems()
        if items:
            self._chosen = items[0].data(Qt.ItemDataRole.UserRole)
            cost = self._plan.costs.get(self._chosen) if self._plan else None
            name_item = self.models.item(items[0].row(), 1)  # the model's one display name
            name = name_item.text() if name_item else Path(self._chosen).name
            self.status.setText(f"Will load {name}" + (f": {cost.summary()}" if cost else ""))
            self.status.setWordWrap(True)

    def _add_file(self) -> None:
        path = self._folders_memory.open_file(self, "models", "Add a GGUF model", "GGUF models (*.gguf)")
        if path:
            self._chosen = path
            self.status.setText(f"Will load {model_display_name(Path(path).name)}")

    def _add_folder(self) -> None:
        folder = self._folders_memory.folder(self, "models", "Add a models folder")
        if folder and folder not in self._folders:
            self._folders.append(folder)
            self.folder_list.addItem(folder)
            self.folder_models.add(Path(folder))

    def _folder_models_found(self, folder: Path, models: list[DiscoveredModel]) -> None:
        self._fill_models()
        chat = [m for m in models if not m.is_projector]
        projectors = len(models) - len(chat)
        beside = f" (and {format_count(projectors, 'vision projector')})" if projectors else ""
        self.status.setText(f"Found {format_count(len(chat), 'model')}{beside} in {one_line(folder.name, 60)}")

    def _remove_folder(self) -> None:
        row = self.folder_list.currentRow()
        if row >= 0:
            self._folders.pop(row)
            self.folder_list.takeItem(row)

    # ------------------------------------------------------------------ inference page

    def _inference_page(self) -> QWidget:
        page = InferencePage(self._plan.tuned if self._plan else None, self._settings.inference)
        self.inference = page
        self.ctx, self.threads, self.threads_batch, self.batch = page.ctx, page.threads, page.threads_batch, page.batch
        self.kv, self.flash, self.mmap, self.mlock = page.kv, page.flash, page.mmap, page.mlock
        return page

    # ------------------------------------------------------------------ sampling page

    def _sampling_page(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)

        self.temperature = decimal_spin("sampling.temperature", "temperature")
        self.top_p = decimal_spin("sampling.top_p", "topP")
        self.top_k = whole_spin("sampling.top_k", "topK")
        self.min_p = decimal_spin("sampling.min_p", "minP")
        self.repeat_penalty = decimal_spin("sampling.repeat_penalty", "repeatPenalty")
        self.mirostat = QComboBox()
        self.mirostat.setObjectName("mirostatMode")
        self.mirostat.addItems(list(described("sampling.mirostat_mode").choices))
        self.tau = decimal_spin("sampling.mirostat_tau", "mirostatTau")
        self.eta = decimal_spin("sampling.mirostat_eta", "mirostatEta")
        self.seed = whole_spin("sampling.seed", "seed")
        self.max_tokens = whole_spin("sampling.max_tokens", "maxTokens")
        help_line = plain_label()
        help_line.setObjectName("samplingHelp")
        help_line.setWordWrap(True)
        self.sampling_help = FocusedHelp(help_line, "Choose a field to read here what it does.")
        reset = QPushButton("Reset to defaults")
        reset.setObjectName("resetSamplingButton")
        reset.clicked.connect(lambda: self._show_sampling(SamplingSettings()))
        for key, widget in (
            ("temperature", self.temperature),
            ("top_p", self.top_p),
            ("top_k", self.top_k),
            ("min_p", self.min_p),
            ("repeat_penalty", self.repeat_penalty),
            ("mirostat_mode", self.mirostat),
            ("mirostat_tau", self.tau),
            ("mirostat_eta", self.eta),
            ("seed", self.seed),
            ("max_tokens", self.max_tokens),
        ):
            add_row(form, f"sampling.{key}", widget)
            self.sampling_help.watch(widget, f"sampling.{key}")
        form.addRow(reset)
        form.addRow(self.sampling_help.label)
        remote_note = plain_label(
            f"With a server's model: {', '.join(NOT_SENT_TO_SERVERS)} do not apply (the OpenAI API has no field for "
            "them); the others are sent with each request."
        )
        remote_note.setObjectName("samplingRemoteNote")
        remote_note.setWordWrap(True)
        form.addRow(remote_note)
        self._show_sampling(self._settings.sampling)
        return page

    def _show_sampling(self, sampling: SamplingSettings) -> None:
        self.temperature.setValue(sampling.temperature)
        self.top_p.setValue(sampling.top_p)
        self.top_k.setValue(sampling.top_k)
        self.min_p.setValue(sampling.min_p)
        self.repeat_penalty.setValue(sampling.repeat_penalty)
        self.mirostat.setCurrentIndex(sampling.mirostat_mode)
        self.tau.setValue(sampling.mirostat_tau)
        self.eta.setValue(sampling.mirostat_eta)
        show_value(self.seed, "sampling.seed", sampling.seed)
        show_value(self.max_tokens, "sampling.max_tokens", sampling.max_tokens)

    # ------------------------------------------------------------------ appearance page

    def _appearance_page(self) -> QWidget:
        page = QWidget()
        form = QFormLayout(page)
        self.theme = QComboBox()
        self.theme.setObjectName("theme")
        for name in THEMES:
            self.theme.addItem(name.capitalize(), name)
        self.theme.setCurrentIndex(self.theme.findData(self._settings.theme))
        self.font_size = whole_spin("font_size", "fontSize")
        self.font_size.setValue(self._settings.font_size)
        add_row(form, "theme", self.theme)
        add_row(form, "font_size", self.font_size)
        return page

    # ------------------------------------------------------------------ result

    def open_guide(self) -> GuideDialog:
        """The user guide at its Settings section, beside the dialog."""
        guide = GuideDialog(self, "Settings")
        guide.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        guide.show()
        return guide

    def chosen_model(self) -> str | None:
        return self._chosen

    def chosen_remote(self) -> RemoteChoice | None:
        """A server model picked on the Servers page (it wins over a file picked on the Model page only when it
        was picked; a file picked replaces a server model in use)."""
        return self.servers_page.choice

    def settings(self) -> Settings:
        inference = self.inference.overrides()
        sampling = SamplingSettings(
            temperature=self.temperature.value(),
            top_p=self.top_p.value(),
            top_k=self.top_k.value(),
            min_p=self.min_p.value(),
            repeat_penalty=self.repeat_penalty.value(),
            mirostat_mode=self.mirostat.currentIndex(),
            mirostat_tau=self.tau.value(),
            mirostat_eta=self.eta.value(),
            seed=spin_value(self.seed, "sampling.seed"),
            max_tokens=spin_value(self.max_tokens, "sampling.max_tokens"),
        ).validated()
        remote = self.servers_page.choice or (None if self._chosen else self._settings.remote_model)
        names = {server.name for server in self.servers_page.servers}
        return replace(
            self._settings,
            servers=list(self.servers_page.servers),
            remote_model=remote if remote and remote.server in names else None,
            local_api=self.local_api_page.api_settings(),
            prompts=self.prompts_page.prompt_settings(),
            tools=self.tools_page.tool_settings(),
            model_path=self._chosen or self._settings.model_path,
            extra_model_folders=list(self._folders),
            projectors=dict(self._projectors),
            inference=inference,
            sampling=sampling,
            theme=self.theme.currentData(),
            font_size=self.font_size.value(),
        )
