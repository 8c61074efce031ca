"""`fara-desktop catalog` and `fara-desktop download`: the curated catalog with verdicts, and verified downloads."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from fara_desktop.files.paths import AppPaths
from fara_desktop.models.catalog import CatalogError, load_catalog
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.hub import (
    DownloadError,
    configured_endpoint,
    host_of,
    is_configured_hub,
    list_gguf_files,
    parse_model_reference,
    pick_projector,
    resolve_remote_file,
)
from fara_desktop.models.metadata import metadata_from_header
from fara_desktop.models.transfer import Downloader, Progress
from fara_desktop.planning.catalog_fit import assess_catalog_here, trade_off_words
from fara_desktop.settings import load_settings
from fara_desktop.text.format import format_duration, format_rate, format_size
from fara_desktop.text.untrusted import printable
from fara_desktop.vocabulary.errors import FaraError

VERDICT_MARK = {"fits": "✓", "tight": "~", "too_big": "✗"}


def catalog_report(paths: AppPaths, as_json: bool = False) -> int:
    settings = load_settings(paths.config).settings
    try:
        folders = [Path(folder) for folder in settings.extra_model_folders]
        assessment = assess_catalog_here(paths.models, paths.cache, folders)
    except CatalogError as exc:
        print(f"fara-desktop catalog: {exc}", file=sys.stderr)
        return 1
    recommended = assessment.recommended
    if as_json:
        print(
            json.dumps(
                {
                    "recommended": recommended.to_json() if recommended else None,
                    "reason": assessment.reason,
                    "options": [option.to_json() for option in assessment.options],
                    "draft_pairs": {
                        key: {"draft": pair.draft.key, "gain_here": round(pair.gain, 2), "proposals": pair.proposals}
                        for key, pair in assessment.pairs.items()
                    },
                },
                indent=2,
            )
        )
        return 0
    current = None
    for option in assessment.options:
        if option.entry.id != current:
            current = option.entry.id
            print(f"\n{option.entry.name}  ({option.entry.repo}, {option.entry.license})")
            print(f"  {option.entry.description}")
            if option.entry.projector:
                print(f"  sees pictures: its projector {option.entry.projector} comes with the download")
            print(f"  sources: {', '.join(option.entry.sources)}")
        star = "★" if option.recommended else " "
        installed = "  [installed]" if option.installed else ""
        print(
            f" {star}{VERDICT_MARK[option.verdict.verdict]} {option.quant.quant:<7} "
            f"≈{format_size(option.quant.estimated_bytes):>9}  "
            f"~{option.expected_tok_per_s:5.1f} tok/s  {option.verdict.verdict}: {option.verdict.message}{installed}"
        )
        pair = assessment.pairs.get(option.key)
        if pair is not None:
            print(f"      paired: {pair.words()}")
    if recommended:
        faster = assessment.faster_choice
        print(
            f"\nWorth downloading for this machine: {trade_off_words(recommended, faster)}\n  ({assessment.reason})"
            f"\n  fara-desktop download {recommended.entry.repo} --file {recommended.quant.file_name}"
        )
        if faster is not None:
            print(f"  fara-desktop download {faster.entry.repo} --file {faster.quant.file_name}   (faster)")
    else:
        print("\nNothing in the catalog runs comfortably on this machine.")
    return 0


def download_command(reference: str, filename: str | None, quant: str | None, allow_host: str | None = None) -> int:
    """Progress on stderr; the verified file's path on stdout; exit 0 only when it is in place. A link to a host
    other than the configured hub is refused unless ``--allow-host`` names that host (a terminal cannot be asked)."""
    try:
        ref = parse_model_reference(reference)
        if ref.endpoint and not is_configured_hub(ref.endpoint) and host_of(ref.endpoint) != allow_host:
            print(
                printable(
                    f"fara-desktop download: {host_of(ref.endpoint)} is not your configured hub "
                    f"({host_of(configured_endpoint())}). To download from it anyway (your Hugging Face token is "
                    f"not sent there), add  --allow-host {host_of(ref.endpoint)}"
                ),
                file=sys.stderr,
            )
            return 1
        remote = resolve_remote_file(ref.repo_id, filename or ref.filename, quant, ref.revision, ref.endpoint)
    except DownloadError as exc:
        print(printable(f"fara-desktop download: {exc}"), file=sys.stderr)
        return 1
    print(
        printable(
            f"{remote.repo_id}/{remote.filename} from {host_of(remote.url)}: {format_size(remote.size)}, "
            f"sha256 {remote.sha256}"
        ),
        file=sys.stderr,
    )
    interactive = sys.stderr.isatty()
    lock = threading.Lock()
    last_line = [""]

    def show(progress: Progress) -> None:
        eta = format_duration(progress.eta_s)
        line = (
            f"{100 * progress.done / progress.total:5.1f} %  {format_size(progress.done)} of "
            f"{format_size(progress.total)}  {format_rate(progress.bytes_per_s)}  {eta}"
        )
        with lock:
            if interactive:
                print(f"\r{line:<72}", end="", file=sys.stderr, flush=True)
            elif line.split("%")[0] != last_line[0].split("%")[0]:
                print(line, file=sys.stderr, flush=True)
            last_line[0] = line

    downloader = Downloader(remote, on_progress=show)
    if downloader.partial_bytes():
        print(f"resuming after {format_size(downloader.partial_bytes())} already downloaded", file=sys.stderr)
    try:
        path = downloader.run()
    except KeyboardInterrupt:
        print("\ninterrupted: run the same command again to continue where it stopped", file=sys.stderr)
        return 130
    except (DownloadError, OSError) as exc:
        print(printable(f"\nfara-desktop download: {exc}"), file=sys.stderr)
        return 1
    if interactive:
        print(file=sys.stderr)
    print(f"verified sha256; saved as {path}", file=sys.stderr)
    print(catalog_check(remote.repo_id, path), file=sys.stderr)
    entry = next((e for e in load_catalog() if e.repo.lower() == remote.repo_id.lower()), None)
    if entry is not None and entry.projector:
        try:
            files = list_gguf_files(remote.repo_id, remote.commit, ref.endpoint)  # the same commit: one folder
            projector = Downloader(
                pick_projector(remote.repo_id, files, entry.projector, remote.filename), on_progress=show
            ).run()
        except KeyboardInterrupt:
            print("\ninterrupted: run the same command again to fetch its projector", file=sys.stderr)
            return 130
        except (DownloadError, OSError) as exc:
            print(
                printable(f"\nfara-desktop download: the model is in place, its projector is not: {exc}"),
                file=sys.stderr,
            )
            return 1
        print(f"\nverified sha256; its projector {projector.name} is beside it: it can see pictures", file=sys.stderr)
    print(path)
    return 0


def catalog_check(repo_id: str, path: Path) -> str:
    """A downloaded catalog model's header against the figures the catalog showed before the download."""
    entry = next((e for e in load_catalog() if e.repo.lower() == repo_id.lower()), None)
    if entry is None:
        return "not a catalog model: its figures come from its own header"
    try:
        meta = metadata_from_header(read_gguf_header(path))
    except FaraError as exc:
        return printable(f"its header could not be read: {exc}")
    differences = entry.header_differences(meta)
    if not differences:
        return f"its header matches the catalog's {entry.name}"
    return printable(f"its header differs from the catalog's {entry.name}: " + "; ".join(differences))
