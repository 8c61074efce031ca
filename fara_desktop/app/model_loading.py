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
from fara_desktop.planning.params import LoadParams, TunedParams
from fara_desktop.planning.planner import (
    PreparedLoad,
    StartupPlan,
    prepare_load,
    remember_calibration,
    thread_candidates,
)
from fara_desktop.planning.tuning import with_calibrated_threads


class ModelLoading:
    """The plan in use, and when to measure threads for the model loaded with it."""

    def __init__(self, paths: AppPaths) -> None:
        self.paths = paths
        self.plan: StartupPlan | None = None

    def prepare(
        self, preferred: Path | None, folders: list[Path], with_overrides: Callable[[TunedParams], LoadParams],
        projectors: Mapping[str, str] | None = None,
    ) -> PreparedLoad:  # fmt: skip
        """The start's plan and load decision (any thread; ``adopt`` makes it the one in use)."""
        return prepare_load(self.paths, preferred, folders, with_overrides, projectors)

    def adopt(self, prepared: PreparedLoad) -> None:
        self.plan = prepared.plan

    def calibration_after(self, info: ModelInfo, pinned_threads: int | None) -> list[int] | None:
        """The thread counts to measure now that ``info`` loaded (None: nothing to measure — a server's model, a
        count the user pinned, or one this machine measured before for a model of this size)."""
        plan = self.plan
        if info.remote or plan is None or not plan.needs_calibration or pinned_threads is not None:
            return None
        return thread_candidates(plan.hardware)

    def recalibration(self, loaded: bool) -> list[int] | None:
        """The thread counts to measure again, asked by the user (None: no plan or no model loaded)."""
        return thread_candidates(self.plan.hardware) if self.plan is not None and loaded else None

    def calibrated(self, event: ThreadsCalibrated) -> None:
        """Keep the measurement for the next start, and make its count the plan's (Settings' "auto (= N)")."""
        plan = self.plan
        if plan is None:
            return
        remember_calibration(self.paths, plan, event.tok_per_s, event.best)
        tuned = with_calibrated_threads(plan.tuned, event.best) if plan.tuned is not None else None
        self.plan = dataclasses.replace(plan, tuned=tuned, needs_calibration=False)
