"""The fused phase: the fusion buffer's copies timed by the wall clock without Horovod's timeline
(``autotuner measure``'s ``fused.jsonl``), fitted by :func:`autotuner.frameworks.horovod.fit.phase_fused.fused_copy` and
charged in place of the copy rate the sweep's timelines give. The rule is checked on records simulated with a known
rate; the committed phases on the models shipped from them."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from autotuner.frameworks.horovod.fit.phase_fused import FUSED_RECORDS, MIN_FUSED_JOBS, fused_copy
from autotuner.model.costmodel import HostPasses
from autotuner.frameworks.horovod.readers.sweep import parse_fused_records
from autotuner.render import fit_regime_lines

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "runs"
MODELS = ROOT / "autotuner" / "models"
MIB = 1 << 20
SIZES = [4 * MIB, 16 * MIB, 32 * MIB]
#: the timelines' host passes of fresh-poll-2x1-3gbit's shipped model before the phase (ms per MiB, knee 4 MiB)
HOST = HostPasses(knee_bytes=4 * MIB, memcpy_s_per_byte=0.361e-3 / MIB, memcpy_spill_s_per_byte=0.147e-3 / MIB,
                  gap_fixed_s=44e-6, gap_s_per_byte=0.127e-3 / MIB)


def _record(j: int, k_ms_per_mib: float, c_ms: float, jitter_ms: float = 0.0) -> dict:
    """One job of the phase whose fused responses each cost ``c + k S`` more than a lone one of ``S`` bytes: lone
    samples on a 2.4 Gbit/s line, the fused item two responses of S back to back."""
    lone, fused = [], []
    for b in SIZES:
        t = 0.5 + b * 8 / 2.4e9 * 1e3
        x = c_ms + k_ms_per_mib * b / MIB + jitter_ms
        lone.append([t * f for f in (0.99, 1.0, 1.01)])
        fused.append([(2 * t + 2 * x) * f for f in (0.995, 1.0, 1.005)])
    return {"phase": "fused", "tier": "inter", "repeat": j, "sizes": SIZES, "lone_ms": lone, "fused_ms": fused,
            "ranks": 2, "wait": "sleep"}


def test_the_fused_rule_recovers_the_copy_rate_it_was_simulated_with():
    """Records simulated with a known copy price per MiB and a per-response part give both back; charged with host
    passes to correct; the per-size table holds what the timelines charged."""
    for k, c in ((0.37, -1.8), (0.12, 0.4)):
        out = fused_copy([_record(j, k, c) for j in range(3)], HOST)
        assert out["charged"] and out["jobs"] == 3, out
        assert out["ms_per_mib"] == pytest.approx(k, rel=1e-6) and out["fixed_ms"] == pytest.approx(c, abs=1e-6)
        assert [r[0] for r in out["sizes"]] == SIZES
        assert out["sizes"][-1][5] == pytest.approx(HOST.memcpy_s(32 * MIB) * 1e3)
        assert out["timelines_ms_per_mib"] == pytest.approx([0.361, 0.508])


def test_the_fused_rule_charges_nothing_it_cannot_read():
    """Too few jobs or sizes, no host passes to correct, no records, a slope whose two standard errors include 0, a
    rate the timelines already charge, a dearer one: recorded with the reason, the timelines' copy rate stands."""
    out = fused_copy([_record(j, 0.3, 0.0) for j in range(MIN_FUSED_JOBS - 1)], HOST)
    assert not out["charged"] and "fewer than 3 jobs" in out["note"], out
    one = [{**r, "sizes": r["sizes"][:1], "lone_ms": r["lone_ms"][:1], "fused_ms": r["fused_ms"][:1]}
           for r in (_record(j, 0.3, 0.0) for j in range(3))]
    out = fused_copy(one, HOST)
    assert not out["charged"] and "1 size(s)" in out["note"], out
    out = fused_copy([_record(j, 0.3, 0.0) for j in range(3)], None)
    assert not out["charged"] and out["ms_per_mib"] == pytest.approx(0.3) and "no host passes" in out["note"]
    out = fused_copy([], HOST)
    assert not out["charged"] and "no fused phase" in out["note"] and out["ms_per_mib"] is None
    # copies that cost no more with more bytes, and points that scatter: no price pinned, the timelines' stands
    out = fused_copy([_record(j, -0.2, 5.0) for j in range(3)], HOST)
    assert not out["charged"] and out["ms_per_mib"] == pytest.approx(-0.2) and "includes 0" in out["note"], out
    out = fused_copy([_record(j, 0.3, 0.0, jitter_ms=x) for j, x in enumerate((-40.0, 30.0, 5.0))]
                     + [_record(3, 0.3, 0.0, jitter_ms=-20.0)], HOST)
    assert not out["charged"] and "includes 0" in out["note"], out
    # a rate the timelines already charge at the phase's sizes (within two standard errors): theirs stands
    same = fused_copy([_record(j, 0.484, 0.0, jitter_ms=x) for j, x in enumerate((-0.3, 0.2, 0.1))], HOST)
    assert not same["charged"] and "agrees with the timelines" in same["note"], same
    assert same["timelines_ms_per_mib_at_sizes"] == pytest.approx(0.484, abs=5e-3)
    # a wall clock dearer than the timelines' copies: recorded, only a lower rate is charged
    dear = fused_copy([_record(j, 0.7, 0.0, jitter_ms=x) for j, x in enumerate((-0.3, 0.2, 0.1))], HOST)
    assert not dear["charged"] and "above the timelines'" in dear["note"] and dear["ms_per_mib"] == pytest.approx(0.7)


def test_a_fused_record_that_does_not_add_up_is_dropped_with_one_line():
    good = _record(0, 0.3, 0.0)
    bad = {**good, "repeat": 1, "fused_ms": good["fused_ms"][:2]}
    text = "\n".join(json.dumps(r) for r in (good, bad, {**good, "repeat": 2, "lone_ms": [[-1.0]] * 3}))
    recs, problems = parse_fused_records(text, "x/fused.jsonl")
    assert [r["repeat"] for r in recs] == [0] and len(problems) == 2
    assert all("\n" not in p and "x/fused.jsonl" in p for p in problems), problems


def test_the_probe_refuses_a_one_line_job_it_cannot_pair():
    """``sweepprobe --one-line`` pairs each lone size with its fused twin: other lists are one line, status 2
    (before Horovod is imported)."""
    for args in (["--sizes", "4194304", "--fusion-sizes", "8388608"], ["--sizes", "4194304", "--fusion-sizes",
                 "4194304", "--tiny-counts", "1"]):
        p = subprocess.run([sys.executable, "-m", "autotuner.frameworks.horovod.sweepprobe", *args, "--one-line"],
                           capture_output=True, text=True, cwd=ROOT, timeout=60)
        assert p.returncode == 2 and p.stderr.count("\n") == 1 and "--one-line" in p.stderr, p.stderr


def _phase_envs() -> list[str]:
    return sorted(p.parent.name for p in RUNS.glob(f"*/{FUSED_RECORDS}"))


#: where the committed phases move the copy rate: their rate differs from the timelines' by more than two standard
#: errors (research/notes/accuracy.md, "Fused responses without the timeline")
CHARGED = {"fresh-1.5gbit", "fresh-poll-1.25gbit", "fresh-poll-2x1-3gbit", "local-gloo-1gbit-sweep",
           "fresh-poll-2.5gbit", "fresh-poll-1gbit", "fresh-poll-2.25gbit", "fresh-poll-1.1gbit", "fresh-poll-2.75gbit", "fresh-poll-3gbit",
           # measured on an Intel Xeon VM in a later sitting, for the below-knee bound: 0.31 and 0.39 ms per MiB
           "fresh-poll-1.5gbit", "fresh-poll-3.5gbit", "fresh-poll-4gbit", "fresh-poll-2.2gbit"}
#: the envs measured in one sitting on an AMD EPYC VM (env.toml's ``stack`` names its CPU), whose copies are dearer:
#: 0.48-0.52 ms per MiB charged, against 0.25-0.40 on most other envs
EPYC_MACHINE = {"fresh-poll-1gbit", "fresh-poll-2.25gbit"}
#: the envs measured in one sitting on an Intel Xeon VM (env.toml's ``stack``: "vm: Intel(R) Xeon(R) Processor, 2
#: cores"; its fp16 and burst phases on a copy of fresh-poll-2gbit measured as that env's committed ones): 0.42-0.44 ms
#: per MiB charged on all three
XEON_SITTING = {"fresh-poll-1.1gbit", "fresh-poll-2.75gbit", "fresh-poll-3gbit"}


def test_the_committed_fused_phases_move_the_copy_rate_only_where_they_resolve_it():
    """Every 2-rank sweep env has the phase (3 jobs, 4-32 MiB, no timeline); it is charged on exactly the envs whose
    timelines' rate it finds too dear by more than two standard errors (fresh-poll-2.5gbit: measured after the rule
    was committed), and there at 0.25-0.40 ms per MiB for the two copies (5-8 GB/s each: one machine's memory, though
    the timelines' rates spread 0.10-0.61 over the same envs); a dearer wall clock is recorded, not charged."""
    envs = _phase_envs()
    assert len(envs) == 25, envs
    assert EPYC_MACHINE | XEON_SITTING | {"fresh-poll-2.2gbit"} <= CHARGED  # each named range is one applied
    charged = set()
    for env in envs:
        fused = json.loads((MODELS / f"{env}.json").read_text())["fit"]["host_passes"]["fused"]
        if fused["charged"]:
            charged.add(env)
            lo, hi = ((0.45, 0.55) if env in EPYC_MACHINE else (0.40, 0.48) if env in XEON_SITTING else
                      # measured twelve minutes after fresh-poll-4gbit's 0.35, on the same machine
                      (0.50, 0.56) if env == "fresh-poll-2.2gbit" else (0.25, 0.40))
            assert lo <= fused["ms_per_mib"] <= hi, (env, fused["ms_per_mib"])
            assert fused["timelines_ms_per_mib_at_sizes"] - fused["ms_per_mib"] > 2 * fused["ms_per_mib_se"]
        else:
            assert "timelines' copy rate" in fused["note"], (env, fused)
    assert charged == CHARGED


@pytest.mark.parametrize("env", _phase_envs())
def test_the_committed_fused_phase_sets_the_shipped_copy_rate(env):
    """The shipped model holds what its records give: the copy rate is the phase's where charged (no spill above
    the knee), the timelines' where not; ``fit`` says which, and a refit of the records gives the stored figures
    back (to 1e-6: a fitted float is not compared with ==)."""
    m = json.loads((MODELS / f"{env}.json").read_text())
    fused = m["fit"]["host_passes"]["fused"]
    hp = m["cost_model"]["host_passes"]
    recs, problems = parse_fused_records((RUNS / env / FUSED_RECORDS).read_text(), env)
    assert not problems and len(recs) >= MIN_FUSED_JOBS
    tl = fused["timelines_ms_per_mib"]
    again = fused_copy([r for r in recs if r["tier"] == m["fit"]["tier"]],
                       HostPasses(knee_bytes=hp["knee_mib"] * MIB, memcpy_s_per_byte=tl[0] * 1e-3 / MIB,
                                  memcpy_spill_s_per_byte=(tl[1] - tl[0]) * 1e-3 / MIB))
    assert again["charged"] == fused["charged"]
    assert again["ms_per_mib"] == pytest.approx(fused["ms_per_mib"], rel=1e-6, abs=1e-9)
    assert np.allclose([p[2] for p in again["points"]], [p[2] for p in fused["points"]], atol=1e-3)
    lines = fit_regime_lines(m)
    if fused["charged"]:
        assert hp["memcpy_ms_per_mib"] == pytest.approx(fused["ms_per_mib"], rel=1e-9)
        assert hp["memcpy_spill_ms_per_mib"] == 0.0
        line = [x for x in lines if "fused responses' copies" in x]
        assert len(line) == 1 and f"{fused['ms_per_mib']:.2f} ms per MiB" in line[0], line
    else:
        assert hp["memcpy_ms_per_mib"] == pytest.approx(tl[0], rel=1e-9)
        assert any("fused phase (recorded, not charged)" in x for x in lines), lines
