#!/usr/bin/env bash
# GPU, ONE H100 (issue 41): what profiling costs against the program alone, on the programs of
# scripts/speed_programs.py (gpt2, vision, mlp_adam, llama_decode, compiled). Per program P, by STEPS
# (default "bare default pair"; "idle" and "full" on request):
#   bare:    bare_P, the program alone (full size), timed by this script;
#   default: default_P, `memtraffic profile --torch-ops` with every default (full size): the first look;
#   pair:    sampled_P / every_P, the defaults and the defaults with --every-launch, both at --small (the
#            pair scripts/speed_summary.py compares op type by op type; --replay auto chooses the same
#            replay for both);
#   idle:    idle_P, the program under ncu measuring no kernel (ncu's own start-up and interception);
#   full:    full_P, the defaults with --metrics traffic (the six-pass set), full size.
# Every command is cut after T_CMD seconds (default 120; its timing line then says rc=124) and no new one
# starts after BUDGET_S (default 400). The compiled program makes its own empty Inductor cache each run.
# mlp_adam runs its steps in a cudaProfilerStart window: its profiles pass --profile-from-start off.
# Usage: bash scripts/gpu_speed.sh OUT [PROGRAM...]   OUT gets, as it goes, timings.txt and machine.txt,
# and speed.tgz (runs/: the run folders, full-size ones without their reports; logs/; summary.json and
# summary.txt from scripts/speed_summary.py) after each program.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/gpu_speed.sh OUT [PROGRAM...]}
shift
programs=${*:-gpt2 vision mlp_adam llama_decode compiled}
work=$(mktemp -d)
runs=$work/runs logs=$work/logs
mkdir -p "$runs" "$logs" "$out"
budget=${BUDGET_S:-400}
t_cmd=${T_CMD:-120}
steps=" ${STEPS:-bare default pair} "
start=$(date +%s)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$logs/install.txt" 2>&1 || cat "$logs/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ
  ncu --version | tail -1; nproc
  python3 -c "import torch, triton, transformers, torchvision; print('torch', torch.__version__, 'triton', triton.__version__, 'transformers', transformers.__version__, 'torchvision', torchvision.__version__)"
} >"$out/machine.txt" 2>&1
cat "$out/machine.txt"
python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()" >/dev/null 2>&1
elapsed() { echo $(( $(date +%s) - start )); }

timed() {  # timed NAME COMMAND...: run, log, and write "NAME rc=.. command_ms=.." to timings.txt
  local name=$1; shift
  local t0=$(date +%s%N)
  if [ "$(elapsed)" -ge "$budget" ]; then echo "SKIPPED $name at $(elapsed) s" | tee -a "$out/timings.txt"; return; fi
  timeout -k 5 "$t_cmd" "$@" >"$logs/$name.stdout.txt" 2>"$logs/$name.stderr.txt"
  local rc=$?
  echo "$name rc=$rc command_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$out/timings.txt"
  grep -E "^(ncu replays|ncu profiled|measured |==ERROR==)" "$logs/$name.stderr.txt" | sort | uniq -c | head -6
}
prof() {  # prof NAME [profile options] -- PROGRAM...
  local name=$1; shift
  timed "$name" python3 -m memtraffic.cli profile --torch-ops --out "$runs/$name" "$@"
}

pack() {  # the results so far into OUT (the full-size runs' reports left out)
  rm -f "$runs"/{default,full}_*/*.ncu-rep
  cp "$out/timings.txt" "$out/machine.txt" "$work/" 2>/dev/null
  python3 scripts/speed_summary.py "$work" --json "$work/summary.json" >"$work/summary.txt" 2>&1
  tar -C "$work" -czf "$out/speed.tgz" runs logs timings.txt machine.txt summary.json summary.txt
}
want() { [[ "$steps" == *" $1 "* ]]; }
for p in $programs; do
  window=()
  [ "$p" = mlp_adam ] && window=(--profile-from-start off)
  full=(python3 scripts/speed_programs.py "$p")
  small=(python3 scripts/speed_programs.py "$p" --small)
  want bare && timed "bare_$p" "${full[@]}"
  want idle && timed "idle_$p" ncu --metrics dram__bytes_read.sum --kernel-name regex:^memtraffic_none$ "${full[@]}"
  want default && prof "default_$p" "${window[@]}" -- "${full[@]}"
  want full && prof "full_$p" --metrics traffic "${window[@]}" -- "${full[@]}"
  if want pair; then
    prof "sampled_$p" "${window[@]}" -- "${small[@]}"
    prof "every_$p" --every-launch "${window[@]}" -- "${small[@]}"
  fi
  pack
done
cat "$work/summary.txt"
echo "total $(elapsed) s" | tee -a "$out/timings.txt"
ls -la "$out"
