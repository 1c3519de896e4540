"""Measure a DDP environment for issue 30: its sweep (torch.distributed's own allreduce, float32 and float16, the
bucket copy and the fp16 hook's casts), then real DDP replays of layouts the sweep never saw, each bucket setting
repeated and interleaved, no profiler or timeline. Records (appended one line at a time; a killed run resumes):

    runs/<env>/ddp-sweep.jsonl                 one AUTOTUNER_DDP_SWEEP record per job, with its setup
    runs/<env>/ddp-validation/<model>.jsonl    one record per trial: the DDP knobs, the measured steps, the
                                               first iteration, DDP's own rebuilt bucket sizes

    python scripts/ddp_env.py --env ddp-2gbit --np 2 --bandwidth-gbit 2 --models resnet18,resnet101
    python scripts/ddp_env.py --env ddp-2x1-3gbit --testbed-hosts 2 --ranks-per-host 1 --link-gbit 3 --models ...

As root (the shaped link is a network namespace with HTB), on a quiet machine, alone. Exit status 2 and one line
for a bad argument.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RUNS = ROOT / "autotuner" / "runs"
SIZES = [1 << k for k in range(12, 28)]  # 4 KiB .. 128 MiB
#: the bucket settings replayed: DDP's default, single caps from 1 to 200 MiB, the same 25 MiB set explicitly
#: (the first bucket then 25 MiB, not 1), a per-bucket list, the view, the fp16 hook
SETTINGS = [{}, {"bucket_cap_mb": 1}, {"bucket_cap_mb": 4}, {"bucket_cap_mb": 10}, {"bucket_cap_mb": 25},
            {"bucket_cap_mb": 50}, {"bucket_cap_mb": 100}, {"bucket_cap_mb": 200},
            {"bucket_cap_mb_list": [1, 4, 25]}, {"gradient_as_bucket_view": True},
            {"comm_hook": "fp16_compress"}]


def _append(path: Path, rec: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(rec, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _replay_args(model: str, compute_ms: float, steps: int, warmup: int, s: dict) -> list[str]:
    a = ["--model", model, "--compute-ms", f"{compute_ms:g}", "--steps", str(steps), "--warmup", str(warmup)]
    if "bucket_cap_mb" in s:
        a += ["--bucket-cap-mb", f"{s['bucket_cap_mb']:g}"]
    if "bucket_cap_mb_list" in s:
        a += ["--bucket-cap-mb-list", ",".join(f"{c:g}" for c in s["bucket_cap_mb_list"])]
    if s.get("gradient_as_bucket_view"):
        a += ["--gradient-as-bucket-view"]
    if s.get("comm_hook"):
        a += ["--comm-hook", s["comm_hook"]]
    return a


def main() -> int:
    from autotuner.frameworks.ddp.knobs import DdpConfig
    from autotuner.frameworks.ddp.launch import run_ddp
    from autotuner.realrun.launcher import testbed_for

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--bandwidth-gbit", type=float, default=None)
    ap.add_argument("--testbed-hosts", type=int, default=0)
    ap.add_argument("--ranks-per-host", type=int, default=1)
    ap.add_argument("--link-gbit", type=float, default=None)
    ap.add_argument("--sweep-jobs", type=int, default=3)
    ap.add_argument("--sweep-repeats", type=int, default=7)
    ap.add_argument("--models", default="")
    ap.add_argument("--compute-ms", type=float, default=100.0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--timeout", type=float, default=600.0)
    a = ap.parse_args()
    if not a.env.replace("-", "").replace(".", "").replace("_", "").isalnum():
        print(f"error: --env {a.env!r}: letters, digits, '-', '.' and '_' only", file=sys.stderr)
        return 2
    env_dir = RUNS / a.env
    topo = (a.testbed_hosts, a.ranks_per_host) if a.testbed_hosts else None
    rph = a.ranks_per_host if topo else a.np
    setup = {"np": (a.testbed_hosts * a.ranks_per_host) if topo else a.np, "bandwidth_gbit": a.bandwidth_gbit,
             "testbed_hosts": a.testbed_hosts or None, "ranks_per_host": a.ranks_per_host if topo else None,
             "link_gbit": a.link_gbit, "launcher": "torchrun", "backend": "gloo"}
    with testbed_for(topo, a.bandwidth_gbit, a.link_gbit) as (tb, note):
        print(note, flush=True)
        sweep = env_dir / "ddp-sweep.jsonl"
        for k in range(len(_lines(sweep)), a.sweep_jobs):
            r = run_ddp("autotuner.frameworks.ddp.sweepprobe",
                        ["--sizes", ",".join(map(str, SIZES)), "--repeats", str(a.sweep_repeats), "--warmup", "2"],
                        ranks_per_host=rph, testbed=tb, timeout_s=a.timeout)
            line = next((x for x in r.stdout.splitlines() if "AUTOTUNER_DDP_SWEEP " in x), None)
            if line is None:
                print(f"error: sweep job {k} gave no result (exit {r.returncodes}): {r.stderr[-500:]}", file=sys.stderr)
                return 1
            rec = json.loads(line.split("AUTOTUNER_DDP_SWEEP ", 1)[1])
            _append(sweep, {"phase": "ddp-sweep", "repeat": k, **rec, "setup": setup, "testbed": note,
                            "exit": list(r.returncodes), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
            print(f"sweep job {k + 1}/{a.sweep_jobs}: done", flush=True)
        for model in [m for m in a.models.split(",") if m]:
            out = env_dir / "ddp-validation" / f"{model}.jsonl"
            done = {(r["label"], r["repeat"]) for r in _lines(out)}
            for rep in range(a.repeats):
                for s in SETTINGS:
                    cfg = DdpConfig.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in s.items()})
                    label = cfg.label()
                    if (label, rep) in done:
                        continue
                    r = run_ddp("autotuner.frameworks.ddp.replay",
                                _replay_args(model, a.compute_ms, a.steps, a.warmup, s),
                                ranks_per_host=rph, testbed=tb, timeout_s=a.timeout)
                    line = next((x for x in r.stdout.splitlines() if x.split("AUTOTUNER_RESULT ")[0].endswith("")
                                 and "AUTOTUNER_RESULT " in x), None)
                    res = json.loads(line.split("AUTOTUNER_RESULT ", 1)[1]) if line else None
                    rec = {"trial": f"{label}/r{rep}", "label": label, "repeat": rep, "ddp": cfg.to_dict(),
                           "status": "ok" if res else ("timeout" if r.timed_out else "failed"),
                           "measured_step_time_ms": res["median_step_time_ms"] if res else None,
                           "step_times_ms": res["step_times_ms"] if res else [],
                           "first_step_ms": res["first_step_ms"] if res else None,
                           "buckets": res["buckets"] if res else None, "gradients": res["gradients"] if res else None,
                           "exit": list(r.returncodes), "error": "" if res else r.stderr[-300:],
                           "setup": {**setup, "model": model, "compute_ms": a.compute_ms, "steps": a.steps,
                                     "warmup": a.warmup}, "testbed": note, "wall_s": round(r.wall_s, 2),
                           "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
                    _append(out, rec)
                    print(f"{model} {label} r{rep}: {rec['status']} {rec['measured_step_time_ms']} ms "
                          f"(first {rec['first_step_ms']})", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
