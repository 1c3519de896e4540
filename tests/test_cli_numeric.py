"""Property test (hypothesis): every numeric option of every command, given nan, inf, negative,
huge, fractional or non-numeric values, ends in exit 0 or in exit 2 with one ``error:`` line;
never a traceback, never a hang (an alarm stops a call after 60 s), and ``--json`` output is
strict JSON. ``validate`` is driven with process starts blocked (tests/fuzz/harness.py).
"""
import json
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli_helpers import fuzz_harness

ROOT = Path(__file__).resolve().parents[1]


SPECIAL = ["nan", "NaN", "inf", "-inf", "Infinity", "-0", "0", "-1", "1", "2", "0.5", "1e300", "-1e300", "1e309",
           "1e-320", "99999999999999999999999", "9223372036854775808", "-9223372036854775809", "", "abc", "1,5", "0x10",
           " 3", "1_000"]
NUMBER = st.one_of(st.sampled_from(SPECIAL),
                   st.floats(allow_nan=True, allow_infinity=True).map(repr),
                   st.integers(min_value=-(10 ** 25), max_value=10 ** 25).map(str))
NUMBER_LIST = st.lists(NUMBER, min_size=1, max_size=3).map(",".join)
#: options whose valid values set the amount of work (100,000 proposals is accepted and slow,
#: not a hang): small valid values, or values outside the option's range
WORK = st.one_of(st.sampled_from(["1", "2", "3", "0", "-1", "nan", "inf", "x", "", "2.5", "1e3", "100001"]),
                 st.integers(max_value=0).map(str), st.integers(min_value=100_001).map(str))
WORK_OPTS = ("--n-calls", "--timeline-steps", "--repeats", "--steps", "--warmup")

KNOBS = ["--fusion-threshold-mb", "--cycle-time-ms", "--cache-capacity"]
WHAT_IFS = ["--nodes", "--gpus-per-node", "--link-gbit", "--compute-ms"]
NUMERIC = {
    "simulate": KNOBS + WHAT_IFS + ["--timeline-steps"],
    "suggest": KNOBS + WHAT_IFS + ["--top", "--n-calls", "--seed"],
    "explore": KNOBS + WHAT_IFS,
    "scale": ["--gpus-per-node", "--batch-size", "--compute-ms"],
    "compare": ["--skip-real", "--skip-sim", "--top"],
    "validate": ["--np", "--link-gbit", "--compute-ms", "--steps", "--warmup", "--repeats", "--top", "--timeout",
                 "--batch-size"],
}
LIST_OPTS = {"scale": ["--nodes", "--link-gbit"]}
FIX = ROOT / "runs/local-gloo-1gbit/fixtures"


def _base(cmd: str, out: Path) -> list[str]:
    if cmd == "simulate":
        return ["simulate", "--model", "resnet50", "--json", "--timeline-filename", str(out / "t.json")]
    if cmd == "suggest":
        return ["suggest", "--model", "resnet50", "--json"]
    if cmd == "explore":  # small grid: --resolution is drawn from a bounded set below
        return ["explore", "--model", "resnet50", "--no-suggest", "--out", str(out), "--json"]
    if cmd == "scale":
        return ["scale", "--model", "resnet50", "--out", str(out), "--json"]
    if cmd == "compare":
        return ["compare", str(FIX / "timeline-hvd0.28.1-gloo-2ranks-fusion-cycles.json"),
                str(FIX / "timeline-hvd0.28.1-gloo-2ranks-nofusion.json"), "--json"]
    props = out / "proposals.json"  # given proposals: validate has nothing to search before it would launch
    props.write_text(json.dumps([{"fusion_threshold_mb": 64.0, "cycle_time_ms": 5.0, "cache_capacity": 1024,
                                  "hierarchical_allreduce": False, "hierarchical_allgather": False}]))
    return ["validate", "--env", "fuzz-env", "--model", "resnet50", "--runs-dir", str(out / "runs"), "--no-autotune",
            "--proposals", str(props)]


def _options(cmd: str):
    single = st.lists(st.sampled_from(NUMERIC[cmd]), min_size=1, max_size=3, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: WORK if k in WORK_OPTS else NUMBER for k in keys}))
    lists = st.dictionaries(st.sampled_from(LIST_OPTS.get(cmd, ["--none"])), NUMBER_LIST, max_size=2) \
        if cmd in LIST_OPTS else st.just({})
    extra = st.sampled_from(["2", "3", "0", "1", "-1", "nan", "x", "", "99999999999999999999999"]) \
        if cmd == "explore" else st.just(None)
    return st.tuples(single, lists, extra)


def _check(cmd: str, opts) -> None:
    h = fuzz_harness()
    single, lists, resolution = opts
    out = Path(tempfile.mkdtemp(prefix=f"autotuner-numeric-{cmd}-"))
    try:
        argv = _base(cmd, out)
        for k, v in {**single, **lists}.items():
            argv += [k, v]
        if cmd == "explore":
            argv += ["--resolution", resolution]
        if cmd == "suggest" and "--n-calls" not in single:
            argv += ["--n-calls", "2"]
        res = h.invoke(argv, timeout=TIMEOUT_S, allow_launch=cmd != "validate")
    finally:
        shutil.rmtree(out, ignore_errors=True)
    shown = " ".join(argv)
    assert not res["hung"], f"hang: autotuner {shown}"
    if cmd == "validate" and isinstance(res["exc"], h.Launched):
        return  # every value was accepted and a run would have started: not a fault of this test
    assert res["exc"] is None, f"traceback: autotuner {shown}\n{res['tb']}"
    assert "Traceback" not in res["stderr"], f"autotuner {shown}\n{res['stderr']}"
    lines = [ln for ln in res["stderr"].splitlines() if ln.strip()]
    assert res["rc"] in (0, 2), f"exit {res['rc']}: autotuner {shown}\n{res['stderr']}"
    if res["rc"] == 2:
        assert len(lines) == 1 and lines[0].startswith("error:"), f"autotuner {shown}\n{res['stderr']}"
    elif "--json" in argv:
        def bad(c):
            raise AssertionError(f"--json printed {c}: autotuner {shown}")
        json.loads(res["stdout"], parse_constant=bad)


COMMON = {"deadline": None, "derandomize": True, "database": None,
          "suppress_health_check": [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]}
EXAMPLES = {"simulate": 40, "suggest": 10, "explore": 6, "scale": 12, "compare": 25, "validate": 12}
TIMEOUT_S = 60  # a hang, not a slow call on a loaded machine (the first call of a command imports its libraries)


@pytest.fixture(autouse=True)
def _cwd(monkeypatch):
    monkeypatch.chdir(ROOT)


def _make(cmd):
    @settings(max_examples=EXAMPLES[cmd], **COMMON)
    @given(opts=_options(cmd))
    def test(opts):
        _check(cmd, opts)
    test.__name__ = f"test_{cmd}_numeric_options"
    return test


test_simulate_numeric_options = _make("simulate")
test_suggest_numeric_options = _make("suggest")
test_explore_numeric_options = _make("explore")
test_scale_numeric_options = _make("scale")
test_compare_numeric_options = _make("compare")
test_validate_numeric_options = _make("validate")
