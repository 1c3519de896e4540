"""Issue 29 part 5: the small-response price the env's phases leave open, against the held-out replays.

Every committed sweep env whose step phase is charged also measured the burst phase; the two price a small response
apart (``fit.small_responses.range``, :func:`autotuner.frameworks.horovod.fit.sweep.small_price_range`). This script
predicts every held-out step-time row of the fresh envs three times through the public API
(:func:`autotuner.accuracy_table`): with the shipped models (the step phase's price, charged), and with the inter
tier's small-message latency at the low and at the high end of ``cost_model.small_alpha_range_us`` (every other term
as shipped: the table's ``predicted_range``, :meth:`autotuner.model.costmodel.CostModel.at_small_alpha`). It prints, for the
small-response rows replayed without the timeline (fusion off, thresholds of 1 MiB and below, cache off: the job the
prediction is for):

* each row: measured median, its repeats' range, the charged prediction's error, the errors at both ends;
* how many rows' medians fall inside the range, how many repeat ranges overlap it, its width;
* ``--sittings``: every configuration replayed in two or more sittings (validation files), its medians and
  difference from the same sitting's defaults, sitting by sitting: what the machine reproduces, and whether one
  prediction could meet the acceptance (within 10 % or inside the repeats' range) in every sitting;
* ``--calibrate``: the issue's third way to price small responses, "a short calibrating run of the user's own
  model", tried leave-one-sitting-out on the committed records (nothing charged): the price ``a`` at which the
  simulator meets one sitting's fusion off - defaults (paired by round,
  ``scripts/small_response_pairs.price_that_meets``), then every other sitting's small-response rows of the same
  env and model predicted at that ``a`` (the scenario of
  :func:`autotuner.frameworks.horovod.predict.make_scenario` at the replays' compute, only the tier's alpha moved).

    python research/scripts/small_price_range.py              # the table (Markdown)
    python research/scripts/small_price_range.py --sittings   # and the sittings
    python research/scripts/small_price_range.py --calibrate  # and the leave-one-sitting-out calibration

Reads the shipped runs and models; writes nothing.
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import autotuner
from autotuner.frameworks.horovod.readers.runs import parse_records
from autotuner.frameworks.horovod.schemas.records import timeline_recorded

ROOT = Path(__file__).resolve().parents[2]
RUNS, MODELS = ROOT / "runs", ROOT / "autotuner" / "models"
LABEL = re.compile(r"\((\S+) MiB, \S+ ms(.*?)\)")


def _records(source: str) -> list[dict]:
    f = RUNS / source.split(" ")[0]
    recs, _ = parse_records(f.read_text(), f.name)
    return [r for r in recs if r.get("status") == "ok"]


def _small(q: str) -> bool:
    m = LABEL.search(q)
    return bool(m) and "timeline ran" not in q and q.endswith("step time (ms)") and (
        float(m.group(1)) <= 1 or "cache off" in m.group(2))


def rows() -> list[dict]:
    """The fresh envs' small-response rows without the timeline, with the prediction at both ends (the accuracy
    table's ``predicted_range``)."""
    out = []
    for c in autotuner.accuracy_table()["cases"]:
        if not (c["env"].startswith("fresh-") and _small(c["quantity"])):
            continue
        label = c["quantity"].split(" ")[1]
        v = [r["measured_step_time_ms"] for r in _records(c["source"]) if r.get("label") == label]
        lo, hi = c["predicted_range"]
        out.append({"env": c["env"], "file": c["source"].split("/")[-1].split(" ")[0],
                    "row": c["quantity"].split(":")[0], "measured": c["measured"], "rep": (min(v), max(v)),
                    "charged": c["predicted"], "lo": lo, "hi": hi})
    return out


def _pct(p: float, m: float) -> str:
    return f"{(p - m) / m * 100:+.1f} %"


def table(rs: list[dict]) -> None:
    print("| env | file | row | measured (repeats) | charged | at the low end | at the high end | median inside |")
    print("|---|---|---|---:|---:|---:|---:|---|")
    for r in rs:
        inside = r["lo"] <= r["measured"] <= r["hi"]
        print(f"| {r['env']} | {r['file']} | {r['row']} | {r['measured']:.1f} ({r['rep'][0]:.1f}-{r['rep'][1]:.1f}) | "
              f"{_pct(r['charged'], r['measured'])} | {_pct(r['lo'], r['measured'])} | {_pct(r['hi'], r['measured'])} "
              f"| {'yes' if inside else 'no'} |")
    n = len(rs)
    inside = sum(r["lo"] <= r["measured"] <= r["hi"] for r in rs)
    overlap = sum(not (r["rep"][1] < r["lo"] or r["rep"][0] > r["hi"]) for r in rs)
    miss = [r for r in rs if abs(r["charged"] - r["measured"]) / r["measured"] > 0.10]
    width = sorted((r["hi"] - r["lo"]) / r["charged"] * 100 for r in rs)
    print(f"\n{n} rows: median inside the range {inside}, repeats overlapping it {overlap}; width median "
          f"{statistics.median(width):.1f} % of the charged prediction (max {width[-1]:.1f} %); charged prediction "
          f"beyond 10 %: {len(miss)}, of which inside the range {sum(r['lo'] <= r['measured'] <= r['hi'] for r in miss)}")


def sittings() -> None:
    """Configurations replayed in several sittings (files) of one env and model, no timeline."""
    by: dict[tuple, dict[str, tuple[float, float]]] = {}
    for f in sorted(RUNS.glob("fresh-*/validation/*.jsonl")):
        recs = [r for r in _records(f"{f.parent.parent.name}/validation/{f.name}")
                if not timeline_recorded(r) and r.get("compression") in (None, "none") and r.get("config")]
        if not recs:
            continue
        med: dict[tuple, list[float]] = {}
        for r in recs:
            c = r["config"]
            med.setdefault((c["fusion_threshold_bytes"], c["cycle_time_ms"], c["cache_capacity"]), []).append(
                r["measured_step_time_ms"])
        d0 = med.get((134217728, 1.0, 1024))
        if d0 is None:
            continue
        s = recs[0]["setup"]
        for cfg, v in med.items():
            by.setdefault((f.parent.parent.name, s["model"], s["compute_ms"], cfg), {})[f.name] = (
                statistics.median(v), statistics.median(v) - statistics.median(d0), min(v), max(v))
    print("\n| env | model | configuration (bytes, ms, cache) | sittings | medians (ms) | minus the sitting's defaults "
          "(ms) | medians max/min | one prediction can pass every sitting |")
    print("|---|---|---|---:|---|---|---:|---|")
    pairs = []  # (small-response configuration?, |one sitting's median as the other's prediction| error, %)
    for (env, model, _, cfg), d in sorted(by.items()):
        if len(d) < 2:
            continue
        meds = [x[0] for x in d.values()]
        pairs += [(cfg[0] <= MIB or cfg[2] == 0, abs(a - b) / b * 100) for a in meds for b in meds if a is not b]
        ok = passable(list(d.values()))
        print(f"| {env} | {model} | {cfg} | {len(d)} | {', '.join(f'{m:.1f}' for m in meds)} | "
              f"{', '.join(f'{x[1]:+.1f}' for x in d.values())} | {max(meds) / min(meds):.3f} | "
              f"{'yes' if ok else '**no**'} |")
    for small in (True, False):
        e = [x for k, x in pairs if k == small]
        print(f"\n{'small-response' if small else 'other'} configurations, one sitting's median as the prediction of "
              f"another's: {len(e)} ordered pairs, mean |error| {statistics.mean(e):.2f} %, beyond 10 %: "
              f"{sum(x > 10 for x in e)}", end="")
    print()


def passable(sits: list[tuple]) -> bool:
    """Whether one predicted step p meets the acceptance in every sitting: within 10 % of the sitting's median m
    (|p - m| <= 0.1 m: p in [0.9 m, 1.1 m]) or inside its repeats' range [lo, hi]. Each sitting admits the union of
    two intervals; one p passes all where their intersection is not empty (checked at every interval end, where an
    intersection of closed intervals starts). ``sits``: (median, minus the defaults, lo, hi) per sitting, ms."""
    sets = [[(0.9 * m, 1.1 * m), (lo, hi)] for m, _, lo, hi in sits]
    cands = [x for s in sets for iv in s for x in iv]
    return any(all(any(a <= p <= b for a, b in s) for s in sets) for p in cands)


def _sitting_files() -> dict[tuple[str, str, float], list[Path]]:
    """(env, model, compute ms) -> its validation files that replayed the defaults and fusion off without the
    timeline, uncompressed: the sittings a calibration can be taken from and judged on."""
    out: dict[tuple[str, str, float], list[Path]] = {}
    for f in sorted(RUNS.glob("fresh-*/validation/*.jsonl")):
        recs = _plain(f)
        cf = {(r["config"]["fusion_threshold_bytes"], r["config"]["cache_capacity"]) for r in recs}
        if recs and (134217728, 1024) in cf and (0, 1024) in cf:
            s = recs[0]["setup"]
            out.setdefault((f.parent.parent.name, s["model"], float(s["compute_ms"])), []).append(f)
    return {k: v for k, v in out.items() if len(v) >= 2}


def _plain(f: Path) -> list[dict]:
    return [r for r in _records(f"{f.parent.parent.name}/validation/{f.name}")
            if not timeline_recorded(r) and r.get("compression") in (None, "none") and r.get("config")]


def calibrate() -> None:
    """Leave one sitting out: the price from one sitting's fusion off - defaults, the other sittings' rows at it."""
    from dataclasses import replace

    sys.path.insert(0, str(ROOT / "research" / "scripts"))
    from small_response_pairs import price_that_meets

    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario

    print("\n| env | model | calibrated on | its price a (ms) | the env's a (ms) | judged on | row | measured | "
          "charged a | calibrated a |")
    print("|---|---|---|---:|---:|---|---|---:|---:|---:|")
    errs: dict[str, list[float]] = {"charged": [], "calibrated": []}
    for (env, model, compute), files in sorted(_sitting_files().items()):
        sc, _ = make_scenario(None, env, model, compute_ms=compute)
        p = sc.cluster.size
        at = lambda a_ms: replace(sc, cost=sc.cost.at_small_alpha(a_ms * 1e-3 / (2 * (p - 1))))  # noqa: E731
        by_file = {}
        for f in files:
            rounds: dict[str, dict[tuple, float]] = {}
            cfgs: dict[tuple, dict] = {}
            for r in _plain(f):
                c = r["config"]
                k = (c["fusion_threshold_bytes"], c["cycle_time_ms"], c["cache_capacity"])
                rounds.setdefault(r["trial"].rsplit("/", 1)[1], {})[k] = r["measured_step_time_ms"]
                cfgs[k] = c
            by_file[f] = (rounds, cfgs)
        for f in files:
            rounds, cfgs = by_file[f]
            d0, fo = (134217728, 1.0, 1024), (0, 1.0, 1024)
            diffs = [x[fo] - x[d0] for x in rounds.values() if fo in x and d0 in x]
            a, own, _ = price_that_meets(sc, config_from_values(cfgs[d0]), config_from_values(cfgs[fo]),
                                         statistics.mean(diffs))
            if a is None:
                continue
            for g in files:
                if g == f:
                    continue
                grounds, gcfgs = by_file[g]
                for k, c in sorted(gcfgs.items()):
                    if not (k[0] <= 1 << 20 or k[2] == 0):
                        continue
                    meas = statistics.median(x[k] for x in grounds.values() if k in x)
                    cfg = config_from_values(c)
                    e_own = (sc.simulate(cfg).step_time_ms - meas) / meas * 100
                    e_cal = (at(a).simulate(cfg).step_time_ms - meas) / meas * 100
                    errs["charged"].append(e_own)
                    errs["calibrated"].append(e_cal)
                    row = f"{k[0] / MIB:g} MiB, {k[1]:g} ms" + (", cache off" if k[2] == 0 else "")
                    print(f"| {env} | {model} | {f.name} | {a:.2f} | {own:.2f} | {g.name} | {row} | {meas:.1f} | "
                          f"{e_own:+.1f} % | {e_cal:+.1f} % |")
    for k, v in errs.items():
        if v:
            print(f"\n{k} price: {len(v)} row-judgements, mean |error| {statistics.mean(map(abs, v)):.2f} %, beyond 10 %: "
                  f"{sum(abs(x) > 10 for x in v)}", end="")
    print()


MIB = 1 << 20


def main(argv: list[str]) -> int:
    if any(a not in ("--sittings", "--calibrate") for a in argv):
        print(f"error: {' '.join(argv)}: unknown argument (only --sittings, --calibrate)", file=sys.stderr)
        return 2
    table(rows())
    if "--sittings" in argv:
        sittings()
    if "--calibrate" in argv:
        calibrate()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BrokenPipeError:  # | head
        sys.stderr.close()
        sys.exit(0)
