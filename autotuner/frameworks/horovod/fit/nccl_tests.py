"""Fit an environment whose measurements are nccl-tests ``all_reduce_perf`` runs (``format =
"nccl-tests"``; how to produce them: docs/how-to/nccl-tests.md).

Input (env.toml, :class:`autotuner.schemas.NcclTestsEnv`): ``source``, the run across all
``nodes`` x ``gpus_per_node`` ranks (or the one-node run when ``nodes`` is 1), and optionally
``intra_source``, a run on the ``gpus_per_node`` GPUs of one node. Both are read by
:mod:`autotuner.readers.nccl_tests` (stdout table or ``-J`` JSON).

What is fitted, per tier (inter-node from ``source``, intra-node from ``intra_source``):

- the rank count of the file (its ``#  Rank`` lines, or the JSON device list) must equal the
  tier's: nodes x gpus_per_node for ``source``, gpus_per_node for ``intra_source``; otherwise
  FitError. Hosts that do not match the cluster shape are named in ``problems`` (host names can
  repeat across containers, so that is not an error).
- ``T(n) = a + b·n`` on the out-of-place column (time per allreduce, µs, turned to s; n in
  bytes): :func:`autotuner.fit.regression.fit_linear`, relative residuals, every size of the
  sweep weighted alike (a ``-f 2`` sweep is geometric, so every decade of sizes counts the
  same), then, where the sweep allows, two such lines split at a knee
  (:func:`autotuner.fit.regression.fit_piecewise`): NCCL changes protocol with size (LL, LL128,
  Simple), so small messages have a lower latency and a lower bandwidth than large ones.
  Each line maps to a ring tier by :meth:`autotuner.model.costmodel.Tier.from_linear`:
  alpha = a / (2(p-1)) per ring step, B = 2(p-1)/(p·b) = the asymptotic busbw of
  nccl-tests (src/all_reduce.cu ``AllReduceGetBw``: busbw = algbw x 2(p-1)/p; doc/PERFORMANCE.md).

What nccl-tests cannot measure is borrowed, and said so in the model's ``fit.borrowed``:

- Horovod's negotiation (controller over MPI or Gloo on the host): ``ctrl_op_us`` = the fitted
  allreduce time of 64 bytes on all ranks, as the other fitters do
  (:func:`autotuner.frameworks.horovod.fit.fitters._negotiation_for`);
- the fusion-buffer copy rate: :data:`autotuner.frameworks.horovod.fit.fitters.GPU_MEMCPY_BPS` (a V100 figure);
- the device<->host copy of hierarchical allreduce: :data:`autotuner.frameworks.horovod.fit.fitters.PCIE3_BPS`.

The backend is NCCL, so collectives are asynchronous to Horovod's background loop
(:func:`autotuner.frameworks.horovod.fit.fitters._async`); ``cluster.backend`` is written as ``"nccl"`` when
env.toml leaves it out. No workload is fitted (nccl-tests trains no model): ``simulate``
and ``suggest`` need ``--compute-ms``. With ``nodes`` = 1 the one tier serves as both the
intra- and the inter-node tier (a ``--nodes`` what-if is then not measured: named in
``fit.notes``); with ``nodes`` > 1 and no ``intra_source``, the inter tier is used inside a
node too (:class:`autotuner.model.costmodel.CostModel`).

Raises FitError (rank count, fewer than 2 sizes, time not growing with size),
:class:`autotuner.errors.NcclTestsError` (a file that cannot be read or a bad row: one line
naming file:line), KnobError (knobs in env.toml).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import FitError
from ..knobs import MIB
from ....model.costmodel import Cluster, CostModel, Tier
from ....readers.nccl_tests import AllReducePerf, read_all_reduce_perf
from ..readers.runs import EnvData
from .fitters import GPU_MEMCPY_BPS, PCIE3_BPS, _async, _model_dict, _negotiation_for, run_config
from ....fit.regression import fit_linear, fit_piecewise, mape, r_squared

#: bytes of the tiny allreduce that stands for one negotiation collective (as _negotiation_for)
CTRL_OP_BYTES = 64


def _read(env: EnvData, key: str) -> AllReducePerf:
    name = env.meta[key]
    path = env.path / name
    if not path.is_file():
        raise FitError(f"{env.path / 'env.toml'}: {key}: {name!r}: file not found ({path})")
    return read_all_reduce_perf(path, f"{env.path.name}/{name}")


def _check_ranks(env: EnvData, perf: AllReducePerf, nodes: int, gpus_per_node: int, key: str) -> None:
    want = nodes * gpus_per_node
    if perf.ranks != want:
        raise FitError(f"{perf.ranks_where}: {perf.ranks} ranks, but env.toml's {key} must be a run on nodes x "
                       f"gpus_per_node = {nodes} x {gpus_per_node} = {want} ranks")
    per_host = sorted(perf.ranks_per_host.values())
    if per_host != [gpus_per_node] * nodes:
        shape = ", ".join(f"{h}: {k}" for h, k in sorted(perf.ranks_per_host.items()))
        env.problems.append(f"{perf.ranks_where}: ranks per host ({shape}) are not {nodes} host(s) x {gpus_per_node}: "
                            "check that the run matches env.toml (containers may share a host name)")


def fit_tier(perf: AllReducePerf) -> tuple[Tier, dict[str, Any]]:
    """The ring tier of one ``all_reduce_perf`` run on ``perf.ranks`` ranks, and its fit info
    (see the module docstring). Raises FitError."""
    p = perf.ranks
    if p < 2:
        raise FitError(f"{perf.ranks_where}: {p} rank: an allreduce on one rank moves no data; measure >= 2 ranks")
    nbytes = np.array([r.size_bytes for r in perf.rows], float)
    times = np.array([r.time_us * 1e-6 for r in perf.rows], float)
    if np.unique(nbytes).size < 2:
        raise FitError(f"{perf.source}: one message size only: sweep sizes (-b 1K -e 512M -f 2)")
    ones = np.ones_like(times)
    lin = fit_linear(nbytes, times, ones)
    if not lin.b_s_per_byte > 0:
        raise FitError(f"{perf.source}: the time does not grow with the size: sweep to larger sizes (-e 512M)")
    tier = Tier.from_linear(lin.a_s, lin.b_s_per_byte, p)
    pred = lin.a_s + lin.b_s_per_byte * nbytes
    piece_info = None
    piece = fit_piecewise(nbytes, times, ones, ones)
    if piece is not None and piece[1].b_s_per_byte > 0 and piece[2].b_s_per_byte > 0:
        knee, small, large = piece
        tier = Tier.from_linear(small.a_s, small.b_s_per_byte, p).with_large(knee, large.a_s, large.b_s_per_byte, p)
        pred = np.where(nbytes >= knee, large.a_s + large.b_s_per_byte * nbytes,
                        small.a_s + small.b_s_per_byte * nbytes)
        piece_info = {"knee_bytes": knee,
                      "small": {"a_ms": small.a_s * 1e3, "b_ms_per_mib": small.b_s_per_byte * MIB * 1e3,
                                "n_samples": small.n},
                      "large": {"a_ms": large.a_s * 1e3, "b_ms_per_mib": large.b_s_per_byte * MIB * 1e3,
                                "n_samples": large.n},
                      "r2": r_squared(times, pred), "mape_percent": mape(times, pred)}
    big = tier.large_bandwidth_Bps if tier.large_from_bytes is not None else tier.bandwidth_Bps
    info = {"source": perf.source, "output": perf.form, "version": perf.version, "p": p, "ranks_from": perf.ranks_where,
            "a_ms": lin.a_s * 1e3, "b_ms_per_mib": lin.b_s_per_byte * MIB * 1e3, "r2": lin.r2,
            "mape_percent": lin.mape, "n_samples": lin.n, "piecewise": piece_info,
            "latency_us": tier.allreduce_s(0.0, p) * 1e6,
            "alpha_us": tier.alpha_s * 1e6,
            "busbw_gbytes_per_s": big / 1e9,
            "measured_busbw_gbytes_per_s": max(r.busbw_gbs for r in perf.rows),
            "avg_busbw_gbytes_per_s": perf.avg_busbw_gbs,
            "samples": [{"bytes": float(n), "time_ms": float(t * 1e3), "count": 1, "pred_ms": float(q * 1e3),
                         "busbw_gbytes_per_s": r.busbw_gbs, "where": r.where, "model": "all_reduce_perf"}
                        for n, t, q, r in zip(nbytes, times, pred, perf.rows)]}
    if info["avg_busbw_gbytes_per_s"] is None:
        del info["avg_busbw_gbytes_per_s"]
    return tier, info


def fit_nccl_tests_env(env: EnvData) -> dict[str, Any]:
    """Fit a ``nccl-tests`` environment (see the module docstring); returns the model dict
    (schema ``autotuner.model/1``)."""
    meta = env.meta
    nodes, gpn = int(meta["nodes"]), int(meta["gpus_per_node"])
    cluster = Cluster(nodes, gpn)
    cfg = run_config(meta, {})
    main = _read(env, "source")
    _check_ranks(env, main, nodes, gpn, "source")
    tier, info = fit_tier(main)
    notes: list[str] = []
    intra_info = None
    if nodes == 1:
        inter = intra = tier
        notes.append("one node measured: its tier is both the intra- and the inter-node tier; a --nodes what-if "
                     "is not measured")
    else:
        inter, intra = tier, None
        if meta.get("intra_source"):
            one = _read(env, "intra_source")
            _check_ranks(env, one, 1, gpn, "intra_source")
            intra, intra_info = fit_tier(one)
        else:
            notes.append("no intra_source: the inter-node tier is used inside a node too")
    backend = meta.get("backend")
    if backend is None:
        backend = "nccl"
    elif str(backend).lower() != "nccl":
        env.problems.append(f"{env.path.name}/env.toml: backend: {backend!r}: nccl-tests measure NCCL; the fitted "
                            "collective costs are NCCL's")
    negotiation = _negotiation_for(inter, cluster.size)
    cost = CostModel(inter=inter, intra=intra, link_gbps=float(meta["link_gbps"]), memcpy_Bps=GPU_MEMCPY_BPS,
                     host_copy_Bps=PCIE3_BPS, negotiation=negotiation)
    asy = _async({"backend": backend})
    fit_info = {
        **info,
        "form": "alpha-beta (ring) on nccl-tests all_reduce_perf: out-of-place time vs size",
        "intra": intra_info,
        "async_collectives": asy,
        "borrowed": {
            "negotiation": f"ctrl_op_us = {negotiation.ctrl_op_s * 1e6:.4g}: the fitted allreduce time of "
                           f"{CTRL_OP_BYTES} bytes on {cluster.size} ranks; Horovod negotiates over MPI/Gloo on the "
                           "host, which nccl-tests does not measure",
            "memcpy_gbytes_per_s": f"{GPU_MEMCPY_BPS / 1e9:g}: fusion-buffer copies are not in nccl-tests; "
                                   "autotuner.frameworks.horovod.fit.fitters.GPU_MEMCPY_BPS (a V100 device-copy rate)",
            "host_copy_gbytes_per_s": f"{PCIE3_BPS / 1e9:g}: hierarchical allreduce's device<->host copy; "
                                      "autotuner.frameworks.horovod.fit.fitters.PCIE3_BPS (PCIe 3.0 x16)",
        },
        "workloads": "none: nccl-tests trains no model; simulate and suggest need --compute-ms",
        "notes": notes,
    }
    d = _model_dict(env, cluster, cost, fit_info, {}, cfg)
    d["cluster"]["backend"] = backend
    return d
