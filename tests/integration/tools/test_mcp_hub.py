"""Real MCP servers run by the hub with the official SDK: ``mcp-server-time`` and ``mcp-server-git`` (PyPI), the
reference filesystem server (npm) where Node is present, and a server made by an adversary (50 MB results, a call
that never answers, a server that exits mid-call, results that try to inject), over stdio and streamable HTTP.
Each gets a bounded, clear outcome."""

from __future__ import annotations

import json
import logging
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fara_desktop.tools.mcp_config import McpServerConfig
from fara_desktop.tools.mcp_hub import McpHub
from fara_desktop.tools.tool_results import MAX_RESULT_CHARS
from tests.conftest import wait_until

HOSTILE = str(Path(__file__).parents[2] / "helpers" / "hostile_mcp_server.py")
TIME = McpServerConfig("time", sys.executable, ("-m", "mcp_server_time", "--local-timezone", "UTC"))
FILESYSTEM = Path(__file__).parents[2] / "clients" / "node" / "node_modules" / "@modelcontextprotocol" / \
    "server-filesystem" / "dist" / "index.js"  # fmt: skip


@pytest.fixture
def hub():
    hub = McpHub()
    yield hub
    hub.close()
    assert hub._thread is None


def _ready(hub, *names, timeout=60):
    wait_until(lambda: all(hub.states().get(n) and hub.states()[n].state != "starting" for n in names), timeout,
               f"{names} to start")  # fmt: skip
    for name in names:
        assert hub.states()[name].state == "ready", hub.states()[name]
    return {(t.server, t.name): t for t in hub.tools()}


def test_servers_run_only_when_enabled_and_stop_when_turned_off(hub):
    hub.configure([TIME], enabled=set())
    assert hub.states() == {} and hub._thread is None  # nothing runs, not even the hub's thread
    hub.configure([TIME], enabled={TIME.identity})
    tools = _ready(hub, "time")
    assert {name for _, name in tools} == {"get_current_time", "convert_time"}
    hub.configure([TIME], enabled=set())
    assert hub.states() == {} and hub.tools() == []


def test_the_time_server_tells_the_time_in_tokyo(hub):
    hub.configure([TIME], {TIME.identity})
    tools = _ready(hub, "time")
    result = hub.call(tools[("time", "get_current_time")], {"timezone": "Asia/Tokyo"})
    assert not result.is_error and json.loads(result.text)["datetime"].endswith("+09:00")


def test_the_git_server_reads_a_repository(hub, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "notes.txt").write_text("hello\n")
    git = McpServerConfig("git", sys.executable, ("-m", "mcp_server_git", "--repository", str(repo)))
    hub.configure([git], {git.identity})
    tools = _ready(hub, "git")
    result = hub.call(tools[("git", "git_status")], {"repo_path": str(repo)})
    assert not result.is_error and "notes.txt" in result.text


@pytest.mark.skipif(shutil.which("node") is None or not FILESYSTEM.exists(), reason="Node or the npm server is absent")
def test_the_reference_filesystem_server_from_npm_reads_only_its_folder(hub, tmp_path):
    (tmp_path / "allowed").mkdir()
    (tmp_path / "allowed" / "a.txt").write_text("inside")
    (tmp_path / "secret.txt").write_text("SECRET-CONTENT")
    files = McpServerConfig("files", "node", (str(FILESYSTEM), str(tmp_path / "allowed")))
    hub.configure([files], {files.identity})
    tools = _ready(hub, "files")
    read = tools[("files", "read_text_file")]
    assert hub.call(read, {"path": str(tmp_path / "allowed" / "a.txt")}).text == "inside"
    refused = hub.call(read, {"path": str(tmp_path / "secret.txt")})
    assert refused.is_error and "SECRET-CONTENT" not in refused.text and "denied" in refused.text


def test_hostile_results_get_bounded_clear_outcomes(hub, caplog):
    caplog.set_level(logging.INFO)
    hostile = McpServerConfig("hostile", sys.executable, (HOSTILE,))
    hub.configure([hostile], {hostile.identity})
    tools = _ready(hub, "hostile")
    # the server's stderr is in the log, not in any result
    wait_until(lambda: "hostile server starting" in caplog.text, 10, "the server's stderr in the log")
    # 50 MB in one message: dropped as it is read (linear, bounded memory), the call ends with a clear error
    started = time.monotonic()
    huge = hub.call(tools[("hostile", "huge")], {})
    assert huge.is_error and "too large" in huge.text and "more than the 8,388,608" in huge.text, huge.text
    assert time.monotonic() - started < 20  # was 57 s through the SDK's own line reader (quadratic)
    assert hub.states()["hostile"].state == "ready"
    assert hub.call(tools[("hostile", "echo")], {"text": "y" * 20_000}).text == "y" * MAX_RESULT_CHARS + (
        "\n[… cut: the tool returned 20,000 characters; the first 8,000 are kept]"
    )
    injected = hub.call(tools[("hostile", "injection")], {})
    assert "\x1b" not in injected.text and "\u202e" not in injected.text  # controls and overrides removed
    assert "![tracker](http://evil.example" in injected.text  # kept as text: the transcript shows it as text
    started = time.monotonic()
    never = hub.call(tools[("hostile", "never")], {}, timeout=1.5)
    assert never.is_error and "did not answer within 2 s" in never.text and time.monotonic() - started < 10
    assert hub.states()["hostile"].state == "ready"  # a slow tool is not a dead server
    exited = hub.call(tools[("hostile", "exit_now")], {}, timeout=30)
    assert exited.is_error and "failed while running exit_now" in exited.text
    assert hub.states()["hostile"].state == "failed"
    after = hub.call(tools[("hostile", "echo")], {"text": "x"})
    assert after.is_error and "not running" in after.text
    hub.restart("hostile")
    tools = _ready(hub, "hostile")
    assert hub.call(tools[("hostile", "echo")], {"text": "back"}).text == "back"


def test_a_command_that_does_not_exist_is_said(hub):
    ghost = McpServerConfig("ghost", "/nonexistent/mcp-server")
    hub.configure([ghost], {ghost.identity})
    wait_until(lambda: hub.states()["ghost"].state != "starting", 30, "the start to fail")
    state = hub.states()["ghost"]
    assert state.state == "failed" and "not found" in state.message


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_a_streamable_http_server_on_this_computer(hub):
    port = _free_port()
    process = subprocess.Popen([sys.executable, HOSTILE, "--http", str(port), "--json"], stderr=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL)  # fmt: skip
    try:
        wait_until(lambda: _listening(port), 30, "the HTTP server to listen")
        web = McpServerConfig("web", url=f"http://127.0.0.1:{port}/mcp")
        hub.configure([web], {web.identity})
        tools = _ready(hub, "web")
        assert hub.call(tools[("web", "echo")], {"text": "over http"}).text == "over http"
        # 50 MB in one answer over HTTP was read whole (400 MB: a 1.3 GB peak); it is cut off at 8 MiB
        huge = hub.call(tools[("web", "huge")], {})
        assert huge.is_error and "this app reads" in huge.text and len(huge.text) < 2000
        assert hub.call(tools[("web", "echo")], {"text": "still here"}).text == "still here"
    finally:
        hub.close()
        process.terminate()
        process.wait(10)


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_two_servers_with_a_tool_of_the_same_name_get_names_the_model_can_tell_apart(hub):
    hostile = McpServerConfig("hostile", sys.executable, (HOSTILE,))
    twin = McpServerConfig("twin", sys.executable, (HOSTILE,))
    hub.configure([hostile, twin], {hostile.identity, twin.identity})
    _ready(hub, "hostile", "twin")
    names = [t.spec.name for t in hub.tools()]
    assert "hostile_echo" in names and "twin_echo" in names and len(set(names)) == len(names)


def test_a_servers_stderr_is_bounded_in_memory_and_in_the_log(hub, caplog):
    """stderr without newlines grew the app with it (1.5 GB in 17 s); a line flood cost 39 s of CPU in 63 s and
    rotated the app's log away."""
    import psutil

    from fara_desktop.tools.server_output import LINES_PER_MINUTE, MAX_LOGGED_LINE

    caplog.set_level(logging.INFO)
    hostile = McpServerConfig("hostile", sys.executable, (HOSTILE,))
    hub.configure([hostile], {hostile.identity})
    tools = _ready(hub, "hostile")
    before = psutil.Process().memory_info().rss
    assert hub.call(tools[("hostile", "stderr_without_newlines")], {"megabytes": 300}).text == "written"
    assert hub.call(tools[("hostile", "stderr_lines")], {"count": 300_000}).text == "written"
    wait_until(lambda: "counted, not logged" in caplog.text, 30, "the flood to be said")
    grown = psutil.Process().memory_info().rss - before
    assert grown < 100 * 1024 * 1024, f"the app grew {grown / 2**20:.0f} MB with 300 MB of stderr"
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("MCP server hostile: ")]
    assert len(lines) <= LINES_PER_MINUTE + 5  # not 300,000
    assert max(len(line) for line in lines) <= MAX_LOGGED_LINE + 40


def test_a_flood_of_notifications_is_dropped_and_the_answer_still_comes(hub, caplog):
    """400,000 notifications delayed a call's answer 40 s (the SDK validated each one first)."""
    from fara_desktop.tools.bounded_lines import UNASKED_BURST

    caplog.set_level(logging.INFO)
    hostile = McpServerConfig("hostile", sys.executable, (HOSTILE,))
    hub.configure([hostile], {hostile.identity})
    tools = _ready(hub, "hostile")
    assert hub.call(tools[("hostile", "chatty")], {"count": 6000}).text == "answered"
    heard = [r for r in caplog.records if "] note " in r.getMessage()]
    assert 0 < len(heard) <= UNASKED_BURST + 100  # the rest never reached the SDK
    assert "messages unasked faster than" in caplog.text
    wait_until(lambda: hub.call(tools[("hostile", "echo")], {"text": "x"}).text == "x", 30, "the server to answer")


def test_a_call_that_fails_as_its_server_restarts_leaves_the_new_run_running(hub, caplog):
    """The failing call stopped the server by its name: it read the new run's stop event and ended the server just
    restarted (issue 42). Each run has its own."""
    caplog.set_level(logging.INFO)
    hostile = McpServerConfig("hostile", sys.executable, (HOSTILE,))
    hub.configure([hostile], {hostile.identity})
    tools = _ready(hub, "hostile")
    pending = hub.start_call(tools[("hostile", "never")], {})
    wait_until(lambda: "never: waiting for ever" in caplog.text, 30, "the call to be under way")
    hub.restart("hostile")
    assert pending.result(60).is_error  # the first run's call ends with it
    tools = _ready(hub, "hostile")
    assert hub.call(tools[("hostile", "echo")], {"text": "still here"}).text == "still here"
    assert hub.states()["hostile"].state == "ready"


def test_closing_waits_for_every_run_of_a_restarted_server_and_leaves_no_process(tmp_path):
    """Issue 50, item 10: ``close`` waited for each server's latest run only; a restarted server's earlier runs,
    still ending, were left to a loop that had stopped. Runs 1 and 2 take 3 s to end, run 3 none."""
    import psutil

    seconds = tmp_path / "seconds"
    seconds.write_text("3", encoding="utf-8")
    slow = McpServerConfig("slow", sys.executable, (HOSTILE, "--slow-exit", str(seconds)))
    hub = McpHub()
    hub.configure([slow], {slow.identity})
    _ready(hub, "slow")
    hub.restart("slow")
    _ready(hub, "slow")
    seconds.write_text("0", encoding="utf-8")
    hub.restart("slow")
    _ready(hub, "slow")

    def servers() -> list[psutil.Process]:
        return [p for p in psutil.Process().children(recursive=True) if "--slow-exit" in " ".join(p.cmdline())]

    assert len(servers()) >= 2  # the earlier runs are still ending
    hub.close(timeout=30)
    assert hub._thread is None and hub._tasks == {}
    assert servers() == []


NAMED = str(Path(__file__).parents[2] / "helpers" / "named_tools_mcp_server.py")


def test_a_strangers_server_cannot_take_the_users_tool_by_its_name(hub):
    """Issue 51, item 3: a stranger's server lists the user's tool name and the name the user's would be renamed to;
    the model is offered tools of unique names, each call resolves to exactly one tool and runs on the server whose
    tool the model named. A lookalike server name (Cyrillic in a Latin name) is refused where it is written."""
    from fara_desktop.tools.mcp_config import McpConfigError, parse_mcp_servers
    from fara_desktop.tools.tool_box import ToolBox, tool_key

    with pytest.raises(McpConfigError, match="mixes"):
        parse_mcp_servers(json.dumps({"mcpServers": {"files": {"command": "x"}, "f\u0456les": {"command": "y"}}}))
    users = McpServerConfig("files", sys.executable, (NAMED, "files", "read_file"))
    strangers = McpServerConfig("other", sys.executable, (NAMED, "other", "read_file", "files_read_file"))
    hub.configure([users, strangers], {users.identity, strangers.identity})
    _ready(hub, "files", "other")
    offered = hub.tools()
    names = [t.spec.name for t in offered]
    assert len(set(names)) == len(names) == 3, names
    box = ToolBox(hub)
    keys = [tool_key(t) for t in offered]
    for tool in offered:
        found = box.find(tool.spec.name, keys)
        assert found is not None and (found.server, found.name) == (tool.server, tool.name)
        result = hub.call(found, {"path": "notes.txt"})
        assert f"{tool.server}:{tool.name}:notes.txt" in result.text


@pytest.mark.parametrize(("users", "strangers"), [("MCP", "МСР"), ("HTTP", "НТТР"), ("GIT", "ꓖꓲꓔ"), ("git", "GIT")])
def test_a_whole_script_lookalike_server_name_is_refused(users, strangers):
    """Issue 62, item 4: a name all in Cyrillic ("МСР") or Lisu ("ꓖꓲꓔ") passed the mixed-script check and stood
    beside "MCP" or "GIT"; names are now compared by Unicode's confusable skeleton (UTS #39's data)."""
    from fara_desktop.tools.mcp_config import McpConfigError, parse_mcp_servers

    with pytest.raises(McpConfigError, match="looks like the server"):
        parse_mcp_servers(json.dumps({"mcpServers": {users: {"command": "x"}, strangers: {"command": "y"}}}))
    assert len(parse_mcp_servers(json.dumps({"mcpServers": {users: {"command": "x"}, "notes": {"command": "y"}}})))


def test_on_a_clash_the_server_listed_first_keeps_the_name_and_the_approval_says_what_each_runs(hub, qtbot):
    """Issue 62, item 4: the stranger's server (listed after the user's) lists a tool named as the user's own is
    offered ("files_read_file"); it was offered under that name and the user's became "files_read_file_2", so a
    call the user approved ran on the stranger's server. Now the user's keeps it; the approval bar names each
    server by what it runs as well as by its name (the two bars differed by 0 pixels)."""
    from fara_desktop.ui.widgets.tool_approval import ToolApprovalBar

    users = McpServerConfig("files", sys.executable, (NAMED, "files", "read_file"))
    strangers = McpServerConfig("other", sys.executable, (NAMED, "other", "read_file", "files_read_file"))
    hub.configure([users, strangers], {users.identity, strangers.identity})
    _ready(hub, "files", "other")
    by_name = {t.spec.name: t for t in hub.tools()}
    assert (by_name["files_read_file"].server, by_name["files_read_file"].name) == ("files", "read_file")
    assert by_name["files_read_file_2"].server == "other"
    bar = ToolApprovalBar()
    qtbot.addWidget(bar)
    bar.ask("files_read_file", "files", "{}", 1, 1, hub.runs("files"))
    mine = bar.question.text()
    bar.ask("files_read_file_2", "other", "{}", 1, 1, hub.runs("other"))
    assert NAMED in mine and "other" not in mine.split("which runs", 1)[1]
    assert mine != bar.question.text() and "files_read_file" in bar.question.text()
