"""The one description of every setting a person can change: its label, a help line in plain words, its range and
its step. The settings file's loader keeps values inside these ranges, the dialogs build their fields from them,
and the user guide's settings table (docs/guide.md) is written from them (a test checks it is the same).

Defaults live with the values themselves (``settings.values.default_of``); the guide's table is
``settings.table``.
"""

from __future__ import annotations

from dataclasses import dataclass

from fara_desktop.planning.tuning import KV_TYPES

THEMES = ("system", "light", "dark")


@dataclass(frozen=True)
class SettingField:
    """One setting: ``key`` is its place in the settings file ("sampling.temperature"); ``low``/``high`` bound a
    number; ``auto`` names what an unset value means ("auto": the value tuned for this machine)."""

    key: str
    label: str
    help: str
    low: float | None = None
    high: float | None = None
    step: float = 1
    decimals: int = 0
    auto: str = ""  # what None means, shown in place of a number
    choices: tuple[str, ...] = ()
    unit: str = ""

    def within(self, value: float) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)

    def clamp(self, value: float) -> float:
        low = self.low if self.low is not None else value
        high = self.high if self.high is not None else value
        return min(max(value, low), high)

    def range_text(self) -> str:
        """The range as the user guide says it."""
        if self.choices:
            return " / ".join(self.choices)
        if self.low is None or self.high is None:
            return "on / off"

        def shown(value: float) -> str:
            return f"{value:,.{self.decimals}f}" if self.decimals else f"{int(value):,}"

        text = f"{shown(self.low)}–{shown(self.high)}{' ' + self.unit if self.unit else ''}"
        return f"{text}, or {self.auto}" if self.auto else text


KERNEL_PATHS = ("default", "no-amx", "plain")  # machine/kernel_paths' keys

FIELDS: tuple[SettingField, ...] = (
    # ---- the Inference page (unset: tuned for this machine and model)
    SettingField(
        "inference.n_ctx",
        "Context length",
        "How much of the chat the model sees at once, in tokens "
        "(a token is about ¾ of a word). Longer remembers more of a long chat but needs more memory.",
        256,
        1 << 20,
        step=256,
        auto="auto",
    ),
    SettingField(
        "inference.n_threads",
        "Generation threads",
        "CPU threads that write the reply. auto uses the "
        "count measured fastest here: past a point, more threads only wait for memory.",
        1,
        1024,
        auto="auto",
    ),
    SettingField(
        "inference.n_threads_batch",
        "Prompt threads",
        "CPU threads that read your message. Reading is arithmetic, so every physical core helps.",
        1,
        1024,
        auto="auto",
    ),
    SettingField(
        "inference.n_batch",
        "Batch size",
        "Tokens of your message read in one step. Larger reads a long message faster but needs more memory.",
        32,
        8192,
        step=32,
        auto="auto",
    ),
    SettingField(
        "inference.kv_type",
        "KV cache",
        "How the model's memory of the chat is stored: f16 exact, q8_0 "
        "half the memory and nearly exact, q4_0 a quarter and slightly worse.",
        choices=tuple(KV_TYPES),
        auto="auto",
    ),
    SettingField(
        "inference.flash_attn",
        "Flash attention",
        "A faster way to compute attention; it is also what lets the KV cache be stored in less memory.",
        auto="auto",
    ),
    SettingField(
        "inference.parallel",
        "Parallel API conversations",
        "Local API requests answered at once: one pass over the weights writes a token of each, so four cost "
        "this CPU little more than one. Each takes a KV cache of the whole context. auto: while the API is on, "
        "four (or two) where they fit.",
        1,
        16,
        auto="auto",
    ),
    SettingField(
        "inference.speculation",
        "Speculative decoding",
        "A reply proposes its next tokens from its own text (a quote, an edit of pasted text) and checks them "
        "in one pass, as many as measured to pay here; off where it slows this model. Same replies.",
        auto="auto",
    ),
    SettingField(
        "inference.draft_model",
        "Draft model",
        "A smaller model of the same vocabulary on this computer (SmolLM2-135M for SmolLM2-1.7B) proposes the "
        "window's next tokens. auto: the largest that pairs, where it fits beside; off by itself where it slows.",
        auto="auto",
    ),
    SettingField(
        "inference.kernel_path",
        "Kernel path",
        "How llama.cpp multiplies the weights on this CPU. auto "
        "takes the fastest path proven correct here; default is llama.cpp's own, no-amx the same without "
        "AMX, plain without repacked weights. A path that failed the check cannot be chosen.",
        choices=KERNEL_PATHS,
        auto="auto",
    ),
    SettingField(
        "inference.use_mmap",
        "Memory-map weights",
        "Read the model file as it is needed instead of "
        "copying it into memory first: starts sooner, and apps using the same file share it.",
        auto="auto",
    ),
    SettingField(
        "inference.use_mlock",
        "Lock weights in RAM",
        "Keep the model in memory even when the computer "
        "runs short (steadier speed; that memory is not given to other apps while it is loaded).",
        auto="auto",
    ),
    # ---- the Sampling page
    SettingField(
        "sampling.temperature",
        "Temperature",
        "How adventurous the wording is: 0 always takes the "
        "likeliest word (the same question gets the same answer), 0.7 varies sensibly, above 1.2 small "
        "models ramble.",
        0,
        5,
        step=0.05,
        decimals=2,
    ),
    SettingField(
        "sampling.top_p",
        "Top-p",
        "Words are drawn only from the likeliest ones that together make up "
        "this share of the chances. Lower: safer, plainer wording.",
        0,
        1,
        step=0.01,
        decimals=2,
    ),
    SettingField(
        "sampling.top_k", "Top-k", "Words are drawn only from this many of the likeliest (0: no limit).", 0, 100_000
    ),
    SettingField(
        "sampling.min_p",
        "Min-p",
        "A word less likely than this share of the likeliest word's chance is "
        "never drawn: cuts nonsense without making replies dull.",
        0,
        1,
        step=0.01,
        decimals=2,
    ),
    SettingField(
        "sampling.repeat_penalty",
        "Repeat penalty",
        "Makes words already used less likely: above 1 discourages repeating, 1 is off.",
        0.5,
        3,
        step=0.05,
        decimals=2,
    ),
    SettingField(
        "sampling.mirostat_mode",
        "Mirostat",
        "Replaces temperature, top-p and top-k by a feedback loop "
        "that keeps how surprising the words are near a target (tau). Leave it off unless you want it.",
        0,
        2,
        choices=("off", "Mirostat 1", "Mirostat 2"),
    ),
    SettingField(
        "sampling.mirostat_tau",
        "Mirostat tau",
        "Mirostat's target: lower is more focused, higher more varied.",
        0,
        20,
        step=0.5,
        decimals=2,
    ),
    SettingField(
        "sampling.mirostat_eta",
        "Mirostat eta",
        "How fast Mirostat corrects itself toward its target.",
        0,
        1,
        step=0.01,
        decimals=2,
    ),
    SettingField(
        "sampling.seed",
        "Seed",
        "The same seed, question and settings give the same reply; random gives a new one each time.",
        0,
        2**31 - 1,
        auto="random",
    ),
    SettingField(
        "sampling.max_tokens",
        "Max tokens",
        "A reply stops after this many tokens (about ¾ of a word each).",
        1,
        1 << 20,
        auto="until the context is full",
    ),
    # ---- Prompts
    SettingField(
        "prompts.chat_states_gb",
        "Disk for chats' saved reading",
        "A chat's reading (the model's memory "
        "of it) is kept on disk, so going back to the chat answers at once instead of reading it all again. "
        "0 keeps none; a deleted chat's goes with it.",
        0,
        10_000,
        step=0.5,
        decimals=1,
        unit="GB",
    ),
    SettingField(
        "prompts.read_ahead",
        "Read while I type",
        "The model reads the chat and what you type before you press Enter, so the reply starts sooner.",
    ),
    SettingField(
        "prompts.read_ahead_on_battery",
        "Read ahead on battery too",
        "Reading ahead spends energy on text that may still change: off on battery unless you turn this on.",
    ),
    SettingField(
        "prompts.document_wait_s",
        "Longest wait for document passages",
        "Passages from your documents "
        "are added to a question only as far as the model reads them in this many seconds here.",
        1,
        600,
        step=1,
        decimals=0,
        unit="s",
    ),
    SettingField(
        "prompts.pictures_whole",
        "Attach pictures at full size",
        "A picture is scaled to 896 pixels on "
        "its longest side, what small vision models read; a larger one only costs more encoding. On: "
        "pictures are kept as they are.",
    ),
    # ---- Appearance
    SettingField("theme", "Theme", "Light, dark, or as the system is set.", choices=THEMES),
    SettingField("font_size", "Font size", "The size of the text, in points.", 7, 24, unit="pt"),
    # ---- Local API
    SettingField("local_api.port", "Port", "The port other apps on this computer connect to.", 1, 65535),
)
BY_KEY = {field.key: field for field in FIELDS}


def described(key: str) -> SettingField:
    return BY_KEY[key]
