#!/bin/bash
# The second (short) device call of 2026-11-27 (see research/scripts/device_ddp_env.sh): the first-touch probe on the lent
# machine's cores (1 and 4 processes), then `autotuner ddp validate` resumed on ddp-1x4-16core's committed record
# (the first call ran out of time after 27 of 33 trials; a resumed run skips the trials it holds).
#   bash research/scripts/device_ddp_resume.sh      (from the repository root, .whl/ carried, $OUT set by the device tool)
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{
date -u
python3 research/scripts/first_touch_probe.py --procs 1 --out "$OUT/first-touch-x1.json"
python3 research/scripts/first_touch_probe.py --procs 4 --out "$OUT/first-touch-x4.json"
mkdir -p "$OUT/ddp-1x4-16core/ddp-validation"
cp runs/ddp-1x4-16core/ddp-sweep.jsonl runs/ddp-1x4-16core/ddp-burst.jsonl "$OUT/ddp-1x4-16core/"
cp runs/ddp-1x4-16core/ddp-validation/resnet101.jsonl "$OUT/ddp-1x4-16core/ddp-validation/"
date -u
python3 -c "import sys; from autotuner.cli import main; sys.exit(main())" ddp validate --env ddp-1x4-16core --model resnet101 --compute-ms 100 --np 4 --runs-dir "$OUT" --steps 5 --warmup 2 --repeats 3
date -u
} 2>&1 | tee "$OUT/log2.txt"
