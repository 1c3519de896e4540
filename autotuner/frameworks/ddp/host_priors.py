"""GPU priors of DDP's Reducer host cost: what real ``DistributedDataParallel`` adds to a training step on one GPU
beyond its bucket copies at the device's memory rate, per gradient and per bucket, from committed real-GPU records.

The records (``runs/gpu-profiles/h100-ddp/ddp-h100.json``, ``runs/gpu-profiles/h200-ddp/ddp-h200.json``, made by
``research/scripts/gpu_ddp_probe.py``; schema ``autotuner.gpu-ddp-probe/1``) time torchvision models (batch 64,
float32, SGD) without DDP ("plain") and under DDP's default, ``bucket_cap_mb`` 1 / 25 / 100, the view, the fp16
and bf16 hooks and ``bucket_cap_mb_list=[1, 4, 25]``, one rank over NCCL (no wire), 3 interleaved rounds each.
For each model and setting ``s`` (medians of the rounds, ms)::

    residual(s) = step(s) - step(plain) - device(s)
    residual(s) ~ per_tensor x T + per_bucket x B(s)          (non-negative least squares, scipy.optimize.nnls)

``T``: the model's gradients; ``B(s)``: DDP's own rebuilt buckets in that setting (its logging data,
``rebuilt_bucket_sizes``); ``device(s)``: the device's passes over the gradients' ``E`` elements at the rates the
same GPU's elementwise probe measured (``research/scripts/gpu_fp16_probe.py``, its largest size, ns per element;
torch 2.13 ``torch/csrc/distributed/c10d/reducer.cpp`` and
``torch/distributed/algorithms/ddp_comm_hooks/default_hooks.py``):

- the copy into the bucket (``mark_variable_ready_dense``: ``mul_out(bucket_view, grad, 1/world)`` without a hook,
  ``bucket_view.copy_(grad)`` with one; a float32 copy's rate, 8 B per element) in every setting: the probe's
  ``zero_grad(set_to_none=True)`` hands DDP a fresh gradient each step, so the view copies it in too;
- the copy back (``finalize_bucket_dense``: ``grad.copy_(bucket_view)``, the same rate) without the view;
- with the fp16 / bf16 hook (``_compress_hook``): ``buffer.to(dtype)`` (the cast down's rate),
  ``.div_(world_size)`` on the 2-byte buffer (the 16-bit add's rate x 4/6: 4 of its 6 B per element) and the
  decompress ``copy_`` (the cast up's rate).

The per-tensor term is everything DDP adds once per gradient that is not a pass over its bytes: autograd's
post-accumulate hook, ``mark_variable_ready``, the launch of the copy kernels; the per-bucket term what it adds
once per bucket: ``mark_bucket_ready``, the comm hook's call and future, NCCL's enqueue and its one-rank
collective (15-23 µs in these records, ``nccl_one_rank``), ``finalize_bucket_dense``. Each model is fitted alone
(its settings change ``B`` only: where they barely do, its per-bucket figure is weak) and all models together; the
models disagree (their rounds spread 10-20 % on the small models), so a prior is the pooled figure with the range of
the per-model ones beside it, never one per-model constant.

:func:`derive` is the pure computation (records in, the shipped JSON's dict out); ``scripts/gpu_host_priors.py``
writes it to :data:`PRIORS_FILE` (``--check`` compares), since ``runs/`` stays out of the wheel;
:func:`gpu_host_prior` reads the shipped file.
"""
from __future__ import annotations

import json
import statistics
from functools import lru_cache
from pathlib import Path

from .hostcost import ReducerHostCost

#: the shipped priors (written by scripts/gpu_host_priors.py from the records in :data:`RECORDS`)
PRIORS_FILE = Path(__file__).resolve().parent / "data" / "gpu_host_priors.json"
SCHEMA = "autotuner.gpu-host-priors/1"
#: the records the priors come from, relative to the repository root: the GPU (as :data:`autotuner.specs.GPUS`
#: names it) -> (DDP probe record, the same GPU's elementwise probe record)
RECORDS = {
    "H100-SXM": ("runs/gpu-profiles/h100-ddp/ddp-h100.json", "runs/gpu-profiles/h100-fp16/fp16-h100-2.json"),
    "H200": ("runs/gpu-profiles/h200-ddp/ddp-h200.json", "runs/gpu-profiles/h200-device/fp16-h200.json"),
}
#: the DDP probe's settings and what the device does per element in each (module docstring): copy in, copy back,
#: the 16-bit hook's dtype (None: no hook)
SETTINGS = {"default": (True, True, None), "cap1": (True, True, None), "cap25": (True, True, None),
            "cap100": (True, True, None), "list_1_4_25": (True, True, None), "view": (True, False, None),
            "fp16_hook": (True, True, "fp16"), "bf16_hook": (True, True, "bf16")}


def device_ns_per_elem(elementwise_record: dict) -> dict[str, float]:
    """The device's passes per gradient element (ns) from an elementwise probe record
    (``research/scripts/gpu_fp16_probe.py``, its largest size, where launches no longer count): ``copy``
    (float32 copy, 8 B), ``fp16_down`` / ``fp16_up`` / ``fp16_div`` and ``bf16_down`` / ``bf16_up`` /
    ``bf16_div`` (casts, 6 B; the in-place divide of the 16-bit buffer, 4 B at the 16-bit add's rate). A record
    without the bfloat16 ops (an older schema) lends the float16 ones (measured within 3 % of each other on the
    H100). Raises KeyError for a record without the float16 ops or the copy."""
    row = max(elementwise_record["elementwise"], key=lambda r: r["elements"])
    ns = {k: v["ns_per_elem"] for k, v in row.items() if isinstance(v, dict)}
    out = {"copy": ns["copy_fp32"], "fp16_down": ns["cast_down"], "fp16_up": ns["cast_up"],
           "fp16_div": ns["add_fp16"] * 4 / 6}
    out["bf16_down"] = ns.get("cast_down_bf16", ns["cast_down"])
    out["bf16_up"] = ns.get("cast_up_bf16", ns["cast_up"])
    out["bf16_div"] = ns.get("add_bf16", ns["add_fp16"]) * 4 / 6
    return out


def device_ms(setting: str, elements: int, ns: dict[str, float]) -> float:
    """The device's passes over ``elements`` gradient elements in DDP ``setting`` (a key of :data:`SETTINGS`), ms,
    at the rates ``ns`` (:func:`device_ns_per_elem`). Raises KeyError for another setting."""
    copy_in, copy_back, hook = SETTINGS[setting]
    per = ns["copy"] * (int(copy_in) + int(copy_back))
    if hook:
        per += ns[f"{hook}_down"] + ns[f"{hook}_div"] + ns[f"{hook}_up"]
    return per * elements * 1e-6


def fit_terms(rows: list[tuple[float, float, float]]) -> tuple[float, float]:
    """(per_tensor, per_bucket) >= 0, ms, minimising the squared residual of ``T x a + B x b = r`` over rows
    ``(T, B, r)``."""
    import numpy as np
    from scipy.optimize import nnls

    a = np.array([[t, b] for t, b, _ in rows], dtype=float)
    x, _ = nnls(a, np.array([r for _, _, r in rows], dtype=float))
    return float(x[0]), float(x[1])


def model_rows(ddp_record: dict, ns: dict[str, float]) -> list[dict]:
    """One row per model of a DDP probe record (schema ``autotuner.gpu-ddp-probe/1``): ``model``, ``tensors``,
    ``elements``, ``plain_ms`` (median of the rounds), per setting of :data:`SETTINGS` it holds ``buckets`` (DDP's
    rebuilt buckets; ValueError when the rounds disagree), ``step_ms`` (median), ``device_ms`` and ``residual_ms``;
    and the model's own fit, ``per_tensor_us`` and ``per_bucket_us`` (µs, non-negative least squares)."""
    out = []
    for m in ddp_record["ddp"]:
        plain = statistics.median(r["step_ms"] for r in m["settings"]["plain"])
        settings, fit_rows = {}, []
        for name, rounds in m["settings"].items():
            if name not in SETTINGS:
                continue
            nb = {len(r["ddp_logging"]["rebuilt_bucket_sizes"].split(",")) for r in rounds}
            if len(nb) != 1:
                raise ValueError(f"{m['model']} {name}: the rounds rebuilt {sorted(nb)} buckets")
            step = statistics.median(r["step_ms"] for r in rounds)
            dev = device_ms(name, m["elements"], ns)
            settings[name] = {"buckets": nb.pop(), "step_ms": round(step, 4), "device_ms": round(dev, 4),
                              "residual_ms": round(step - plain - dev, 4)}
            fit_rows.append((m["tensors"], settings[name]["buckets"], step - plain - dev))
        t, b = fit_terms(fit_rows)
        out.append({"model": m["model"], "tensors": m["tensors"], "elements": m["elements"],
                    "plain_ms": round(plain, 4), "settings": settings,
                    "per_tensor_us": round(t * 1e3, 3), "per_bucket_us": round(b * 1e3, 3)})
    return out


def _prior(models: list[dict], source: str) -> dict:
    """The pooled fit of ``models`` (rows of :func:`model_rows`) and the range of their own fits (µs)."""
    rows = [(m["tensors"], s["buckets"], s["residual_ms"]) for m in models for s in m["settings"].values()]
    t, b = fit_terms(rows)
    t, b = t * 1e3, b * 1e3
    ts = [m["per_tensor_us"] for m in models]
    bs = [m["per_bucket_us"] for m in models]
    return {"per_tensor_us": round(t, 3), "per_bucket_us": round(b, 3),
            "per_tensor_range_us": [round(min(ts + [t]), 3), round(max(ts + [t]), 3)],
            "per_bucket_range_us": [round(min(bs + [b]), 3), round(max(bs + [b]), 3)],
            "models": [m["model"] for m in models], "source": source}


def derive(records: dict[str, tuple[dict, dict, str, str]]) -> dict:
    """The shipped priors' JSON (schema :data:`SCHEMA`) from ``records``: GPU name -> (DDP probe record,
    elementwise probe record, the first's path, the second's path). Per GPU: the records' provenance, the rates
    (:func:`device_ns_per_elem`), every model's rows (:func:`model_rows`) and its prior; ``all``: the prior of
    every GPU's models together. Pure: no file is read."""
    gpus, every = {}, []
    for gpu, (ddp, elementwise, ddp_path, rates_path) in records.items():
        ns = device_ns_per_elem(elementwise)
        models = model_rows(ddp, ns)
        every += [m | {"model": f"{gpu} {m['model']}"} for m in models]
        gpus[gpu] = {"device": ddp["device"], "torch": ddp["torch"], "nccl": ddp.get("nccl"),
                     "recorded": ddp["recorded"], "record": ddp_path, "rates_record": rates_path,
                     "device_ns_per_elem": {k: round(v, 7) for k, v in ns.items()}, "models": models,
                     "prior": _prior(models, f"{ddp_path} ({len(models)} models, {ddp['device']}), copies at "
                                             f"{rates_path}'s rates")}
    paths = ", ".join(v[2] for v in records.values())
    return {"schema": SCHEMA, "made_by": "python scripts/gpu_host_priors.py", "gpus": gpus,
            "all": _prior(every, f"{paths} ({len(every)} model runs, {len(records)} GPUs), copies at each GPU's "
                                 "measured rates")}


@lru_cache(maxsize=1)
def load_priors(path: Path = PRIORS_FILE) -> dict:
    """The shipped priors' JSON (:func:`derive`'s dict). Raises OSError or ValueError for a missing or damaged
    file."""
    d = json.loads(Path(path).read_text())
    if d.get("schema") != SCHEMA:
        raise ValueError(f"{path}: schema {d.get('schema')!r}, expected {SCHEMA}")
    return d


def gpu_host_prior(gpu: str | None = None) -> ReducerHostCost:
    """The GPU prior of the Reducer's host cost (:class:`ReducerHostCost`, s per gradient and per bucket, with the
    range of the models' own fits) on ``gpu`` (a name or alias of :data:`autotuner.specs.GPUS`, e.g. "H100",
    "H200") where the records hold that GPU, else (None, or a GPU never measured) every measured GPU's models
    together; its ``source`` names the records (and, for an unmeasured GPU, that it is borrowed). Raises
    ScenarioError (one line) for a GPU name not in the table."""
    from ...specs import check_gpu

    name = check_gpu(gpu)
    d = load_priors()
    p = d["gpus"][name]["prior"] if name in d["gpus"] else d["all"]
    source = "GPU prior: " + p["source"]
    if name is not None and name not in d["gpus"]:
        source = f"GPU prior borrowed for {name} (never measured): " + p["source"]
    return ReducerHostCost(p["per_tensor_us"] * 1e-6, p["per_bucket_us"] * 1e-6, source,
                           tuple(x * 1e-6 for x in p["per_tensor_range_us"]),
                           tuple(x * 1e-6 for x in p["per_bucket_range_us"]))
