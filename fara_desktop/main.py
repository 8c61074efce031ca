"""Entry point: parse the command line, then open the window or run one of the commands.

This is the top of the layers: the only module that may import the command line, the GUI and the benchmark.
Each branch imports what it needs when it runs, so `fara-desktop models` never loads Qt.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from pathlib import Path

from fara_desktop.cli.arguments import build_parser
from fara_desktop.files.fatal_log import enable_fatal_log, sweep_fatal_logs
from fara_desktop.files.paths import app_paths
from fara_desktop.system.logs import configure_logging


def main(argv: list[str] | None = None) -> int:
    # The document reader's sandbox is a child process started by multiprocessing; a frozen build must let the
    # child run it instead of opening another window.
    multiprocessing.freeze_support()
    # A windowed build on Windows (console=False) has no standard streams; printing must not crash it.
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")  # noqa: SIM115
    args = build_parser().parse_args(argv)
    if args.model is not None and args.command is not None:
        build_parser().error(
            f"--model before a command opens the window with that model; `{args.command}` does not use it"
            + (
                f" (put it after: fara-desktop {args.command} --model {args.model})"
                if args.command in ("smoke", "serve", "bench")
                else ""
            )
        )
    paths = app_paths().ensure()
    log_file = configure_logging(paths.logs)
    # A record left by a load or a first batch then tells a crash (a fatal signal, written here) from a stop
    enable_fatal_log(paths.logs)
    sweep_fatal_logs(paths.logs)
    if args.command == "smoke":
        from fara_desktop.ui.smoke import run_smoke

        if args.server:
            if not args.smoke_model:
                build_parser().error("smoke --server needs --model NAME (the server's model id)")
            remote = (args.server, args.smoke_model, args.api_key)
            return run_smoke(None, args.prompt, args.max_tokens, args.timeout, args.screenshot, remote)
        model = Path(args.smoke_model) if args.smoke_model else None
        return run_smoke(model, args.prompt, args.max_tokens, args.timeout, args.screenshot)
    if args.command == "serve":
        from fara_desktop.cli.serve import run_serve

        return run_serve(
            paths,
            args.serve_model,
            args.host,
            args.port,
            args.serve_api_key,
            args.api_key_file,
            args.parallel,
            args.context,
            args.speculation,
        )
    if args.command == "bench":
        from fara_desktop.bench.report import run_benchmark

        return run_benchmark(args.bench_model, args.json, args.quick, paths, args.bench_sections)
    if args.command == "export":
        from fara_desktop.cli.commands import run_export

        return run_export(paths, args.out, args.format)
    if args.command == "import":
        from fara_desktop.cli.commands import run_import

        return run_import(paths, args.files)
    if args.command in ("catalog", "download"):
        from fara_desktop.cli import downloads

        if args.command == "catalog":
            return downloads.catalog_report(paths, as_json=args.json)
        return downloads.download_command(args.repo, args.file, args.quant, args.allow_host)
    if args.command == "docs":
        from fara_desktop.cli import docs

        if args.docs_command == "import-embedder":
            return docs.run_import_embedder(paths, args.source, args.type)
        if args.docs_command == "index":
            return docs.run_docs_index(paths, args.paths, args.collection, args.json, args.embedding_model)
        query = " ".join(args.query)
        return docs.run_docs_search(paths, args.collection, query, args.top, args.json, args.embedding_model)
    if args.command == "install-desktop-entry":
        from fara_desktop.cli.commands import run_desktop_entry

        return run_desktop_entry(args.uninstall)
    if args.command in ("hardware", "models"):
        from fara_desktop.cli import reports

        report = reports.hardware_report if args.command == "hardware" else reports.models_report
        return report(paths, as_json=args.json)
    from fara_desktop.ui.application import run_gui

    return run_gui(args.model, log_file)
