#!/bin/bash
# Issue 30, the first-touch question on ddp-1x4-16core (docs/ddp.md, "An uncontended machine"), on a lent device
# machine of the kind that env was measured on (nvidia-h200: 16 CPU cores; the device tool, DEVELOPERS.md).
# Three sets of real DDP replays of ResNet-101 on 4 Gloo CPU ranks, each trial recording rank 0's minor page faults
# per step (the replay's minor_faults_per_step) and the MALLOC_* variables it ran with (malloc_env):
#   A  resnet101-faults  100 ms compute (the env's records), glibc's defaults: DDP's default, 1 MiB, the view, x1
#   B  resnet101-notrim  the same settings x2 with MALLOC_TRIM_THRESHOLD_/MALLOC_MMAP_THRESHOLD_ set so that glibc
#                        keeps freed gradient pages (0 faults in research/scripts/first_touch_probe.py here and there)
#   C  resnet101-300ms   300 ms compute (the backward's 178 MB of gradient writes fit inside its 200 ms), glibc's
#                        defaults: DDP's default, 1 MiB, 200 MiB, the view, the fp16 hook, x3 interleaved
# If the held gradients' re-faults are what the simulator misses at 100 ms, B's DDP default comes down to the view's
# gap the simulator predicts, and C is predicted as well as the 2-host envs.
#   bash research/scripts/device_ddp_faults.sh OUTDIR [small]      (small: resnet18, 2 ranks, 1 step: a dry run here)
set -u
out=${1:?usage: device_ddp_faults.sh OUTDIR [small]}
scale=${2:-full}
env_name=ddp-1x4-16core
mkdir -p "$out/$env_name/ddp-validation"
. research/scripts/device_common.sh
cp "runs/$env_name/ddp-sweep.jsonl" "runs/$env_name/ddp-burst.jsonl" "$out/$env_name/"
if [ "$scale" = small ]; then
  M="--model resnet18 --np 2 --steps 1 --warmup 1"; RA=1; RB=1; RC=1
else
  M="--model resnet101 --np 4 --steps 5 --warmup 2"; RA=1; RB=2; RC=3
fi
three=/tmp/ddp-faults-settings.json five=/tmp/ddp-300ms-settings.json
echo '[{"bucket_cap_mb": 1}, {"gradient_as_bucket_view": true}]' > $three
echo '[{"bucket_cap_mb": 1}, {"bucket_cap_mb": 200}, {"gradient_as_bucket_view": true},
       {"comm_hook": "fp16_compress"}]' > $five
{
  date -u; nproc; grep -m1 "model name" /proc/cpuinfo; uname -r; ldd --version | head -1
  echo "== A: 100 ms, glibc defaults"
  at ddp validate --env $env_name $M --compute-ms 100 --name resnet101-faults --proposals $three --repeats $RA \
    --runs-dir "$out" || echo "FAILED A"
  echo "== B: 100 ms, glibc keeps freed pages"; date -u
  MALLOC_TRIM_THRESHOLD_=4000000000 MALLOC_MMAP_THRESHOLD_=4000000000 \
    at ddp validate --env $env_name $M --compute-ms 100 --name resnet101-notrim --proposals $three --repeats $RB \
    --runs-dir "$out" || echo "FAILED B"
  echo "== C: 300 ms, glibc defaults"; date -u
  at ddp validate --env $env_name $M --compute-ms 300 --name resnet101-300ms --proposals $five --repeats $RC \
    --runs-dir "$out" || echo "FAILED C"
  date -u
} 2>&1 | tee "$out/faults-log.txt"
