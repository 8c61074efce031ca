"""The plan → load → calibrate loop of one process, the window's or ``fara-desktop serve``'s.

Start: the machine probed, the models found, the best that fits chosen and tuned, the load judged and the file
found (``prepare_load``; slow, never on a GUI thread). After a load: the fastest thread count measured once per
machine and model size, unless the user pinned one or this machine knows it (``calibration_after``); its result
kept for the next start and the plan's tuning (``calibrated``). The window shows each step; ``serve`` prints
them. Qt-free; one thread at a time uses it (the window's GUI thread, or serve's engine events).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path

from fara_desktop.engine.types import ModelInfo, ThreadsCalibrated
from fara_desktop.files.paths import AppPaths
from fara_desktop.machine.measurements import MachineCache
from fara_desktop.planning.params import LoadParams, TunedParams
from fara_desktop.planning.planner import (
    PreparedLoad,
    StartupPlan,
    prepare_load,
    remember_calibration,
    thread_candidates,
)
from fara_desktop.planning.tuning import size_class, with_calibrated_threads

DISPUTE_RATIO = 1.5  # a reply this much faster than the calibration at the same count: it was measured busy
DISPUTES_NEEDED = 2
DISPUTE_MIN_TOKENS = 32  # a shorter reply's speed says little


class ModelLoading:
    """The plan in use, and when to measure threads for the model loaded with it."""

    def __init__(self, paths: AppPaths) -> None:
        self.paths = paths
        self.plan: StartupPlan | None = None
        self._disputes = 0  # replies in a row that ran clearly faster than the calibration said

    def prepare(
        self,
        preferred: Path | None,
        folders: list[Path],
        with_overrides: Callable[[TunedParams], LoadParams],
        projectors: Mapping[str, str] | None = None,
        avoid: Path | None = None,
    ) -> PreparedLoad:
        """The start's plan and load decision (any thread; ``use_plan`` makes it the one in use); ``avoid``: a model
        that just failed to load."""
        return prepare_load(self.paths, preferred, folders, with_overrides, projectors, avoid)

    def use_plan(self, prepared: PreparedLoad) -> None:
        self.plan = prepared.plan

    def calibration_after(self, info: ModelInfo, pinned_threads: int | None) -> list[int] | None:
        """The thread counts to measure now that ``info`` loaded (None: nothing to measure — a server's model, a
        count the user pinned, or one this machine measured before for a model of this size)."""
        plan = self.plan
        if info.remote or plan is None or not plan.needs_calibration or pinned_threads is not None:
            return None
        return thread_candidates(plan.hardware)

    def speed_seen(self, info: ModelInfo, tok_per_s: float, tokens: int) -> list[int] | None:
        """A reply's generation speed on the model loaded with the plan: the counts to measure again when replies
        run clearly faster than the calibration measured at the count in use (it was taken while the machine was
        busy), twice in a row; None otherwise."""
        plan = self.plan
        if plan is None or plan.model is None or plan.model.metadata is None or info.remote:
            return None
        if tokens < DISPUTE_MIN_TOKENS or Path(plan.model.path) != info.path:
            return None
        cache = MachineCache.of_app(self.paths)
        size = size_class(plan.model.metadata)
        calibrated = cache.calibrated_speed(plan.hardware, size, info.n_threads)
        if calibrated is None:
            return None
        self._disputes = self._disputes + 1 if tok_per_s > DISPUTE_RATIO * calibrated else 0
        if self._disputes < DISPUTES_NEEDED:
            return None
        self._disputes = 0
        cache.dispute_threads(plan.hardware, size)
        return thread_candidates(plan.hardware)

    def recalibration(self, loaded: bool) -> list[int] | None:
        """The thread counts to measure again, asked by the user (None: no plan or no model loaded)."""
        return thread_candidates(self.plan.hardware) if self.plan is not None and loaded else None

    def calibrated(self, event: ThreadsCalibrated) -> None:
        """Keep the measurement for the next start, and make its count the plan's (Settings' "auto (= N)")."""
        plan = self.plan
        if plan is None:
            return
        remember_calibration(self.paths, plan, event.tok_per_s, event.best, event.busy)
        tuned = with_calibrated_threads(plan.tuned, event.best) if plan.tuned is not None else None
        self.plan = dataclasses.replace(plan, tuned=tuned, needs_calibration=False)
