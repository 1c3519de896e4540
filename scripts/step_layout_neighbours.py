"""Issue 29 part 5: why a two-host env's real layouts want different small-response prices.

On fresh-poll-2x1-4.5gbit the price ``a = 2(p-1) alpha`` at which the simulator meets a replay's fusion off -
defaults (paired by round) is 0.75 / 0.95 / 1.05 ms for vit_s16 in three sittings and 1.38 / 1.56 ms for DistilBERT
in two, against the step phase's 1.46 ms, which the fit charges (``python scripts/small_price_range.py
--calibrate``; docs/accuracy.md, "The small-response price the phases leave open"). The step phase's layout is 32
blocks of one 256 KiB weight and three 1 KiB vectors at 100 ms of compute; vit_s16's replays ran 300 ms, and its
small vectors sit between weights of 0.6-2.25 MiB. Two things differ, and this separates them in one sitting on the
env's own testbed (2 emulated hosts, 4.5 Gbit/s HTB links, ranks polling):

* the weight beside the small vectors: the phase's 256 KiB (``w256k``) against 2.25 MiB (``w2m``: 768x768, the size
  of vit_s16's fc1/fc2 and DistilBERT's attention weights);
* the compute: 100 ms (the phase's) against 300 ms (the replays');

and vit_s16 and DistilBERT themselves at 300 ms as anchors. Each job: Horovod's defaults against fusion off, 5
interleaved repeats, 8 steps after 2 of warm-up, no timeline (``autotuner validate`` in a scratch copy of the env, so
that no acceptance row reads the records). The report gives, per job, the measured fusion off - defaults (mean over
rounds, +- its standard error) and the price that meets it (``small_response_pairs.price_that_meets``).

Declared before it ran (2026-12-02, session 53):

1. The anchors reproduce their earlier sittings: vit_s16 wants at most 0.75x the step phase's 1.46 ms (<= 1.10 ms),
   DistilBERT within 20 % of it (1.17-1.75 ms). If not, the sitting differs from the earlier ones and the rest is
   read with that caveat.
2. If the weight beside the small responses is what makes vit_s16's cheaper: at either compute, ``w2m`` wants at
   least 25 % less than ``w256k``.
3. If the compute is: for either weight, 300 ms wants at least 25 % less than 100 ms.
4. ``w256k`` at 100 ms is the step phase's own job: it wants within 30 % of the charged 1.46 ms (session 52 found a
   one-host env's phase re-measured +57 % and -61 % apart; this is the first two-host re-measure).

Nothing is charged from it: it decides what the next pass measures.

    python scripts/step_layout_neighbours.py measure    # as root, alone (~15 min)
    python scripts/step_layout_neighbours.py report     # the prices, and the anchors over price x copy rate

Records: ``runs/fresh-poll-2x1-4.5gbit/experiments/step-layout-neighbours/<job>.jsonl`` beside the layout files; no
fit reads them.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
RUNS = ROOT / "autotuner" / "runs"
ENV = "fresh-poll-2x1-4.5gbit"
SUB = Path("experiments") / "step-layout-neighbours"
#: job -> (model: a layout of step_layout_sizes.layout's (weight shape) or a shipped model's name, compute ms)
JOBS = {"w256k-100ms": ((256, 256), 100.0), "w2m-100ms": ((768, 768), 100.0),
        "w256k-300ms": ((256, 256), 300.0), "w2m-300ms": ((768, 768), 300.0),
        "vit_s16-300ms": ("vit_s16", 300.0), "distilbert-300ms": ("distilbert", 300.0)}


def _model(job: str, out: Path) -> str:
    from step_layout_sizes import layout

    what = JOBS[job][0]
    if isinstance(what, str):
        return what
    lf = out / f"{job.split('-')[0]}.json"
    lf.write_text(json.dumps(layout(job.split("-")[0], 256, what), indent=1) + "\n")
    return str(lf)


def measure() -> int:
    from step_layout_sizes import replay_jobs

    out = RUNS / ENV / SUB
    out.mkdir(parents=True, exist_ok=True)
    return replay_jobs(ENV, out, [(job, _model(job, out), compute) for job, (_, compute) in JOBS.items()])


def report() -> int:
    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario
    from small_response_pairs import price_that_meets
    from step_layout_sizes import paired

    print("| job | defaults, measured (median ms) | fusion off - defaults, measured (mean +- se, ms) | simulated at "
          "the env's price (ms) | the price it wants (ms) | / the env's step-phase price |")
    print("|---|---:|---:|---:|---:|---:|")
    for job, (what, compute) in JOBS.items():
        f = RUNS / ENV / SUB / f"{job}.jsonl"
        if not f.exists():
            continue
        try:
            by, d, m, se = paired(f)
        except statistics.StatisticsError:  # no round ran both jobs yet
            continue
        d0 = statistics.median(x["default"]["measured_step_time_ms"] for x in by.values() if "default" in x)
        r0 = next(x for x in by.values() if "proposal-1" in x and "default" in x)
        model = what if isinstance(what, str) else str(RUNS / ENV / SUB / f"{job.split('-')[0]}.json")
        sc, _ = make_scenario(None, ENV, model, compute_ms=compute)
        a, own, at_own = price_that_meets(sc, config_from_values(r0["default"]["config"]),
                                          config_from_values(r0["proposal-1"]["config"]), m)
        print(f"| {job} ({len(d)} rounds) | {d0:.1f} | {m:+.1f} +- {se:.1f} | {at_own:+.1f} | "
              + ("none in 0-10 | -" if a is None else f"{a:.2f} | {a / own:.2f}") + " |")
    return 0


def joint() -> int:
    """Can one per-response price meet both real layouts of the sitting? Their fusion off - defaults simulated over a
    grid of the price ``a`` (ms) and the fusion buffer's copy rate (ms per MiB, the other term fusion off changes:
    the defaults' fused responses pay it, fusion off's single tensors do not), beside the measured means."""
    from dataclasses import replace

    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario
    from step_layout_sizes import paired

    d0, fo = config_from_values({}), config_from_values({"fusion_threshold_mb": 0})
    anchors = [j for j, (w, _) in JOBS.items() if isinstance(w, str) and (RUNS / ENV / SUB / f"{j}.jsonl").exists()]
    scs = {j: make_scenario(None, ENV, JOBS[j][0], compute_ms=JOBS[j][1])[0] for j in anchors}
    meas = {j: paired(RUNS / ENV / SUB / f"{j}.jsonl")[2] for j in anchors}
    print("\n| copy rate (ms/MiB) | price a (ms) | " + " | ".join(f"{j}: simulated (measured {meas[j]:+.1f})"
                                                                for j in anchors) + " |")
    print("|---:|---:|" + "---:|" * len(anchors))
    for c in (0.0, 0.2, 0.34, 0.5):
        for a in (0.77, 1.10, 1.46, 1.95):
            row = []
            for j in anchors:
                cost = scs[j].cost.at_small_alpha(a * 1e-3 / (2 * (scs[j].cluster.size - 1)))
                cost = replace(cost, host=replace(cost.host, memcpy_s_per_byte=c * 1e-3 / 2**20))
                sc = replace(scs[j], cost=cost)
                row.append(f"{sc.simulate(fo).step_time_ms - sc.simulate(d0).step_time_ms:+.1f}")
            print(f"| {c:.2f} | {a:.2f} | " + " | ".join(row) + " |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("measure", "report"))
    a = ap.parse_args(argv)
    return measure() if a.what == "measure" else report() or joint()


if __name__ == "__main__":
    sys.exit(main())
