"""Export conversations to Markdown and JSON files (one file per conversation); import our JSON and other apps'."""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from fara_desktop.chats.exchange import ImportOutcome, export_json, export_markdown, import_or_update
from fara_desktop.chats.export_format import ImportedConversation, ImportedMessage, ImportRefusedError
from fara_desktop.chats.imports import read_import_file
from fara_desktop.chats.imports.common import FILE_ID
from fara_desktop.chats.storage import ConversationStore
from fara_desktop.chats.tool_rounds import ToolRound, ToolUse
from fara_desktop.files.atomic import write_bytes_atomically, write_text_atomically
from fara_desktop.files.regular import open_regular
from fara_desktop.system.sandbox import (
    Budget,
    BudgetExceededError,
    Sandbox,
    SandboxFailedError,
    SandboxStoppedError,
    allowed_classes,
)
from fara_desktop.text.untrusted import one_line
from fara_desktop.vocabulary.errors import FaraError
from fara_desktop.vocabulary.tools import ToolCall

FORMATS = ("md", "json")


def file_stem(conversation_id: int, title: str) -> str:
    slug = re.sub(r"[^\w]+", "-", title.lower(), flags=re.UNICODE).strip("-")[:60] or "chat"
    return f"{conversation_id:04d}-{slug}"


class ExportStoppedError(FaraError):
    """Export was stopped; the files written before the stop are complete (each is written atomically)."""


def export_conversations(
    store: ConversationStore,
    out_dir: Path,
    formats: Iterable[str] = FORMATS,
    ids: Iterable[int] | None = None,
    on_progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    picture_file: Callable[[str], Path] | None = None,
) -> list[Path]:
    """One file per conversation and format, and the chats' pictures in a ``pictures`` folder beside them (where
    ``picture_file`` says the store keeps a digest's file). ``on_progress(done, total)`` after each conversation;
    ``should_stop()`` is asked between conversations (raises ``ExportStoppedError`` with the files written)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    wanted = set(ids) if ids is not None else None
    chosen = [c for c in store.conversations() if wanted is None or c.id in wanted]
    written: list[Path] = []
    for done, summary in enumerate(chosen, start=1):
        if should_stop is not None and should_stop():
            raise ExportStoppedError(f"Export stopped after {len(written):,} files.")
        stem = file_stem(summary.id, summary.title)
        for fmt in formats:
            path = out_dir / f"{stem}.{fmt}"
            if fmt == "md":
                write_text_atomically(path, export_markdown(store, summary.id))
            elif fmt == "json":
                write_text_atomically(path, json.dumps(export_json(store, summary.id), indent=2, ensure_ascii=False))
            else:
                raise ValueError(f"unknown export format {fmt!r}")
            written.append(path)
        if picture_file is not None:
            written += _copy_pictures(store, summary.id, out_dir / PICTURES_FOLDER, picture_file)
        if on_progress is not None:
            on_progress(done, len(chosen))
    return written


PICTURES_FOLDER = "pictures"


def _copy_pictures(
    store: ConversationStore, conversation_id: int, folder: Path, picture_file: Callable[[str], Path]
) -> list[Path]:
    """The chat's pictures copied beside its export (each once; one missing from the store is left out)."""
    copied: list[Path] = []
    for digest in dict.fromkeys(d for m in store.messages(conversation_id) for d in m.pictures):
        target = folder / f"{digest}.png"
        if target.is_file():
            continue
        try:
            data = picture_file(digest).read_bytes()
        except OSError:
            continue
        folder.mkdir(parents=True, exist_ok=True)
        write_bytes_atomically(target, data)
        copied.append(target)
    return copied


# What one import may try, not what succeeds: 400 data: URIs that were no pictures ran 75 s and kept none, and the
# largest file the reader takes holds ~1.78 M references. The import's pictures are read by one sandbox child.
MAX_IMPORT_PICTURES = 200  # references tried
MAX_IMPORT_PICTURE_SECONDS = 60.0  # spent reading them, in all


def take_pictures_beside(
    conversations: list[ImportedConversation],
    folder: Path,
    take: Callable[[Path | bytes], str | None],
    should_stop: Callable[[], bool] | None = None,
) -> list[ImportedConversation]:
    """The imported messages' pictures taken in by ``take`` (which reads a stranger's file or bytes in the sandbox
    and returns its digest here; None: it could not be read, and the message goes without it): ours from the
    export's ``pictures`` folder, other apps' from their data: URIs or the files beside their export. At most
    ``MAX_IMPORT_PICTURES`` different references are tried, for at most ``MAX_IMPORT_PICTURE_SECONDS`` in all,
    whether or not they are pictures (the others are left out, the messages kept); ``should_stop`` is asked before
    each: ``SandboxStoppedError`` when it says so."""
    taken: dict[str, str | None] = {}
    deadline = time.monotonic() + MAX_IMPORT_PICTURE_SECONDS

    def resolved(reference: str) -> str | None:
        if reference not in taken:
            if should_stop is not None and should_stop():
                raise SandboxStoppedError("the import was stopped")
            tried = len(taken)
            within = tried < MAX_IMPORT_PICTURES and time.monotonic() < deadline
            taken[reference] = _take_reference(reference, folder, take) if within else None
        return taken[reference]

    def with_pictures(message: ImportedMessage) -> ImportedMessage:
        if not (message.pictures or message.picture_refs):
            return message
        references = [f"ours:{d}" for d in message.pictures] + list(message.picture_refs)
        digests = [d for d in map(resolved, references) if d]
        return replace(message, pictures=tuple(dict.fromkeys(digests)), picture_refs=())

    return [replace(c, messages=[with_pictures(m) for m in c.messages]) for c in conversations]


def _take_reference(reference: str, folder: Path, take: Callable[[Path | bytes], str | None]) -> str | None:
    kind, _, value = reference.partition(":")
    if kind == "ours":
        return take(folder / PICTURES_FOLDER / f"{value}.png")
    if kind == "data":
        try:
            return take(base64.b64decode(value.split(",", 1)[1], validate=True))
        except (IndexError, ValueError, binascii.Error):
            return None
    if kind == "file" and FILE_ID.fullmatch(value):
        # ChatGPT names a file "<id>-<its name>" or "<id>.<ext>": the id whole, never a longer id it begins
        beside = sorted(
            p for p in folder.glob(f"{value}*") if _named_by_id(p.name, value) and p.is_file() and not p.is_symlink()
        )
        return take(beside[0]) if beside else None
    return None


def _named_by_id(name: str, file_id: str) -> bool:
    if not name.startswith(file_id):
        return False
    return len(name) == len(file_id) or name[len(file_id)] in "-."


MB = 1024 * 1024
MAX_IMPORT_BYTES = 512 * MB


def import_budget(size: int) -> Budget:
    """What reading an import of ``size`` bytes may cost: about 8 bytes of memory per byte of JSON (its Python
    objects), a minute of processor time and more for large files."""
    return Budget(
        cpu_seconds=60.0 + 2.0 * size / MB, memory_bytes=1024 * MB + 8 * size, output_bytes=8 * size + 64 * MB
    )


@dataclass(frozen=True)
class ImportResult:
    """What an import did: the format it was read as and what became of each conversation in it."""

    format_name: str
    outcomes: list[ImportOutcome]

    @property
    def conversation_ids(self) -> list[int]:
        """The chats this file added or updated, in file order."""
        return [o.conversation_id for o in self.outcomes if o.action != "skipped"]

    def count(self, action: str) -> int:
        return sum(1 for o in self.outcomes if o.action == action)

    def summary(self) -> str:
        """``2 chats added, 1 updated, 5 already imported (skipped)``."""
        added, updated, skipped = self.count("added"), self.count("updated"), self.count("skipped")
        parts = [f"{added} {'chat' if added == 1 else 'chats'} added"]
        if updated:
            parts.append(f"{updated} updated (changed since the last import)")
        if skipped:
            parts.append(f"{skipped} already imported (skipped)")
        return ", ".join(parts)


# What the reader may send back: the conversations and every record a message holds (a reply's tool rounds too)
IMPORT_CLASSES = allowed_classes(ImportedConversation, ImportedMessage, ToolRound, ToolUse, ToolCall)


def import_conversations(
    store: ConversationStore,
    path: Path,
    should_stop: Callable[[], bool] | None = None,
    budget_for: Callable[[int], Budget] = import_budget,
    take_picture: Callable[[Path | bytes], str | None] | None = None,
) -> ImportResult:
    """Every conversation in the file, or none; one seen before is skipped or updated (``import_or_update``).
    ``take_picture``: takes a picture file beside the export into the store (None: pictures are dropped). Raises
    what ``read_import`` raises, or ``StorageError`` (cannot be saved)."""
    format_name, conversations = read_import(path, should_stop, budget_for)
    conversations = take_pictures_beside(conversations, path.parent, take_picture or (lambda _path: None), should_stop)
    return ImportResult(format_name, import_or_update(store, conversations, format_name))


def read_import(
    path: Path, should_stop: Callable[[], bool] | None = None, budget_for: Callable[[int], Budget] = import_budget
) -> tuple[str, list[ImportedConversation]]:
    """(format name, validated conversations) of a file. It is opened once (no link followed, nothing but a
    regular file) and parsed in the sandbox within ``budget_for(its size)``. Raises ``ImportRefusedError``
    (unreadable, not JSON, not a format we know, invalid, over budget) or ``SandboxStoppedError``."""
    name = one_line(path.name, 120)
    try:
        fd = open_regular(path, follow_links=False)
    except OSError as exc:
        reason = exc.strerror if exc.strerror else str(exc)
        raise ImportRefusedError(f"{name} could not be read: {one_line(reason)}") from exc
    try:
        size = os.fstat(fd).st_size
        if size > MAX_IMPORT_BYTES:
            raise ImportRefusedError(f"{name} is larger than {MAX_IMPORT_BYTES // MB} MB.")
        with Sandbox() as sandbox:
            format_name, conversations = sandbox.run(
                read_import_file,
                fd,
                (MAX_IMPORT_BYTES,),
                budget_for(size),
                allowed=IMPORT_CLASSES,
                should_stop=should_stop,
                refusal=ImportRefusedError,
            )
    except (BudgetExceededError, SandboxFailedError) as exc:
        raise ImportRefusedError(f"{name} was not imported: reading it {exc}.") from exc
    except ImportRefusedError as exc:
        raise ImportRefusedError(f"{name}: {exc}") from exc
    finally:
        os.close(fd)
    if not conversations:
        raise ImportRefusedError(f"{name} holds no conversation.")
    return format_name, conversations


def import_conversation(store: ConversationStore, path: Path) -> int:
    """The first conversation of an import (see ``import_conversations``)."""
    return import_conversations(store, path).outcomes[0].conversation_id
