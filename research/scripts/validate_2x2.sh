#!/usr/bin/env bash
# The whole real validation batch of runs/local-gloo-2x2 (issue 14), as root, on a quiet machine:
#   bash research/scripts/validate_2x2.sh            # the 2x2 batch (parts A-C), then the topology what-ifs (part D)
#   bash research/scripts/validate_2x2.sh 2x2        # only the 2x2 batch;  ... topo: only part D
#   ENV=local-gloo-2x2-poll WAIT=sleep bash research/scripts/validate_2x2.sh   # the env measured with --wait sleep,
#     its replay polling instead of spinning too (validate --replay-wait sleep; docs/validation.md says why)
# Every part appends trial by trial to runs/local-gloo-2x2/validation/<name>.jsonl and resumes when re-run.
# A: 8 knob configurations + Horovod's defaults, ResNet50 replay (300 ms compute), 2 repeats, interleaved;
#    the last configuration is the defaults with both hierarchical flags on (Gloo ignores them: docs/knobs.md).
# B, C: suggest's pick vs Horovod's defaults vs Horovod autotune and its best, 3 repeats: ResNet50, BERT-Medium.
# D: the 2x2 picks and the defaults on 2x1, 4x1 and 1x4 (predicted by the 2x2 fit for that shape).
# Wall times go to runs/local-gloo-2x2/validation/batch-times.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
ENV=${ENV:-local-gloo-2x2}
V=runs/$ENV/validation
mkdir -p "$V"
WHAT=${1:-all}
WAIT=${WAIT:-spin}
SUFFIX=${SUFFIX:-}
COMMON=(--env "$ENV" --compute-ms 300 --link-gbit 1 --replay-wait "$WAIT")
timed() {  # name, then the command
  local name=$1; shift
  local t0=$SECONDS
  "$@"
  echo "$name$SUFFIX $((SECONDS - t0)) s" >> "$V/batch-times.txt"
}
picks() {  # suggest's top pick for model $1 on the 2x2 fit, knobs only (the replay does not compress)
  autotuner suggest --model "$1" --env "$ENV" --compute-ms 300 --compression none --top 1 --json > "$V/pick-$1.json"
}
if [[ $WHAT == all || $WHAT == 2x2 ]]; then
  t0=$SECONDS
  timed A-knobs-resnet50 autotuner validate "${COMMON[@]}" --model resnet50 --testbed-hosts 2 --ranks-per-host 2 \
    --proposals runs/local-gloo-2x2/knob-sweep.json --no-autotune --repeats 2 --name knobs-resnet50$SUFFIX
  for m in resnet50 bert_medium; do
    picks $m
    timed "B/C-suggest-$m" autotuner validate "${COMMON[@]}" --model $m --testbed-hosts 2 --ranks-per-host 2 \
      --proposals "$V/pick-$m.json" --repeats 3 --name suggest-$m$SUFFIX
  done
  echo "2x2-batch-total$SUFFIX $((SECONDS - t0)) s" >> "$V/batch-times.txt"
fi
if [[ $WHAT == all || $WHAT == topo ]]; then
  for shape in "2 1" "4 1" "1 4"; do
    set -- $shape
    for m in resnet50 bert_medium; do
      [[ -f $V/pick-$m.json ]] || picks $m
      timed "D-topo-$1x$2-$m" autotuner validate "${COMMON[@]}" --model $m --testbed-hosts "$1" --ranks-per-host "$2" \
        --proposals "$V/pick-$m.json" --no-autotune --repeats 2 --name topo-$1x$2-$m$SUFFIX
    done
  done
fi
