"""Issue 29 part 5: can any prediction meet every sitting of the same job? The arithmetic behind the small-response
rows still beyond 10 %, from committed records only (no run, nothing charged).

Part 5's acceptance asks each small-response row (fusion off, thresholds of 1 MiB and below, cache off; replayed
without Horovod's timeline) to be predicted within 10 % of its measured step, or inside its own repeats' range. A
prediction is one number per job: the simulator is deterministic, and a job is fixed by its env, layout, knobs,
compression and emulated compute. This machine measured several of those jobs in more than one sitting (a validation
file is one sitting, run interleaved; each set of ``research/scripts/completion_times.py`` is one, its plain replay being the
harness ``validate`` runs). A sitting with median ``m`` and repeats spanning ``[lo, hi]`` accepts a prediction ``P``
when ``|P - m| <= 0.1 m`` or ``lo <= P <= hi`` (the acceptance test's rule:
tests/test_small_responses.py::test_every_small_response_row_within_10_percent_or_its_repeat_range), that is
``P`` in ``[min(0.9 m, lo), max(1.1 m, hi)]``. Every sitting of the job accepts ``P`` only inside the intersection of
those intervals; when the intersection is empty no model, however good, meets every sitting of the job, and the row
is the machine's. When it is not empty and the shipped prediction lies outside it, the row is the model's.

Read after session 56's sets, not declared: it decides no model term, only which misses a model could still fix.

    python research/scripts/sitting_spread.py            # the missed rows, each with its job's sittings
    python research/scripts/sitting_spread.py --all      # and every job measured in two or more sittings on a fresh env
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "research" / "scripts"))
#: the acceptance's band: a prediction within this fraction of a sitting's median meets it
BAND = 0.10


@dataclass(frozen=True)
class Sitting:
    """One sitting of a job: where it was measured, its median step (ms), its repeats' range (ms) and the
    prediction the shipped model makes for it (ms)."""
    source: str
    median_ms: float
    lo_ms: float
    hi_ms: float
    predicted_ms: float

    def accepts(self) -> tuple[float, float]:
        """The predictions this sitting accepts, [low, high] ms."""
        return min((1 - BAND) * self.median_ms, self.lo_ms), max((1 + BAND) * self.median_ms, self.hi_ms)


def _key(model: str, fusion: int, cycle: float, cache: int, compression: str, compute_ms: float) -> tuple:
    return model, int(fusion), float(cycle), int(cache), compression, float(compute_ms)


@lru_cache(maxsize=None)
def _predictions() -> dict[tuple[str, str, str], float]:
    """The shipped model's prediction per (env, validation file, row label), from ``autotuner accuracy``'s cases."""
    from autotuner.frameworks.horovod.views.accuracy import cases
    from autotuner.paths import model_search_path, runs_search_path

    return {(c.env, c.source.split("/")[-1].split(" ")[0], c.what.split(":")[0]): c.predicted
            for c in cases(runs_search_path(), model_search_path()) if c.what.endswith("step time (ms)")}


@lru_cache(maxsize=None)
def sittings(env: str) -> dict[tuple, list[Sitting]]:
    """Every sitting of every job of ``env`` run without Horovod's timeline, by job key (model, fusion threshold
    bytes, cycle time ms, cache capacity, compression, compute ms): each validation file's rows (measured = median
    of its trials, as ``autotuner accuracy``) and each completion-time set's plain replays (median of their steps;
    repeats: the rounds' medians). fp16 rows over zero gradients or the same values on every rank are other jobs
    and left out, as are trials that ran a real training command. Read once per env (cached): the caller must not
    change what it returns."""
    from autotuner.frameworks.horovod.views.accuracy import _other_jobs
    from autotuner.frameworks.horovod.readers.runs import read_validation_files
    from autotuner.paths import runs_search_path

    env_dir = next(d / env for d in runs_search_path() if (d / env).is_dir())
    preds = _predictions()
    groups: dict[tuple, dict[tuple, list[dict]]] = {}
    for f, recs in read_validation_files(env_dir):
        for r in recs:
            if r.get("status") != "ok" or not r.get("config") or r["setup"].get("command") or any(_other_jobs(r)):
                continue
            c = r["config"]
            k = _key(r["setup"]["model"], c["fusion_threshold_bytes"], c["cycle_time_ms"], c["cache_capacity"],
                     r.get("compression", "none"), r["setup"].get("compute_ms", float("nan")))
            groups.setdefault(k, {}).setdefault((f.name, r.get("label")), []).append(r)
    out: dict[tuple, list[Sitting]] = {}
    for k, by in groups.items():
        for (fname, label), rs in by.items():
            v = [float(r["measured_step_time_ms"]) for r in rs]
            tag = next((w for (e, s, w) in preds if e == env and s == fname and w.startswith(f"{k[0]} {label} (")), None)
            if tag is None:
                continue
            out.setdefault(k, []).append(Sitting(f"validation/{fname} ({label})", float(np.median(v)), min(v), max(v),
                                                 preds[(env, fname, tag)]))
    import completion_times as ct

    if (env_dir / ct.RECORDS).is_file():
        recs = ct.load(env)
        for name, rounds in ct.SETS.items():
            for model in sorted({r["model"] for r in recs if r["round"] in rounds and r.get("way") == "plain"}):
                for knobs in ct.KNOBS:
                    rs = [r for r in recs if r["round"] in rounds and r.get("way") == "plain" and r["model"] == model
                          and r["knobs"] == knobs]
                    if not rs:
                        continue
                    cfg = ct._config(knobs)
                    k = _key(model, cfg.fusion_threshold_bytes, cfg.cycle_time_ms, cfg.cache_capacity, "none",
                             rs[0]["compute_ms"])
                    per_round = [float(np.median(r["plain_step_times_ms"])) for r in rs]
                    out.setdefault(k, []).append(Sitting(
                        f"experiments/completion-times.jsonl, set {name} ({knobs})",
                        float(np.median([s for r in rs for s in r["plain_step_times_ms"]])), min(per_round),
                        max(per_round), float(ct.simulated(model, knobs, env)["step_ms"])))
    return out


def feasible(ss: list[Sitting]) -> tuple[float, float] | None:
    """The predictions every sitting in ``ss`` accepts, [low, high] ms; None when there is none."""
    lo = max(s.accepts()[0] for s in ss)
    hi = min(s.accepts()[1] for s in ss)
    return (lo, hi) if lo <= hi else None


def verdict(ss: list[Sitting]) -> str:
    """'machine' when no prediction meets every sitting; 'model' when one does and the shipped one does not; 'met'."""
    f = feasible(ss)
    if f is None:
        return "machine"
    return "met" if all(f[0] <= s.predicted_ms <= f[1] for s in ss) else "model"


def missed_rows() -> list[tuple[str, str, str, tuple]]:
    """The like-with-like small-response rows on fresh envs beyond the band and outside their repeats' range:
    (env, validation file, row label, job key)."""
    import re

    out = []
    for env in sorted(p.parent.name for p in (ROOT / "runs").glob("fresh-*/sweep.jsonl")):
        for k, ss in sittings(env).items():
            if not (k[1] <= 1 << 20 or k[3] == 0):
                continue
            for s in ss:
                if not s.source.startswith("validation/"):
                    continue
                lo, hi = s.accepts()
                if not lo <= s.predicted_ms <= hi:
                    m = re.match(r"validation/(\S+) \((.*)\)", s.source)
                    out.append((env, m.group(1), m.group(2), k))
    return out


def _fmt(k: tuple) -> str:
    model, fusion, cycle, cache, comp, compute = k
    return (f"{model} ({fusion / 2**20:g} MiB, {cycle:g} ms" + (", cache off" if cache == 0 else "")
            + ("" if comp == "none" else f", {comp}") + f"; {compute:g} ms compute)")


def _table(env: str, k: tuple, ss: list[Sitting]) -> list[str]:
    f = feasible(ss)
    lines = [f"{env}: {_fmt(k)}: " + (f"every sitting accepts {f[0]:.1f}-{f[1]:.1f} ms" if f else
                                      "no prediction meets every sitting") + f"; verdict: {verdict(ss)}", "",
             "| sitting | median (ms) | repeats (ms) | accepts (ms) | predicted (ms) | error |",
             "|---|---:|---:|---:|---:|---:|"]
    for s in sorted(ss, key=lambda s: s.median_ms):
        a = s.accepts()
        lines.append(f"| {s.source} | {s.median_ms:.1f} | {s.lo_ms:.1f}-{s.hi_ms:.1f} | {a[0]:.1f}-{a[1]:.1f} | "
                     f"{s.predicted_ms:.1f} | {(s.predicted_ms / s.median_ms - 1) * 100:+.1f} % |")
    return lines + [""]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv not in ([], ["--all"]):
        print("error: usage: sitting_spread.py [--all]", file=sys.stderr)
        return 2
    seen = set()
    for env, _, _, k in missed_rows():
        if (env, k) in seen:
            continue
        seen.add((env, k))
        print("\n".join(_table(env, k, sittings(env)[k])))
    if argv == ["--all"]:
        counts = {"machine": 0, "model": 0, "met": 0}
        for env in sorted(p.parent.name for p in (ROOT / "runs").glob("fresh-*/sweep.jsonl")):
            for k, ss in sorted(sittings(env).items(), key=str):
                if len(ss) < 2:
                    continue
                v = verdict(ss)
                counts[v] += 1
                if v == "machine":
                    hi, lo = max(s.median_ms for s in ss), min(s.median_ms for s in ss)
                    print(f"machine: {env}: {_fmt(k)}: {len(ss)} sittings, {lo:.1f}-{hi:.1f} ms ({hi / lo:.2f}x)")
        print(f"jobs measured in two or more sittings on the fresh envs: {sum(counts.values())}; no prediction meets "
              f"every sitting: {counts['machine']}; the shipped one misses a sitting a prediction could meet: "
              f"{counts['model']}; met: {counts['met']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
