#!/bin/bash
# One lent-GPU run (the device tool; see DEVELOPERS.md): everything this project measures on a GPU, in one go.
#   - research/scripts/gpu_fp16_probe.py: casts and float16/bfloat16 adds at the device's memory bandwidth (issue 29)
#   - research/scripts/gpu_ddp_probe.py: what DDP's Reducer adds on one GPU with no wire, NCCL's one-rank floor (issue 30)
#   - `autotuner profile --device cuda`: the product's own CUDA path on real models (ResNet-50 fp32/amp, ResNet-101)
# Run from the repository root with .whl/ carried (pydantic, typer 0.29, platformdirs: the GPU image lacks them):
#   bash research/scripts/gpu_session.sh "$OUT"
# Writes into the folder given (at most 8 files: the device tool's limit); a step that fails is logged and the
# others still run.
set -u
out=${1:?usage: gpu_session.sh OUTDIR}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
  || { echo "wheel install failed"; exit 2; }
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
at() { python3 -c "import sys; from autotuner.cli import main; sys.exit(main())" "$@"; }
{
  date -u; nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
  python3 -c "import torch, torchvision; print('torch', torch.__version__, 'torchvision', torchvision.__version__)"
  echo "== fp16/bf16 elementwise"; time python3 research/scripts/gpu_fp16_probe.py --out "$out/fp16-h100-2.json" || echo "FAILED fp16 probe"
  echo "== autotuner profile --device cuda"
  at profile --model torchvision.models:resnet50 --input-shape 3,224,224 --batch-size 64 --device cuda \
     --out "$out/resnet50-cuda-fp32-b64.json" || echo "FAILED profile resnet50"
  at profile --model torchvision.models:resnet50 --input-shape 3,224,224 --batch-size 64 --device cuda --amp \
     --out "$out/resnet50-cuda-amp-b64.json" || echo "FAILED profile resnet50 amp"
  at profile --model torchvision.models:resnet101 --input-shape 3,224,224 --batch-size 64 --device cuda \
     --out "$out/resnet101-cuda-fp32-b64.json" || echo "FAILED profile resnet101"
  at profile --model torchvision.models:resnet50 --input-shape 3,224,224 --batch-size 64 --device cuda --threads 2 \
     --out "$out/bad.json"; echo "bad input exit: $?"
  echo "== DDP on one GPU"; time python3 research/scripts/gpu_ddp_probe.py --out "$out/ddp-h100.json" || echo "FAILED ddp probe"
  date -u
} 2>&1 | tee "$out/log.txt"
