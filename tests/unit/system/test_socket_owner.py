"""Who opened a connection to us (``system.socket_owner``), and the local API keeping another user's programs
apart from this user's when no key is set (issue 62, item 5: program B told from ``cached_tokens`` and the time to
its first token whether program A had sent a prompt — on a shared machine, any user could probe another's)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

from fara_desktop.serving.api_server import ApiServer
from fara_desktop.serving.local_api import LocalApi
from fara_desktop.serving.principals import LOCAL_CLIENTS
from fara_desktop.system.socket_owner import connection_owner
from tests.helpers.scripted_queue import ScriptedQueue
from tests.unit.serving.test_admission import LOCAL, QUESTION, post

NOBODY = 65534


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's socket table is Linux's")
def test_the_owner_of_a_connection_on_this_computer_is_found():
    with socket.create_server(("127.0.0.1", 0)) as server:
        client = socket.create_connection(server.getsockname())
        try:
            assert connection_owner(client.getsockname(), server.getsockname()) == os.getuid()
            assert connection_owner(("127.0.0.1", 1), server.getsockname()) is None  # no such connection
            assert connection_owner(("not an address", 1), server.getsockname()) is None
        finally:
            client.close()


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("curl") is None, reason="needs root to run a client as nobody")
def test_with_no_key_another_users_programs_are_a_principal_of_their_own():
    queue = ScriptedQueue()
    server = ApiServer(LocalApi(queue, lambda: LOCAL))
    server.start()
    try:
        assert post(server).status_code == 200  # a program of this user
        other = subprocess.run(
            ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "-H", "content-type: application/json",
             "--data", json.dumps(QUESTION), f"{server.address}/chat/completions"],
            capture_output=True, text=True, timeout=60, user=NOBODY, group=NOBODY, cwd="/",
        )  # fmt: skip
        assert other.stdout == "200", other.stderr
        assert post(server).status_code == 200
        uses = server.api.principals.uses()
        assert [(u.label, u.requests) for u in uses] == [
            ("Apps on this computer", 2),
            (f"Programs of another user of this computer (user id {NOBODY})", 1),
        ]
        clients = [getattr(conversation, "principal", None) for conversation in queue.conversations]
        assert clients[0] == clients[2] == LOCAL_CLIENTS and clients[1] == f"user-{NOBODY}", clients
    finally:
        server.stop()
