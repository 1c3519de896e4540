#!/usr/bin/env bash
# Issue 30: the 2-host DDP env's replays again, each setting's median over more steps and repeats (15 steps x 5
# interleaved repeats instead of 5 x 3), to tell the simulator's misses on ddp-2x1-3gbit from the testbed's noise.
# The sweep and its fit are unchanged (no replay enters the fit). As root, on a quiet machine, alone (~18 min).
#   bash research/scripts/ddp_long_replays.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
autotuner ddp validate --env ddp-2x1-3gbit --model resnet101 --compute-ms 100 --steps 15 --warmup 3 --repeats 5 \
  --testbed-hosts 2 --ranks-per-host 1 --link-gbit 3 --name resnet101-long
