#!/usr/bin/env bash
# Issue 29 part 5: the below-knee bound's second form (autotuner/frameworks/horovod/fit/sweep.py bound_below_knee:
# below the knee no cheaper per byte than the segment from it; committed before this ran, written after
# fresh-poll-3gbit's MobileNetV2 1 MiB miss at -14.7 %) judged on two envs no fit has seen: fresh-poll-1.5gbit and
# fresh-poll-3.5gbit (one host, HTB on lo, ranks polling), each measured with every phase, fitted from its measured
# files alone, then MobileNetV2 (60 ms of compute) with fusion off, 1 MiB / 1 ms and cache off beside the defaults,
# 5 interleaved repeats, no timeline (research/scripts/below_knee_heldout.sh, unchanged, per env).
# Declared before it ran: each row judged as tests/test_small_responses.py judges every row (within 10 % or inside
# its repeats' range). The fit's output says whether the bound fired ("borrowed from the segment from the knee").
# The same rows are also predicted with the bound's first form (only a slope above the link borrows:
# research/scripts/below_knee_forms.py), a diagnosis of what the second form changed, not a second judgement.
# As root, alone on the machine (~25 min):  bash research/scripts/below_knee_second_form_heldout.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ENV=fresh-poll-1.5gbit G=1.5 bash research/scripts/below_knee_heldout.sh
ENV=fresh-poll-3.5gbit G=3.5 bash research/scripts/below_knee_heldout.sh
