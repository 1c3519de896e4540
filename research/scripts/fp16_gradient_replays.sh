#!/usr/bin/env bash
# Issue 29 (second pass): every committed fp16 replay again, with the replay's gradient-like values
# (autotuner/frameworks/horovod/replay.py GRADIENT_STD; the earlier replays allreduced zeros, whose float16 sum costs a CPU
# far less than real gradients'), each beside the defaults without compression, 3 interleaved repeats, no
# timeline, on each env's own recorded setup. Run as root on a quiet machine, after
# `python scripts/probe_phase.py --phase fp16 ...` and `autotuner fit runs/` (the predictions are held out: no
# fit reads validation records' step times). Records: runs/<env>/validation/<name>-gradients${NAME_SUFFIX}.jsonl
# (NAME_SUFFIX=-3 for issue 29's third pass: the fp16 phase timing fused responses).
set -euo pipefail
cd "$(dirname "$0")/../.."
props=$(mktemp -d)
trap 'rm -rf "$props"' EXIT
knobs() {  # fusion threshold (bytes), cycle time (ms) -> one fp16 proposal
  echo "{\"config\": {\"fusion_threshold_bytes\": $1, \"cycle_time_ms\": $2, \"cache_capacity\": 1024, \"hierarchical_allreduce\": false, \"hierarchical_allgather\": false}, \"compression\": \"fp16\"}"
}
echo "[$(knobs 134217728 1.0)]" > "$props/defaults.json"
echo "[$(knobs 134217728 1.0), $(knobs 83886080 40.1)]" > "$props/2x1.json"
echo "[$(knobs 134217728 1.0), $(knobs 4194304 0.5)]" > "$props/tune.json"
common=(--replay-wait sleep --repeats 3 --no-autotune --steps 6 --warmup 2)
autotuner validate --env fresh-poll-0.75gbit --model mobilenet_v2 --bandwidth-gbit 0.75 --compute-ms 60 \
  "${common[@]}" --proposals "$props/defaults.json" --name fp16-mobilenet_v2-gradients${NAME_SUFFIX:-}
autotuner validate --env fresh-poll-2gbit --model mobilenet_v2 --bandwidth-gbit 2 --compute-ms 60 \
  "${common[@]}" --proposals "$props/defaults.json" --name fp16-mobilenet_v2-gradients${NAME_SUFFIX:-}
autotuner validate --env fresh-poll-2gbit --model resnet18 --bandwidth-gbit 2 --compute-ms 60 \
  "${common[@]}" --proposals "$props/defaults.json" --name fp16-resnet18-gradients${NAME_SUFFIX:-}
autotuner validate --env fresh-poll-1.25gbit --model resnet18 --bandwidth-gbit 1.25 --compute-ms 60 \
  "${common[@]}" --proposals "$props/tune.json" --name fp16-resnet18-gradients${NAME_SUFFIX:-}
autotuner validate --env fresh-poll-2x1-3gbit --model resnet18 --testbed-hosts 2 --ranks-per-host 1 --link-gbit 3 \
  --compute-ms 100 "${common[@]}" --proposals "$props/2x1.json" --name fp16-resnet18-2x1-gradients${NAME_SUFFIX:-}
