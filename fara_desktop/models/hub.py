"""The Hugging Face hub (or a mirror set with ``HF_ENDPOINT``): which files a repository has, with the size and
sha256 the hub publishes, search, and whose credentials go where.

``huggingface_hub`` gives us the hub's API: the file listing with each LFS file's size and sha256, search, URLs,
headers (``HF_TOKEN``) and the cache layout shared with other tools. The token is only ever sent to the configured
hub's origin. The transfer itself is in ``transfer.py``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import ssl
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from fara_desktop.text.untrusted import one_line

log = logging.getLogger(__name__)

# huggingface_hub reads these when it is first imported. Telemetry on, it adds library versions to every request
# and fetches an "agent harnesses" registry from the hub once a day: requests the user never asked for.
os.environ["HF_HUB_DISABLE_TELEMETRY"] = "1"
os.environ["HF_HUB_DISABLE_UPDATE_CHECK"] = "1"


def _hub() -> ModuleType:
    """huggingface_hub, with its telemetry off even if something imported it before the switches above were set."""
    import huggingface_hub
    from huggingface_hub import constants

    constants.HF_HUB_DISABLE_TELEMETRY = True
    constants.HF_HUB_DISABLE_UPDATE_CHECK = True
    return huggingface_hub


_QUANT_RE = re.compile(r"(?<![A-Za-z0-9])(I?Q\d(?:_[A-Z0-9]+)*|F16|BF16|F32)(?![A-Za-z0-9])", re.IGNORECASE)


class DownloadError(Exception):
    """A download could not be done; the message says why in words a user understands."""


class RemoteNotFoundError(DownloadError):
    """The repository, revision or file does not exist on the hub (HTTP 404)."""


class AccessDeniedError(DownloadError):
    """The hub refused access (gated or private repository)."""


class DownloadInterruptedError(DownloadError):
    """The connection failed mid-way; the partial file is kept and the next attempt resumes from it."""


def configured_endpoint() -> str:
    """The hub the user configured (``HF_ENDPOINT``, else huggingface.co): the only origin that gets the token."""
    return str(_hub().constants.ENDPOINT).rstrip("/")


def endpoint_url(endpoint: str | None = None) -> str:
    return endpoint.rstrip("/") if endpoint else configured_endpoint()


def origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port: two URLs share an origin only when all three match (https and http do not)."""
    parsed = urllib.parse.urlsplit(url)
    scheme = parsed.scheme.lower()
    try:
        port = parsed.port or {"http": 80, "https": 443}.get(scheme)
    except ValueError:
        port = None
    return scheme, (parsed.hostname or "").lower(), port


def host_of(url: str) -> str:
    return urllib.parse.urlsplit(url).netloc or url


def is_configured_hub(url: str, configured: str | None = None) -> bool:
    """Whether ``url`` is on the hub the user configured (``configured`` overrides HF_ENDPOINT, for tests)."""
    return origin(url) == origin(configured or configured_endpoint())


def _token_for(url: str) -> bool | None:
    """huggingface_hub's ``token`` argument: None (= the user's token) for the configured hub only; False (= send
    none) for any other host, so a pasted link to another server never receives the user's credentials."""
    return None if is_configured_hub(url) else False


def auth_headers(url: str) -> dict[str, str]:
    if not is_configured_hub(url):
        return {}
    token = _hub().get_token()
    return {"Authorization": f"Bearer {token}"} if token else {}


def _api(api_class: type, base: str) -> Any:
    """A hub client that sends the user's token only to the configured hub and names only Fara Desktop."""
    return api_class(endpoint=base, token=_token_for(base), headers={"user-agent": user_agent()})


def user_agent() -> str:
    """What we tell servers about ourselves: the app and its version, nothing about the machine or libraries."""
    from fara_desktop import __version__

    return f"fara-desktop/{__version__}"


def hub_cache_dir() -> Path:
    from fara_desktop.models.discovery import hf_cache_dir

    return hf_cache_dir(os.environ, Path.home())


# ---------------------------------------------------------------------- what to download


@dataclass(frozen=True)
class RemoteFile:
    """A file on the hub at one commit, with the size and sha256 from the hub's listing."""

    repo_id: str
    filename: str
    commit: str
    size: int
    sha256: str
    endpoint: str

    @property
    def url(self) -> str:
        quoted = urllib.parse.quote(self.filename)
        return f"{self.endpoint}/{self.repo_id}/resolve/{self.commit}/{quoted}"


@dataclass(frozen=True)
class ModelReference:
    """What a user pasted: a repository id or a hub URL, possibly naming a file and a revision."""

    repo_id: str
    filename: str | None = None
    revision: str | None = None
    endpoint: str | None = None


REPO_ID_RE = re.compile(r"(?!.*\.\.)[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def parse_model_reference(text: str) -> ModelReference:
    """``org/name``, ``https://huggingface.co/org/name`` or a file URL (``.../resolve/<rev>/<file>.gguf`` or
    ``.../blob/...``) on the hub or a mirror."""
    text = text.strip()
    if REPO_ID_RE.fullmatch(text):
        return ModelReference(text)
    parsed = urllib.parse.urlparse(text)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise DownloadError(f"not a repository id (owner/name) or a hub address: {text!r}")
    parts = [urllib.parse.unquote(p) for p in parsed.path.split("/") if p]
    endpoint = f"{parsed.scheme}://{parsed.netloc}"
    if len(parts) >= 2 and REPO_ID_RE.fullmatch(f"{parts[0]}/{parts[1]}"):
        repo_id = f"{parts[0]}/{parts[1]}"
        if len(parts) >= 5 and parts[2] in ("resolve", "blob"):
            return ModelReference(repo_id, "/".join(parts[4:]), parts[3], endpoint)
        if len(parts) == 2 or (len(parts) >= 4 and parts[2] == "tree"):
            return ModelReference(repo_id, None, parts[3] if len(parts) >= 4 else None, endpoint)
    raise DownloadError(f"this address does not name a hub repository or file: {text}")


def quant_tag(filename: str) -> str | None:
    found = _QUANT_RE.findall(Path(filename).stem)
    return found[-1].upper() if found else None


_HUB_CALLS = threading.Lock()


@contextlib.contextmanager
def _one_off_session() -> Iterator[None]:
    """huggingface_hub keeps one global HTTP client with keep-alive connections; close it after each use so that
    no connection stays open once what the user asked for is done. Calls take turns: closing the shared client
    under a search still running on another thread broke that search ("Bad file descriptor")."""
    hub = _hub()
    with _HUB_CALLS:
        try:
            yield
        finally:
            hub.close_session()


_NO_NAME = (
    "Name or service not known",
    "nodename nor servname",
    "getaddrinfo failed",
    "No address associated",
    "Temporary failure in name resolution",
)


def network_reason(exc: BaseException, host: str) -> str:
    """Why ``host`` could not be reached, as a person reads it (never "[Errno -2] Name or service not known"):
    the cause chain of urllib, httpx and huggingface_hub errors is searched for what happened."""
    chain: list[BaseException] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 16:
        chain.append(seen)
        reason = getattr(seen, "reason", None)
        seen = reason if isinstance(reason, BaseException) else (seen.__cause__ or seen.__context__)
    text = " ".join(str(e) for e in chain)
    if any(isinstance(e, socket.gaierror) for e in chain) or any(marker in text for marker in _NO_NAME):
        return f"{host} cannot be found: this computer seems to be offline (or its name cannot be looked up)"
    if any(isinstance(e, ConnectionRefusedError) for e in chain) or "Connection refused" in text:
        return f"{host} refused the connection"
    if any(isinstance(e, (TimeoutError, socket.timeout)) for e in chain) or "timed out" in text.lower():
        return f"{host} did not answer in time"
    if any(isinstance(e, ssl.SSLError) for e in chain):
        return f"the secure connection to {host} failed"
    if any(isinstance(e, (ConnectionResetError, ConnectionAbortedError)) for e in chain):
        return f"{host} closed the connection"
    return f"{host} could not be reached ({one_line(str(exc) or type(exc).__name__, 120)})"


REACH_TIMEOUT_S = 8.0


def check_reachable(base: str) -> None:
    """One TCP connection to the hub before asking it anything: huggingface_hub retries a failed connection five
    times with back-off (~20 s), so without it an offline search would sit there before saying anything. Raises
    ``DownloadInterruptedError`` with the reason."""
    scheme, host, port = origin(base)
    if urllib.request.getproxies().get(scheme) and not urllib.request.proxy_bypass(host):
        return  # through a proxy the hub itself is not ours to dial: the request will say what went wrong
    try:
        with socket.create_connection((host, port or (443 if scheme == "https" else 80)), timeout=REACH_TIMEOUT_S):
            pass
    except OSError as exc:
        raise DownloadInterruptedError(network_reason(exc, host_of(base))) from exc


def _hub_errors() -> ModuleType:  # imported lazily: huggingface_hub is only needed once the user asks for the network
    errors: ModuleType = _hub().errors
    return errors


def list_gguf_files(repo_id: str, revision: str | None = None, endpoint: str | None = None) -> list[RemoteFile]:
    """The repository's GGUF files with the sizes and sha256 the hub publishes (LFS metadata)."""
    HfApi = _hub().HfApi
    errors = _hub_errors()
    base = endpoint_url(endpoint)
    check_reachable(base)
    try:
        with _one_off_session():
            api = _api(HfApi, base)
            info = api.model_info(repo_id, revision=revision, files_metadata=True, timeout=30)
    except errors.RepositoryNotFoundError as exc:
        raise RemoteNotFoundError(f"no repository {repo_id} on {base} (or it is private)") from exc
    except errors.RevisionNotFoundError as exc:
        raise RemoteNotFoundError(f"{repo_id} has no revision {revision}") from exc
    except errors.GatedRepoError as exc:
        raise AccessDeniedError(
            f"{repo_id} is gated: accept its license on the hub, then set HF_TOKEN and try again"
        ) from exc
    except errors.HfHubHTTPError as exc:
        raise DownloadError(f"the hub did not answer for {repo_id}: {exc}") from exc
    except OSError as exc:  # connection refused, DNS, timeouts (httpx errors are not OSError: see below)
        raise DownloadInterruptedError(network_reason(exc, host_of(base))) from exc
    except Exception as exc:
        if type(exc).__module__.startswith(("httpx", "httpcore")):
            raise DownloadInterruptedError(network_reason(exc, host_of(base))) from exc
        raise
    commit = info.sha
    if not isinstance(commit, str) or not COMMIT_RE.fullmatch(commit):
        raise DownloadError(f"{host_of(base)} sent a listing for {repo_id} without a valid commit id")
    files = []
    for sibling in info.siblings or []:
        name = sibling.rfilename
        if not isinstance(name, str) or not name.lower().endswith(".gguf"):
            continue
        if sibling.lfs is None:  # only LFS files carry a sha256 we can verify against
            continue
        problem = listing_problem(name, sibling.lfs.sha256, sibling.lfs.size)
        if problem:
            log.warning("ignoring a listing entry of %s on %s: %s", repo_id, host_of(base), problem)
            continue
        files.append(RemoteFile(repo_id, name, commit, sibling.lfs.size, sibling.lfs.sha256, base))
    return files


COMMIT_RE = re.compile(r"[0-9a-f]{40}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_SAFE_PART_RE = re.compile(r"[\w .+=,@()\[\]-]+")
MAX_FILE_BYTES = 1 << 40


def listing_problem(name: object, sha256: object, size: object) -> str | None:
    """Why a file entry from a hub listing cannot be used, or None. Names become paths on this disk: only plain
    relative names of ordinary characters, without ``..``, absolute paths, drive letters or backslashes."""
    if not isinstance(name, str) or not 0 < len(name) <= 512:
        return "a file name that is empty or too long"
    parts = name.split("/")
    if name.startswith("/") or any(p in ("", ".", "..") or not _SAFE_PART_RE.fullmatch(p) for p in parts):
        return f"an unsafe file name {name[:80]!r}"
    if len(parts) > 8:
        return "a file name nested too deep"
    if not isinstance(sha256, str) or not _SHA256_RE.fullmatch(sha256):
        return "a sha256 that is not 64 hex digits"
    if not isinstance(size, int) or isinstance(size, bool) or not 0 < size <= MAX_FILE_BYTES:
        return "an impossible file size"
    return None


def resolve_remote_file(
    repo_id: str,
    filename: str | None = None,
    quant: str | None = None,
    revision: str | None = None,
    endpoint: str | None = None,
) -> RemoteFile:
    """Pick one GGUF from the listing: the named file; else the one with the quantization tag (catalog names can
    drift); else the only one. Split models (``-00001-of-0000N``) are not offered here."""
    return pick_remote_file(repo_id, list_gguf_files(repo_id, revision, endpoint), filename, quant)


def resolve_with_projector(
    repo_id: str, filename: str, quant: str, projector: str | None, endpoint: str | None = None, model: bool = True
) -> list[RemoteFile]:
    """The model and, for a model that sees, its vision projector — both from one listing, so both come from the
    same commit and land in the same snapshot folder (the model's own: a repository per model), where discovery
    pairs them. A projector the listing does not name exactly is the repository's only ``mmproj`` file, if any.
    ``model`` False: the projector alone (for a model already installed)."""
    files = list_gguf_files(repo_id, None, endpoint)
    wanted = [pick_remote_file(repo_id, files, filename, quant)] if model else []
    return [*wanted, pick_projector(repo_id, files, projector, filename)] if projector else wanted


def pick_projector(repo_id: str, files: list[RemoteFile], projector: str, model_name: str) -> RemoteFile:
    """The named projector of a listing, else its only ``mmproj`` file."""
    named = [r for r in files if r.filename.lower() == projector.lower()]
    projectors = named or [r for r in files if "mmproj" in Path(r.filename).name.lower()]
    if len(projectors) != 1:
        offered = ", ".join(r.filename for r in projectors) or "none"
        raise RemoteNotFoundError(
            f"{repo_id} has no {projector} to let {model_name} see pictures (projectors: {offered})"
        )
    return projectors[0]


def pick_remote_file(repo_id: str, files: list[RemoteFile], filename: str | None, quant: str | None) -> RemoteFile:
    """One GGUF of a listing: the named file; else the one with the quantization tag; else the only one."""
    if filename:
        for remote in files:
            if remote.filename == filename or remote.filename.lower() == filename.lower():
                return remote
        quant = quant or quant_tag(filename)
    if quant:
        tagged = [r for r in files if quant_tag(r.filename) == quant.upper() and "-of-" not in r.filename]
        if tagged:
            return min(tagged, key=lambda r: len(r.filename))
    if not filename and not quant and len(files) == 1:
        return files[0]
    offered = ", ".join(r.filename for r in files) or "no GGUF files"
    wanted = filename or (f"a {quant} file" if quant else "a file name (--file)")
    raise RemoteNotFoundError(f"{repo_id} has no {wanted}; it offers: {offered}")


@dataclass(frozen=True)
class HubModel:
    """One search result."""

    repo_id: str
    downloads: int
    likes: int


def search_hub(query: str, endpoint: str | None = None, limit: int = 30) -> list[HubModel]:
    HfApi = _hub().HfApi
    base = endpoint_url(endpoint)
    try:
        check_reachable(base)
    except DownloadInterruptedError as exc:
        raise DownloadInterruptedError(f"Searching failed: {exc}") from exc
    try:
        with _one_off_session():
            api = _api(HfApi, base)
            found = api.list_models(search=query, filter="gguf", sort="downloads", limit=limit)
            models = [HubModel(m.id, m.downloads or 0, m.likes or 0) for m in found]
    except Exception as exc:
        raise DownloadInterruptedError(f"Searching failed: {network_reason(exc, host_of(base))}") from exc
    return [m for m in models if isinstance(m.repo_id, str) and REPO_ID_RE.fullmatch(m.repo_id)]
