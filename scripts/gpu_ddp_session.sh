#!/bin/bash
# DDP on one lent GPU, end to end (the device tool; DEVELOPERS.md), about 4-5 minutes of the GPU after its start:
#   1. `autotuner ddp measure --device cuda --np 1`: the product's own probes on the GPU over NCCL (one rank: the
#      sweep's copies and casts at the device's rates, NCCL's one-rank floor; the burst phase; the host phase: what
#      DDP's Reducer adds per gradient and per bucket, fitted from that phase alone);
#   2. scripts/gpu_ddp_check.py predict: four models' one-GPU DDP overheads (DDP's step less the plain step) under
#      DDP's default, 1 MiB, 100 MiB, the view and the fp16 hook, from that env's host phase and from the shipped GPU
#      prior (autotuner/frameworks/ddp/data/gpu_host_priors.json), written before any model runs;
#   3. research/scripts/gpu_ddp_probe.py: the same models and settings measured with real DistributedDataParallel
#      (torchvision, batch 64, 3 interleaved rounds);
#   4. scripts/gpu_ddp_check.py compare: predictions against measurements, DDP's rebuilt buckets against the
#      simulator's, and each model predicted from a host fit on the other three (held out).
# Everything lands in OUT (at most 8 files, two folders down: the device tool's limits) for runs/gpu-profiles/:
#   OUT/log.txt, OUT/check.json, OUT/ddp-gpu.json, OUT/runs/gpu1/ddp-*.jsonl
# Run from the repository root, with .whl/ carried where the GPU image lacks pydantic/typer/platformdirs:
#   bash scripts/gpu_ddp_session.sh "$OUT"
# DEVICE=cpu runs the same steps on CPU ranks (2 ranks, Gloo), a dry run of the script itself: its figures mean
# nothing and the model step fails without torchvision (logged, the others still run).
set -u
out=${1:?usage: gpu_ddp_session.sh OUTDIR}
device=${DEVICE:-cuda}
env_name=gpu1
models=resnet50,resnet101,vgg16,mobilenet_v2
settings=default,cap1,cap100,view,fp16_hook
mkdir -p "$out/runs"
. research/scripts/device_common.sh  # `at` (the CLI from this tree), unbuffered output, carried wheels
if [ "$device" = cuda ]; then np=1; cpu_only=(); else np=2; cpu_only=(--first-touch-rounds 0 --cpu-rounds 0); fi
{
  date -u
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo "no GPU"
  python3 -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available())"
  python3 -c "import torchvision; print('torchvision', torchvision.__version__)" 2>/dev/null || echo "no torchvision"

  echo "== 1. autotuner ddp measure --device $device --np $np"; date -u
  host=()
  if at ddp measure --help | grep -q -- --host-rounds; then
    host=(--host-rounds 1)
  else
    echo "NOTE: this tree's ddp measure has no host phase (--host-rounds): step 2 predicts from the prior alone"
  fi
  time timeout 240 python3 -c "import sys; from autotuner.cli import main; sys.exit(main())" \
    ddp measure --env "$env_name" --np "$np" --device "$device" --runs-dir "$out/runs" \
    --sweep-rounds 1 --repeats 5 --burst-rounds 1 "${host[@]}" "${cpu_only[@]}" || echo "FAILED ddp measure (exit $?)"

  echo "== 2. predict (before any model runs)"; date -u
  timeout 120 python3 scripts/gpu_ddp_check.py predict --env-dir "$out/runs/$env_name" --models "$models" \
    --settings "$settings" --out "$out/check.json" || echo "FAILED predict (exit $?)"

  echo "== 3. real DDP on the GPU: $models x plain,$settings x 3 rounds"; date -u
  time timeout 300 python3 research/scripts/gpu_ddp_probe.py --out "$out/ddp-gpu.json" --device "$device" \
    --models "$models" --settings "$settings" --rounds 3 --no-floor || echo "FAILED gpu_ddp_probe (exit $?)"

  echo "== 4. compare"; date -u
  timeout 120 python3 scripts/gpu_ddp_check.py compare --check "$out/check.json" --measured "$out/ddp-gpu.json" \
    || echo "FAILED compare (exit $?)"
  date -u
  find "$out" -type f | sort
} 2>&1 | tee "$out/log.txt"
