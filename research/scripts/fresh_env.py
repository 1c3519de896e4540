#!/usr/bin/env python3
"""Issue 20's fresh-environment protocol, in one command: measure a new environment, fit it on
its sweep alone, ask suggest for a layout no fit has seen, replay >= 10 configurations of that
layout for real (interleaved repeats), then print MAPE, worst, bias, Kendall tau and the pick
against the defaults and autotune's best.

    python research/scripts/fresh_env.py --env fresh-3gbit --model vit_s16 --compute-ms 300 -- --bandwidth-gbit 3
    python research/scripts/fresh_env.py --env fresh-2x1-2gbit --model distilbert -- --testbed-hosts 2 \\
        --ranks-per-host 1 --link-gbit 2
    python research/scripts/fresh_env.py --env fresh-3gbit --model vit_s16 --only report   # figures again
    python research/scripts/fresh_env.py --env fresh-poll-0.75gbit --model mobilenet_v2 --compute-ms 150 --wait sleep \
        --tag h2 --only validate -- --bandwidth-gbit 0.75     # the same env replayed again, as fresh-<model>-h2

Arguments after ``--`` are the testbed options ``measure`` and ``validate`` share. Every phase
resumes: ``measure`` and ``validate`` append item by item / trial by trial and measure only what
is missing; the fit goes to ``autotuner/models/<env>.json`` (the env's sweep only: a temporary
runs folder holding just that env); suggest's pick is kept in
``runs/<env>/validation/pick-<model>.json`` and reused. Records: ``runs/<env>/sweep.jsonl``,
``runs/<env>/validation/fresh-<model>.jsonl`` (+ its report); figures:
``runs/<env>/validation/fresh-<model>-protocol.txt`` (``--only report`` rewrites it with the
code of the day: the replays are never refitted).

Root is needed for the emulated links. Run on a quiet machine, one protocol at a time.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT / "runs"
MODELS = ROOT / "autotuner" / "models"

#: The replayed grid besides suggest's pick, the defaults and autotune's best: fusion 0 / 1 / 4 /
#: 8 / 16 / 32 / 64 MiB at a few cycle times, and the defaults with the response cache off.
GRID = [
    {"fusion_threshold_mb": 0, "cycle_time_ms": 1},
    {"fusion_threshold_mb": 1, "cycle_time_ms": 1},
    {"fusion_threshold_mb": 4, "cycle_time_ms": 5},
    {"fusion_threshold_mb": 8, "cycle_time_ms": 2},
    {"fusion_threshold_mb": 16, "cycle_time_ms": 10},
    {"fusion_threshold_mb": 32, "cycle_time_ms": 5},
    {"fusion_threshold_mb": 64, "cycle_time_ms": 25},
    {"fusion_threshold_mb": 128, "cycle_time_ms": 1, "cache_capacity": 0},
]




def measured_files() -> tuple[str, ...]:
    """What ``autotuner measure`` leaves in an env folder: env.toml, the sweep and its probe phases'
    records and timelines (autotuner.frameworks.horovod.measure's names; never validation/)."""
    sys.path.insert(0, str(ROOT))
    from autotuner.frameworks.horovod import measure as M

    return ("env.toml", M.RECORDS, "timelines", M.CPU_RECORDS, M.CPU_TIMELINES, M.TRICKLE_RECORDS,
            M.TRICKLE_TIMELINES, M.IDLE_RECORDS, M.IDLE_TIMELINES, M.BURST_RECORDS, M.MID_RECORDS, M.STEP_RECORDS,
            M.FUSED_RECORDS, M.FP16_RECORDS)


def sh(*argv: str, stdout=None) -> None:
    print("+ " + " ".join(argv), file=sys.stderr, flush=True)
    subprocess.run(argv, check=True, stdout=stdout, cwd=ROOT)


@contextmanager
def measured_only(envs, leave_out: str | None = None):
    """A temporary runs folder holding, per env of ``envs``, only what ``measure`` wrote (:func:`measured_files`,
    less ``leave_out``), as symlinks into runs/; yields its path and removes it on exit."""
    with tempfile.TemporaryDirectory() as tmp:
        for e in envs:
            d = Path(tmp) / e
            d.mkdir()
            for name in measured_files():
                if name != leave_out and (RUNS / e / name).exists():
                    (d / name).symlink_to(RUNS.resolve() / e / name)
        yield Path(tmp)


def fit_alone(env: str, out: Path = MODELS, siblings: tuple[str, ...] = ()) -> None:
    """Fit ``env`` on its sweep alone: a temporary runs folder holding only what ``measure`` wrote
    (:func:`measured_files`: env.toml, the sweep and its probe phases' records and timelines; not its replays), so the model, and the error band suggest
    borrows for a never-checked env, owe nothing to the replays reported against them. ``siblings``: envs of the
    same stack measured in the same sitting whose measured files sit beside it (what the fit may borrow:
    :func:`autotuner.fit.collective.borrow_fp16_sum`); they are fitted too, from their measured files alone."""
    with measured_only((env, *siblings)) as tmp:
        sh("autotuner", "fit", str(tmp), "--out", str(out))


def report(env: str, model: str, run: str) -> list[str]:
    sys.path.insert(0, str(ROOT))
    from autotuner.frameworks.horovod.fit.store import load_env
    from autotuner.frameworks.horovod.views.accuracy import simulate_trial
    from autotuner.frameworks.horovod.views.protocol import format_report, rows_from_records, summary
    from autotuner.frameworks.horovod.readers.runs import parse_records

    path = RUNS / env / "validation" / f"{run}.jsonl"
    recs, _ = parse_records(path.read_text(), path.name)
    with tempfile.TemporaryDirectory() as tmp:  # the code of the day, on the sweep alone
        fit_alone(env, Path(tmp))
        fenv = load_env([Path(tmp)], env)
    rows = rows_from_records(recs, lambda cfg, setup: simulate_trial(fenv, RUNS / env, cfg, dict(setup)).step_time_ms)
    return format_report(rows, summary(rows, pick_label=pick_label(env, model, run)))


def pick_label(env: str, model: str, run: str) -> str:
    """The row of suggest's pick: ``proposal-1``, or ``default`` when the pick is Horovod's defaults
    (validate refuses to measure one configuration twice, so it is then not a proposal)."""
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28, Config, config_from_values

    val = RUNS / env / "validation"
    picked = Config.from_dict(json.loads((val / f"pick-{model}.json").read_text())["proposals"][0]["config"])
    first = config_from_values(json.loads((val / f"{run}-proposals.json").read_text())[0])
    if picked != DEFAULTS_0_28 or first == picked:  # (records before issue 21 measured the defaults twice)
        return "proposal-1"
    return "default"


def plan(picked: dict) -> list[dict]:
    """The proposals validate runs: suggest's pick first, unless it is the defaults (they run anyway),
    then :data:`GRID` without the pick's own configuration (each configuration measured once)."""
    from autotuner.frameworks.horovod.knobs import DEFAULTS_0_28, Config, config_from_values

    pc = Config.from_dict(picked)
    return ([] if pc == DEFAULTS_0_28 else [picked]) + [g for g in GRID if config_from_values(g) != pc]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--env", required=True)
    ap.add_argument("--model", required=True, help="a layout no committed fit has seen")
    ap.add_argument("--compute-ms", type=float, default=300.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--wait", choices=("spin", "sleep"), default="spin",
                    help="measure --wait and validate --replay-wait")
    ap.add_argument("--only", choices=("measure", "fit", "suggest", "validate", "report"))
    ap.add_argument("--timelines", action="store_true",
                    help="record and keep each replay's Horovod timeline (for autotuner compare); off by default: "
                         "the writer costs the replays 3-10 %% (research/scripts/replay_phases.py), which a user's run does not pay")
    ap.add_argument("--tag", default="", help="name the replays fresh-<model>-<tag> (a second replay of one env, "
                                              "e.g. after a change to the replay workload; the pick is shared)")
    ap.add_argument("testbed", nargs=argparse.REMAINDER, help="after --: measure/validate testbed options")
    a = ap.parse_args()
    tb = [x for x in a.testbed if x != "--"]
    val = RUNS / a.env / "validation"
    run = f"fresh-{a.model}" + (f"-{a.tag}" if a.tag else "")
    pick = val / f"pick-{a.model}.json"
    phases = [a.only] if a.only else ["measure", "fit", "suggest", "validate", "report"]
    if "measure" in phases:
        sh("autotuner", "measure", "--env", a.env, "--runs-dir", str(RUNS), "--wait", a.wait, *tb)
    if "fit" in phases:
        fit_alone(a.env)
    if "suggest" in phases and not pick.exists():
        val.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=val, delete=False) as f:
            sh("autotuner", "suggest", "--model", a.model, "--env", a.env, "--model-dir", str(MODELS),
               "--compute-ms", f"{a.compute_ms:g}", "--compression", "none", "--top", "1", "--json", stdout=f)
        Path(f.name).replace(pick)
    if "validate" in phases:
        picked = json.loads(pick.read_text())["proposals"][0]["config"]
        props = val / f"{run}-proposals.json"
        props.write_text(json.dumps(plan(picked), indent=1) + "\n")
        sh("autotuner", "validate", "--env", a.env, "--model", a.model, "--compute-ms", f"{a.compute_ms:g}",
           "--proposals", str(props), "--repeats", str(a.repeats), "--name", run,
           "--runs-dir", str(RUNS), "--model-dir", str(MODELS), "--replay-wait", a.wait,
           *(("--keep-timelines",) if a.timelines else ("--no-timeline",)), *tb)
    if "report" in phases:
        lines = report(a.env, a.model, run)
        print("\n".join(lines))
        out = val / f"{run}-protocol.txt"
        tmp = out.with_suffix(".tmp")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.replace(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
