#!/usr/bin/env bash
# GPU check for issue #5: tokens/s of vLLM through our LLMAgent deployment (four replicas
# at num_gpus=0.25 on one GPU) against vLLM alone on the whole GPU, same prompts.
#
#   bench/gpu_check.sh /path/to/local/model_dir      (or set SWARM_RAY_VLLM_MODEL)
#
# Needs: one visible NVIDIA GPU, the `gpu` extra installed (`pip install -e ".[gpu]"`,
# vllm==0.29.0 as ray[llm] 2.60 pins), and a model directory already on disk (a small
# chat model, e.g. Qwen2.5-0.5B-Instruct). Nothing is downloaded: the Hugging Face hub
# is switched offline. Each side runs in its own process, because vLLM keeps its GPU
# memory until the process exits. Figures are printed and kept in $OUT (default: a
# temporary folder).
set -euo pipefail

MODEL="${1:-${SWARM_RAY_VLLM_MODEL:-}}"
REQUESTS="${REQUESTS:-64}"          # requests per round
ROUNDS="${ROUNDS:-2}"
CONCURRENCY="${CONCURRENCY:-64}"    # requests in flight at once
MAX_TOKENS="${MAX_TOKENS:-128}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
PY="${PYTHON:-$ROOT/.venv/bin/python}"
OUT="${OUT:-$(mktemp -d)}"

if [[ -z "$MODEL" || ! -d "$MODEL" ]]; then
  echo "usage: $0 MODEL_DIR (a local model directory; got '${MODEL}')" >&2
  exit 2
fi
command -v nvidia-smi >/dev/null || { echo "no nvidia-smi: this check needs a GPU" >&2; exit 2; }
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
"$PY" -c "import vllm; print('vllm', vllm.__version__)" \
  || { echo "vllm is not installed: pip install -e '.[gpu]'" >&2; exit 2; }

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 RAY_DEDUP_LOGS=0
cd "$ROOT"
COMMON=(--engine vllm --model "$MODEL" --requests "$REQUESTS" --rounds "$ROUNDS"
        --concurrency "$CONCURRENCY" --max-tokens "$MAX_TOKENS")

echo "== vLLM alone, whole GPU (gpu_memory_utilization 0.9)"
"$PY" bench/llm.py "${COMMON[@]}" --side bare --num-gpus 1 --json-out "$OUT/bare.json"

echo "== LLMAgent on Serve: 4 replicas x num_gpus 0.25 (gpu_memory_utilization 0.225 each)"
"$PY" bench/llm.py "${COMMON[@]}" --side serve --num-gpus 0.25 --replicas 4 \
  --json-out "$OUT/serve.json"

"$PY" - "$OUT/bare.json" "$OUT/serve.json" <<'EOF'
import json, sys
bare, serve = (json.load(open(p))["sides"][0] for p in sys.argv[1:])
ratio = serve["tokens_per_s"] / bare["tokens_per_s"]
print(f"vLLM alone {bare['tokens_per_s']:.1f} tokens/s; "
      f"LLMAgent 4x0.25 GPU {serve['tokens_per_s']:.1f} tokens/s; ratio {ratio:.3f}")
EOF
echo "figures in $OUT"
