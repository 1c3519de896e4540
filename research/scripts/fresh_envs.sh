#!/usr/bin/env bash
# Issue 20's fresh environments, each measured, fitted on its sweep alone and replayed by
# research/scripts/fresh_env.py (as root, on a quiet machine, one at a time; every phase resumes).
#   bash research/scripts/fresh_envs.sh spin    # the first three: Horovod's spinning wait in sweep and replay
#   bash research/scripts/fresh_envs.sh sleep   # the three judged after the fix: polling waits (docs/fresh-environments.md)
set -euo pipefail
cd "$(dirname "$0")/../.."
P="python research/scripts/fresh_env.py"
case "${1:-sleep}" in
  spin)
    $P --env fresh-3gbit --model vit_s16 --compute-ms 300 -- --bandwidth-gbit 3
    $P --env fresh-0.5gbit --model mobilenet_v2 --compute-ms 150 -- --bandwidth-gbit 0.5
    $P --env fresh-2x1-5gbit --model distilbert --compute-ms 300 -- --testbed-hosts 2 --ranks-per-host 1 --link-gbit 5
    ;;
  sleep)
    $P --env fresh-poll-2gbit --model vit_s16 --compute-ms 300 --wait sleep -- --bandwidth-gbit 2
    $P --env fresh-poll-0.75gbit --model mobilenet_v2 --compute-ms 150 --wait sleep -- --bandwidth-gbit 0.75
    $P --env fresh-poll-2x1-2gbit --model distilbert --compute-ms 300 --wait sleep -- --testbed-hosts 2 --ranks-per-host 1 --link-gbit 2
    ;;
esac
