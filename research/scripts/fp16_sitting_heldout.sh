#!/usr/bin/env bash
# Issue 29: the fp16 borrowing rule (autotuner.fit.collective.borrow_fp16_sum, committed before this ran) judged on
# two envs no fit had seen, measured in one sitting on this machine: a 2.25 Gbit/s env, whose fp16 phase is
# expected to pin the float16 sum, then a 1 Gbit/s one, whose phase may not (the sum a small difference of two long
# allreduces). Both fitted from their measured files alone, side by side (research/scripts/fresh_env.py fit_alone with
# siblings: the slow env may borrow only from the other), then on each ResNet-18 and MobileNetV2 replayed with fp16
# at Horovod's defaults beside the uncompressed defaults, 3 interleaved repeats, no timeline, each rank's own
# gradient values renewed every step. As root, alone on the machine (~35 min):
#   bash research/scripts/fp16_sitting_heldout.sh
# Records: runs/<env>/ (measure's), runs/<env>/validation/fp16-<model>-sitting.jsonl; the borrowed figure in the
# slow env's model file (fit.fp16.borrowed).
set -euo pipefail
cd "$(dirname "$0")/../.."
SIB=${SIB:-fresh-poll-2.25gbit}; SIB_G=${SIB_G:-2.25}
SLOW=${SLOW:-fresh-poll-1gbit}; SLOW_G=${SLOW_G:-1}
autotuner measure --env "$SIB" --bandwidth-gbit "$SIB_G" --wait sleep --runs-dir runs
autotuner measure --env "$SLOW" --bandwidth-gbit "$SLOW_G" --wait sleep --runs-dir runs
python -c "import sys; sys.path.insert(0, 'research/scripts'); import fresh_env; fresh_env.fit_alone('$SLOW', siblings=('$SIB',))"
props=$(mktemp -d)
trap 'rm -rf "$props"' EXIT
echo '[{"config": {"fusion_threshold_bytes": 134217728, "cycle_time_ms": 1.0, "cache_capacity": 1024, "hierarchical_allreduce": false, "hierarchical_allgather": false}, "compression": "fp16"}]' > "$props/defaults.json"
common=(--replay-wait sleep --repeats 3 --no-autotune --steps 6 --warmup 2 --proposals "$props/defaults.json")
for eg in "$SLOW:$SLOW_G" "$SIB:$SIB_G"; do
  for m in resnet18 mobilenet_v2; do
    autotuner validate --env "${eg%%:*}" --model "$m" --bandwidth-gbit "${eg##*:}" --compute-ms 60 "${common[@]}" \
      --name "fp16-$m-sitting" --runs-dir runs
  done
done
