"""Fused responses without the timeline: what the host passes cost by the wall clock (issue 29, an experiment).

Every sweep env's host passes (the fusion-buffer copies MEMCPY_IN/OUT and the untimed gap after a response,
:class:`autotuner.model.costmodel.HostPasses`) are fitted from the sweep's three timelines, whose writer runs on
the same 2 cores. Fitted so they spread 6x between envs of this one machine (MEMCPY 0.10-0.61 ms per MiB), though
a copy of a buffer is a fact of the host, not of the link; on fresh-poll-2x1-3gbit, ResNet-18 at Horovod's defaults
(three fused responses of 2-25 MB) is predicted +9 to +12 % in four sittings, and with another env's host passes
+2 %. This times the sweep probe's own items (:mod:`autotuner.frameworks.horovod.sweepprobe`: ``allreduce``, one
tensor of S bytes, one response; ``fusion``, 8 float32 + 8 float64 tensors of S/8 bytes, two fused responses of S
back to back) at Horovod's defaults, in jobs without the timeline and with it, interleaved per round, on each env's
own recorded setup. Per size: the host time a fused response adds over a lone one of the same bytes,
``(T_fusion - 2 T_lone) / 2``, against what the simulator charges a fused response over a lone one of the same
bytes (``HostPasses.memcpy_s``: both pay the line and the gap). The two fused responses share one cycle's wait and
negotiation that two lone calls pay twice, so the difference reads a little under the copies (about half a cycle).

    python research/scripts/fused_host_passes.py fresh-poll-2x1-3gbit fresh-poll-1.25gbit --rounds 3
    python research/scripts/fused_host_passes.py --report

Records: ``runs/<env>/experiments/fused-host-passes.jsonl``, one line per job (appended as each job ends; a killed
run resumes at the next job). No fit reads them. As root, on a quiet machine, one env at a time.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
RUNS = ROOT / "runs"
RECORDS = "experiments/fused-host-passes.jsonl"
MIB = 1 << 20
SIZES = (4 * MIB, 16 * MIB, 32 * MIB)
LINE = re.compile(r"AUTOTUNER_SWEEP (\{.*\})")


def _records(env: str) -> list[dict]:
    f = RUNS / env / RECORDS
    return [json.loads(x) for x in f.read_text().splitlines() if x.strip()] if f.exists() else []


def measure(env: str, rounds: int, repeats: int) -> None:
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28
    from autotuner.frameworks.horovod.launch import Job, run_job
    from autotuner.frameworks.horovod.measure import SweepSetup, tiers
    from autotuner.realrun.launcher import testbed_for

    s = json.loads((RUNS / env / "sweep.jsonl").open().readline())["setup"]
    setup = SweepSetup(**s)
    tier = tiers(setup.np, setup.hosts)[-1]
    done = {(int(r["round"]), bool(r["timeline_recorded"])) for r in _records(env)}
    out = RUNS / env / RECORDS
    out.parent.mkdir(parents=True, exist_ok=True)
    sizes = ",".join(map(str, SIZES))
    with testbed_for(setup.topology, setup.bandwidth_gbit, setup.link_gbit) as (tb, note):
        print(f"{env}: {note}", flush=True)
        for k in range(rounds):
            for tl in (False, True):
                if (k, tl) in done:
                    continue
                tl_path = Path(f"/tmp/fused-host-passes-{os.getpid()}-{k}.json") if tl else None
                job = Job(np=tier.np, hosts=tier.hosts, prefix=tb.prefix, launcher=tb.launcher, config=DEFAULTS_0_28,
                          timeline=tl_path,
                          command=(sys.executable, "-m", "autotuner.frameworks.horovod.sweepprobe", "--sizes", sizes,
                                   "--fusion-sizes", sizes, "--repeats", str(repeats), "--warmup", "1",
                                   "--wait", setup.wait))
                print(f"  round {k + 1} of {rounds}, {'with' if tl else 'no'} timeline", flush=True)
                res = run_job(job, 900.0)
                if tl_path is not None and tl_path.exists():
                    tl_path.unlink()
                items = [json.loads(m.group(1)) for m in LINE.finditer(res.stdout)]
                if res.returncode != 0 or len(items) != 2 * len(SIZES):
                    tail = [x for x in (res.stderr + res.stdout).splitlines() if x.strip()][-1:] or ["no output"]
                    raise SystemExit(f"error: {env} round {k + 1}: horovodrun exit {res.returncode}: {tail[0][-300:]}")
                rec = {"env": env, "round": k, "timeline_recorded": tl, "items": items, "setup": setup.to_dict(),
                       "config": DEFAULTS_0_28.to_dict(), "load_avg_1m": round(os.getloadavg()[0], 2),
                       "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                with out.open("a") as fh:  # one line per job, flushed as it ends: nothing measured is lost
                    fh.write(json.dumps(rec) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())


def _as_phase_record(r: dict) -> dict:
    """An experiment job as the ``fused`` phase records one (:class:`autotuner.schemas.FusedRecord`'s fields)."""
    it = {(i["phase"], int(i["bytes"])): i["times_ms"] for i in r["items"]}
    return {"sizes": list(SIZES), "lone_ms": [it[("allreduce", b)] for b in SIZES],
            "fused_ms": [it[("fusion", b)] for b in SIZES]}


def report(envs: list[str]) -> list[dict]:
    """Per env, size and timeline setting: lone and fused medians over jobs (ms), the host time a fused response
    adds over a lone one ``(T_fusion - 2 T_lone) / 2`` (median over jobs, and the jobs' range: the per-size table of
    :func:`autotuner.frameworks.horovod.fit.sweep.fused_copy`, the fit's own arithmetic), and what the shipped model
    charges for it (``memcpy_s``, ms)."""
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.fit.phase_fused import fused_copy

    rows = []
    for env in envs:
        recs = _records(env)
        if not recs:
            continue
        host = load_env(ROOT / "autotuner" / "models", env).cost.host
        by_tl = {tl: [_as_phase_record(r) for r in recs if bool(r["timeline_recorded"]) == tl] for tl in (False, True)}
        per_size = {tl: {row[0]: row for row in fused_copy(jobs, host)["sizes"]} for tl, jobs in by_tl.items()}
        for k, b in enumerate(SIZES):
            for tl in (False, True):
                if b not in per_size[tl]:
                    continue
                _, n, lo, med, hi, _ = per_size[tl][b]
                rows.append({"env": env, "bytes": b, "timeline": tl, "jobs": n,
                             "lone_ms": float(np.median([np.median(j["lone_ms"][k]) for j in by_tl[tl]])),
                             "fusion_ms": float(np.median([np.median(j["fused_ms"][k]) for j in by_tl[tl]])),
                             "extra_ms": med, "extra_range_ms": [lo, hi],
                             "charged_ms": None if host is None else host.memcpy_s(b) * 1e3})
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("envs", nargs="*")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=5, help="timed samples per item and job")
    ap.add_argument("--report", action="store_true")
    a = ap.parse_args(argv)
    envs = a.envs or sorted(p.parent.parent.name for p in RUNS.glob(f"*/{RECORDS}"))
    if not a.report:
        for env in envs:
            if not (RUNS / env / "sweep.jsonl").exists():
                print(f"error: {env}: no runs/{env}/sweep.jsonl", file=sys.stderr)
                return 2
            measure(env, a.rounds, a.repeats)
    print("| env | size | timeline | jobs | lone (ms) | two fused (ms) | a fused response adds (ms, jobs' range) "
          "| the model charges (ms) |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for r in report(envs):
        lo, hi = r["extra_range_ms"]
        ch = "-" if r["charged_ms"] is None else f"{r['charged_ms']:.2f}"
        print(f"| {r['env']} | {r['bytes'] // MIB} MiB | {'yes' if r['timeline'] else 'no'} | {r['jobs']} | "
              f"{r['lone_ms']:.2f} | {r['fusion_ms']:.2f} | {r['extra_ms']:.2f} ({lo:.2f} to {hi:.2f}) | {ch} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
