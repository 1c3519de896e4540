#!/usr/bin/env bash
# A fresh DDP environment in one sitting, for the cpu phase's held-out check (issue 30; docs/ddp.md, "Compute beside
# the collectives"): `ddp measure` with every phase (sweep, burst, first-touch, cpu), the user's script profiled
# (examples/train_ddp.py's transformer, one torch thread, 2 copies computing at once), then `ddp validate` of the
# script at 7 settings x 3 interleaved repeats, predicted from the env's own phases alone.
#   bash research/scripts/ddp_cpu_env.sh ENV GBIT [HOSTS]   (as root; e.g. ddp-3gbit 3, or ddp-2x1-2gbit 2 2: HOSTS emulated
#                                                   hosts of one rank each, joined by GBIT links)
set -euo pipefail
cd "$(dirname "$0")/../.."
ENV=${1:?env name}; GBIT=${2:?link Gbit/s}; HOSTS=${3:-}
if [ -n "$HOSTS" ]; then SHAPE=(--testbed-hosts "$HOSTS" --ranks-per-host 1 --link-gbit "$GBIT"); else
  SHAPE=(--np 2 --bandwidth-gbit "$GBIT"); fi
REC=docs/records/train-$ENV
mkdir -p "$REC"
autotuner ddp measure --env "$ENV" "${SHAPE[@]}" --runs-dir runs
PYTHONPATH=examples autotuner profile --model train_horovod:build_model --input-shape 64,80 --batch-size 16 \
    --threads 1 --concurrent 2 --out "$REC/layout.json"
cat > "$REC/proposals.json" <<'JSON'
[{"bucket_cap_mb": null}, {"bucket_cap_mb": 1}, {"bucket_cap_mb": 4}, {"bucket_cap_mb": 10}, {"bucket_cap_mb": 25},
 {"bucket_cap_mb": null, "comm_hook": "fp16_compress"}, {"bucket_cap_mb": null, "gradient_as_bucket_view": true}]
JSON
autotuner ddp validate --env "$ENV" --model "$REC/layout.json" --proposals "$REC/proposals.json" --name train-ddp-script \
    --steps 10 --warmup 4 --repeats 3 "${SHAPE[@]}" --runs-dir runs -- python examples/train_ddp.py
