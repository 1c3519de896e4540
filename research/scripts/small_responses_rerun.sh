#!/usr/bin/env bash
# Issue 29, part 5, noise or model: the like-with-like small-response misses named in tests/test_small_responses.py
# (MISSED) measured again, without Horovod's timeline, 5 interleaved repeats each beside Horovod's defaults, with
# each record's own replay setup; the earlier records are kept, the new ones go to a file of their own.
#   - fresh-poll-2x1-3gbit, vit_s16: 1 MiB / 1 ms (+14.0 % in fresh-vit_s16-nt.jsonl), fusion off, and
#     4 MiB / 5 ms / cache off (the timeline-ran autotune_best of fresh-vit_s16.jsonl, never run without it)
#   - fresh-2x1-5gbit, distilbert: cache off (-14.4 % in small-distilbert-nt.jsonl), fusion off, 1 MiB
# As root (emulated hosts), alone on the machine (~10 min):  bash research/scripts/small_responses_rerun.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
P1=$(mktemp); P2=$(mktemp)
trap 'rm -f "$P1" "$P2"' EXIT
echo '[{"fusion_threshold_mb": 1, "cycle_time_ms": 1}, {"fusion_threshold_mb": 0, "cycle_time_ms": 1},
 {"fusion_threshold_mb": 4, "cycle_time_ms": 5, "cache_capacity": 0}]' > "$P1"
echo '[{"fusion_threshold_mb": 128, "cycle_time_ms": 1, "cache_capacity": 0}, {"fusion_threshold_mb": 0, "cycle_time_ms": 1},
 {"fusion_threshold_mb": 1, "cycle_time_ms": 1}]' > "$P2"
V="autotuner validate --no-autotune --repeats 5 --compute-ms 300 --steps 6 --warmup 2 --testbed-hosts 2 --ranks-per-host 1"
$V --proposals "$P1" --env fresh-poll-2x1-3gbit --model vit_s16 --link-gbit 3 --replay-wait sleep --name small-vit_s16-rerun
$V --proposals "$P2" --env fresh-2x1-5gbit --model distilbert --link-gbit 5 --name small-distilbert-rerun
