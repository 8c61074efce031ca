"""Document collections in the window: indexing on a background thread (lower priority, paused on request, waiting
while a reply is generated), the Documents panel, each chat's choice of collections, and the passages a question
retrieves for the prompt."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox, QToolButton, QWidget

from fara_desktop.app.embedding import EmbedderService, embedding_model_in
from fara_desktop.app.jobs import Jobs, Stage
from fara_desktop.chats.session import ChatSession
from fara_desktop.documents.grounding import MAX_BUDGET_TOKENS, grounded_prompt
from fara_desktop.documents.index import DocumentIndex, DocumentIndexError, documents_path
from fara_desktop.documents.indexer import IndexProgress, IndexReport
from fara_desktop.documents.pipeline import update_collection
from fara_desktop.engine.embedder import Embedder, EmbedderClosedError
from fara_desktop.files.paths import AppPaths
from fara_desktop.machine.priority import lower_this_threads_priority
from fara_desktop.models.embedder_convert import PACKAGED_EMBEDDER, import_embedder, packaged_embedder_installed
from fara_desktop.planning.planner import StartupPlan
from fara_desktop.text.format import format_count
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.widgets.documents_panel import DocumentsPanel
from fara_desktop.ui.widgets.file_dialogs import FolderMemory
from fara_desktop.ui.widgets.plain_text import plain_message_box
from fara_desktop.ui.widgets.stay_open_menu import StayOpenMenu
from fara_desktop.vocabulary.messages import ChatMessage
from fara_desktop.vocabulary.sampling import SamplingParams
from fara_desktop.vocabulary.sources import Source

log = logging.getLogger(__name__)

LEXICAL_NOTE = (
    "Retrieval is lexical (SQLite FTS5, BM25): instant, no model needed. For semantic search as well, put an "
    "embedding GGUF (bge-small, e5, all-MiniLM, nomic-embed-text) in a models folder: it is found like any model, "
    "and passages get vectors in the background."
)


class DocumentsScreen(Protocol):
    paths: AppPaths
    folders: FolderMemory
    documents_panel: DocumentsPanel
    documents_button: QToolButton

    def set_status(self, text: str) -> None: ...
    def show_notice(self, text: str, role: str = "notice") -> None: ...


class DocumentsController(QObject):
    """Owns the GUI's connection to the documents database; each scan opens its own on its thread."""

    progressed = Signal(str, object)  # (collection, IndexProgress), from the indexing thread
    finished = Signal(str, object)  # (collection, IndexReport or Exception)
    wordsIndexed = Signal(str)  # a collection's text index is done (searchable by words; vectors follow)
    embedding = Signal(str, int, int, float)  # (collection, passages done, of, per second), from the thread

    def __init__(
        self,
        screen: DocumentsScreen,
        dialog_parent: QWidget,
        session: ChatSession,
        engine_busy: Sequence[threading.Event],
        embedding: EmbedderService,
        jobs: Jobs | None = None,
    ) -> None:
        """``session``: the open chat (its choice of collections); ``engine_busy``: events set while the chat model
        works (a reply asked for, a prompt read ahead): indexing waits while any is set. The window wires
        ``retrieve`` to the chat controller; ``embedding``: the app's embedding model (the core's); ``jobs``: the
        app's (indexing and searching stop before the engine at quitting)."""
        super().__init__()
        self.screen = screen
        self.dialog_parent = dialog_parent
        self.session = session
        self._engine_busy = tuple(engine_busy)
        self.index: DocumentIndex | None = None
        try:
            self.index = DocumentIndex(documents_path(screen.paths.data))
        except DocumentIndexError as exc:
            screen.documents_panel.show_idle(str(exc))
        self.pause = threading.Event()
        self._stop = threading.Event()
        (jobs or Jobs()).service("documents: indexing and searching", Stage.PRODUCERS, self.stop)
        self._scan: threading.Thread | None = None
        # A scan runs from its start until its ``finished`` is handled here: its thread may still be alive a moment
        # after that signal, and a click then must start the next scan, not wait behind a scan that has ended.
        self._scanning = False
        self._queue: list[tuple[str, list[Path]]] = []
        self.embedding_service = embedding
        self._packaged_embedder = False  # all-MiniLM-L6-v2's package is installed and not converted yet
        self._converting = False
        self._retrieval_index: DocumentIndex | None = None  # the searches' own connection, on their thread
        self._retrieval_lock = threading.Lock()
        self.retrieval: BackgroundCall | None = None  # the search running for a reply, if any
        # The passage tokens the model reads in the wait the user accepts (the window: speed × the setting).
        self.readable_tokens: Callable[[], int] = lambda: MAX_BUDGET_TOKENS
        self.progressed.connect(lambda name, state: screen.documents_panel.show_progress(name, state))
        self.finished.connect(self._scan_finished)
        self.wordsIndexed.connect(lambda _name: self.refresh())  # its counts, while its vectors are still made
        self.embedding.connect(screen.documents_panel.show_embedding)
        panel = screen.documents_panel
        panel.addFolderRequested.connect(self.add_folder)
        panel.addFilesRequested.connect(self.add_files)
        panel.rescanRequested.connect(lambda name: self.index_paths(name, []))
        panel.removeRequested.connect(self.remove)
        panel.pauseToggled.connect(lambda paused: self.pause.set() if paused else self.pause.clear())
        panel.semanticRequested.connect(self.import_embedder)
        menu = StayOpenMenu(screen.documents_button)  # several collections are ticked in one go
        menu.aboutToShow.connect(self._fill_menu)
        screen.documents_button.setMenu(menu)
        screen.documents_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.refresh()

    # ------------------------------------------------------------------ collections

    def collection_names(self) -> list[str]:
        return [c.name for c in self.index.collections()] if self.index else []

    def use_plan(self, plan: StartupPlan) -> None:
        """The start-up scan found the models: an embedding model among them turns on semantic search. Without one,
        semantic search is still on by default when all-MiniLM-L6-v2's package is installed: it is converted (once)
        as soon as there are documents to search."""
        found = embedding_model_in(plan)
        self.use_embedding_model(found)
        self._packaged_embedder = found is None and packaged_embedder_installed()
        if self._packaged_embedder and self.collection_names():
            self.import_embedder()

    @property
    def embedding_model(self) -> Path | None:
        """The embedding GGUF in use (found among the models, or converted), if any."""
        return self.embedding_service.model

    def use_embedding_model(self, found: Path | None) -> None:
        if self.embedding_service.use(found):
            if found is not None:
                for name in self.collection_names():  # vectors for what was indexed before, or stopped halfway
                    self.index_paths(name, [], quiet=True)
            self.refresh()

    def import_embedder(self) -> None:
        """Convert the installed all-MiniLM-L6-v2 into the models folder (off the window's thread), then use it;
        a failure offers the panel's button to try again."""
        if self._converting:
            return
        self._converting = True
        panel = self.screen.documents_panel
        panel.semantic_button.hide()
        self.screen.set_status("Turning on semantic search: converting all-MiniLM-L6-v2 for llama.cpp…")
        models = self.screen.paths.models

        def done(path: Path) -> None:
            self._converting = False
            self._packaged_embedder = False
            self.screen.set_status("Semantic search is on (all-MiniLM-L6-v2)")
            self.use_embedding_model(path)

        def failed(error: Exception) -> None:
            self._converting = False
            self._packaged_embedder = False  # not again by itself: the button tries again when the user asks
            reason = f"Semantic search could not be turned on: {one_line(error, 200)}"
            self.screen.set_status(reason)
            self.screen.show_notice(f"{reason} Search stays lexical; Turn on semantic search tries again.", "error")
            panel.semantic_button.show()

        call = BackgroundCall(lambda: import_embedder(PACKAGED_EMBEDDER, models), owner=self)
        call.done.connect(done)
        call.failed.connect(failed)
        call.start()  # BackgroundCall keeps itself alive until its result has arrived

    def embedder(self) -> Embedder | None:
        """The embedding model, loaded on first use: its own thread serves the indexing, the searches' queries
        (first) and the local API."""
        return self.embedding_service.get()

    def retrieval_note(self) -> str:
        if self.embedding_model is None:
            return LEXICAL_NOTE
        return f"Retrieval is lexical (FTS5, BM25) and semantic ({self.embedding_model.name}), fused by rank."

    def refresh(self) -> None:
        if self.index is None:
            return
        collections = self.index.collections()
        self.screen.documents_panel.show_collections(
            collections, self.retrieval_note(), semantic=self.embedding_model is not None
        )
        for summary in collections:
            if summary.unreadable:
                cid = self.index.collection_id(summary.name)
                if cid is not None:
                    self.screen.documents_panel.show_unreadable(summary.name, self.index.unreadable(cid))
        self.show_chat_choice()

    def add_folder(self) -> None:
        folder = self.screen.folders.folder(self.dialog_parent, "documents", "Add a folder of documents")
        if folder:
            self.index_paths(self._name_for(Path(folder)), [Path(folder)])

    def add_files(self) -> None:
        files = self.screen.folders.open_files(self.dialog_parent, "documents", "Add documents")
        if files:
            self.index_paths(self._name_for(Path(files[0]).parent), [Path(f) for f in files])

    def _name_for(self, folder: Path) -> str:
        """A folder becomes the collection named after it (adding it again updates that collection)."""
        return folder.name or "Documents"

    def remove(self, name: str) -> None:
        if self.index is None:
            return
        box = plain_message_box(
            QMessageBox.Icon.Question,
            "Remove collection",
            f"Forget the collection “{name}”? Your files are not touched.",
            self.dialog_parent,
        )
        box.setStandardButtons(QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        if box.exec() != QMessageBox.StandardButton.Yes:
            return
        self.index.remove_collection(name)
        session = self.session
        if name in session.collections:
            session.set_collections(tuple(n for n in session.collections if n != name))
        self.refresh()

    # ------------------------------------------------------------------ indexing

    def index_paths(self, name: str, paths: list[Path], quiet: bool = False) -> None:
        """Index ``paths`` into ``name`` (or re-scan it) on a background thread; scans run one after another.
        ``quiet``: the app's own re-scan (vectors to add), not a click to answer."""
        if self.embedding_model is None and self._packaged_embedder:
            self.import_embedder()  # the first documents turn semantic search on; the words do not wait for it
        if (name, paths) in self._queue:
            return
        self._queue.append((name, paths))
        if not self._scanning:
            self._next_scan()
        elif not quiet:  # one scan at a time: say this one waits rather than seem to ignore the click
            self.screen.set_status(f"{one_line(name, 80)} will be scanned after the scan running now")

    def _next_scan(self) -> None:
        if not self._queue:
            return
        name, paths = self._queue.pop(0)
        self._scanning = True
        self.screen.documents_panel.show_progress(name, IndexProgress())
        self._scan = threading.Thread(
            target=self._run_scan, args=(name, paths, self.engine_busy), name="fara-indexer", daemon=True
        )
        self._scan.start()

    def engine_busy(self) -> bool:
        """The chat model is working (a reply, a read-ahead): indexing waits. Reads only Events (any thread)."""
        return any(event.is_set() for event in self._engine_busy)

    def _run_scan(self, name: str, paths: list[Path], engine_busy: Callable[[], bool]) -> None:
        lower_this_threads_priority()
        try:
            index = DocumentIndex(documents_path(self.screen.paths.data))
            try:
                update = update_collection(
                    index,
                    name,
                    paths,
                    lambda: self.embedder() if self.embedding_model is not None else None,
                    on_index=lambda state: self.progressed.emit(name, state),
                    on_embed=lambda state: self.embedding.emit(
                        name, state.already + state.done, state.already + state.total, state.per_second
                    ),
                    pause=self.pause,
                    yield_to=engine_busy,
                    should_stop=self._stop.is_set,
                    on_indexed=lambda _report: self.wordsIndexed.emit(name),
                )
            finally:
                index.close()
        except EmbedderClosedError:
            log.info("Vectors stopped as the app closes; the next start resumes them")
            return
        except Exception as exc:  # said in the panel in a sentence; the cause, with its traceback, in the log
            log.warning("Indexing the collection %s failed", one_line(name, 80), exc_info=True)
            self.finished.emit(name, exc)
            return
        self.finished.emit(name, update.report)

    def _scan_finished(self, name: str, result: IndexReport | Exception) -> None:
        self._scanning = False
        panel = self.screen.documents_panel
        if isinstance(result, Exception):
            panel.show_idle(f"Indexing {name} failed: {result}")
        else:
            unreadable = f", {len(result.unreadable):,} unreadable" if result.unreadable else ""
            changed = result.indexed or result.removed
            self.screen.set_status(
                f"Scanned {one_line(name, 80)}: "
                + (
                    f"{result.indexed:,} read, {result.removed:,} removed"
                    if changed
                    else f"up to date ({format_count(result.files, 'file')}, none changed since the last scan)"
                )
            )
            panel.show_idle(
                f"{name}: {format_count(result.files, 'file')} ({result.indexed:,} read, "
                f"{result.unchanged:,} unchanged, "
                f"{result.removed:,} removed){unreadable} in {result.seconds:.1f} s"
            )
        self.refresh()
        self._next_scan()

    def stop(self) -> None:
        self._stop.set()
        self.pause.clear()
        if self._scan is not None:
            self._scan.join(5)
        if self.index is not None:
            self.index.close()
            self.index = None
        # A search still running finishes first and its connection is closed after it; one stuck behind a busy
        # embedder does not hold the closing window for more than a moment (its daemon thread ends with the app).
        if self._retrieval_lock.acquire(timeout=2):
            try:
                if self._retrieval_index is not None:
                    self._retrieval_index.close()
                    self._retrieval_index = None
            finally:
                self._retrieval_lock.release()
        self.embedding_service.close()

    # ------------------------------------------------------------------ chats

    def _fill_menu(self) -> None:
        menu = self.screen.documents_button.menu()
        menu.clear()
        chosen = set(self.session.collections)
        names = self.collection_names()
        for name in names:
            action = menu.addAction(name)
            action.setCheckable(True)
            action.setChecked(name in chosen)
            action.toggled.connect(lambda on, n=name: self.use_collection(n, on))
        if not names:
            menu.addAction("No collections yet: add documents in the Documents panel").setEnabled(False)

    def use_collection(self, name: str, used: bool) -> None:
        current = [n for n in self.session.collections if n != name]
        if used:
            current.append(name)
        self.session.set_collections(tuple(current))
        self.show_chat_choice()

    def show_chat_choice(self) -> None:
        names = [n for n in self.session.collections if n in set(self.collection_names())]
        button = self.screen.documents_button
        button.setText(f"Documents: {', '.join(names)}" if names else "Documents: off")
        button.setToolTip("Answer from these document collections" if names else "Answer from your documents")

    def retrieve(
        self,
        messages: list[ChatMessage],
        n_ctx: int,
        sampling: SamplingParams,
        on_done: Callable[[list[ChatMessage], tuple[Source, ...]], None],
    ) -> bool:
        """For a chat that uses collections: search them for the question on a background thread (loading the
        embedding model, or waiting for it while indexing uses it, never holds up the window), then
        ``on_done(prompt with the best passages, their sources)`` on the window's thread. False: nothing to do."""
        names = [n for n in self.session.collections if n in set(self.collection_names())]
        if not names or self.index is None or not messages or messages[-1].role != "user":
            return False
        data = self.screen.paths.data
        readable = self.readable_tokens()

        def work() -> tuple[list[ChatMessage], tuple[Source, ...]]:
            with self._retrieval_lock:
                if self._retrieval_index is None:
                    self._retrieval_index = DocumentIndex(documents_path(data))
                embedder = self.embedder() if self.embedding_model is not None else None
                return grounded_prompt(self._retrieval_index, names, messages, embedder, n_ctx, sampling, readable)

        def failed(error: Exception) -> None:
            log.warning("Searching the documents failed (%s)", type(error).__name__)
            self.screen.show_notice(
                f"Your documents could not be searched ({one_line(error, 200)}); the question is sent without them.",
                "error",
            )
            on_done(messages, ())

        call = BackgroundCall(work, owner=self)
        call.done.connect(lambda result: on_done(*result))
        call.failed.connect(failed)
        self.retrieval = call
        call.start()
        return True
