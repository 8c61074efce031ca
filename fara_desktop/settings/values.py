"""The user's settings as typed values, and how they are read from the file's JSON: a value outside its range
(``settings.fields``) or of the wrong type falls back to its default.

Inference values are overrides: ``None`` means "auto", i.e. the tuned value for this machine and model.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from fara_desktop.planning.params import LoadParams, TunedParams
from fara_desktop.planning.tuning import KV_TYPES
from fara_desktop.settings.fields import KERNEL_PATHS, THEMES, described
from fara_desktop.vocabulary.sampling import SamplingParams

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
    kernel_path: str | None = None
    parallel: int | None = None  # the local API's conversations decoded together; auto: as many as fit (API on)
    speculation: bool | None = None  # replies propose tokens from their own text; auto: on
    draft_model: bool | None = None  # a smaller model of the same vocabulary proposes too; auto: where one fits

    def validated(self) -> InferenceOverrides:
        """Counts of 0 or less (or not numbers) mean auto; others are brought into their range (a context of 100
        tokens becomes the least, 256)."""

        def count(key: str, value: int | None) -> int | None:
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                return None
            return int(described(f"inference.{key}").clamp(value))

        kv = self.kv_type if self.kv_type in KV_TYPES else None
        return InferenceOverrides(
            n_ctx=count("n_ctx", self.n_ctx),
            n_threads=count("n_threads", self.n_threads),
            n_threads_batch=count("n_threads_batch", self.n_threads_batch),
            n_batch=count("n_batch", self.n_batch),
            kv_type=kv,
            flash_attn=self.flash_attn if isinstance(self.flash_attn, bool) else None,
            use_mmap=self.use_mmap if isinstance(self.use_mmap, bool) else None,
            use_mlock=self.use_mlock if isinstance(self.use_mlock, bool) else None,
            kernel_path=self.kernel_path if self.kernel_path in KERNEL_PATHS else None,
            parallel=count("parallel", self.parallel),
            speculation=self.speculation if isinstance(self.speculation, bool) else None,
            draft_model=self.draft_model if isinstance(self.draft_model, bool) else None,
        )

    def apply(self, tuned: TunedParams, serving: bool = False) -> LoadParams:
        """The tuned values with the ones the user pinned put in their place; ``serving``: the local API is on (the
        tuned number of its replies decode together; else one at a time)."""
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
        parallel = self.parallel or (tuned.parallel if serving else 1)
        speculate = self.speculation is not False
        draft = "auto" if speculate and self.draft_model is not False else ""
        loaded = replace(loaded, parallel=parallel, speculate=speculate, draft_model=draft)
        return loaded if self.flash_attn is None else replace(loaded, flash_attn=self.flash_attn)


def _projector_choices(value: Any) -> dict[str, str]:
    """Model path → projector path ("" for none), as many as a person could have chosen; anything else dropped."""
    if not isinstance(value, dict):
        return {}
    chosen = [
        (k, v)
        for k, v in value.items()
        if isinstance(k, str) and isinstance(v, str) and len(k) < 4096 and len(v) < 4096
    ]
    return dict(chosen[:1000])


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def default_of(key: str) -> Any:
    """The default value, read from the settings' own classes."""
    value: Any = Settings()
    for part in key.split("."):
        value = getattr(value, part)
    return value


def _number(value: Any, key: str) -> float:
    """A number of the settings file within its field's range; its default otherwise."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and described(key).within(value):
        return float(value)
    return float(default_of(key))


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
        def optional(key: str, value: Any) -> int | None:
            whole = isinstance(value, int) and not isinstance(value, bool)
            return value if whole and described(f"sampling.{key}").within(value) else None

        return SamplingSettings(
            temperature=_number(self.temperature, "sampling.temperature"),
            top_p=_number(self.top_p, "sampling.top_p"),
            top_k=int(_number(self.top_k, "sampling.top_k")),
            min_p=_number(self.min_p, "sampling.min_p"),
            repeat_penalty=_number(self.repeat_penalty, "sampling.repeat_penalty"),
            mirostat_mode=int(_number(self.mirostat_mode, "sampling.mirostat_mode")),
            mirostat_tau=_number(self.mirostat_tau, "sampling.mirostat_tau"),
            mirostat_eta=_number(self.mirostat_eta, "sampling.mirostat_eta"),
            seed=optional("seed", self.seed),
            max_tokens=optional("max_tokens", self.max_tokens),
        )

    def params(self) -> SamplingParams:
        return SamplingParams(**asdict(self))


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
    pictures_whole: bool = False  # attach pictures at their own size (default: scaled to what vision models read)


@dataclass(frozen=True)
class ToolSettings:
    """MCP servers as the user pasted them (the ``mcpServers`` JSON, parsed by ``tools.mcp_config``), which of them
    run, and the tools the user allowed to run without asking ("server/tool")."""

    servers_json: str = ""
    enabled: tuple[str, ...] = ()
    always_allowed: tuple[str, ...] = ()


@dataclass(frozen=True)
class Settings:
    """Everything the user chose; unknown keys in the file are ignored, bad values fall back to defaults (the ranges
    are ``settings.fields``')."""

    schema_version: int = SCHEMA_VERSION
    model_path: str | None = None
    extra_model_folders: list[str] = field(default_factory=list)
    # the vision projector the user chose for a model (its path; "": none, text only), where discovery's guess is
    # not what they want or it found several
    projectors: dict[str, str] = field(default_factory=dict)
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
        font_size = int(_number(data.get("font_size"), "font_size"))
        servers = _servers(data.get("servers"))
        remote = _mapping(data.get("remote_model"))
        remote_model = (
            RemoteChoice(remote["server"], remote["model"][:500])
            if isinstance(remote.get("server"), str)
            and isinstance(remote.get("model"), str)
            and any(s.name == remote["server"] for s in servers)
            else None
        )
        api = _mapping(data.get("local_api"))
        host = api.get("host") if isinstance(api.get("host"), str) and 0 < len(api["host"]) <= 255 else "127.0.0.1"
        local_api = LocalApiSettings(
            enabled=api.get("enabled") is True,
            host=str(host),
            port=int(_number(api.get("port"), "local_api.port")),
            allowed_origins=_short_strings(api.get("allowed_origins"), ("http://", "https://")),
            relay_servers=tuple(n for n in _short_strings(api.get("relay_servers")) if settings_has(servers, n)),
        )
        raw_prompts = _mapping(data.get("prompts"))
        prompts = PromptSettings(
            chat_states_gb=_number(raw_prompts.get("chat_states_gb"), "prompts.chat_states_gb"),
            read_ahead=raw_prompts.get("read_ahead") is not False,
            read_ahead_on_battery=raw_prompts.get("read_ahead_on_battery") is True,
            document_wait_s=_number(raw_prompts.get("document_wait_s"), "prompts.document_wait_s"),
            pictures_whole=raw_prompts.get("pictures_whole") is True,
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
            projectors=_projector_choices(data.get("projectors")),
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
