#!/usr/bin/env bash
# GPU, ONE H100 (issue 41): small real reports of ncu's range replay beside kernel replay, and a first
# timing of the programs of scripts/speed_programs.py.
#   1. the probe program (4-layer MLP, foreach Adam over 2 steps, a memtraffic.region): `memtraffic profile
#      --torch-ops` with --replay range and kernel, sets bytes and traffic; range replay asked for what it
#      refuses (the flops set's smsp__sass_* counters) to keep ncu's message;
#      every report dumped by scripts/dump_report.py (each result's name, NVTX stack and metrics);
#   2. the mlp_adam program --small under --profile-from-start off, kernel and range replay (range: the
#      tracer ranges only the window's ops, ncu runs from the start);
#   3. each program of scripts/speed_programs.py alone (bare) and under `profile --torch-ops --replay range
#      --metrics bytes`, while BUDGET_S (default 360) lasts.
# Usage: bash scripts/gpu_range_replay_reports.sh OUT   (packages the GPU machine lacks as wheels in .whl/)
# OUT gets probe.tgz: runs/ (run folders, --import-sass no), logs/, dumps/, timings.txt, machine.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bash scripts/gpu_range_replay_reports.sh OUT}
work=$(mktemp -d)
runs=$work/runs logs=$work/logs dumps=$work/dumps
mkdir -p "$runs" "$logs" "$dumps" "$out"
budget=${BUDGET_S:-360}
start=$(date +%s)
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-deps --no-build-isolation -e . >"$logs/install.txt" 2>&1 || cat "$logs/install.txt"
{ nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; date -u +%FT%TZ; git rev-parse HEAD 2>/dev/null
  ncu --version | tail -1; nproc
  python3 -m pip list 2>/dev/null | grep -i -E "^(torch|triton|transformers|torchvision|tokenizers|safetensors|huggingface|regex|pyyaml|filelock|tqdm|requests|numpy|pandas) "
} >"$work/machine.txt" 2>&1
for m in transformers torchvision; do
  if ! python3 -c "import $m" 2>/dev/null && ls .whl/*.whl >/dev/null 2>&1; then
    echo "$m missing: installing the carried wheels into /tmp/site" >>"$work/machine.txt"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      $( [ "$m" = torchvision ] && ls .whl/torchvision-*.whl || ls .whl/*.whl | grep -v torchvision ) \
      >>"$work/machine.txt" 2>&1
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
  fi
  python3 -c "import $m; print('$m', $m.__version__)" >>"$work/machine.txt" 2>&1
done
cat "$work/machine.txt"
python3 -c "import torch; torch.zeros(1, device='cuda'); torch.cuda.synchronize()" >/dev/null 2>&1

elapsed() { echo $(( $(date +%s) - start )); }
# prof NAME [profile options] -- PROGRAM...: one `memtraffic profile --torch-ops` run, timed
prof() {
  local name=$1; shift
  local t0=$(date +%s%N)
  python3 -m memtraffic.cli profile --torch-ops --out "$runs/$name" "$@" >"$logs/$name.stdout.txt" 2>"$logs/$name.stderr.txt"
  local rc=$?
  echo "$name rc=$rc command_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$work/timings.txt"
  grep -E "^(ncu profiled|measured |==ERROR==|==WARNING==)" "$logs/$name.stderr.txt" | head -5 | sed 's/^/    /'
  for rep in "$runs/$name"/*.ncu-rep; do
    [ -f "$rep" ] && python3 scripts/dump_report.py "$rep" >"$dumps/$name.json" 2>"$dumps/$name.err"
  done
}
bare() {  # bare NAME PROGRAM...: the program alone
  local name=$1; shift
  local t0=$(date +%s%N)
  "$@" >"$logs/bare_$name.txt" 2>&1
  echo "bare_$name rc=$? command_ms=$(( ($(date +%s%N) - t0) / 1000000 ))" | tee -a "$work/timings.txt"
}

probe=(python3 scripts/speed_programs.py probe)
prof range_bytes --replay range --metrics bytes -- "${probe[@]}"
prof kernel_bytes --metrics bytes -- "${probe[@]}"
prof kernel_bytes_every --metrics bytes --every-launch -- "${probe[@]}"
prof range_traffic --replay range --metrics traffic -- "${probe[@]}"
prof range_flops --replay range --metrics flops -- "${probe[@]}"
# the window traced, ncu from the start: only the window's ranges exist to be replayed
small_adam=(python3 scripts/speed_programs.py mlp_adam --small)
bare mlp_adam_small "${small_adam[@]}"
prof kernel_window_adam --metrics bytes --profile-from-start off -- "${small_adam[@]}"
prof range_window_adam --replay range --metrics bytes --profile-from-start off -- "${small_adam[@]}"
echo "fixtures done at $(elapsed) s" | tee -a "$work/timings.txt"

for p in probe mlp_adam gpt2 vision llama_decode compiled; do
  [ "$(elapsed)" -ge "$budget" ] && { echo "SKIPPED $p: $(elapsed) s" | tee -a "$work/timings.txt"; continue; }
  bare "$p" python3 scripts/speed_programs.py "$p"
  [ "$(elapsed)" -ge "$budget" ] && continue
  prof "prog_$p" --replay range --metrics bytes -- python3 scripts/speed_programs.py "$p"
done
echo "total $(elapsed) s" | tee -a "$work/timings.txt"
cp "$work/timings.txt" "$work/machine.txt" "$out/"
tar -C "$work" -czf "$out/probe.tgz" runs logs dumps timings.txt machine.txt
ls -la "$out"
