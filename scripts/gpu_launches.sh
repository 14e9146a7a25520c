#!/usr/bin/env bash
# GPU, ONE H100 (issue 33): every-launch against distinct-launch `memtraffic profile --torch-ops` runs.
#   1. scripts/many_kernels_mlp.py (64 layers, 2 AdamW steps, ~3,000 launches), --metrics bytes;
#      and (mlp12) 12 layers, 2 steps, the default traffic set: a deep pair small enough to commit whole;
#   2. examples/train_step.py (its second step, --profile-from-start off), the default traffic set;
#   3. a real model (scripts/real_model_step.py: transformers GPT-2 12 layers, else torchvision
#      resnet18; skipped when the device has neither), --metrics bytes;
#   each as profile_sampled_<NAME> (--distinct 1, the default) and profile_full_<NAME> (--every-launch),
#   then `memtraffic diff FULL SAMPLED --group-by op` and the premise check (scripts/check_repeats.py)
#   of the every-launch run;
#   4. the cost of each metric set: a 2-layer MLP step, every launch, sets traffic, bytes, flops, roofline
#      (metric_<SET>), and the program's own time without ncu;
#   5. the train_step distinct run again, to show the progress ETA from the first (again_train_step);
#   0. first, the GPU tests of tests/analysis/test_reuse.py (ncu skips repeats, also inside a measured region).
# STEPs (default all): tests mlp64 mlp12 train_step real metrics again. Steps after the first pair skip
# themselves once BUDGET_S (default 300) seconds have passed. REAL_LAYERS: GPT-2 blocks (12); REAL_STEPS:
# its profiled steps (1), also timed once without ncu (native_<MODEL>).
# Usage: bash scripts/gpu_launches.sh OUT [STEP...]   (after `pip install -e . --no-deps`)
# OUT gets: reports/h100/profile_{full,sampled}_<NAME>/ and metric_<SET>/ (run folders, --import-sass no),
# logs/ (each command's stdout/stderr, diffs, premise checks), timings.txt, summary.json/.txt
# (scripts/launches_summary.py), machine.txt, sizes.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/gpu_launches.sh OUT [STEP...]}
shift
steps="$*"  # none: every step
budget=${BUDGET_S:-300}
layers=${REAL_LAYERS:-12}
real_steps=${REAL_STEPS:-1}
runs=$out/reports/h100
logs=$out/logs
mkdir -p "$runs" "$logs"
start=$(date +%s)
mt() { python3 -m memtraffic.cli "$@"; }
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; git rev-parse HEAD
  ncu --version | tail -1; python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)"
  for m in transformers torchvision; do python3 -c "import $m; print('$m', $m.__version__)" 2>/dev/null || echo "$m: absent"; done
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"

elapsed() { echo $(( $(date +%s) - start )); }
over() { if [ "$(elapsed)" -ge "$budget" ]; then echo "SKIPPED $1: $(elapsed) s >= budget $budget s" | tee -a "$out/timings.txt"; return 0; fi; return 1; }

# run NAME MODE(full|sampled|metric|again) SET FROM(on|off: --profile-from-start) -- PROGRAM...
run() {
  local name=$1 mode=$2 set=$3 from=$4; shift 5
  local flags=() folder
  case $mode in
    full) flags=(--every-launch); folder=$runs/profile_full_$name ;;
    sampled) flags=(--distinct 1); folder=$runs/profile_sampled_$name ;;
    again) flags=(--distinct 1); folder=$runs/again_$name ;;
    metric) flags=(--every-launch); folder=$runs/metric_$set ;;
  esac
  local t0 rc
  t0=$(date +%s%N)
  mt profile --torch-ops --profile-from-start "$from" --metrics "$set" "${flags[@]}" --out "$folder" -- "$@" \
    >"$logs/${mode}_$name.stdout.txt" 2>"$logs/${mode}_$name.stderr.txt"
  rc=$?
  echo "$name $mode $set rc=$rc command_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$out/timings.txt"
  grep -E "^(measured |ncu profiled|expecting|the program ended)" "$logs/${mode}_$name.stderr.txt" | sed 's/^/    /'
}

pair() {  # pair NAME SET FROM -- PROGRAM...
  local name=$1 set=$2 from=$3; shift 4
  run "$name" sampled "$set" "$from" -- "$@"
  over "$name every-launch" && return
  run "$name" full "$set" "$from" -- "$@"
  mt diff "$runs/profile_full_$name" "$runs/profile_sampled_$name" --group-by op >"$logs/diff_$name.txt" 2>&1
  python3 scripts/check_repeats.py "$runs/profile_full_$name" --json "$logs/premise_$name.json" \
    >"$logs/premise_$name.txt" 2>&1
  head -3 "$logs/premise_$name.txt"
}

want() { [ -z "$steps" ] || [[ " $steps " == *" $1 "* ]]; }

# torch and CUDA loaded once before anything is timed: on a fresh machine the first run reads its libraries
# from disk (3 s more start-up, 2026-11-25), which would count against whichever run of a pair came first
python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()" >/dev/null 2>&1

# ncu's exclude filter on a small program: repeats skipped, also inside a measured region (tests/analysis/test_reuse.py)
if want tests && python3 -m pytest --version >/dev/null 2>&1; then
  python3 -m pytest -q -p no:cacheprovider -m "gpu or ncu" tests/analysis/test_reuse.py tests/inprogram/test_distinct.py \
    >"$logs/pytest.txt" 2>&1
  echo "pytest (gpu, ncu) rc=$? $(tail -1 "$logs/pytest.txt")" | tee -a "$out/timings.txt"
fi

# the MLP calls no cudaProfilerStart: profiled from the start, as make_many_kernels_report.sh did
want mlp64 && pair mlp64 bytes on -- python3 scripts/many_kernels_mlp.py --layers 64 --steps 2
# a deep pair small enough to commit whole: 12 layers, two steps, profile's default (traffic) set
want mlp12 && pair mlp12 traffic on -- python3 scripts/many_kernels_mlp.py --layers 12 --steps 2
want train_step && ! over train_step && pair train_step traffic off -- python3 examples/train_step.py
if want real && ! over real_model; then
  if python3 scripts/real_model_step.py --check >"$logs/real_model_probe.txt" 2>&1; then
    model=$(head -1 "$logs/real_model_probe.txt" | awk '{print $2}')
    t0=$(date +%s%N)
    python3 scripts/real_model_step.py --model "$model" --layers "$layers" --steps "$real_steps" \
      >"$logs/native_$model.txt" 2>&1
    echo "$model native (no ncu) command_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$out/timings.txt"
    pair "$model" bytes off -- python3 scripts/real_model_step.py --model "$model" --layers "$layers" \
      --steps "$real_steps"
  else
    echo "real model: $(tail -1 "$logs/real_model_probe.txt")" | tee -a "$out/timings.txt"
  fi
fi
if want metrics && ! over metric_sets; then
  t0=$(date +%s%N)
  python3 scripts/many_kernels_mlp.py --layers 2 --steps 1 >"$logs/native_mlp2.txt" 2>&1
  echo "mlp2 native (no ncu) command_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$out/timings.txt"
  for set in traffic bytes flops roofline; do
    over "metric $set" && break
    run "mlp2_$set" metric "$set" on -- python3 scripts/many_kernels_mlp.py --layers 2 --steps 1
  done
fi
# the progress ETA: the sampled train step again, beside the first (profile finds it there)
want again && ! over "again (ETA)" && run train_step again traffic off -- python3 examples/train_step.py
grep -h "expected kernel launches\|expecting" "$logs"/again_train_step.stderr.txt 2>/dev/null | tail -3

python3 scripts/launches_summary.py "$runs" --json "$out/summary.json" >"$out/summary.txt" 2>&1
cat "$out/summary.txt"
du -sh "$runs"/* >"$out/sizes.txt" 2>&1
cat "$out/sizes.txt"
echo "total $(elapsed) s"
