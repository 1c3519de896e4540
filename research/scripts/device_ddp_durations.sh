#!/bin/bash
# Issue 30, after research/scripts/device_ddp_faults.sh: the same env (ddp-1x4-16core, a lent nvidia-h200 machine's 16 CPU
# cores, 4 Gloo ranks) with the DDP replay's backward emulated by stage durations (the replay's --stages duration,
# the default since 2026-11-27: the hooks' work on the backward's thread delays every later gradient, as on a CPU
# rank's real backward) instead of absolute deadlines (which absorbed the copy into the bucket at 300 ms).
#   D  resnet101-300ms-durations  300 ms: DDP's default, 1 MiB, 200 MiB, the view, the fp16 hook, x2 interleaved
#   E  resnet101-100ms-durations  100 ms: DDP's default and the view, x1 (the stages' overrun: writes vs compute)
#   bash research/scripts/device_ddp_durations.sh OUTDIR [small]      (small: resnet18, 2 ranks, 1 step: a dry run here)
set -u
out=${1:?usage: device_ddp_durations.sh OUTDIR [small]}
scale=${2:-full}
env_name=ddp-1x4-16core
mkdir -p "$out/$env_name/ddp-validation"
. research/scripts/device_common.sh
cp "runs/$env_name/ddp-sweep.jsonl" "runs/$env_name/ddp-burst.jsonl" "$out/$env_name/"
if [ "$scale" = small ]; then
  M="--model resnet18 --np 2 --steps 1 --warmup 1"; RD=1
else
  M="--model resnet101 --np 4 --steps 5 --warmup 2"; RD=2
fi
two=/tmp/ddp-view-settings.json five=/tmp/ddp-300ms-settings.json
echo '[{"gradient_as_bucket_view": true}]' > $two
echo '[{"bucket_cap_mb": 1}, {"bucket_cap_mb": 200}, {"gradient_as_bucket_view": true},
       {"comm_hook": "fp16_compress"}]' > $five
{
  date -u; nproc; grep -m1 "model name" /proc/cpuinfo
  echo "== D: 300 ms, stage durations"
  at ddp validate --env $env_name $M --compute-ms 300 --name resnet101-300ms-durations --proposals $five \
    --repeats $RD --runs-dir "$out" || echo "FAILED D"
  echo "== E: 100 ms, stage durations"; date -u
  at ddp validate --env $env_name $M --compute-ms 100 --name resnet101-100ms-durations --proposals $two \
    --repeats 1 --runs-dir "$out" || echo "FAILED E"
  date -u
} 2>&1 | tee "$out/durations-log.txt"
