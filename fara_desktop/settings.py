"""User settings: one JSON file, typed, validated, written atomically; a corrupt file is kept aside.

Inference values are overrides: ``None`` means "auto", i.e. the tuned value for this machine and model.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from fara_desktop.atomic_files import write_json_atomically
from fara_desktop.engine.types import SamplingParams
from fara_desktop.planning.params import LoadParams, TunedParams
from fara_desktop.planning.tuning import KV_TYPES
from fara_desktop.regular_files import read_regular_text

log = logging.getLogger(__name__)
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class InferenceOverrides:
    """Values the user pinned; ``None`` keeps the tuned ("auto") value."""

    n_ctx: int | None = None
    n_threads: int | None = None
    n_threads_batch: int | None = None
    n_batch: int | None = None
    kv_type: str | None = None
    flash_attn: bool | None = None
    use_mmap: bool | None = None
    use_mlock: bool | None = None

    def validated(self) -> InferenceOverrides:
        def positive(value: int | None, low: int, high: int) -> int | None:
            return None if value is None or not isinstance(value, int) or not low <= value <= high else value

        kv = self.kv_type if self.kv_type in KV_TYPES else None
        return InferenceOverrides(
            n_ctx=positive(self.n_ctx, 256, 1 << 20),
            n_threads=positive(self.n_threads, 1, 1024),
            n_threads_batch=positive(self.n_threads_batch, 1, 1024),
            n_batch=positive(self.n_batch, 32, 8192),
            kv_type=kv,
            flash_attn=self.flash_attn if isinstance(self.flash_attn, bool) else None,
            use_mmap=self.use_mmap if isinstance(self.use_mmap, bool) else None,
            use_mlock=self.use_mlock if isinstance(self.use_mlock, bool) else None,
        )

    def apply(self, tuned: TunedParams) -> LoadParams:
        """The tuned values with the ones the user pinned put in their place."""
        loaded = replace(
            tuned,
            n_ctx=self.n_ctx or tuned.n_ctx,
            n_threads=self.n_threads or tuned.n_threads,
            n_threads_batch=self.n_threads_batch or tuned.n_threads_batch,
            n_batch=self.n_batch or tuned.n_batch,
            kv_type=self.kv_type or tuned.kv_type,
            use_mmap=self.use_mmap if self.use_mmap is not None else tuned.use_mmap,
            use_mlock=self.use_mlock if self.use_mlock is not None else tuned.use_mlock,
        ).load_params()
        return loaded if self.flash_attn is None else replace(loaded, flash_attn=self.flash_attn)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _number(value: Any, low: float, high: float, default: float) -> float:
    return (
        float(value)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and low <= value <= high
        else default
    )


@dataclass(frozen=True)
class SamplingSettings:
    """How replies are sampled; the defaults suit small chat models."""

    temperature: float = 0.7
    top_p: float = 0.95
    top_k: int = 40
    min_p: float = 0.05
    repeat_penalty: float = 1.1
    mirostat_mode: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.1
    seed: int | None = None
    max_tokens: int | None = None

    def validated(self) -> SamplingSettings:
        default = SamplingSettings()
        seed = self.seed
        seed = seed if isinstance(seed, int) and not isinstance(seed, bool) and 0 <= seed < 1 << 32 else None
        max_tokens = self.max_tokens if isinstance(self.max_tokens, int) and 1 <= self.max_tokens <= 1 << 20 else None
        return SamplingSettings(
            temperature=_number(self.temperature, 0.0, 5.0, default.temperature),
            top_p=_number(self.top_p, 0.0, 1.0, default.top_p),
            top_k=int(_number(self.top_k, 0, 100000, default.top_k)),
            min_p=_number(self.min_p, 0.0, 1.0, default.min_p),
            repeat_penalty=_number(self.repeat_penalty, 0.5, 3.0, default.repeat_penalty),
            mirostat_mode=int(_number(self.mirostat_mode, 0, 2, 0)),
            mirostat_tau=_number(self.mirostat_tau, 0.0, 20.0, default.mirostat_tau),
            mirostat_eta=_number(self.mirostat_eta, 0.0, 1.0, default.mirostat_eta),
            seed=seed,
            max_tokens=max_tokens,
        )

    def params(self) -> SamplingParams:
        return SamplingParams(**asdict(self))


THEMES = ("system", "light", "dark")
MAX_SERVERS = 50


@dataclass(frozen=True)
class ServerEntry:
    """An OpenAI-compatible server the user added; its API key lives in ``api_keys``, never here."""

    name: str
    base_url: str

    @staticmethod
    def valid_url(url: str) -> bool:
        return len(url) <= 500 and url.startswith(("http://", "https://")) and len(url.split("//", 1)[1].strip("/")) > 0


@dataclass(frozen=True)
class RemoteChoice:
    """The server model chosen for chatting (instead of a GGUF file here)."""

    server: str
    model: str


@dataclass(frozen=True)
class LocalApiSettings:
    """The local API: off unless the user turns it on; on 127.0.0.1 unless they choose another address."""

    enabled: bool = False
    host: str = "127.0.0.1"
    port: int = 8765
    allowed_origins: tuple[str, ...] = ()  # web pages that may use it (e.g. "http://localhost:3000"); none by default
    relay_servers: tuple[str, ...] = ()  # servers (by name) whose models it may relay to; none by default


@dataclass(frozen=True)
class PromptSettings:
    """How the app spares the user from waiting for prompts to be read."""

    chat_states_gb: float = 4.0  # disk kept for chats' KV states (0: none are kept)
    read_ahead: bool = True  # read the chat and the text being typed before Enter
    read_ahead_on_battery: bool = False  # also on battery (it spends energy on text that may change)
    document_wait_s: float = 10.0  # the reading time a question's document passages may add


@dataclass(frozen=True)
class ToolSettings:
    """MCP servers as the user pasted them (the ``mcpServers`` JSON, parsed by ``tools.mcp_config``), which of them
    run, and the tools the user allowed to run without asking ("server/tool")."""

    servers_json: str = ""
    enabled: tuple[str, ...] = ()
    always_allowed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    """Everything the user chose; unknown keys in the file are ignored, bad values fall back to defaults."""

    schema_version: int = SCHEMA_VERSION
    model_path: str | None = None
    extra_model_folders: list[str] = field(default_factory=list)
    inference: InferenceOverrides = field(default_factory=InferenceOverrides)
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    theme: str = "system"
    font_size: int = 10
    servers: list[ServerEntry] = field(default_factory=list)
    remote_model: RemoteChoice | None = None
    local_api: LocalApiSettings = field(default_factory=LocalApiSettings)
    prompts: PromptSettings = field(default_factory=PromptSettings)
    tools: ToolSettings = field(default_factory=ToolSettings)

    def server(self, name: str) -> ServerEntry | None:
        return next((s for s in self.servers if s.name == name), None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Settings:
        known = {f.name for f in fields(InferenceOverrides)}
        raw_inference = _mapping(data.get("inference"))
        inference = InferenceOverrides(**{k: v for k, v in raw_inference.items() if k in known}).validated()
        raw_sampling = _mapping(data.get("sampling"))
        sampling_keys = {f.name for f in fields(SamplingSettings)}
        sampling = SamplingSettings(**{k: v for k, v in raw_sampling.items() if k in sampling_keys}).validated()
        folders = data.get("extra_model_folders")
        model_path = data.get("model_path")
        theme = data.get("theme") if data.get("theme") in THEMES else "system"
        font_size = int(_number(data.get("font_size"), 7, 24, 10))
        servers = _servers(data.get("servers"))
        remote = _mapping(data.get("remote_model"))
        remote_model = (
            RemoteChoice(remote["server"], remote["model"][:500])
            if isinstance(remote.get("server"), str) and isinstance(remote.get("model"), str)
            and any(s.name == remote["server"] for s in servers)
            else None
        )  # fmt: skip
        api = _mapping(data.get("local_api"))
        host = api.get("host") if isinstance(api.get("host"), str) and 0 < len(api["host"]) <= 255 else "127.0.0.1"
        local_api = LocalApiSettings(
            enabled=api.get("enabled") is True, host=str(host), port=int(_number(api.get("port"), 1, 65535, 8765)),
            allowed_origins=_short_strings(api.get("allowed_origins"), ("http://", "https://")),
            relay_servers=tuple(n for n in _short_strings(api.get("relay_servers")) if settings_has(servers, n)),
        )  # fmt: skip
        raw_prompts = _mapping(data.get("prompts"))
        prompts = PromptSettings(
            chat_states_gb=_number(raw_prompts.get("chat_states_gb"), 0, 10_000, 4.0),
            read_ahead=raw_prompts.get("read_ahead") is not False,
            read_ahead_on_battery=raw_prompts.get("read_ahead_on_battery") is True,
            document_wait_s=_number(raw_prompts.get("document_wait_s"), 1, 600, 10.0),
        )
        raw_tools = _mapping(data.get("tools"))
        servers_json = raw_tools.get("servers_json")
        tools = ToolSettings(
            servers_json=servers_json if isinstance(servers_json, str) and len(servers_json) <= 1 << 20 else "",
            enabled=_short_strings(raw_tools.get("enabled")),
            always_allowed=_short_strings(raw_tools.get("always_allowed")),
        )
        return cls(
            model_path=model_path if isinstance(model_path, str) else None,
            extra_model_folders=[f for f in folders if isinstance(f, str)] if isinstance(folders, list) else [],
            inference=inference,
            sampling=sampling,
            theme=str(theme),
            font_size=font_size,
            servers=servers,
            remote_model=remote_model,
            local_api=local_api,
            prompts=prompts,
            tools=tools,
        )


def settings_has(servers: list[ServerEntry], name: str) -> bool:
    return any(s.name == name for s in servers)


def _short_strings(value: Any, prefixes: tuple[str, ...] = ("",)) -> tuple[str, ...]:
    """A list of short, printable strings from the file (at most 50; anything else is dropped)."""
    items = value if isinstance(value, (list, tuple)) else []
    kept = [v for v in items if isinstance(v, str) and 0 < len(v) <= 200 and v.isprintable() and v.startswith(prefixes)]
    return tuple(dict.fromkeys(kept))[:50]


def _servers(value: Any) -> list[ServerEntry]:
    servers: list[ServerEntry] = []
    for entry in value if isinstance(value, list) else []:
        entry = _mapping(entry)
        name, url = entry.get("name"), entry.get("base_url")
        if not (isinstance(name, str) and isinstance(url, str)) or not 0 < len(name) <= 80:
            continue
        if ServerEntry.valid_url(url) and all(s.name != name for s in servers):
            servers.append(ServerEntry(name, url))
    return servers[:MAX_SERVERS]


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    notice: str | None  # set when the file was unusable and defaults are in use


def settings_file(config_dir: Path) -> Path:
    return config_dir / "settings.json"


MAX_SETTINGS_BYTES = 1 << 20


def load_settings(config_dir: Path) -> LoadedSettings:
    path = settings_file(config_dir)
    if not os.path.lexists(path):
        return LoadedSettings(Settings(), None)
    try:
        data = json.loads(read_regular_text(path, MAX_SETTINGS_BYTES))
        if not isinstance(data, dict):
            raise ValueError("the file does not hold a settings object")
        if int(data.get("schema_version", SCHEMA_VERSION)) > SCHEMA_VERSION:
            raise ValueError(f"it was written by a newer Fara Desktop (schema {data['schema_version']})")
        return LoadedSettings(Settings.from_json(data), None)
    except (OSError, ValueError, TypeError, OverflowError, RecursionError) as exc:
        exc = exc if not isinstance(exc, RecursionError) else ValueError("it is nested too deeply")
        kept = path.with_name(f"settings.corrupt-{time.strftime('%Y%m%d-%H%M%S')}.json")
        try:
            os.replace(path, kept)
        except OSError:
            kept = path
        log.warning("Settings file %s is unusable (%s); kept as %s", path, exc, kept)
        return LoadedSettings(
            Settings(),
            f"Your settings could not be read ({exc}); defaults are in use. The old file was kept as {kept}.",
        )


def save_settings(config_dir: Path, settings: Settings) -> None:
    write_json_atomically(settings_file(config_dir), settings.to_json())
