"""Commands that need no window: export every conversation, install the launcher entry."""

from __future__ import annotations

import sys
from pathlib import Path

from fara_desktop.files.paths import AppPaths
from fara_desktop.text.format import format_count
from fara_desktop.text.untrusted import one_line, printable


def run_export(paths: AppPaths, out: Path, format_choice: str) -> int:
    from fara_desktop.chats.export import FORMATS, export_conversations
    from fara_desktop.chats.storage import ConversationStore, StorageError, database_path
    from fara_desktop.pictures.store import PictureStore

    try:
        store = ConversationStore(database_path(paths.data))
        formats = FORMATS if format_choice == "both" else (format_choice,)
        written = export_conversations(store, out, formats, picture_file=PictureStore(paths.data / "pictures").path)
        store.close()
    except (StorageError, OSError) as exc:
        print(printable(f"fara-desktop export: {exc}"), file=sys.stderr)
        return 1
    print(f"wrote {format_count(len(written), 'file')} to {out}")
    return 0


def run_import(paths: AppPaths, files: list[Path]) -> int:
    """Each file is imported whole or refused whole; one refused file does not stop the others."""
    from functools import partial

    from fara_desktop.app.picture_intake import PictureIntake
    from fara_desktop.chats.export import import_conversations
    from fara_desktop.chats.export_format import ImportRefusedError
    from fara_desktop.chats.storage import ConversationStore, StorageError, database_path
    from fara_desktop.pictures.store import PictureStore
    from fara_desktop.system.sandbox import Sandbox

    try:
        store = ConversationStore(database_path(paths.data))
    except StorageError as exc:
        print(printable(f"fara-desktop import: {exc}"), file=sys.stderr)
        return 1
    failed = 0
    try:
        for file in files:
            try:
                intake = PictureIntake(PictureStore(paths.data / "pictures"))
                with Sandbox() as sandbox:  # one child reads the file's pictures, not a process each
                    take = partial(intake.take_imported, sandbox=sandbox)
                    result = import_conversations(store, file, take_picture=take)
            except (ImportRefusedError, StorageError) as exc:
                failed += 1
                print(printable(f"fara-desktop import: {exc}"), file=sys.stderr)
                continue
            print(printable(f"{one_line(file.name)}: {result.summary()} from {result.format_name}"))
    finally:
        store.close()
    return 1 if failed else 0


def run_desktop_entry(uninstall: bool) -> int:
    from fara_desktop.cli.desktop_entry import DesktopEntryError, install_desktop_entry, uninstall_desktop_entry

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
