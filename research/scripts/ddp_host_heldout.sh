#!/usr/bin/env bash
# The held-out check of the Reducer's host term (autotuner/frameworks/ddp/hostcost.py): fresh DDP envs at link rates
# no runs/ddp-* env used, each measured and checked in one sitting:
#   1. autotuner ddp measure: every phase, the host phase among them (what the Reducer adds per gradient and per
#      bucket, fitted from that phase alone);
#   2. autotuner ddp validate: ResNet-101 (314 tensors, a layout no host fit saw) under the 11 default settings (DDP's
#      default, 1, 4, 10, 25, 50, 100 and 200 MiB, [1, 4, 25], the view, the fp16 hook), 3 interleaved rounds, each
#      round first running the replay without DDP (whose median step is the compute every prediction takes);
#      then DenseNet-121 (364 tensors but 32 MB, research/scripts/densenet121_layout.py) the same way at 300 ms of
#      compute, where the backward, not the wire, sets the step and the host work is a visible share of it;
#   3. the rows with and without the term: python research/scripts/ddp_host_heldout.py <env>...
# Every real job runs alone (the shared test lock). Usage (root: the shaped loopback; the venv active):
#   bash research/scripts/ddp_host_heldout.sh ddp-1.75gbit:1.75 ddp-3.5gbit:3.5
set -euo pipefail
cd "$(dirname "$0")/../.."
LOCK=/tmp/autotuner-tests.lock
DENSENET=$(mktemp -d)/densenet121.json
python research/scripts/densenet121_layout.py "$DENSENET"
for spec in "${@:-ddp-1.75gbit:1.75 ddp-3.5gbit:3.5}"; do
  for one in $spec; do
    env=${one%%:*}; gbit=${one#*:}
    echo "== $env at $gbit Gbit/s: $(date -u +%FT%TZ)"
    flock "$LOCK" autotuner ddp measure --env "$env" --np 2 --link-gbit "$gbit" --runs-dir runs
    flock "$LOCK" autotuner ddp validate --env "$env" --model resnet101 --np 2 --link-gbit "$gbit" \
      --compute-ms 100 --repeats 3 --steps 5 --warmup 3 --runs-dir runs
    flock "$LOCK" autotuner ddp validate --env "$env" --model "$DENSENET" --np 2 --link-gbit "$gbit" \
      --compute-ms 300 --repeats 3 --steps 5 --warmup 3 --runs-dir runs
    echo "== $env done: $(date -u +%FT%TZ)"
  done
done
python research/scripts/ddp_host_heldout.py "${@:-ddp-1.75gbit ddp-3.5gbit}"
