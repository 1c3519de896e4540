#!/usr/bin/env bash
# Issue 30: a DDP env on 2 emulated hosts x 1 rank at 3 Gbit/s whose sweep, burst phase and replays are measured in
# one sitting (ddp-2x1-3gbit's sweep and replays are hours apart, and this testbed drifts ~5 % in an hour): the
# replays (ResNet-101, 11 settings, 10 steps x 5 interleaved repeats) predicted from this sweep alone.
# As root, on a quiet machine, alone (~25 min).
#   bash research/scripts/ddp_same_sitting.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
E=ddp-2x1-3gbit-b
SHAPE="--testbed-hosts 2 --ranks-per-host 1 --link-gbit 3"
autotuner ddp measure --env $E $SHAPE
autotuner ddp validate --env $E --model resnet101 --compute-ms 100 --steps 10 --warmup 3 --repeats 5 $SHAPE
