"""Issue 29 part 5, the lead of docs/accuracy.md ("The lead, every fusion-off row at once"): does the step phase's
price of a small response depend on the size of the small responses? The phase's layout (autotuner/frameworks/
horovod/stepprobe.py) is 32 blocks of one 256 KiB weight and three 1 KiB vectors; real layouts' small responses
spread over 1-256 KiB, and on the one-host polling envs they want 1.34-1.63x the phase's price.

This replays the phase's own structure (32 blocks, equal backward share per block on its weight, 100 ms of compute,
8 steps after 2 of warm-up, Horovod's defaults against fusion off, 5 interleaved repeats, no timeline, the env's
own link and wait) with the three vectors of every block at 1 KiB (the phase's layout), 16 KiB and 64 KiB, and
reports, per env and layout, the price ``a = 2(p-1) alpha`` (ms per small response) at which the simulator meets the
measured fusion off - defaults (scipy ``brentq``, as ``research/scripts/small_response_pairs.py``), beside the env's charged
step-phase price.

Declared before it ran (2026-12-01): if what the model misses is the per-byte cost below the sweep's knee, the 16 and
64 KiB layouts want a higher price than the 1 KiB one on fresh-poll-2.75gbit (its line below the knee has a per-byte
slope of ~0) and about the same one on fresh-poll-1.1gbit (its slope measured, 0.55 Gbit/s); if the price is the
same for all three sizes on both, the size of the small responses is not what the phase misses.

A second run, declared before it ran (2026-12-01, session 52, with the below-knee bound's second form shipped, which
lowered the step phase's price on fresh-poll-3gbit 0.45 -> 0.30 ms and on fresh-poll-1.25gbit 1.24 -> 0.87, and
moved their MobileNetV2 fusion off to -11.1 and -8.8 %): on those two envs, if the phase's layout simply re-measures
its own price, the 1 KiB layout wants within 30 % of the env's step-phase price (fresh-poll-2.75gbit's first run:
0.45 against 0.35); if the fixed part of a small response grows with its size, the 16 and 64 KiB layouts want more
than the 1 KiB one on both envs.

    python research/scripts/step_layout_sizes.py measure fresh-poll-2.75gbit fresh-poll-1.1gbit   # as root, alone (~12 min)
    python research/scripts/step_layout_sizes.py measure fresh-poll-3gbit fresh-poll-1.25gbit     # the second run
    python research/scripts/step_layout_sizes.py report fresh-poll-2.75gbit fresh-poll-1.1gbit

Records: ``runs/<env>/experiments/step-layout-sizes/<layout>.jsonl`` (``validate``'s, measured in a scratch copy of
the env so that no acceptance row reads them) beside the three layout files; no fit reads them.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "research" / "scripts"))
RUNS = ROOT / "runs"
SUB = Path("experiments") / "step-layout-sizes"
#: the vectors' elements per layout (float32: 1, 16, 64 KiB)
VECTORS = {"vec1k": 256, "vec16k": 4096, "vec64k": 16384}
FUSION_OFF = [{"fusion_threshold_mb": 0, "cycle_time_ms": 1}]


def layout(name: str, elems: int, weight_shape: tuple[int, int] | None = None) -> dict:
    """The step phase's blocks (one weight, three vectors of ``elems`` float32 each) as a layout dict; the weight
    ``weight_shape`` (default the phase's own, ``stepprobe.WEIGHT_SHAPE``)."""
    from autotuner.frameworks.horovod.stepprobe import BLOCKS, WEIGHT_SHAPE

    shape = list(weight_shape or WEIGHT_SHAPE)
    tensors = []
    for b in reversed(range(BLOCKS)):
        tensors.append({"name": f"block{b}.weight", "shape": shape, "dtype": "float32",
                        "compute_share": 1.0 / BLOCKS})
        for v in ("bias", "norm.weight", "norm.bias"):
            tensors.append({"name": f"block{b}.{v}", "shape": [elems], "dtype": "float32", "compute_share": 0.0})
    return {"schema": "autotuner.layout/1", "name": f"step-probe-{name}",
            "source": (f"research/scripts/step_layout_sizes.py: the step phase's {BLOCKS} blocks with {elems}-element vectors"
                       if weight_shape is None else f"research/scripts/step_layout_sizes.py: the step phase's {BLOCKS} blocks "
                       f"with {shape[0]}x{shape[1]} weights and {elems}-element vectors"),
            "order": "backward", "tensors": tensors}


def _setup_args(env: str) -> list[str]:
    s = json.loads((RUNS / env / "sweep.jsonl").open().readline())["setup"]
    if s.get("testbed_hosts"):
        args = ["--testbed-hosts", str(s["testbed_hosts"]), "--ranks-per-host", str(s["ranks_per_host"]),
                "--link-gbit", f"{s['link_gbit']:g}"]
    else:
        args = ["--bandwidth-gbit", f"{s['bandwidth_gbit']:g}"] if s.get("bandwidth_gbit") is not None else []
    wait = json.loads((RUNS / env / "step.jsonl").open().readline()).get("wait", "spin")
    return args + ["--replay-wait", wait]


def measure(envs: list[str]) -> int:
    for env in envs:
        out = RUNS / env / SUB
        out.mkdir(parents=True, exist_ok=True)
        jobs = []
        for name, elems in VECTORS.items():
            lf = out / f"{name}.json"
            lf.write_text(json.dumps(layout(name, elems), indent=1) + "\n")
            jobs.append((name, str(lf), 100.0))
        if replay_jobs(env, out, jobs) != 0:
            return 1
    return 0


def replay_jobs(env: str, out: Path, jobs: list[tuple[str, str, float]], repeats: int = 5) -> int:
    """Each ``(name, model, compute ms)`` of ``jobs`` replayed on ``env``'s own testbed (its sweep's setup, its step
    phase's wait) by ``autotuner validate``: Horovod's defaults against fusion off, ``repeats`` interleaved repeats, 8 steps
    after 2 of warm-up, no timeline, in a scratch copy of the env (no acceptance row reads the records); the records
    copied to ``out/<name>.jsonl``. A job whose records are there is skipped (a rerun resumes). Returns 0, or 1 when a
    validate failed."""
    exe = str(Path(sys.executable).parent / "autotuner")
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp) / env
        shutil.copytree(RUNS / env, scratch, ignore=shutil.ignore_patterns("validation", "experiments", "*timelines"))
        props = Path(tmp) / "proposals.json"
        props.write_text(json.dumps(FUSION_OFF))
        for name, model, compute in jobs:
            if (out / f"{name}.jsonl").exists():
                continue
            cmd = [exe, "validate", "--env", env, "--model", model, "--runs-dir", tmp, "--no-autotune",
                   "--repeats", str(repeats), "--compute-ms", f"{compute:g}", "--steps", "8", "--warmup", "2",
                   "--proposals", str(props), "--name", name, *_setup_args(env)]
            print("+ " + " ".join(cmd), flush=True)
            if subprocess.run(cmd, cwd=ROOT).returncode != 0:
                return 1
            shutil.copyfile(scratch / "validation" / f"{name}.jsonl", out / f"{name}.jsonl")
    return 0


def paired(f: Path) -> tuple[dict[str, dict[str, dict]], list[float], float, float]:
    """A ``validate`` file of the defaults against one proposal (``proposal-1``), read with the project's reader
    (damaged lines named and skipped): round -> label -> ok record, the rounds' proposal - defaults (ms), their mean
    and its standard error (nan for one round). Raises StatisticsError where no round ran both."""
    from autotuner.frameworks.horovod.readers.runs import parse_records

    recs, _ = parse_records(f.read_text(), f.name)
    by: dict[str, dict[str, dict]] = {}
    for r in recs:
        if r["status"] == "ok":
            by.setdefault(r["trial"].rsplit("/", 1)[1], {})[r["label"]] = r
    d = [x["proposal-1"]["measured_step_time_ms"] - x["default"]["measured_step_time_ms"]
         for x in by.values() if "proposal-1" in x and "default" in x]
    m = statistics.mean(d)
    return by, d, m, statistics.stdev(d) / len(d) ** 0.5 if len(d) > 1 else float("nan")


def report(envs: list[str]) -> int:
    from autotuner.frameworks.horovod.knobs import config_from_values
    from autotuner.frameworks.horovod.predict import make_scenario
    from small_response_pairs import price_that_meets

    print("| env | vectors | fusion off - defaults, measured (mean +- se, ms) | simulated at the env's price (ms) | "
          "the price it wants (ms) | the env's step-phase price (ms) |")
    print("|---|---|---:|---:|---:|---:|")
    for env in envs:
        for name in VECTORS:
            f = RUNS / env / SUB / f"{name}.jsonl"
            if not f.exists():
                continue
            by, d, m, se = paired(f)
            r0 = next(iter(by.values()))
            sc, _ = make_scenario(None, env, str(RUNS / env / SUB / f"{name}.json"), compute_ms=100.0)
            a, own, at_own = price_that_meets(sc, config_from_values(r0["default"]["config"]),
                                              config_from_values(r0["proposal-1"]["config"]), m)
            print(f"| {env} | {name} ({len(d)} rounds) | {m:+.1f} +- {se:.1f} | {at_own:+.1f} | "
                  + ("none in 0-10" if a is None else f"{a:.2f}") + f" | {own:.2f} |")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("measure", "report"))
    ap.add_argument("envs", nargs="+")
    a = ap.parse_args(argv)
    for env in a.envs:
        if not (RUNS / env / "step.jsonl").exists():
            print(f"error: {env}: no runs/{env}/step.jsonl (a sweep env with the step phase)", file=sys.stderr)
            return 2
    return measure(a.envs) if a.what == "measure" else report(a.envs)


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:  # | head
        sys.stderr.close()
        sys.exit(0)
