"""Find GGUF models already on this machine, in place and read-only (nothing is copied or moved).

Sources, in order of preference when the same file is reachable twice: Fara's own models folder, folders the
user added, models shipped in Python packages, the Hugging Face cache, LM Studio, Ollama's store, GPT4All and Jan.
Bad files never break a scan: each is listed as unusable with the reason.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from fara_desktop.files.regular import read_regular_text
from fara_desktop.models import packaged
from fara_desktop.models.gguf_checks import check_projector
from fara_desktop.models.gguf_file import read_gguf_header
from fara_desktop.models.metadata import MetadataCache, ModelMetadata
from fara_desktop.text.untrusted import one_line
from fara_desktop.vocabulary.errors import NotAGGUFError

log = logging.getLogger(__name__)

SPLIT_RE = re.compile(r"^(?P<base>.+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.gguf$", re.IGNORECASE)
MAX_DEPTH = 8
NOT_CHAT_ARCHITECTURES = {"clip": "a vision projector (mmproj), not a chat model"}
OLLAMA_MODEL_LAYER = "application/vnd.ollama.image.model"
OLLAMA_PROJECTOR_LAYER = "application/vnd.ollama.image.projector"
MAX_MANIFEST_BYTES = 1 << 20
OLLAMA_DIGEST_RE = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class SearchLocation:
    """A place that was searched, for the "what was searched" part of the UI and the CLI."""

    source: str
    folder: str
    exists: bool


@dataclass(frozen=True)
class DiscoveredModel:
    """One model found on disk (a split model counts once); ``problem`` set means it cannot be used."""

    path: str
    source: str
    display_name: str
    metadata: ModelMetadata | None
    problem: str | None = None
    shards: int = 1
    needs_assembly: bool = False  # packaged in chunks; written to ``path`` on first use
    projector: str | None = None  # a vision projector (mmproj) found for this model: it could see pictures
    is_projector: bool = False  # this file is a vision projector, not a chat model
    projector_refused: bool = False  # a projector that llama.cpp could not load safely: never paired

    @property
    def usable(self) -> bool:
        return self.problem is None and self.metadata is not None

    def to_json(self) -> dict[str, object]:
        return {
            "path": self.path,
            "source": self.source,
            "name": self.display_name,
            "usable": self.usable,
            "problem": self.problem,
            "shards": self.shards,
            "needs_assembly": self.needs_assembly,
            "projector": self.projector,
            "metadata": self.metadata.to_json() if self.metadata else None,
        }


@dataclass
class ScanResult:
    models: list[DiscoveredModel] = field(default_factory=list)
    searched: list[SearchLocation] = field(default_factory=list)

    @property
    def usable(self) -> list[DiscoveredModel]:
        return [m for m in self.models if m.usable]


@dataclass(frozen=True)
class _Candidate:
    path: Path
    source: str
    display_name: str | None = None
    header_path: Path | None = None
    total_bytes: int | None = None
    shards: int = 1
    problem: str | None = None
    needs_assembly: bool = False
    projector: Path | None = None  # Ollama's manifest names the model's projector layer


# ---------------------------------------------------------------------- where other apps keep models


def _platform_key(platform: str) -> str:
    if platform.startswith("win"):
        return "windows"
    return "macos" if platform == "darwin" else "linux"


def hf_cache_dir(env: Mapping[str, str], home: Path) -> Path:
    if env.get("HF_HUB_CACHE"):
        return Path(env["HF_HUB_CACHE"])
    if env.get("HF_HOME"):
        return Path(env["HF_HOME"]) / "hub"
    cache = Path(env["XDG_CACHE_HOME"]) if env.get("XDG_CACHE_HOME") else home / ".cache"
    return cache / "huggingface" / "hub"


def ollama_dirs(env: Mapping[str, str], home: Path, platform: str) -> list[Path]:
    if env.get("OLLAMA_MODELS"):
        return [Path(env["OLLAMA_MODELS"])]
    dirs = [home / ".ollama" / "models"]
    if _platform_key(platform) == "linux":  # the system service's store
        dirs += [Path("/usr/share/ollama/.ollama/models"), Path("/var/lib/ollama/.ollama/models")]
    return dirs


def app_store_dirs(env: Mapping[str, str], home: Path, platform: str) -> list[tuple[str, Path]]:
    """LM Studio, GPT4All and Jan model folders for this OS."""
    key = _platform_key(platform)
    local = Path(env.get("LOCALAPPDATA", home / "AppData" / "Local"))
    roaming = Path(env.get("APPDATA", home / "AppData" / "Roaming"))
    xdg_data = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else home / ".local" / "share"
    mac_support = home / "Library" / "Application Support"
    stores = [("LM Studio", home / ".lmstudio" / "models"), ("LM Studio", home / ".cache" / "lm-studio" / "models")]
    if key == "linux":
        stores += [
            ("GPT4All", xdg_data / "nomic.ai" / "GPT4All"),
            ("Jan", xdg_data / "Jan" / "data" / "llamacpp" / "models"),
            ("Jan", home / "jan" / "models"),
        ]
    elif key == "macos":
        stores += [
            ("GPT4All", mac_support / "nomic.ai" / "GPT4All"),
            ("Jan", mac_support / "Jan" / "data" / "llamacpp" / "models"),
            ("Jan", home / "jan" / "models"),
        ]
    else:
        stores += [
            ("GPT4All", local / "nomic.ai" / "GPT4All"),
            ("Jan", roaming / "Jan" / "data" / "llamacpp" / "models"),
            ("Jan", home / "jan" / "models"),
        ]
    return stores


# ---------------------------------------------------------------------- walking folders


def _walk_gguf(root: Path, problems: list[_Candidate], source: str) -> Iterator[Path]:
    """Every *.gguf below root; follows folder symlinks once (loops are cut), records unreadable folders."""
    seen: set[tuple[int, int]] = set()

    def on_error(error: OSError) -> None:
        problems.append(
            _Candidate(Path(error.filename or root), source, problem=f"cannot read folder: {error.strerror}")
        )

    for folder, dirs, files in os.walk(root, followlinks=True, onerror=on_error):
        here = Path(folder)
        try:
            stat = here.stat()
        except OSError:
            dirs[:] = []
            continue
        if (stat.st_dev, stat.st_ino) in seen or len(here.relative_to(root).parts) >= MAX_DEPTH:
            dirs[:] = []
            continue
        seen.add((stat.st_dev, stat.st_ino))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.lower().endswith(".gguf"):
                yield here / name


def _group_splits(paths: list[Path], source: str, names: dict[Path, str]) -> list[_Candidate]:
    """Split GGUFs (``-00001-of-00003``) become one candidate: the first shard, with the total size."""
    singles: list[_Candidate] = []
    groups: dict[tuple[Path, str, int], dict[int, Path]] = {}
    for path in paths:
        match = SPLIT_RE.match(path.name)
        if match:
            key = (path.parent, match["base"], int(match["count"]))
            groups.setdefault(key, {})[int(match["index"])] = path
        else:
            singles.append(_Candidate(path, source, names.get(path)))
    for (_, base, count), shards in groups.items():
        first = shards.get(1)
        if first is None or len(shards) != count:
            some = next(iter(shards.values()))
            singles.append(
                _Candidate(
                    some,
                    source,
                    base,
                    shards=count,
                    problem=f"split model incomplete: {len(shards)} of {count} parts present",
                )
            )
            continue
        total = 0
        for shard in shards.values():
            with contextlib.suppress(OSError):
                total += shard.stat().st_size
        singles.append(_Candidate(first, source, names.get(first, base), total_bytes=total, shards=count))
    return singles


def _folder_candidates(source: str, root: Path, problems: list[_Candidate], naming: str = "file") -> list[_Candidate]:
    paths = list(_walk_gguf(root, problems, source))
    names: dict[Path, str] = {}
    for path in paths:
        rel = path.relative_to(root)
        if naming == "hf" and rel.parts and rel.parts[0].startswith("models--"):
            repo = rel.parts[0][len("models--") :].replace("--", "/")
            names[path] = f"{repo} · {path.name}"
        elif naming == "publisher" and len(rel.parts) >= 3:
            names[path] = f"{rel.parts[0]}/{rel.parts[1]} · {path.name}"
    if naming == "hf":  # only snapshot files, not blobs or partial downloads
        paths = [p for p in paths if "snapshots" in p.relative_to(root).parts]
    return _group_splits(paths, source, names)


def _ollama_candidates(root: Path, problems: list[_Candidate]) -> list[_Candidate]:
    manifests = root / "manifests"
    found: list[_Candidate] = []
    if not manifests.is_dir():
        return found
    for folder, _dirs, files in os.walk(manifests):
        for tag in files:
            manifest = Path(folder) / tag
            rel = manifest.relative_to(manifests).parts  # registry / namespace / model / tag
            model = rel[-2] if len(rel) >= 2 else "model"
            namespace = rel[-3] if len(rel) >= 3 else "library"
            name = f"{model}:{tag}" if namespace == "library" else f"{namespace}/{model}:{tag}"
            try:
                layers = json.loads(read_regular_text(manifest, MAX_MANIFEST_BYTES)).get("layers", [])
                digest = next(layer["digest"] for layer in layers if layer.get("mediaType") == OLLAMA_MODEL_LAYER)
            except (OSError, ValueError, StopIteration, KeyError, TypeError, AttributeError, RecursionError) as exc:
                problems.append(_Candidate(manifest, "Ollama", name, problem=f"unreadable Ollama manifest ({exc})"))
                continue
            if not isinstance(digest, str) or not OLLAMA_DIGEST_RE.fullmatch(digest):
                problems.append(_Candidate(manifest, "Ollama", name, problem="Ollama manifest has an invalid digest"))
                continue
            blob = root / "blobs" / digest.replace(":", "-")
            if not blob.is_file():
                problems.append(_Candidate(blob, "Ollama", name, problem="Ollama manifest points at a missing blob"))
                continue
            found.append(_Candidate(blob, "Ollama", name, projector=_ollama_projector(root, layers)))
    return found


def _ollama_projector(root: Path, layers: list[object]) -> Path | None:
    """The blob of the manifest's projector layer (a model that sees pictures), when it is there."""
    for layer in layers:
        if isinstance(layer, dict) and layer.get("mediaType") == OLLAMA_PROJECTOR_LAYER:
            digest = layer.get("digest")
            if isinstance(digest, str) and OLLAMA_DIGEST_RE.fullmatch(digest):
                blob = root / "blobs" / digest.replace(":", "-")
                return blob if blob.is_file() else None
    return None


def _package_candidates(models_cache: Path) -> list[_Candidate]:
    found: list[_Candidate] = []
    smol = packaged.embedded_default_model()
    if smol is not None:
        found.append(_Candidate(smol, f"Python package {packaged.SMOLLM2_DISTRIBUTION} (embedded default)"))
    chunks = packaged.gemma3_chunks()
    if len(chunks) == 4:
        target = models_cache / packaged.GEMMA3_FILE
        source = f"Python package {packaged.GEMMA3_DISTRIBUTION}"
        total = sum(c.stat().st_size for c in chunks)
        if target.is_file() and target.stat().st_size == total:
            found.append(_Candidate(target, source))
        else:
            found.append(_Candidate(target, source, header_path=chunks[0], total_bytes=total, needs_assembly=True))
    return found


# ---------------------------------------------------------------------- the scan


def packaged_models_dir(cache_dir: Path) -> Path:
    return cache_dir / "packaged-models"


def scan_models(
    app_models_dir: Path,
    cache_dir: Path,
    extra_folders: list[Path] | None = None,
    env: Mapping[str, str] | None = None,
    home: Path | None = None,
    platform: str = sys.platform,
    include_packages: bool = True,
) -> ScanResult:
    env = os.environ if env is None else env
    home = Path.home() if home is None else home
    result = ScanResult()
    problems: list[_Candidate] = []
    candidates: list[_Candidate] = []

    def folder(source: str, root: Path, naming: str = "file") -> None:
        exists = root.is_dir()
        result.searched.append(SearchLocation(source, str(root), exists))
        if exists:
            candidates.extend(_folder_candidates(source, root, problems, naming))

    folder("Fara models folder", app_models_dir)
    for extra in extra_folders or []:
        folder("Added folder", extra)
    if include_packages:
        result.searched.append(SearchLocation("Python packages", "installed distributions", True))
        candidates.extend(_package_candidates(packaged_models_dir(cache_dir)))
    folder("Hugging Face cache", hf_cache_dir(env, home), "hf")
    for source, root in app_store_dirs(env, home, platform):
        folder(source, root, "publisher" if source == "LM Studio" else "file")
    for root in ollama_dirs(env, home, platform):
        exists = root.is_dir()
        result.searched.append(SearchLocation("Ollama", str(root), exists))
        if exists:
            candidates.extend(_ollama_candidates(root, problems))

    cache = MetadataCache(cache_dir / "gguf-metadata.json")
    seen: set[str] = set()
    for candidate in [*candidates, *problems]:
        try:
            real = str(candidate.path.resolve())
        except (OSError, RuntimeError):  # RuntimeError: symlink loop on older Pythons
            real = str(candidate.path)
        if real in seen:
            continue
        seen.add(real)
        result.models.append(_examine(candidate, cache))
    cache.save()
    result.models = pair_projectors(result.models)
    return result


def scan_folder(root: Path, cache_dir: Path) -> list[DiscoveredModel]:
    """The models in one folder the user just added (the rest of a scan is known): as ``scan_models`` finds them."""
    problems: list[_Candidate] = []
    candidates = _folder_candidates("Added folder", root, problems) if root.is_dir() else []
    cache = MetadataCache(cache_dir / "gguf-metadata.json")
    found = [_examine(candidate, cache) for candidate in [*candidates, *problems]]
    cache.save()
    return pair_projectors(found)


def _examine(candidate: _Candidate, cache: MetadataCache) -> DiscoveredModel:
    name = one_line(candidate.display_name or candidate.path.name)
    base = DiscoveredModel(
        str(candidate.path),
        candidate.source,
        name,
        None,
        shards=candidate.shards,
        needs_assembly=candidate.needs_assembly,
    )
    if candidate.problem:
        return replace(base, problem=candidate.problem)
    try:
        metadata = cache.read(candidate.path, candidate.display_name, candidate.header_path, candidate.total_bytes)
    except NotAGGUFError as exc:
        if _architecture_of(candidate.path) == "clip":  # a vision projector: no chat model's keys, by design
            return _projector(base, candidate.path)
        return replace(base, problem=str(exc))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        return replace(base, problem=f"cannot read: {reason}")
    except Exception as exc:  # a stranger's file: whatever it makes the reader do, only this file is unusable
        log.warning("Unexpected error reading %s: %s", one_line(candidate.path.name), type(exc).__name__)
        return replace(base, problem=f"cannot read this file ({type(exc).__name__})")
    paired = candidate.projector if candidate.projector and _projector_refusal(candidate.projector) is None else None
    return replace(
        base,
        display_name=name if candidate.display_name else metadata.name,
        metadata=metadata,
        problem=NOT_CHAT_ARCHITECTURES.get(metadata.architecture),
        is_projector=metadata.architecture == "clip",
        projector=str(paired) if paired is not None else None,
    )


def _projector(base: DiscoveredModel, path: Path) -> DiscoveredModel:
    """A vision projector, checked as llama.cpp's ``mtmd`` would need it (one it would abort on is never paired)."""
    refused = _projector_refusal(path)
    if refused is not None:
        return replace(base, problem=refused, is_projector=True, projector_refused=True)
    return replace(base, problem=NOT_CHAT_ARCHITECTURES["clip"], is_projector=True)


def _projector_refusal(path: Path) -> str | None:
    """Why this projector cannot be used safely (None: it can)."""
    try:
        check_projector(read_gguf_header(path))
    except NotAGGUFError as exc:
        return str(exc)
    except Exception as exc:  # a stranger's file: whatever it makes the reader do, only this projector is refused
        return f"cannot read this projector ({type(exc).__name__})"
    return None


def _architecture_of(path: Path) -> str | None:
    try:
        return read_gguf_header(path).architecture
    except Exception:  # a stranger's file: not a projector we can pair, whatever it is
        return None


def pair_projectors(models: list[DiscoveredModel]) -> list[DiscoveredModel]:
    """Each chat model gets the vision projector beside it (the same folder: a download's, a Hugging Face
    snapshot's, an LM Studio model's): the only one there, or the one whose name shares most with the model's. A
    projector says which model it serves."""
    projectors = [m for m in models if m.is_projector and not m.projector_refused]
    if not projectors:
        return models
    served: dict[str, str] = {}
    paired: list[DiscoveredModel] = []
    for model in models:
        if model.is_projector or not model.usable or model.projector is not None:
            paired.append(model)
            continue
        here = [p for p in projectors if Path(p.path).parent == Path(model.path).parent]
        best = _closest(model, here)
        if best is not None:
            served[best.path] = model.display_name
            model = replace(model, projector=best.path)
        paired.append(model)
    return [
        replace(m, problem=f"a vision projector (mmproj) for {served[m.path]}, not a chat model itself")
        if m.path in served
        else m
        for m in paired
    ]


MAX_BESIDE = 64  # files looked at beside a model opened from elsewhere


def projector_beside(model: DiscoveredModel) -> DiscoveredModel:
    """A model opened from a folder no scan covers (Ctrl+O, ``serve --model``), paired with the projector beside
    it as a scanned one would be: the GGUFs of its folder whose header says ``clip``, checked, the closest name."""
    folder = Path(model.path).parent
    try:
        files = sorted(p for p in folder.glob("*.gguf") if p.is_file() and str(p) != model.path)[:MAX_BESIDE]
    except OSError:
        return model
    base = DiscoveredModel("", "opened by you", "", None)
    found = [
        _projector(replace(base, path=str(p), display_name=p.name), p) for p in files if _architecture_of(p) == "clip"
    ]
    best = _closest(model, [p for p in found if not p.projector_refused])
    return replace(model, projector=best.path) if best is not None else model


def _closest(model: DiscoveredModel, projectors: list[DiscoveredModel]) -> DiscoveredModel | None:
    if len(projectors) <= 1:
        return projectors[0] if projectors else None
    name = Path(model.path).stem.lower()

    def shared(projector: DiscoveredModel) -> int:
        other = Path(projector.path).stem.lower().removeprefix("mmproj-").removeprefix("mmproj")
        return next(
            (i for i, (a, b) in enumerate(zip(name, other.lstrip("-_."), strict=False)) if a != b),
            min(len(name), len(other.lstrip("-_."))),
        )

    ranked = sorted(projectors, key=shared, reverse=True)
    return ranked[0] if shared(ranked[0]) > shared(ranked[1]) else None  # a tie: ambiguous, none is guessed
