"""Finding GGUF models in other apps' stores: layouts, split files, bad files, caches."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from fara_desktop.models.discovery import hf_cache_dir, ollama_dirs, scan_models
from tests.conftest import without_root_powers
from tests.helpers.gguf_factory import write_tiny_model, write_truncated_copy


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny.gguf", "llama", name="Tiny Llama")


def place(source: Path, target: Path) -> Path:
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(source.read_bytes())
    return target


def scan(home: Path, app: Path | None = None, env: dict[str, str] | None = None, **kwargs):
    app = app or home / "fara" / "models"
    return scan_models(
        app, home / "fara" / "cache", env=env or {}, home=home, platform="linux", include_packages=False, **kwargs
    )


def by_source(result, source: str):
    return [m for m in result.models if m.source == source]


def test_hugging_face_cache_layout(tmp_path, tiny):
    hub = tmp_path / ".cache" / "huggingface" / "hub" / "models--TheOrg--Tiny-GGUF"
    blob = place(tiny, hub / "blobs" / hashlib.sha256(b"x").hexdigest())
    snapshot = hub / "snapshots" / "abc123" / "tiny-q4.gguf"
    snapshot.parent.mkdir(parents=True)
    snapshot.symlink_to(blob)
    (hub / "blobs" / "partial.incomplete").write_bytes(b"GGUF")  # an interrupted download is not a model
    found = by_source(scan(tmp_path), "Hugging Face cache")
    assert len(found) == 1
    assert found[0].display_name == "TheOrg/Tiny-GGUF · tiny-q4.gguf"
    assert found[0].usable and found[0].metadata.architecture == "llama"


def test_hf_home_and_hub_cache_variables(tmp_path):
    assert hf_cache_dir({"HF_HOME": "/x/hf"}, tmp_path) == Path("/x/hf/hub")
    assert hf_cache_dir({"HF_HUB_CACHE": "/y", "HF_HOME": "/x"}, tmp_path) == Path("/y")
    assert ollama_dirs({"OLLAMA_MODELS": "/z"}, tmp_path, "linux") == [Path("/z")]


def test_lm_studio_gpt4all_and_jan(tmp_path, tiny):
    place(tiny, tmp_path / ".lmstudio" / "models" / "lmstudio-community" / "Tiny-GGUF" / "tiny-Q4_K_M.gguf")
    place(tiny, tmp_path / ".local" / "share" / "nomic.ai" / "GPT4All" / "tiny-gpt4all.gguf")
    place(tiny, tmp_path / ".local" / "share" / "Jan" / "data" / "llamacpp" / "models" / "tiny" / "model.gguf")
    result = scan(tmp_path)
    lm = by_source(result, "LM Studio")
    assert [m.display_name for m in lm] == ["lmstudio-community/Tiny-GGUF · tiny-Q4_K_M.gguf"]
    assert [m.usable for m in by_source(result, "GPT4All")] == [True]
    assert [m.usable for m in by_source(result, "Jan")] == [True]


def test_ollama_manifest_points_at_the_model_blob(tmp_path, tiny):
    store = tmp_path / ".ollama" / "models"
    digest = "sha256:" + hashlib.sha256(tiny.read_bytes()).hexdigest()
    place(tiny, store / "blobs" / digest.replace(":", "-"))
    manifest = {
        "schemaVersion": 2,
        "layers": [
            {"mediaType": "application/vnd.ollama.image.model", "digest": digest, "size": tiny.stat().st_size},
            {"mediaType": "application/vnd.ollama.image.template", "digest": "sha256:00", "size": 10},
        ],
    }
    path = store / "manifests" / "registry.ollama.ai" / "library" / "tinyllama" / "latest"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(manifest))
    broken = store / "manifests" / "registry.ollama.ai" / "library" / "broken" / "1b"
    broken.parent.mkdir(parents=True)
    broken.write_text("{not json")
    found = by_source(scan(tmp_path), "Ollama")
    names = {m.display_name: m for m in found}
    assert names["tinyllama:latest"].usable
    assert names["tinyllama:latest"].metadata.architecture == "llama"  # read from the blob
    assert not names["broken:1b"].usable and "manifest" in names["broken:1b"].problem


def test_split_gguf_counts_once_and_incomplete_split_is_flagged(tmp_path, tiny):
    app = tmp_path / "fara" / "models"
    for i in (1, 2, 3):
        place(tiny, app / f"big-model-0000{i}-of-00003.gguf")
    for i in (1, 2):
        place(tiny, app / "partial" / f"half-0000{i}-of-00003.gguf")
    found = by_source(scan(tmp_path, app), "Fara models folder")
    complete = [m for m in found if m.usable]
    assert len(complete) == 1 and complete[0].shards == 3
    assert complete[0].metadata.file_bytes == 3 * tiny.stat().st_size
    incomplete = [m for m in found if not m.usable]
    assert len(incomplete) == 1 and "2 of 3" in incomplete[0].problem


def test_bad_files_are_listed_with_reasons_and_never_break_the_scan(tmp_path, tiny):
    app = tmp_path / "fara" / "models"
    place(tiny, app / "good.gguf")
    (app / "empty.gguf").write_bytes(b"")
    (app / "text.gguf").write_text("hello")
    (app / "future.gguf").write_bytes(b"GGUF" + struct.pack("<IQQ", 7, 0, 0))
    write_truncated_copy(tiny, app / "truncated.gguf", 3000)
    (app / "absurd.gguf").write_bytes(
        b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + struct.pack("<Q", 1) + b"k" + struct.pack("<IIQ", 9, 8, 1 << 50)
    )
    (app / "loop").symlink_to(app, target_is_directory=True)
    (app / "dangling.gguf").symlink_to(tmp_path / "nowhere.gguf")
    found = {Path(m.path).name: m for m in by_source(scan(tmp_path, app), "Fara models folder")}
    assert found["good.gguf"].usable
    assert "empty" in found["empty.gguf"].problem
    assert "not a GGUF" in found["text.gguf"].problem
    assert "version 7" in found["future.gguf"].problem
    assert "truncated" in found["truncated.gguf"].problem
    assert "claims" in found["absurd.gguf"].problem
    assert "cannot read" in found["dangling.gguf"].problem
    assert len([m for m in found.values() if m.usable]) == 1


def test_unreadable_folder_is_reported(tmp_path, tiny):
    app = tmp_path / "fara" / "models"
    locked = app / "locked"
    place(tiny, locked / "x.gguf")
    place(tiny, app / "visible.gguf")
    code = (
        "import json, sys; from pathlib import Path; from fara_desktop.models.discovery import scan_models; "
        "r = scan_models(Path(sys.argv[1]), Path(sys.argv[2]), env={}, home=Path(sys.argv[3]), platform='linux', "
        "include_packages=False); print(json.dumps([[Path(m.path).name, m.problem] for m in r.models]))"
    )
    locked.chmod(0)
    try:
        result = subprocess.run(
            without_root_powers([sys.executable, "-c", code, str(app), str(tmp_path / "cache"), str(tmp_path)]),
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        locked.chmod(0o700)
    assert result.returncode == 0, result.stderr
    found = dict(json.loads(result.stdout))
    assert found["visible.gguf"] is None  # the rest of the scan goes on
    assert "cannot read folder" in found["locked"] and "Permission denied" in found["locked"]


def test_same_file_seen_twice_is_listed_once(tmp_path, tiny):
    app = tmp_path / "fara" / "models"
    model = place(tiny, app / "one.gguf")
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "same.gguf").symlink_to(model)
    result = scan(tmp_path, app, extra_folders=[extra])
    assert len(result.usable) == 1 and result.usable[0].source == "Fara models folder"
    assert any(loc.source == "Added folder" and loc.exists for loc in result.searched)


def test_rescan_uses_the_metadata_cache(tmp_path, tiny):
    app = tmp_path / "fara" / "models"
    place(tiny, app / "a.gguf")
    first = scan(tmp_path, app)
    cache_file = tmp_path / "fara" / "cache" / "gguf-metadata.json"
    assert cache_file.is_file()
    data = json.loads(cache_file.read_text())
    key = next(iter(data["entries"]))
    data["entries"][key]["metadata"]["name"] = "from the cache"
    cache_file.write_text(json.dumps(data))
    second = scan(tmp_path, app)
    assert first.usable[0].metadata.name == "Tiny Llama"
    assert second.usable[0].metadata.name == "from the cache"


def test_a_vision_projector_is_paired_with_its_model_not_listed_as_a_broken_one(tmp_path, tiny):
    """Issue 44, first part: an mmproj file beside a model (a download, a Hugging Face snapshot, an LM Studio
    folder, Ollama's projector layer) is the model's projector; it was listed as a model that "cannot be loaded:
    clip.embedding_length is missing"."""
    from tests.helpers.gguf_factory import write_projector

    projector = write_projector(tmp_path / "projector.gguf")
    app = tmp_path / "fara" / "models"
    place(tiny, app / "gemma-3-4b-it-Q4_K_M.gguf")
    place(projector, app / "mmproj-gemma-3-4b-it-f16.gguf")
    place(tiny, app / "qwen2.5-vl-7b-instruct-q4_k_m.gguf")
    place(projector, app / "mmproj-qwen2.5-vl-7b-instruct-f16.gguf")
    place(tiny, app / "alone" / "text-only.gguf")
    place(projector, app / "orphan" / "mmproj-model-f16.gguf")
    lm = tmp_path / ".lmstudio" / "models" / "lmstudio-community" / "gemma-3-4b-it-GGUF"
    place(tiny, lm / "gemma-3-4b-it-Q4_K_M.gguf")
    place(projector, lm / "mmproj-model-f16.gguf")  # the only one there: whatever its name
    store = tmp_path / ".ollama" / "models"
    model_digest = "sha256:" + hashlib.sha256(tiny.read_bytes()).hexdigest()
    projector_digest = "sha256:" + hashlib.sha256(projector.read_bytes()).hexdigest()
    place(tiny, store / "blobs" / model_digest.replace(":", "-"))
    place(projector, store / "blobs" / projector_digest.replace(":", "-"))
    manifest = store / "manifests" / "registry.ollama.ai" / "library" / "gemma3" / "4b"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(json.dumps({"layers": [
        {"mediaType": "application/vnd.ollama.image.model", "digest": model_digest},
        {"mediaType": "application/vnd.ollama.image.projector", "digest": projector_digest},
    ]}))  # fmt: skip
    result = scan(tmp_path)
    by_name = {Path(m.path).name: m for m in result.models if m.source == "Fara models folder"}
    assert by_name["gemma-3-4b-it-Q4_K_M.gguf"].projector == str(app / "mmproj-gemma-3-4b-it-f16.gguf")
    assert by_name["qwen2.5-vl-7b-instruct-q4_k_m.gguf"].projector == str(
        app / "mmproj-qwen2.5-vl-7b-instruct-f16.gguf"
    )
    assert by_name["text-only.gguf"].projector is None
    lm_model = next(m for m in by_source(result, "LM Studio") if not m.is_projector)
    assert lm_model.projector == str(lm / "mmproj-model-f16.gguf")
    (ollama,) = by_source(result, "Ollama")
    assert ollama.usable and ollama.projector == str(store / "blobs" / projector_digest.replace(":", "-"))
    projectors = [m for m in result.models if m.is_projector]
    assert len(projectors) == 4 and not any(p.usable for p in projectors)
    assert all("cannot be loaded" not in (p.problem or "") for p in projectors)
    orphan = next(p for p in projectors if "orphan" in p.path)
    assert orphan.problem == "a vision projector (mmproj), not a chat model"
    paired = next(p for p in projectors if p.path.endswith("mmproj-gemma-3-4b-it-f16.gguf"))
    assert "for gemma-3-4b-it" in (paired.problem or "")


def test_a_projector_llama_cpp_would_abort_on_is_refused_and_never_paired(tmp_path, tiny):
    """A projector whose position embedding is stored in f16 makes ggml abort the whole process when mtmd loads it
    (tests/integration/pictures shows the abort in a child process); the header check refuses it first."""
    from tests.helpers.gguf_factory import write_projector

    app = tmp_path / "fara" / "models"
    place(tiny, app / "gemma-3-4b-it-Q4_K_M.gguf")
    write_projector(app / "mmproj-gemma-3-4b-it-f16.gguf", half_position_embedding=True)
    result = scan(tmp_path)
    (model,) = [m for m in result.models if not m.is_projector]
    (projector,) = [m for m in result.models if m.is_projector]
    assert model.projector is None and projector.projector_refused
    assert "position_embd.weight is not stored as f32" in (projector.problem or "")
