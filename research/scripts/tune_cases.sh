#!/usr/bin/env bash
# Issue 22's head-to-head: `autotuner tune` against Horovod's default autotune on three (env, model) cases
# that no fit has used (each env fitted on its own `measure` sweep alone; none of these layouts was ever run
# there), then fp16 searched for real on a fourth. Root is needed (emulated links). Records:
#   runs/<env>/tune/h2h-<model>.jsonl              tune's trials
#   runs/<env>/validation/h2h-<model>-h2h.jsonl   the default autotune run + defaults / tune / autotune finals
# Reproduce: bash research/scripts/tune_cases.sh   (about 40 minutes on 2 cores; re-running resumes)
set -euo pipefail
cd "$(dirname "$0")/../.."
. .venv/bin/activate
common=(--replay-wait sleep --steps 6 --warmup 2 --budget-steps 240 --repeats 3)
autotuner tune --env fresh-poll-0.75gbit --model mnist --compute-ms 30 --bandwidth-gbit 0.75 "${common[@]}" \
    --against-autotune --name h2h-mnist
autotuner tune --env fresh-poll-2gbit --model mobilenet_v2 --compute-ms 60 --bandwidth-gbit 2 "${common[@]}" \
    --against-autotune --name h2h-mobilenet_v2
autotuner tune --env fresh-poll-2x1-3gbit --model mobilenet_v2 --compute-ms 60 --testbed-hosts 2 \
    --ranks-per-host 1 --link-gbit 3 "${common[@]}" --against-autotune --name h2h-mobilenet_v2
autotuner tune --env fresh-poll-1.25gbit --model resnet18 --compute-ms 60 --bandwidth-gbit 1.25 "${common[@]}" \
    --compression none,fp16 --name fp16-resnet18
