#!/usr/bin/env bash
# Issue 29 part 5: the below-knee bound (autotuner/frameworks/horovod/fit/sweep.py bound_below_knee, committed
# before this ran, written after fresh-poll-2.75gbit's MobileNetV2 fusion off missed at -15.9 %) judged on an env no
# fit has seen: fresh-poll-3gbit (one host, 3 Gbit/s HTB, ranks polling), measured with every phase, fitted from its
# measured files alone, then MobileNetV2 (60 ms of compute) with fusion off, 1 MiB / 1 ms and cache off beside the
# defaults, 5 interleaved repeats, no timeline. Declared: each row judged as tests/test_small_responses.py judges
# every row (within 10 % or inside its repeats' range); the fit's output says whether the bound fired (it fires
# only where the sweep's spans below the knee give a busbw above the link's 3 Gbit/s).
# As root, alone on the machine (~12 min):  bash research/scripts/below_knee_heldout.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ENV=${ENV:-fresh-poll-3gbit}; G=${G:-3}
autotuner measure --env "$ENV" --bandwidth-gbit "$G" --wait sleep --runs-dir runs
python -c "import sys; sys.path.insert(0, 'research/scripts'); import fresh_env; fresh_env.fit_alone('$ENV')"
P=$(mktemp)
trap 'rm -f "$P"' EXIT
echo '[{"fusion_threshold_mb": 0, "cycle_time_ms": 1}, {"fusion_threshold_mb": 1, "cycle_time_ms": 1},
 {"fusion_threshold_mb": 128, "cycle_time_ms": 1, "cache_capacity": 0}]' > "$P"
autotuner validate --no-autotune --repeats 5 --compute-ms 60 --steps 6 --warmup 2 --replay-wait sleep \
  --proposals "$P" --env "$ENV" --model mobilenet_v2 --bandwidth-gbit "$G" --name small-mobilenet_v2-nt --runs-dir runs
