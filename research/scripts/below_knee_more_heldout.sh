#!/usr/bin/env bash
# Issue 29 part 5: the below-knee bound's second form (sweep.bound_below_knee, a2fdff1) judged on two more envs no
# fit has seen, after its first two held-out envs (research/scripts/below_knee_second_form_heldout.sh: all 8 rows within 10 %;
# the form fired on one of them, fresh-poll-3.5gbit, where it moved MobileNetV2's fusion off +11.4 -> +1.9 %):
# fresh-poll-4gbit and fresh-poll-2.2gbit (one host, HTB on lo, ranks polling), each measured with every phase, fitted
# from its measured files alone, then MobileNetV2 (60 ms of compute) with fusion off, 1 MiB / 1 ms and cache off beside
# the defaults, 5 interleaved repeats, no timeline (research/scripts/below_knee_heldout.sh, unchanged, per env).
# Declared before it ran (nothing in the fit changed since a2fdff1): each row judged as tests/test_small_responses.py
# judges every row (within 10 % or inside its repeats' range); research/scripts/below_knee_forms.py for the first form beside.
# As root, alone on the machine (~25 min):  bash research/scripts/below_knee_more_heldout.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
ENV=fresh-poll-4gbit G=4 bash research/scripts/below_knee_heldout.sh
ENV=fresh-poll-2.2gbit G=2.2 bash research/scripts/below_knee_heldout.sh
