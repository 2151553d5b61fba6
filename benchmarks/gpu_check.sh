#!/usr/bin/env bash
# The prepared device check: one command, about 8 minutes on one H100 or H200 (benchmarks/GPU.md).
#
#   benchmarks/gpu_check.sh            on the GPU machine, from the repository root; results into $OUT
#   benchmarks/gpu_check.sh --dry-run  every step at smoke size on the CPU (tests/test_benchmarks.py runs it)
#
# PYTHON: the interpreter (default python3). Each step has its own time limit, so one that fails or hangs costs its limit and no more; the summary names
# every step with its exit status and seconds. $OUT receives three files, named after the device:
#   gpu_check_<device>_summary.txt   one line per step: name, exit status, seconds
#   gpu_check_<device>_log.txt       every step's output
#   gpu_check_<device>.tar.gz        every result file (benchmark JSON, metrics), for benchmarks/results/
# Wheels in .whl/ (benchmarks/GPU.md says which) are installed first; fine-tuning and embedding training read a
# carried model and data from .gpu/model and .gpu/data (GPU_MODEL_DIR, GPU_DATA_DIR) and are skipped without them.
set -u

DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
PY=${PYTHON:-python3}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
WORK=$(mktemp -d)
RESULTS="$WORK/results"
mkdir -p "$RESULTS"
trap 'rm -rf "$WORK"' EXIT

if [ $DRY = 0 ] && ls .whl/*.whl >/dev/null 2>&1; then
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
fi
export PYTHONPATH="/tmp/site:$ROOT/src:$ROOT/benchmarks:${PYTHONPATH:-}" PYTHONUNBUFFERED=1

if [ $DRY = 1 ]; then
    DEVICE=cpu
    NAME=cpu-dry-run
else
    DEVICE=cuda
    NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -c 'A-Za-z0-9\n' '-' | sed 's/-*$//')
    NAME=${NAME:-cuda}
fi
SUMMARY="$OUT/gpu_check_${NAME}_summary.txt"
LOG="$OUT/gpu_check_${NAME}_log.txt"
: >"$SUMMARY"
: >"$LOG"
{ echo "device: $NAME"; echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)"; date -u; } >>"$SUMMARY"
[ $DRY = 0 ] && nvidia-smi >>"$LOG" 2>&1

# step NAME SECONDS COMMAND...: run with its own limit, output to the log, one summary line
step() {
    local name=$1 limit=$2
    shift 2
    local start=$SECONDS
    echo "===== $name (limit ${limit}s): $*" >>"$LOG"
    timeout --kill-after=10 "$((limit * SCALE))" "$@" >>"$LOG" 2>&1
    local rc=$?
    printf '%-28s rc=%-4s %4ss\n' "$name" "$rc" "$((SECONDS - start))" >>"$SUMMARY"
    [ "$rc" = 0 ] || FAILED=$((FAILED + 1))
    return 0
}
FAILED=0
SCALE=1
[ $DRY = 1 ] && SCALE=4  # a busy CPU spends most of a smoke step importing torch and transformers

bench() { step "$1" "$2" $PY "benchmarks/$3" "${@:4}"; }

if [ $DRY = 1 ]; then
    SMOKE=(--smoke)
    TRAIN=(--device cpu --smoke)
    TESTS=(tests/test_model_attention.py tests/test_attention_by_device.py tests/test_training_sync.py)
else
    SMOKE=()
    TRAIN=(--device cuda --precision bf16 --batch 256 --steps 10 --warmup 2)
    TESTS=(tests/test_model_attention.py tests/test_attention_by_device.py tests/test_training_sync.py tests/test_model.py
        tests/test_compile.py
        tests/test_training_loop.py tests/test_training_pretrain.py tests/test_finetune.py
        tests/test_tasks_embedding.py tests/test_training_resume.py tests/test_inference.py tests/test_serve.py)
fi

# 1. the device tests (the GPU's own run of the CPU suite's model, training, resume, inference and service tests)
step device_tests 100 $PY -m pytest -p no:xdist -p no:cacheprovider -q -x --device "$DEVICE" -m "not slow" "${TESTS[@]}"

# 2. the training step against transformers: base and large, bf16, batch 256; eager and compiled, packed and not
COMPILE=(--compile)
[ $DRY = 1 ] && COMPILE=()  # inductor on a CPU takes minutes: the dry run checks the rest of the path
bench train_step_128 80 bench_train_step.py "${TRAIN[@]}" --sizes base large --seq-len 128 "${COMPILE[@]}" \
    --output "$RESULTS/train_step_${NAME}_seq128.json"
bench train_step_128_packed 80 bench_train_step.py "${TRAIN[@]}" --sizes base large --seq-len 128 --packed \
    "${COMPILE[@]}" --output "$RESULTS/train_step_${NAME}_seq128_packed.json"
bench train_step_512_packed 60 bench_train_step.py "${TRAIN[@]}" --sizes base large --seq-len 512 --packed \
    --output "$RESULTS/train_step_${NAME}_seq512_packed.json"
bench profile_base_128 30 bench_train_step.py "${TRAIN[@]}" --sizes base --seq-len 128 --packed --profile bertkit_packed \
    --steps 3 --output "$RESULTS/train_step_${NAME}_profile.json"

# 3. time to quality (written beside this check; a short budget a side)
if [ -f benchmarks/bench_time_to_quality.py ]; then
    if [ $DRY = 1 ]; then
        bench time_to_quality 50 bench_time_to_quality.py --smoke --output "$RESULTS/time_to_quality_${NAME}.json"
    else
        bench time_to_quality 50 bench_time_to_quality.py --model small --seq 128 --batch 256 --budget 15 \
            --calibrate 5 --threads 8 --note "one GPU, $NAME" --output "$RESULTS/time_to_quality_${NAME}.json"
    fi
else
    printf '%-28s skipped: benchmarks/bench_time_to_quality.py is absent\n' time_to_quality >>"$SUMMARY"
fi

# 4. fine-tuning per update against a transformers loop, and embedding training against SentenceTransformerTrainer
MODEL_DIR=${GPU_MODEL_DIR:-.gpu/model}
DATA_DIR=${GPU_DATA_DIR:-.gpu/data}
if [ $DRY = 1 ]; then
    bench finetune 90 bench_finetune.py --smoke --output "$RESULTS/finetune_${NAME}.json"
    bench embedding_train 90 bench_embedding_train.py --smoke --output "$RESULTS/embedding_train_${NAME}.json"
elif [ -d "$MODEL_DIR" ] && [ -d "$DATA_DIR" ]; then
    bench finetune_sst2 40 bench_finetune.py --device cuda --model-dir "$MODEL_DIR" --data-dir "$DATA_DIR" \
        --tasks sst2 --max-steps 200 --output "$RESULTS/finetune_${NAME}.json"
    bench finetune_squad 40 bench_finetune.py --device cuda --model-dir "$MODEL_DIR" --data-dir "$DATA_DIR" \
        --tasks squad --max-steps 100 --output "$RESULTS/finetune_${NAME}.json"
    bench embedding_train 30 bench_embedding_train.py --model "$MODEL_DIR" --max-steps 50 \
        --output "$RESULTS/embedding_train_${NAME}.json"
else
    printf '%-28s skipped: no %s or %s (benchmarks/GPU.md: what to carry)\n' finetune "$MODEL_DIR" "$DATA_DIR" \
        >>"$SUMMARY"
fi

date -u >>"$SUMMARY"
tar -czf "$OUT/gpu_check_${NAME}.tar.gz" -C "$WORK" results
echo "failed steps: $FAILED" >>"$SUMMARY"
cat "$SUMMARY"
[ "$FAILED" = 0 ]
