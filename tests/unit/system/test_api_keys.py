"""API keys: the system keychain when keyring has one, else a file only the user can read."""

from __future__ import annotations

import stat

import keyring
import pytest
from keyring.backend import KeyringBackend

from fara_desktop.system.api_keys import FILE_NAME, SERVICE, ApiKeyStore


def memory_keychain() -> KeyringBackend:
    """A keychain for the test: what keyring would hand to the Secret Service or the macOS Keychain. Defined only
    once keyring has chosen its backend: keyring adopts every backend class it knows of, so a class defined at
    import would become the keychain of every later test."""

    class MemoryKeychain(KeyringBackend):
        priority = 10  # type: ignore[assignment]

        def __init__(self) -> None:
            super().__init__()
            self.items: dict[tuple[str, str], str] = {}

        def get_password(self, service: str, username: str) -> str | None:
            return self.items.get((service, username))

        def set_password(self, service: str, username: str, password: str) -> None:
            self.items[(service, username)] = password

        def delete_password(self, service: str, username: str) -> None:
            self.items.pop((service, username))

    return MemoryKeychain()


@pytest.fixture
def keychain():
    previous = keyring.get_keyring()
    chain = memory_keychain()
    keyring.set_keyring(chain)
    yield chain
    keyring.set_keyring(previous)


def test_keys_go_to_the_keychain_when_there_is_one(keychain, tmp_path):
    store = ApiKeyStore(tmp_path)
    assert store.uses_keyring and store.where == "the system keychain"
    store.set("gpu-box", "sk-1")
    assert keychain.items == {(SERVICE, "gpu-box"): "sk-1"} and store.get("gpu-box") == "sk-1"
    assert not (tmp_path / FILE_NAME).exists()
    store.set("gpu-box", None)
    assert store.get("gpu-box") is None
    store.set("never-stored", None)  # forgetting a key that is not there is not an error


def test_without_a_keychain_keys_go_to_a_file_only_the_user_can_read(tmp_path):
    store = ApiKeyStore(tmp_path, use_keyring=False)
    store.set("gpu-box", "sk-1")
    store.set("other", "sk-2")
    path = tmp_path / FILE_NAME
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert ApiKeyStore(tmp_path, use_keyring=False).get("other") == "sk-2"
    store.set("other", None)
    assert ApiKeyStore(tmp_path, use_keyring=False).get("other") is None
    path.write_text("{broken")
    assert store.get("gpu-box") is None  # a damaged file: no key, no crash
