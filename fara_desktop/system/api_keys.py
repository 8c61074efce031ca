"""API keys of the servers the user added (and of the local API): in the OS keychain through ``keyring`` where
one is available, otherwise in a file only the user can read (0600, written atomically).

Keys never go into the settings file, a log line, an export or a repr. ``keyring`` is used rather than talking to
each keychain ourselves: it speaks the Secret Service (GNOME Keyring, KWallet), macOS Keychain and Windows
Credential Locker, and says when there is none (headless Linux), which is when the file is used.
"""

from __future__ import annotations

import contextlib
import json
import logging
from pathlib import Path

from fara_desktop.files.atomic import write_json_atomically
from fara_desktop.files.regular import read_regular_text

log = logging.getLogger(__name__)

SERVICE = "fara-desktop"
FILE_NAME = "api-keys.json"
LOCAL_API = "local-api"  # the key other apps must present when the local API listens beyond this computer


def _keyring_usable() -> bool:
    try:
        import keyring
        from keyring.backends import fail

        backend = keyring.get_keyring()
        return not isinstance(backend, fail.Keyring) and backend.priority > 0
    except Exception:  # no keyring installed, or a broken backend: the file is used
        log.info("No usable keychain; API keys go to a private file", exc_info=True)
        return False


class ApiKeyStore:
    """Get, set and forget the key of a named server."""

    def __init__(self, config_dir: Path, use_keyring: bool | None = None) -> None:
        self.file = config_dir / FILE_NAME
        self.uses_keyring = _keyring_usable() if use_keyring is None else use_keyring

    @property
    def where(self) -> str:
        return "the system keychain" if self.uses_keyring else f"{self.file} (readable by you only)"

    def get(self, name: str) -> str | None:
        if self.uses_keyring:
            import keyring

            try:
                return keyring.get_password(SERVICE, name)
            except Exception as exc:
                log.warning("The keychain could not be read (%s)", type(exc).__name__, exc_info=True)
                return None
        return self._read().get(name)

    def set(self, name: str, key: str | None) -> None:
        """Store ``key`` (None or empty: forget it)."""
        if self.uses_keyring:
            import keyring

            if key:
                keyring.set_password(SERVICE, name, key)
            else:
                with contextlib.suppress(Exception):  # there was none
                    keyring.delete_password(SERVICE, name)
            return
        keys = self._read()
        if key:
            keys[name] = key
        else:
            keys.pop(name, None)
        write_json_atomically(self.file, keys)  # 0600

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(read_regular_text(self.file, 1 << 20))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            log.warning("The API key file is unusable (%s); no keys are known", type(exc).__name__)
            return {}
        return (
            {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}
            if isinstance(data, dict)
            else {}
        )
