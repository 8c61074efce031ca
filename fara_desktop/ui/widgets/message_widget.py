"""One message in the chat: title line with actions and versions, a reply's reasoning in a collapsible section,
markdown prose, code blocks with a copy button."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from PySide6.QtCore import QEvent, Qt, QUrl, Signal
from PySide6.QtGui import (
    QDesktopServices,
    QFont,
    QGuiApplication,
    QTextCharFormat,
    QTextCursor,
    QTextDocument,
    QTextFormat,
)
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QSizePolicy, QToolButton, QVBoxLayout, QWidget

from fara_desktop.text.format import format_when
from fara_desktop.text.untrusted import one_line
from fara_desktop.ui.widgets.flow_layout import FlowLayout
from fara_desktop.ui.widgets.picture_thumbnails import PictureRow
from fara_desktop.ui.widgets.plain_text import ElidedLabel, plain_label, plain_tooltip
from fara_desktop.ui.widgets.text_blocks import (
    SOFT_BREAK,
    Block,
    keep_line_breaks,
    soft_breaks,
    split_blocks,
    without_soft_breaks,
)

_SAFE_LINK_SCHEMES = ("http", "https")  # not mailto: a click would hand a stranger's address to the mail client
DISPLAY_LIMIT = 60_000  # characters laid out in one message; beyond that the start is shown
MAX_CITATION_CHARS = 60  # of a citation's place on its button (shortened in the middle; whole for screen readers)
DISPLAY_PREVIEW = 20_000
ROLE_TITLES = {"user": "You", "assistant": "Assistant", "notice": "Fara", "error": "Problem"}


def open_link(url: str) -> None:
    """Links open in the system browser only when clicked, and only for web and mail addresses."""
    target = QUrl(url)
    if target.scheme().lower() in _SAFE_LINK_SCHEMES:
        QDesktopServices.openUrl(target)


class WrappingLabel(QLabel):
    """A word-wrapping QLabel that remembers its height for each width until its text or look changes.

    While a reply streams, Qt's layouts ask the growing label for its height about ten times per repaint (for three
    different widths), and QLabel lays the whole text out again for each question; the cache cuts a repaint's cost
    by a third (measured 9.2 → 6.1 ms), CPU time that llama.cpp's threads get back."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._heights: dict[int, int] = {}

    def setText(self, text: str) -> None:
        self._heights.clear()
        super().setText(text)

    def setTextFormat(self, text_format: Qt.TextFormat) -> None:
        self._heights.clear()
        super().setTextFormat(text_format)

    def changeEvent(self, event: QEvent) -> None:  # font, style sheet, ...
        self._heights.clear()
        super().changeEvent(event)

    def heightForWidth(self, width: int) -> int:
        height = self._heights.get(width)
        if height is None:
            height = self._heights[width] = super().heightForWidth(width)
        return height


_PROSE_INTERACTION = Qt.TextInteractionFlag.TextSelectableByMouse | Qt.TextInteractionFlag.LinksAccessibleByMouse


def _prose_label(text: str, draft: bool = False) -> QLabel:
    label = WrappingLabel()
    label.setObjectName("messageBody")
    label.setWordWrap(True)
    label.setOpenExternalLinks(False)
    label.linkActivated.connect(open_link)
    label.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
    _render_prose(label, text, draft)
    return label


class _InertDocument(QTextDocument):
    """A document that loads nothing: no image, no style sheet, no file, whatever its text asks for."""

    def loadResource(self, kind: int, name: QUrl | str) -> object:
        return None


_MARKDOWN = QTextDocument.MarkdownFeature.MarkdownDialectGitHub | QTextDocument.MarkdownFeature.MarkdownNoHTML


def safe_markdown_html(text: str) -> str:
    """Markdown → HTML for a label, with nothing in it that loads a resource or came from the text as HTML.

    Raw HTML in the markdown stays literal text (MarkdownNoHTML); images become their description in brackets
    (an image would be read from a path or URL the text chose: ``![x](/dev/zero)`` hangs the GUI thread). The
    HTML comes from Qt's own writer, so it holds only the formatting markdown can express."""
    document = _InertDocument()
    document.setMarkdown(text, _MARKDOWN)
    cursor = QTextCursor(document)
    block = document.begin()
    replacements: list[tuple[int, int, str]] = []
    while block.isValid():
        iterator = block.begin()
        while not iterator.atEnd():
            fragment = iterator.fragment()
            char_format = fragment.charFormat()
            if fragment.isValid() and char_format.isImageFormat():
                image = char_format.toImageFormat()
                alt = image.property(QTextFormat.Property.ImageAltText) or image.name()
                replacements.append((fragment.position(), fragment.length(), f"[image: {alt}]"))
            elif fragment.isValid() and char_format.isAnchor():  # the theme's link colour, not a fixed blue
                char_format.clearForeground()
                cursor.setPosition(fragment.position())
                cursor.setPosition(fragment.position() + fragment.length(), QTextCursor.MoveMode.KeepAnchor)
                cursor.setCharFormat(char_format)
            iterator += 1
        block = block.next()
    for position, length, label in reversed(replacements):
        cursor.setPosition(position)
        cursor.setPosition(position + length, QTextCursor.MoveMode.KeepAnchor)
        cursor.insertText(label, QTextCharFormat())
    return document.toHtml()


def _render_prose(label: QLabel, text: str, draft: bool) -> None:
    """``draft``: the paragraph a reply is still writing. It is shown as plain, not-yet-selectable text, which
    QLabel lays out with a bare QTextLayout instead of a QTextDocument: half the CPU per repaint (measured 7.4 vs
    14.3 ms on this machine), and that CPU is taken from llama.cpp's threads. The paragraph gets its markdown
    formatting as soon as it is complete — as HTML that Qt wrote from the markdown (``safe_markdown_html``),
    never as the label's own markdown mode, which honours raw HTML and loads images."""
    label.setTextFormat(Qt.TextFormat.PlainText if draft else Qt.TextFormat.RichText)
    label.setTextInteractionFlags(Qt.TextInteractionFlag.NoTextInteraction if draft else _PROSE_INTERACTION)
    label.setProperty("draft", draft)
    label.setText(soft_breaks(text) if draft else soft_breaks(safe_markdown_html(keep_line_breaks(text)), html=True))


class CodeBlock(QFrame):
    """A fenced code block: monospace, selectable, with its language and a Copy button."""

    def __init__(self, block: Block, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("codeBlock")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        header = QHBoxLayout()
        header.setContentsMargins(10, 4, 4, 4)
        self.language = plain_label(block.language or "code")
        self.language.setObjectName("codeLanguage")
        self.copy_button = QToolButton()
        self.copy_button.setObjectName("copyCodeButton")
        self.copy_button.setText("Copy")
        self.copy_button.setAccessibleName("Copy code")
        self.copy_button.clicked.connect(self.copy)
        header.addWidget(self.language)
        header.addStretch(1)
        header.addWidget(self.copy_button)
        self.code = WrappingLabel()
        self.code.setObjectName("codeText")
        self.code.setTextFormat(Qt.TextFormat.PlainText)
        self.code.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.code.setWordWrap(True)
        font = QFont("monospace")
        font.setStyleHint(QFont.StyleHint.Monospace)
        self.code.setFont(font)
        layout.addLayout(header)
        layout.addWidget(self.code)
        self.set_block(block)

    def set_block(self, block: Block, draft: bool = False) -> None:
        """``draft``: the block is still being written (see ``_render_prose``): not selectable until complete."""
        self.block = block
        self.language.setText(block.language or "code")
        self.code.setTextInteractionFlags(
            Qt.TextInteractionFlag.NoTextInteraction if draft else Qt.TextInteractionFlag.TextSelectableByMouse
        )
        self.code.setProperty("draft", draft)
        self.code.setText(soft_breaks(block.text))  # a long line wraps where it must, never widening the chat

    def copy(self) -> None:
        QGuiApplication.clipboard().setText(self.block.text)
        self.copy_button.setText("Copied")


def keep_copies_clean() -> None:
    """Text copied out of a message goes to the clipboard without the soft breaks it is shown with
    (``text_blocks.soft_breaks``): a copied URL or hash works as it was written. Installed once per process."""
    clipboard = QGuiApplication.clipboard()
    if clipboard.property("faraCleansCopies"):
        return
    clipboard.setProperty("faraCleansCopies", True)

    def clean() -> None:
        text = clipboard.text()
        if SOFT_BREAK in text and clipboard.ownsClipboard():
            clipboard.setText(without_soft_breaks(text))

    clipboard.dataChanged.connect(clean)


def thought_for(seconds: float | None) -> str:
    if seconds is None or seconds <= 0:
        return "Thought"
    return f"Thought for {seconds:.0f} s" if seconds >= 1 else "Thought for less than a second"


class FoldedSection(QFrame):
    """Plain text (never markdown, never HTML) under a header button that opens and closes it."""

    def __init__(self, name: str, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName(f"{name}Section")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.header = QToolButton()
        self.header.setObjectName(f"{name}Header")
        self.header.setCheckable(True)
        self.header.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.header.setAutoRaise(True)
        self.header.toggled.connect(self._set_open)
        self.body = WrappingLabel()
        self.body.setObjectName(f"{name}Text")
        self.body.setTextFormat(Qt.TextFormat.PlainText)
        self.body.setWordWrap(True)
        self.body.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.header, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.body)
        self._set_open(False)

    @property
    def is_open(self) -> bool:
        return self.header.isChecked()

    def _set_open(self, is_open: bool) -> None:
        self.body.setVisible(is_open)
        self.header.setArrowType(Qt.ArrowType.DownArrow if is_open else Qt.ArrowType.RightArrow)


def shown_text(text: str) -> str:
    """What a section lays out of a long text: its start, and how long it is."""
    return text if len(text) <= DISPLAY_LIMIT else text[:DISPLAY_PREVIEW] + f"\n\n… {len(text):,} characters in all."


class ReasoningSection(FoldedSection):
    """A reply's reasoning: plain text (never mixed with the answer's markdown) under a header that opens and closes
    it — "Thinking…" and open while the model reasons, "Thought for 12 s" and closed once the answer starts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__("reasoning", parent)
        self.text = ""
        self.hide()

    def show_reasoning(self, text: str, thinking: bool, seconds: float | None = None) -> None:
        """``thinking``: the model is still reasoning (the section stays open and says so)."""
        self.text = text
        self.setVisible(bool(text.strip()) or thinking)
        self.body.setText(shown_text(text.strip()) or "…")
        title = "Thinking…" if thinking else thought_for(seconds)
        self.header.setText(title)
        self.header.setAccessibleName(f"{title} — show or hide the reasoning")
        if thinking and not self.header.isChecked():
            self.header.setChecked(True)

    def collapse(self) -> None:
        self.header.setChecked(False)


OUTCOME_WORDS = {"ran": "ran", "error": "failed", "denied": "denied by you", "stopped": "stopped"}


class ToolUseSection(FoldedSection):
    """One tool call in a reply: a header (tool, server, what came of it) that opens a plain-text body with the
    arguments and the result. Results are a stranger's text: never markdown, never HTML, nothing loaded."""

    def __init__(self, use: Any, parent: QWidget | None = None) -> None:
        super().__init__("toolUse", parent)
        outcome = OUTCOME_WORDS.get(use.outcome, use.outcome)
        # Names are a model's and a server's (64 characters each): shortened so the header never widens the chat.
        shown = f"{one_line(use.call.name, 40)} ({one_line(use.server or 'no server', 32)})"
        self.header.setText(f"Tool {shown} — {outcome}")
        # Narrower than its text at a narrow width (the text is clipped; the tooltip has it whole), never wider.
        self.header.setSizePolicy(QSizePolicy.Policy.Ignored, self.header.sizePolicy().verticalPolicy())
        title = f"Tool {use.call.name} ({use.server or 'no server'}) — {outcome}"
        self.header.setToolTip(plain_tooltip(title))
        self.header.setAccessibleName(f"{title} — show or hide the call and its result")
        self.body.setText(f"Arguments: {use.call.arguments}\n\nResult:\n{shown_text(use.result_for_model)}")


class MessageWidget(QFrame):
    """A message: title line (who, model, versions, actions), a reply's reasoning, then prose and code blocks
    rendered from markdown.

    While a reply streams, ``set_text`` only rewrites the last block (and adds new ones), so each repaint costs
    the size of the newest block, not of the whole reply.
    """

    copyRequested = Signal(object)
    editRequested = Signal(object)
    regenerateRequested = Signal(object)
    branchRequested = Signal(object)
    versionRequested = Signal(object, int)  # (widget, -1 for the previous version, +1 for the next)
    sourceRequested = Signal(object)  # the Source of a clicked citation
    pictureRequested = Signal(object)  # the Path of a clicked picture

    def __init__(self, role: str, text: str = "", parent: QWidget | None = None) -> None:
        keep_copies_clean()
        super().__init__(parent)
        self.role = role
        self.message_id: int | None = None
        self.setObjectName(f"{role}Message")
        self.setProperty("role", role)
        self.setAccessibleName(f"{ROLE_TITLES.get(role, role)} message")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(14, 8, 14, 10)
        layout.setSpacing(4)
        top = QHBoxLayout()
        top.setSpacing(4)
        self.title = ElidedLabel(ROLE_TITLES.get(role, role))  # a long model name gives up room, not the buttons
        self.title.setObjectName("messageTitle")
        top.addWidget(self.title, 1)
        self.action_buttons: dict[str, QToolButton] = {}
        self.version_label = plain_label()
        self.version_label.setObjectName("versionLabel")
        self._action("previous", "‹", "Show the previous version", lambda: self.versionRequested.emit(self, -1))
        self._action("next", "›", "Show the next version", lambda: self.versionRequested.emit(self, 1))
        for widget in (self.action_buttons["previous"], self.version_label, self.action_buttons["next"]):
            top.addWidget(widget)
            widget.hide()
        versions = dict(self.action_buttons)
        if role in ("user", "assistant"):
            self._action("copy", "Copy", "Copy this message", lambda: self.copyRequested.emit(self))
            self._action("branch", "Branch", "Start a new chat from here", lambda: self.branchRequested.emit(self))
        if role == "user":
            self._action("edit", "Edit", "Edit this message and send it again", lambda: self.editRequested.emit(self))
        if role == "assistant":
            self._action(
                "regenerate", "Regenerate", "Write this reply again", lambda: self.regenerateRequested.emit(self)
            )
            self.action_buttons["regenerate"].hide()
        for key, button in self.action_buttons.items():
            if key not in versions:
                top.addWidget(button)
        layout.addLayout(top)
        self.pictures = PictureRow(parent=self)  # a user message's pictures, before its text
        self.pictures.pictureRequested.connect(self.pictureRequested)
        layout.addWidget(self.pictures)
        self.reasoning = ReasoningSection(self)
        layout.addWidget(self.reasoning)
        self._tools = QVBoxLayout()  # the tools the reply called, before its answer
        self._tools.setSpacing(2)
        layout.addLayout(self._tools)
        self.tool_sections: list[ToolUseSection] = []
        self._tool_texts: list[QLabel] = []
        self._body = QVBoxLayout()
        self._body.setSpacing(6)
        layout.addLayout(self._body)
        sources = QWidget()
        sources.setObjectName("sourcesRow")
        self.sources_row = FlowLayout(sources)  # wraps: eight citations never widen the reply past the window
        layout.addWidget(sources)
        self.source_buttons: list[QToolButton] = []
        self.footer = plain_label()
        self.footer.setObjectName("messageFooter")
        self.footer.setWordWrap(True)
        self.footer.hide()
        layout.addWidget(self.footer)
        self._blocks: list[Block] = []
        self._block_widgets: list[QWidget] = []
        self._draft_index: int | None = None  # the block still being written, while a reply streams
        self._text = ""
        self.set_text(text)

    def _action(self, key: str, text: str, tip: str, slot: object) -> None:
        button = QToolButton()
        button.setObjectName(f"{key}MessageButton")
        button.setText(text)
        button.setToolTip(tip)
        button.setAccessibleName(tip)
        button.clicked.connect(slot)
        button.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)  # never squeezed to "E"
        self.action_buttons[key] = button

    @property
    def text(self) -> str:
        return self._text

    def code_blocks(self) -> list[CodeBlock]:
        return [w for w in self._block_widgets if isinstance(w, CodeBlock)]

    def set_text(self, text: str, streaming: bool = False) -> None:
        """Show ``text``. ``streaming``: a reply still being written; its last block is a draft."""
        self._text = text
        shown = text
        if len(text) > DISPLAY_LIMIT:  # a huge paste: show its start; the whole text is kept and copied
            shown = (
                text[:DISPLAY_PREVIEW].rstrip()
                + f"\n\n*… {len(text):,} characters in all; the rest is not shown here. Copy copies all of it.*"
            )
        blocks = split_blocks(shown) if shown else [Block("text", "…")]
        keep = 0
        while keep < min(len(blocks), len(self._blocks)) and blocks[keep] == self._blocks[keep]:
            keep += 1
        if self._draft_index is not None:  # the old draft block is re-rendered: finished, or still a draft
            keep = min(keep, self._draft_index)
        draft_index = len(blocks) - 1 if streaming else None
        for index in range(keep, len(blocks)):
            block = blocks[index]
            draft = index == draft_index
            widget = self._block_widgets[index] if index < len(self._block_widgets) else None
            if widget is not None and index < len(self._blocks) and self._blocks[index].kind == block.kind:
                if isinstance(widget, CodeBlock):
                    widget.set_block(block, draft)
                else:
                    _render_prose(widget, block.text, draft)  # type: ignore[arg-type]
                continue
            fresh = CodeBlock(block) if block.kind == "code" else _prose_label(block.text, draft)
            if isinstance(fresh, CodeBlock) and draft:
                fresh.set_block(block, draft)
            if widget is not None:
                self._body.replaceWidget(widget, fresh)
                widget.deleteLater()
                self._block_widgets[index] = fresh
            else:
                self._body.addWidget(fresh)
                self._block_widgets.append(fresh)
        for widget in self._block_widgets[len(blocks) :]:
            widget.setParent(None)
            widget.deleteLater()
        del self._block_widgets[len(blocks) :]
        self._blocks = blocks
        self._draft_index = draft_index

    def set_footer(self, text: str) -> None:
        self.footer.setText(text)
        self.footer.setVisible(bool(text))

    def set_meta(self, model: str | None, created_at: float | None = None) -> None:
        """Title line: who, which model wrote it, and when."""
        parts = [ROLE_TITLES.get(self.role, self.role)]
        if self.role == "assistant" and model:  # a server's model id is often its file path: its name is enough
            parts.append(model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1] or model)
        if created_at:
            parts.append(format_when(created_at, always_date=True))
        self.title.setText(" · ".join(parts))

    def set_sources(self, sources: Sequence[Any]) -> None:
        """Numbered citations under a reply that answered from documents: each opens its passage."""
        for button in self.source_buttons:
            button.setParent(None)
            button.deleteLater()
        self.source_buttons = []
        for source in sources:
            button = QToolButton()
            button.setObjectName("sourceButton")
            where = source.where
            shown = (
                where
                if len(where) <= MAX_CITATION_CHARS
                else (where[: MAX_CITATION_CHARS // 2 - 1] + "…" + where[-(MAX_CITATION_CHARS // 2) :])
            )
            button.setText(f"[{source.number}] {shown}")
            button.setToolTip(plain_tooltip(source.text[:600]))
            button.setAccessibleName(f"Source {source.number}: {where}")
            button.clicked.connect(lambda _checked=False, s=source: self.sourceRequested.emit(s))
            self.sources_row.addWidget(button)
            self.source_buttons.append(button)

    def set_tool_rounds(self, rounds: Sequence[Any]) -> None:
        """The reply's tool rounds: each round's text (plain), then one folded section per call."""
        for widget in [*self.tool_sections, *self._tool_texts]:
            widget.setParent(None)
            widget.deleteLater()
        self.tool_sections, self._tool_texts = [], []
        for tool_round in rounds:
            if tool_round.text.strip():
                label = WrappingLabel()
                label.setTextFormat(Qt.TextFormat.PlainText)
                label.setWordWrap(True)
                label.setText(tool_round.text.strip()[:DISPLAY_LIMIT])
                self._tools.addWidget(label)
                self._tool_texts.append(label)
            for use in tool_round.uses:
                section = ToolUseSection(use, self)
                self._tools.addWidget(section)
                self.tool_sections.append(section)

    def set_place(self, index: int, count: int) -> None:
        """``‹ 2/3 ›``: which version of this turn is shown; hidden when there is only one."""
        several = count > 1
        self.version_label.setText(f"{index + 1}/{count}")
        self.version_label.setAccessibleName(f"Version {index + 1} of {count}")
        for widget in (self.action_buttons["previous"], self.version_label, self.action_buttons["next"]):
            widget.setVisible(several)
        self.action_buttons["previous"].setEnabled(index > 0)
        self.action_buttons["next"].setEnabled(index < count - 1)

    def set_can_regenerate(self, allowed: bool) -> None:
        if "regenerate" in self.action_buttons:
            self.action_buttons["regenerate"].setVisible(allowed)
