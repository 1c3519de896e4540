#!/usr/bin/env bash
# Issue 29, part 5: the small-response configurations (fusion off, 1 MiB, cache off) and the defaults replayed
# WITHOUT Horovod's timeline (validate's default since issue 29) on the fresh envs whose committed replays all ran
# with it, with each env's own replay setup (runs/<env>/validation/fresh-<model>.jsonl); 3 interleaved repeats.
# Run after the burst phase was measured and the models refitted (the fit never reads validation/).
#   bash research/scripts/small_responses_nt.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
P=$(mktemp)
echo '[{"fusion_threshold_mb": 0, "cycle_time_ms": 1}, {"fusion_threshold_mb": 1, "cycle_time_ms": 1},
 {"fusion_threshold_mb": 128, "cycle_time_ms": 1, "cache_capacity": 0}]' > "$P"
V="autotuner validate --no-autotune --proposals $P --repeats 3"
$V --env fresh-0.5gbit --model mobilenet_v2 --compute-ms 150 --bandwidth-gbit 0.5 --name small-mobilenet_v2-nt
$V --env fresh-1.5gbit --model vit_s16 --compute-ms 300 --bandwidth-gbit 1.5 --name small-vit_s16-nt
$V --env fresh-3gbit --model vit_s16 --compute-ms 300 --bandwidth-gbit 3 --name small-vit_s16-nt
$V --env fresh-2x1-5gbit --model distilbert --compute-ms 300 --testbed-hosts 2 --ranks-per-host 1 --link-gbit 5 \
   --name small-distilbert-nt
$V --env fresh-poll-2x1-2gbit --model distilbert --compute-ms 300 --replay-wait sleep --testbed-hosts 2 \
   --ranks-per-host 1 --link-gbit 2 --name small-distilbert-nt
rm -f "$P"
