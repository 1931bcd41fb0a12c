#!/usr/bin/env bash
# GPU check for issue #16: vLLM's own OpenAI-compatible server as the swarm's endpoint.
#
#   bench/vllm_openai_check.sh /path/to/local/model_dir     (or set SWARM_RAY_VLLM_MODEL)
#
# 1. serves MODEL_DIR with `vllm serve` (OpenAI API, tool calling on) on a free port;
# 2. bench/llm.py --engine openai: tokens/s of OpenAIEngine inside an LLMAgent replica
#    (budget actor in the path) against the same server called directly (goal >= 0.9);
# 3. bench/wide_research_live.py: the wide-research template over the eight planets,
#    one tool agent per planet calling the demo MCP server, against this server.
#
# Needs: one visible NVIDIA GPU, the `gpu` extra (`pip install -e ".[gpu]"`, vllm==0.29.0
# as ray[llm] 2.60 pins), the `mcp` package, and a chat model with tool calling already
# on disk (e.g. Qwen2.5-1.5B-Instruct; TOOL_PARSER=hermes suits Qwen2.5, llama3_json
# suits Llama 3.x). Nothing is downloaded. Figures are printed and kept in $OUT.
set -euo pipefail

MODEL="${1:-${SWARM_RAY_VLLM_MODEL:-}}"
TOOL_PARSER="${TOOL_PARSER:-hermes}"
CONCURRENCY="${CONCURRENCY:-32}"
REQUESTS="${REQUESTS:-64}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
OUT="${OUT:-$(mktemp -d)}"

if [[ -z "$MODEL" || ! -d "$MODEL" ]]; then
  echo "usage: $0 MODEL_DIR (a local model directory; got '${MODEL}')" >&2
  exit 2
fi
command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: this check needs a GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
"$PY" -c "import vllm, mcp; print('vllm', vllm.__version__)" \
  || { echo "needs vllm and mcp: pip install -e '.[gpu,agents]'" >&2; exit 2; }

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RAY_DEDUP_LOGS=0
cd "$ROOT"
PORT="$("$PY" -c 'from swarm_ray.testing.llm_stubs import free_port; print(free_port())')"
URL="http://127.0.0.1:$PORT/v1"

echo "== vllm serve $MODEL on port $PORT (tool parser $TOOL_PARSER)"
"$PY" -m vllm.entrypoints.openai.api_server --model "$MODEL" --served-model-name local \
  --port "$PORT" --gpu-memory-utilization 0.85 --max-model-len 8192 \
  --enable-auto-tool-choice --tool-call-parser "$TOOL_PARSER" >"$OUT/vllm.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true; wait $SERVER 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do
  curl -sf "$URL/models" >/dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { tail -30 "$OUT/vllm.log"; exit 1; }
  sleep 1
done
curl -sf "$URL/models" >/dev/null || { echo "vllm did not come up" >&2; exit 1; }

echo "== tokens/s: OpenAIEngine in an LLMAgent replica vs the server called directly"
"$PY" bench/llm.py --engine openai --url "$URL" --model local --concurrency "$CONCURRENCY" \
  --requests "$REQUESTS" --rounds 2 --max-tokens 128 --num-cpus 1 \
  --json-out "$OUT/llm_openai.json"

echo "== wide research over the planets, one tool agent each"
"$PY" bench/wide_research_live.py --url "$URL" --model local --json-out "$OUT/wide.json"
echo "figures in $OUT"
