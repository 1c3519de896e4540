#!/usr/bin/env bash
# Issue 29, fourth pass: fp16 on CPU ranks held out on layouts no fp16 replay had used, each beside the uncompressed
# defaults, 3 interleaved repeats, no timeline, each rank's own gradient values renewed every step (the replay since
# the fourth pass), predicted from the env's fp16 phase (runs/<env>/fp16.jsonl) and sweep alone. As root on a quiet
# machine. Records: runs/<env>/validation/fp16-<model>-new.jsonl
set -euo pipefail
cd "$(dirname "$0")/../.."
props=$(mktemp -d)
trap 'rm -rf "$props"' EXIT
echo '[{"config": {"fusion_threshold_bytes": 134217728, "cycle_time_ms": 1.0, "cache_capacity": 1024, "hierarchical_allreduce": false, "hierarchical_allgather": false}, "compression": "fp16"}]' > "$props/defaults.json"
common=(--replay-wait sleep --repeats 3 --no-autotune --steps 6 --warmup 2 --proposals "$props/defaults.json")
autotuner validate --env fresh-poll-2gbit --model resnet50 --bandwidth-gbit 2 --compute-ms 60 "${common[@]}" \
  --name fp16-resnet50-new
autotuner validate --env fresh-poll-1.25gbit --model mobilenet_v2 --bandwidth-gbit 1.25 --compute-ms 60 "${common[@]}" \
  --name fp16-mobilenet_v2-new
autotuner validate --env fresh-poll-0.75gbit --model resnet18 --bandwidth-gbit 0.75 --compute-ms 60 "${common[@]}" \
  --name fp16-resnet18-new
