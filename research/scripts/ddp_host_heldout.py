"""The held-out rows of the Reducer's host term (research/scripts/ddp_host_heldout.sh): per env and setting, the
measured step (median of the rounds' medians, and their range), and three predictions:

- ``nominal``: the replay's nominal compute (``--compute-ms``) and no host term (how every env was predicted before);
- ``compute``: the compute measured by the same rounds' replays without DDP, no host term;
- ``host``: that compute and the env's host term (fitted from its host phase alone).

Usage: python research/scripts/ddp_host_heldout.py ddp-1.75gbit ddp-3.5gbit  (each may carry ``:<gbit>``)
"""
from __future__ import annotations

import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from autotuner.frameworks.ddp.records import env_cost, replay_workload, rows  # noqa: E402
from autotuner.frameworks.ddp.reducer import simulate_ddp_step  # noqa: E402
from autotuner.readers.layouts import load_recorded_layout  # noqa: E402


def main(argv: list[str]) -> int:
    envs = [a.split(":")[0] for arg in argv for a in arg.split()]
    for env in envs:
        d = ROOT / "runs" / env
        cost, info, sweep = env_cost(d)
        h, hc = info["host"], info["host_cost"]
        print(f"\n## {env}: host term {h['per_tensor_us']:.1f} us/gradient (range {h['per_tensor_range_us'][0]:.1f}-"
              f"{h['per_tensor_range_us'][1]:.1f}), {h['per_bucket_us']:.1f} us/bucket (range "
              f"{h['per_bucket_range_us'][0]:.1f}-{h['per_bucket_range_us'][1]:.1f}), per step {h['per_step_us']:.0f} "
              f"us (not charged); autograd alone {h['plain_between_us']:.1f} us/gradient; copy {info['copy_GBps']:.2f} "
              f"GB/s; alpha {info['alpha_us']:.0f} us, busbw {info['busbw_gbps']:.2f} Gbit/s")
        with_term = {(r.source, r.label): r for r in rows(d, cost, host=hc)}
        without = {(r.source, r.label): r for r in rows(d, cost)}
        errs: dict[tuple[str, str], list[tuple[str, float]]] = {}
        print("\n| layout | setting | trials | measured ms (range) | compute ms | nominal, no term | measured compute, "
              "no term | with the term | error with |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
        for key, r in with_term.items():
            L = load_recorded_layout(r.model, d, f"{env}: {r.source}")
            cfg = next(c for c in _configs(d, r.source) if c.label() == r.label)
            nominal = simulate_ddp_step(L.sizes_bytes, L.ready_fraction, replay_workload({"compute_ms": r.compute_ms}),
                                        cfg, cost, r_cluster(sweep), L.dtypes).step_time_ms
            w = without[key]
            e = {}
            for k, p in (("nominal", nominal), ("compute", w.predicted_ms), ("host", r.predicted_ms)):
                e[k] = (p - r.measured_ms) / r.measured_ms * 100
                errs.setdefault((r.source, k), []).append((r.label, e[k]))
            print(f"| {r.source} | {r.label} | {r.trials} | {r.measured_ms:.1f} ({r.low_ms:.1f}-{r.high_ms:.1f}) | "
                  f"{r.predicted_compute_ms:.1f} | {nominal:.1f} ({e['nominal']:+.1f} %) | {w.predicted_ms:.1f} "
                  f"({e['compute']:+.1f} %) | {r.predicted_ms:.1f} | {e['host']:+.1f} % |")
        print()
        for (source, k), e in errs.items():
            six = [x for label, x in e if label in SIX]
            print(f"- {source}, {k}: all {len(e)} settings MAPE {statistics.mean(abs(x) for _, x in e):.1f} %, worst "
                  f"{max((x for _, x in e), key=abs):+.1f} %; the six (default, 1, 4, 25, 100 MiB, view) MAPE "
                  f"{statistics.mean(abs(x) for x in six):.1f} %, worst {max(six, key=abs):+.1f} %")
    return 0


#: the settings the acceptance names: DDP's default, 1, 4, 25 and 100 MiB, the view
SIX = ("25 MiB (default, first 1 MiB)", "1 MiB", "4 MiB", "25 MiB", "100 MiB", "25 MiB (default, first 1 MiB), view")


def r_cluster(sweep):
    from autotuner.frameworks.ddp.records import env_cluster

    return env_cluster(sweep[0]["setup"])


def _configs(d: Path, source: str):
    from autotuner.frameworks.ddp.knobs import DdpConfig
    from autotuner.frameworks.ddp.records import read_jsonl

    seen = []
    for rec in read_jsonl(d / "ddp-validation" / f"{source}.jsonl"):
        if rec["ddp"] is not None:
            c = DdpConfig.from_dict({k: tuple(v) if isinstance(v, list) else v for k, v in rec["ddp"].items()})
            if c not in seen:
                seen.append(c)
    return seen


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
