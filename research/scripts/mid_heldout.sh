#!/usr/bin/env bash
# Issue 29, part 5: the mid-size rule judged on an env no fit had seen (docs/accuracy.md, "Mid-size responses back
# to back"). The rule (fit.sweep.mid_response) was committed before this env was measured; the env is measured by
# `autotuner measure` (every phase, the mid-size burst phase included), fitted on its measured files alone
# (research/scripts/fresh_env.py's fit_alone: never its replays), then vit_s16 and distilbert are replayed WITHOUT the
# timeline, 5 interleaved repeats, at the small-response configurations, beside Horovod's defaults.
# As root (emulated hosts), alone on the machine (~25 min):  bash research/scripts/mid_heldout.sh [SUFFIX]
# SUFFIX names a later sitting's replay files (small-<model>-nt<SUFFIX>.jsonl). The first sitting's measure records,
# taken while other work loaded the machine (load_avg_1m 3.5-4.0 on 2 cores in its cpu, trickle, idle, burst and
# step phases), are kept in runs/fresh-poll-2x1-4gbit/experiments/first-sitting/; its replays in validation/.
set -euo pipefail
cd "$(dirname "$0")/../.."
# ENV, TB (the testbed options measure and validate share) and MODELS ("layout:compute-ms ...") name another env:
#   ENV=fresh-poll-2.5gbit TB="--bandwidth-gbit 2.5" MODELS="vit_s16:300 mobilenet_v2:150" bash research/scripts/mid_heldout.sh
ENV=${ENV:-fresh-poll-2x1-4gbit}
TB=${TB:-"--testbed-hosts 2 --ranks-per-host 1 --link-gbit 4"}
MODELS=${MODELS:-"vit_s16:300 distilbert:300"}
autotuner measure --env "$ENV" $TB --wait sleep --runs-dir runs
python -c "import sys; sys.path.insert(0, 'research/scripts'); import fresh_env; fresh_env.fit_alone('$ENV')"
P=$(mktemp)
trap 'rm -f "$P"' EXIT
echo '[{"fusion_threshold_mb": 0, "cycle_time_ms": 1}, {"fusion_threshold_mb": 1, "cycle_time_ms": 1},
 {"fusion_threshold_mb": 4, "cycle_time_ms": 5, "cache_capacity": 0}, {"fusion_threshold_mb": 128, "cycle_time_ms": 1, "cache_capacity": 0},
 {"fusion_threshold_mb": 8, "cycle_time_ms": 2}]' > "$P"
V="autotuner validate --no-autotune --repeats 5 --steps 6 --warmup 2 --replay-wait sleep $TB --runs-dir runs"
for mc in $MODELS; do
  $V --proposals "$P" --env "$ENV" --model "${mc%%:*}" --compute-ms "${mc##*:}" --name "small-${mc%%:*}-nt${1:-}"
done
