"""Start-up: look at the machine and its models off the GUI thread, load the chosen model, measure threads.

The loop is the core's (``app.model_loading``, which ``fara-desktop serve`` runs too); this controller runs its
slow step in the background, shows each outcome and hands the model to the engine. A newer request (the settings
changed meanwhile) wins over a slower older one.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, Protocol

from PySide6.QtCore import QObject, Signal

from fara_desktop.app.model_loading import ModelLoading
from fara_desktop.engine.types import (
    CalibrationFailed,
    CalibrationPostponed,
    Event,
    Finished,
    ModelInfo,
    RemoteModel,
    ThreadsCalibrated,
)
from fara_desktop.files.paths import AppPaths
from fara_desktop.planning.planner import PreparedLoad, StartupPlan, rescanned
from fara_desktop.settings import Settings
from fara_desktop.text.format import format_count
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.background import BackgroundCall
from fara_desktop.ui.engine_bridge import EngineBridge
from fara_desktop.ui.qt_health import refcount_problem
from fara_desktop.ui.widgets.chat_view import ChatView
from fara_desktop.ui.widgets.hardware_panel import HardwarePanel


class StartupScreen(Protocol):
    """What the start-up controller shows things on (the main window)."""

    chat_view: ChatView
    hardware_panel: HardwarePanel
    paths: AppPaths

    @property
    def settings(self) -> Settings: ...

    def set_status(self, text: str) -> None: ...
    def show_notice(self, text: str, role: str = "notice") -> None: ...


class StartupController(QObject):
    """Plans the start (machine, models, choice, tuning), loads the chosen model, calibrates threads once."""

    planReady = Signal(object)  # StartupPlan
    # What the chat hears from the start-up (the window connects them to the chat controller):
    planStarted = Signal()  # a message sent now waits for the plan
    planSettled = Signal()  # a message that waited is sent now
    loadRequested = Signal(object, object, str)  # (model source, LoadParams or None, display name)
    modelRefused = Signal(str)  # why the chosen model is not loaded

    def __init__(self, screen: StartupScreen, bridge: EngineBridge) -> None:
        super().__init__()
        self.screen = screen
        self.bridge = bridge
        self.loading = ModelLoading(screen.paths)  # the plan → load → calibrate loop; this controller shows it
        self.store_problem: str | None = None  # said once, after the first plan, when chats are kept temporarily
        self._generation = 0
        self._background: set[BackgroundCall] = set()
        self._explicit = False  # the user just picked a file: it wins over a server model chosen before
        self._pending_choice: Path | None = None  # chosen by the user, kept once it has loaded
        self._from_saved_choice = False  # this start loads the choice saved in the settings
        self._requested: Path | None = None  # the file the plan asked the engine to load
        self.keep_choice: Callable[[Path], None] = lambda _path: None  # the window saves the choice
        self.remote_choice: Callable[[], RemoteModel | None] = lambda: None  # the server model chosen in Settings
        # the kernel paths measured on a loaded model (the core's job), once its thread count is known
        self.measure_kernels: Callable[[ModelInfo], object] = lambda _info: None
        self.kernel_speed_seen: Callable[[ModelInfo, float, int], object] = lambda _info, _speed, _tokens: None

    @property
    def plan(self) -> StartupPlan | None:
        return self.loading.plan

    def run_in_background(
        self,
        fn: Callable[[], Any],
        on_done: Callable[[Any], None],
        on_failed: Callable[[Exception], None] | None = None,
    ) -> None:
        call = BackgroundCall(fn, self)
        call.done.connect(on_done)
        call.failed.connect(on_failed or (lambda exc: self.screen.show_notice(f"Something went wrong: {exc}", "error")))
        for signal in (call.done, call.failed):
            signal.connect(lambda _result, c=call: self._background.discard(c))
        self._background.add(call)
        call.start()

    def choose(self, path: Path) -> None:
        """A model the user chose (by Model ▸ Open, in Get models or on the Model page of Settings): loaded now, and
        kept as the choice for the next start only once it has loaded (``keep_choice``) — one that fails leaves the
        choice as it was."""
        self._pending_choice = path
        self.start_auto(path)

    def model_loaded(self, info: ModelInfo) -> None:
        pending, self._pending_choice = self._pending_choice, None
        if pending is not None and isinstance(info.path, Path) and info.path == pending:
            self.keep_choice(pending)

    def model_load_failed(self, message: str) -> None:
        """A load failed: a choice just made is not kept; the saved choice failing at start gives way to the best
        other model here, with which and why."""
        failed, self._requested = self._requested, None
        self._pending_choice = None
        if not self._from_saved_choice or failed is None or self.bridge.worker.loaded_model is not None:
            return
        self._from_saved_choice = False
        self.screen.show_notice(
            f"{one_line(failed.name)}, your chosen model, could not be opened ({one_line(message.rstrip('.'), 300)}). "
            "Starting with the best other model here; choose another in Settings ▸ Model.",
            "error",
        )
        self.start_auto(avoid=failed)

    def start_auto(self, preferred: Path | None = None, avoid: Path | None = None) -> None:
        """Probe the machine, scan for models, pick and tune the best one, load it — all off the GUI thread;
        ``avoid``: a model that just failed to load."""
        screen = self.screen
        screen.set_status("Looking at this machine and its models…")
        self._explicit = preferred is not None
        settings = screen.settings
        saved = Path(settings.model_path) if settings.model_path and avoid is None else None
        self._from_saved_choice = preferred is None and saved is not None
        preferred = preferred or saved
        folders = [Path(f) for f in settings.extra_model_folders]

        # the overrides as they are now (a change in Settings starts a new plan); the local API's replies decode
        # together while it is on (their tuned number; one at a time otherwise)
        tuned_to_params = partial(settings.inference.apply, serving=settings.local_api.enabled)
        projectors = dict(settings.projectors)

        def work() -> PreparedLoad:
            return self.loading.prepare(preferred, folders, tuned_to_params, projectors, avoid)

        self.planStarted.emit()
        self._generation += 1
        generation = self._generation
        self.run_in_background(
            work,
            lambda result: self.apply_plan(result) if generation == self._generation else None,
            lambda error: self._plan_failed(error) if generation == self._generation else None,
        )

    def apply_plan(self, prepared: PreparedLoad) -> None:
        plan, decision = prepared.plan, prepared.decision
        screen = self.screen
        self.loading.use_plan(prepared)
        for crash in plan.crashed_now:
            crashed = Path(crash.path)
            instead = f"Started with {plan.model.display_name} instead. " if plan.model is not None else ""
            screen.show_notice(
                f"Fara Desktop stopped last time while llama.cpp was loading {one_line(crashed.name)} (in "
                f"{one_line(str(crashed.parent), 200)}): llama.cpp cannot handle this file. It will not be loaded "
                f"again. {instead}Replace or delete the file; a changed file is tried again.",
                "error",
            )
        screen.hardware_panel.show_hardware(plan.hardware)
        remote = None if self._explicit else self.remote_choice()
        if remote is not None:
            self.loadRequested.emit(remote, None, "")
        elif plan.model is None:
            searched = [f"• {loc.source}: {loc.folder}" for loc in plan.scan.searched]
            screen.chat_view.empty_state.show_no_model(searched)
            screen.set_status("No model found")
        else:
            if plan.tuned:
                screen.hardware_panel.show_tuning(plan.tuned, screen.settings.inference)
            screen.hardware_panel.show_choice(plan.reason)
            if decision.estimate is not None:
                screen.hardware_panel.show_memory_plan(decision.estimate)
            if decision.refusal or prepared.file is None:
                refusal = decision.refusal or f"{plan.model.display_name} could not be prepared for loading."
                screen.show_notice(refusal, "error")
                screen.set_status("The chosen model does not fit in memory")
                self.modelRefused.emit(refusal)
            else:
                self._requested = prepared.file if isinstance(prepared.file, Path) else None
                self.loadRequested.emit(prepared.file, decision.params, plan.model.display_name)
        self.planSettled.emit()  # a message typed while we were looking is sent now
        self.planReady.emit(plan)
        qt_problem = refcount_problem()
        if qt_problem:  # this PySide6 would abort the app later in the session: say it while nothing is lost
            screen.show_notice(qt_problem, "error")
        if self.store_problem:
            screen.show_notice(
                f"{self.store_problem.rstrip('.')}. Chats are kept in a temporary database until you quit; "
                "make the data folder writable to keep them.",
                "error",
            )
            self.store_problem = None

    def _plan_failed(self, error: Exception) -> None:
        self.screen.show_notice(f"Could not examine this machine's models: {error}", "error")
        self.planSettled.emit()

    def rescan(self) -> None:
        """A download finished: the models found are read again, so Settings lists it as installed at once."""
        plan, paths = self.loading.plan, self.screen.paths
        if plan is None:
            return
        folders = [Path(f) for f in self.screen.settings.extra_model_folders]

        def take(found: StartupPlan) -> None:
            if self.loading.plan is plan:  # no newer plan meanwhile
                self.loading.plan = found

        self.run_in_background(lambda: rescanned(plan, paths, folders), take)

    def recalibrate(self) -> None:
        candidates = self.loading.recalibration(self.bridge.worker.loaded_model is not None)
        if candidates is not None:
            self.screen.set_status("Measuring generation speed at each thread count…")
            self.bridge.calibrate_threads(candidates)

    def calibrate_if_needed(self, info: ModelInfo) -> None:
        """A model loaded: measure the fastest thread count for it, unless this machine knows it already."""
        candidates = self.loading.calibration_after(info, self.screen.settings.inference.n_threads)
        if candidates is not None:
            self.bridge.calibrate_threads(candidates)
            self.screen.hardware_panel.note_threads("measuring the fastest count (a question goes first)")
        else:
            self.measure_kernels(info)  # after the threads: two measurements at once would spoil both

    def reply_finished(self, event: Finished) -> None:
        """A reply's speed: replies clearly faster than the thread calibration said mean it was measured while the
        machine was busy; it is measured again (a question still goes first)."""
        info = self.bridge.worker.loaded_model
        if info is None:
            return
        self.kernel_speed_seen(info, event.stats.gen_tok_per_s, event.stats.completion_tokens)
        candidates = self.loading.speed_seen(info, event.stats.gen_tok_per_s, event.stats.completion_tokens)
        if candidates is not None:
            self.bridge.calibrate_threads(candidates)
            self.screen.hardware_panel.note_threads("measuring again: replies ran faster than the last measurement")

    def _measure_kernels_now(self) -> None:
        info = self.bridge.worker.loaded_model
        if info is not None:
            self.measure_kernels(info)

    # Engine events this controller owns (the window routes each type to one controller).
    ENGINE_EVENTS = (CalibrationPostponed, CalibrationFailed, ThreadsCalibrated)

    def on_engine_event(self, event: Event) -> None:
        if isinstance(event, CalibrationPostponed):
            self.screen.hardware_panel.note_threads("measuring after the reply")
        elif isinstance(event, CalibrationFailed):
            reason = one_line(event.reason, 120)
            self.screen.hardware_panel.note_threads(f"not measured ({reason}; the default is kept)")
            self.screen.set_status("The thread count could not be measured; details are in the log")
            self._measure_kernels_now()
        elif isinstance(event, ThreadsCalibrated):
            self.loading.calibrated(event)  # Settings' "auto (= N)" is the count measured, as the panel says
            n_threads = self.screen.settings.inference.n_threads
            self.screen.hardware_panel.show_calibration(event.tok_per_s, event.best, n_threads)
            self.screen.set_status(f"Ready · {format_count(event.best, 'thread')} measured fastest for this model")
            self._measure_kernels_now()
