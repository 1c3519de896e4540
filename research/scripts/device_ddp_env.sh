#!/bin/bash
# Issue 30 on a lent device machine (the device tool; see DEVELOPERS.md): its 16 CPU cores hold 4 Gloo CPU ranks
# with a core each, the uncontended counterpart of ddp-2x2-5gbit (4 ranks on this machine's 2 cores). A fresh DDP
# environment measured and judged like the others: `autotuner ddp measure` (sweep + burst phase), then
# `autotuner ddp validate` of ResNet-101 (314 tensors, a layout the sweep never saw) at DDP's 11 default settings,
# predicted from that sweep alone. Plain loopback: link emulation (network namespaces, HTB) was not tried on the
# lent machine (a Firecracker VM on 2026-11-27).
# Also the float16/bfloat16 elementwise probe on its GPU, against the datasheet figure (issue 29).
# Run from the repository root with .whl/ carried (pydantic, typer 0.29, platformdirs):
#   bash research/scripts/device_ddp_env.sh "$OUT" ENV [SCALE]
# SCALE=small is a dry run (a few seconds of sweep, one round of 2 steps) to check the script itself.
set -u
out=${1:?usage: device_ddp_env.sh OUTDIR ENV [small]}
env_name=${2:?usage: device_ddp_env.sh OUTDIR ENV [small]}
scale=${3:-full}
mkdir -p "$out"
. research/scripts/device_common.sh
runs=$out  # $OUT/<env>/ddp-validation/<file>: two folders down, what the device tool brings back; appended trial by trial
if [ "$scale" = small ]; then
  M="--jobs 1 --repeats 2 --burst-jobs 1"; V="--steps 2 --warmup 1 --repeats 1"
else
  M="--jobs 3 --repeats 7 --burst-jobs 3"; V="--steps 5 --warmup 2 --repeats 3"
fi
{
  date -u; nproc; grep -m1 "model name" /proc/cpuinfo; uname -r
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
  python3 -c "import torch; print('torch', torch.__version__)"
  if nvidia-smi >/dev/null 2>&1; then
    echo "== fp16/bf16 elementwise"; python3 research/scripts/gpu_fp16_probe.py --out "$out/fp16-gpu.json" || echo "FAILED fp16 probe"
  fi
  echo "== ddp measure ($scale)"; date -u
  time at ddp measure --env "$env_name" --np 4 --runs-dir "$runs" $M || echo "FAILED ddp measure"
  echo "== ddp validate ($scale)"; date -u
  time at ddp validate --env "$env_name" --model resnet101 --compute-ms 100 --np 4 --runs-dir "$runs" $V \
    || echo "FAILED ddp validate"
  date -u
} 2>&1 | tee "$out/log.txt"
