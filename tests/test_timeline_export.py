"""Simulated timelines (timeline_export + writers.timeline) and `autotuner compare`.

Round trip: simulate -> Horovod timeline file -> our reader -> the responses the simulator
produced. Schema: the file is loaded with `json` and every event checked against the Chrome
trace event format (keys by phase, B/E nesting per pid) and against the key order of the real
Horovod 0.28.1 fixture files.
"""
import gzip
import json
from collections import Counter

import pytest

from autotuner.frameworks.horovod.predict import make_scenario, write_simulated_timeline
from autotuner.frameworks.horovod.knobs import MIB, Config
from autotuner.readers.timeline import TimelineError, read_timeline
from autotuner.readers.timeline_steps import split_steps
from autotuner.views.timeline_compare import compare
from autotuner.frameworks.horovod.views.timeline_export import simulated_responses, timeline_events
from autotuner.writers.timeline import format_timeline, write_timeline

from conftest import ROOT

MODEL = ROOT / "autotuner" / "models"
FIX = ROOT / "runs" / "local-gloo-1gbit" / "fixtures"
REAL_FIXTURES = [FIX / "timeline-hvd0.28.1-gloo-2ranks-fusion-cycles.json",
                 FIX / "timeline-hvd0.28.1-gloo-2ranks-nofusion.json"]
SWEEP = ROOT / "runs" / "local-gloo-1gbit" / "validation"
REAL_P3 = SWEEP / "timelines" / "fit-sweep" / "proposal-3-r0.json.gz"  # fusion 24 MiB, cycle 15 ms
AS_RECORDED = ROOT / "runs" / "local-gloo-1gbit" / "layouts" / "resnet50-as-recorded.json"

# (env, knobs): Gloo fused / unfused / coordinator negotiation (cache off: X marks) / NCCL
# (asynchronous collectives: WAIT_FOR_DATA and QUEUE activities)
CASES = [
    ("local-gloo-1gbit", dict(fusion_threshold_bytes=24 * MIB, cycle_time_ms=15.0)),
    ("local-gloo-1gbit", dict(fusion_threshold_bytes=0, cycle_time_ms=3.0)),
    ("local-gloo-1gbit", dict(fusion_threshold_bytes=2 * MIB, cycle_time_ms=7.0, cache_capacity=0)),
    ("v100-16gbit", dict(fusion_threshold_bytes=64 * MIB, cycle_time_ms=5.0)),
    ("v100-16gbit", dict(fusion_threshold_bytes=4 * MIB, cycle_time_ms=1.0)),
]
IDS = ["gloo-24MiB", "gloo-nofusion", "gloo-nocache", "nccl-64MiB", "nccl-4MiB"]


def cfg(**kw):
    base = dict(fusion_threshold_bytes=128 * MIB, cycle_time_ms=1.0, cache_capacity=1024,
                hierarchical_allreduce=False, hierarchical_allgather=False)
    return Config(**{**base, **kw})


from cli_helpers import run  # noqa: E402


def assert_one_line_error(p, needle):
    assert p.returncode == 2, (p.stdout, p.stderr)
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and needle in lines[0], p.stderr
    assert "Traceback" not in p.stderr


@pytest.fixture(scope="module", params=list(zip(CASES, IDS)), ids=IDS)
def written(request, tmp_path_factory):
    (env, knobs), name = request.param
    sc, fenv = make_scenario(MODEL, env, "resnet50")
    path, r = write_simulated_timeline(sc, fenv, cfg(**knobs), tmp_path_factory.mktemp(name) / "sim.json", steps=3)
    return sc, cfg(**knobs), r, path


# --------------------------------------------------------------------------- simulator trace


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_trace_changes_no_result(case):
    env, knobs = case
    sc, _ = make_scenario(MODEL, env, "resnet50")
    plain, traced = sc.simulate(cfg(**knobs)), sc.simulate(cfg(**knobs), trace=True)
    assert plain.trace is None and traced.trace is not None
    assert traced.step_time_s == plain.step_time_s and traced.responses == plain.responses
    assert (traced.comm_s, traced.overlap, traced.n_cycles) == (plain.comm_s, plain.overlap, plain.n_cycles)
    last = traced.trace.steps[-1]
    assert [(x.nbytes, x.end - x.first, x.start_s - last.start_s, x.duration_s) for x in last.responses] == \
        [(x.nbytes, x.n_tensors, pytest.approx(x.start_s, abs=1e-12), x.duration_s) for x in plain.responses]
    assert len(traced.trace.steps) == 2  # the measured steps


# --------------------------------------------------------------------------- round trip


def test_round_trip_same_responses(written):
    sc, c, r, path = written
    tl = read_timeline(path)
    assert tl.problems == [] and tl.horovod_form == "closed"
    want = simulated_responses(r, sc.layout)
    got = [x for x in tl.responses if x.op == "allreduce"]
    assert [x.tensors for x in got] == [w["tensors"] for w in want]
    assert [x.nbytes for x in got] == [w["nbytes"] for w in want]
    for x, w in zip(got, want):  # each timestamp rounded to 1 µs on its own
        assert abs(x.duration_us - w["collective_us"]) <= 1.0 + 1e-6
        assert abs(x.memcpy_in_us + x.memcpy_out_us - w["memcpy_us"]) <= 2.0 + 1e-6
        assert abs(x.start_us - w["start_us"]) <= 0.5 + 1e-6
    # bytes per step = the layout's, every step
    steps = split_steps(tl)
    assert len(steps.steps) == 3 and steps.n_tensors == sc.layout.n_tensors
    assert all(sum(x.nbytes for x in s) == r.bytes_per_step for s in steps.steps)
    # one negotiation per tensor per step
    assert len(tl.negotiations) == 3 * sc.layout.n_tensors


def test_cycle_marks(written):
    sc, c, r, path = written
    tl = read_timeline(path)
    tr = r.trace
    carrying = sum(len(s.cycles) for s in tr.steps)
    assert len(tl.cycle_starts_us) >= carrying
    t0 = tr.steps[0].start_s
    expected = sum(1 for s in tr.steps for cy in s.cycles for t in (*cy.idle_starts_s, cy.start_s) if t >= t0)
    last = tr.steps[-1]
    t, trailing = last.next_cycle_s, 0
    while t < last.end_s:
        trailing, t = trailing + 1, t + tr.period_s
    assert len(tl.cycle_starts_us) == expected + trailing
    # Horovod's loop never starts cycles closer than the cycle time (1 µs rounding)
    gaps = [b - a for a, b in zip(tl.cycle_starts_us, tl.cycle_starts_us[1:])]
    assert min(gaps) >= c.cycle_time_ms * 1e3 - 1
    # a carrying cycle's negotiation starts at its CYCLE_START
    marks = set(tl.cycle_starts_us)
    assert all(n.start_us in marks for n in tl.negotiations)


def test_gzip_output_reads_back_the_same(written, tmp_path):
    sc, c, r, path = written
    gz = tmp_path / "sim.json.gz"
    write_timeline(gz, json.loads(path.read_text()))
    assert gzip.decompress(gz.read_bytes()) == path.read_bytes()
    a, b = read_timeline(path), read_timeline(gz)
    assert a.responses == b.responses and a.cycle_starts_us == b.cycle_starts_us


def test_untraced_result_is_refused():
    sc, _ = make_scenario(MODEL, "local-gloo-1gbit", "resnet50")
    with pytest.raises(ValueError, match="trace=True"):
        timeline_events(sc.simulate(cfg()), sc.layout)


# --------------------------------------------------------------------------- schema


def key_orders(events):
    """Key sequence per phase (and metadata name): Horovod writes fixed key orders."""
    out = set()
    for e in events:
        ks = tuple(e)
        out.add((e["ph"], e.get("name") if e["ph"] == "M" else None, ks, tuple(e.get("args", {}))))
    return out


def check_chrome_trace(events):
    """Chrome trace event format (the JSON array form chrome://tracing and Perfetto load):
    required keys by phase, integer µs timestamps, B/E properly nested per pid, metadata before
    a pid's first event. Returns the per-phase counts."""
    assert isinstance(events, list) and events
    named: dict[int, str] = {}
    stacks: dict[int, list] = {}
    last_ts = -1
    for n, e in enumerate(events):
        assert isinstance(e, dict) and isinstance(e.get("ph"), str), n
        ph = e["ph"]
        if ph == "M":
            assert e["name"] in ("process_name", "process_sort_index") and isinstance(e["pid"], int)
            assert isinstance(e["args"], dict)
            if e["name"] == "process_name" and "name" in e["args"]:
                assert isinstance(e["args"]["name"], str) and e["pid"] not in named
                named[e["pid"]] = e["args"]["name"]
            if e["name"] == "process_sort_index":
                assert isinstance(e["args"]["sort_index"], int)
            continue
        assert isinstance(e["ts"], int) and e["ts"] >= 0, e
        assert e["ts"] >= last_ts, (n, e)  # written in time order
        last_ts = e["ts"]
        if ph == "i":
            assert e["name"] == "CYCLE_START" and e["s"] in ("g", "p", "t") and "pid" not in e
            continue
        assert isinstance(e["pid"], int) and e["pid"] in named, e  # metadata came first
        st = stacks.setdefault(e["pid"], [])
        if ph == "B":
            assert isinstance(e["name"], str) and e["name"]
            st.append(e)
        elif ph == "E":
            assert "name" not in e and st, e
            b = st.pop()
            assert e["ts"] >= b["ts"]
            if not st:  # a top-level op ends with dtype/shape, a negotiation without args
                assert ("args" in e) == (b["name"] == "ALLREDUCE"), (b, e)
                if "args" in e:
                    assert set(e["args"]) == {"dtype", "shape"} and json.loads(e["args"]["shape"])
        elif ph == "X":
            assert e["dur"] == 0 and e["name"].isdigit()
            assert st and st[-1]["name"].startswith("NEGOTIATE_"), e
        else:
            raise AssertionError(f"phase {ph!r} is not written by Horovod")
    assert all(not s for s in stacks.values()), "unclosed B events"
    return Counter(e["ph"] for e in events)


def test_schema_and_key_order_match_real_horovod(written):
    sc, c, r, path = written
    text = path.read_text()
    assert text.startswith('[\n{"name": "process_name", "ph": "M", "pid": 0, "args": '
                           '{"start_time_since_epoch_in_micros":0}},\n'
                           '{"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}},\n')
    assert text.endswith("}]")
    events = json.loads(text)
    counts = check_chrome_trace(events)
    T = sc.layout.n_tensors
    assert counts["M"] == 2 * (T + 1)
    real = set().union(*(key_orders(json.loads(p.read_text())) for p in REAL_FIXTURES))
    real_names = {e.get("name") for p in REAL_FIXTURES for e in json.loads(p.read_text())}
    mine = key_orders(events)
    assert mine <= real, mine - real
    names = {e.get("name") for e in events} - {None}
    extra = names - real_names - {str(k) for k in range(r.trace.ranks)}
    # activities the real CPU fixtures cannot show (GPU waits, NCCL, other backends' names)
    assert extra <= {"WAIT_FOR_DATA", "QUEUE", "NCCL_ALLREDUCE", "MPI_ALLREDUCE"}, extra
    if r.trace.coordinated:
        assert counts["X"] == 3 * T * r.trace.ranks
    else:
        assert counts["X"] == 0  # response-cache hits: no rank-ready marks (as in the real files)


def test_real_fixtures_pass_the_schema_check():
    """The checker itself accepts what Horovod 0.28.1 wrote (allreduce tensors; a broadcast's
    E on the root rank has no args, see the fixtures' README)."""
    for p in REAL_FIXTURES:
        events = json.loads(p.read_text())
        named = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and "name" in e.get("args", {})}
        ar = [e for e in events if e["ph"] == "M" or e.get("pid") is None
              or named.get(e["pid"], "").startswith("allreduce.")]
        check_chrome_trace(ar)


def test_backend_names_the_collective(written):
    sc, c, r, path = written
    acts = {a for op in read_timeline(path).tensor_ops for a in op.collectives}
    assert acts == ({"GLOO_ALLREDUCE"} if sc.env.startswith("local-gloo") else {"NCCL_ALLREDUCE"})


def test_perfetto_trace_processor_loads_it(tmp_path):
    """Perfetto's own parser (the ``perfetto`` package of the test extra) counts a slice for every response.
    It runs the ``trace_processor_shell`` binary: the one on PATH, else the one the package downloads on first use;
    where neither can be had (offline, no binary on PATH) the test is skipped, a skip CI allows (its machines have no
    network)."""
    import shutil
    import subprocess

    import pytest
    from cli_helpers import NO_TRACE_PROCESSOR, need_module

    tp_mod = need_module("perfetto.trace_processor", "perfetto")
    sc, fenv = make_scenario(MODEL, "local-gloo-1gbit", "resnet50")
    path, r = write_simulated_timeline(sc, fenv, cfg(fusion_threshold_bytes=2 * MIB), tmp_path / "sim.json")
    config = tp_mod.TraceProcessorConfig(bin_path=shutil.which("trace_processor_shell"))
    try:
        tp = tp_mod.TraceProcessor(trace=str(path), config=config)
    except (OSError, subprocess.CalledProcessError):  # no binary on PATH, and its download failed
        pytest.skip(NO_TRACE_PROCESSOR)
    try:
        n = next(iter(tp.query("select count(*) as n from slice"))).n
    finally:
        tp.close()
    assert n >= sum(len(s.responses) for s in r.trace.steps)


def test_format_timeline_edge_cases():
    assert json.loads(format_timeline([])) == []
    only_meta = [{"name": "process_sort_index", "ph": "M", "pid": 0, "args": {"sort_index": 0}}]
    assert json.loads(format_timeline(only_meta)) == only_meta


# --------------------------------------------------------------------------- compare


def test_compare_real_fit_sweep_timeline_with_its_simulation(tmp_path):
    rec = [json.loads(l) for l in (SWEEP / "fit-sweep.jsonl").read_text().splitlines()]
    rec = next(x for x in rec if x["trial"] == "proposal-3/r0")
    c = rec["config"]
    knobs = ["--fusion-threshold-mb", str(c["fusion_threshold_mb"]), "--cycle-time-ms", str(c["cycle_time_ms"])]
    # the layout the run replayed (bias before weight in every layer, as shipped before the
    # GPU-measured order): same tensors in the same order, so the same fused responses
    sim = tmp_path / "sim.json"
    p = run("simulate", "--env", "local-gloo-1gbit", "--model", str(AS_RECORDED), "--compute-ms", "300",
            *knobs, "--timeline-filename", str(sim), "--timeline-steps", "3", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["timeline"] == str(sim)
    # the shipped layout (measured order) has the same step time; compare says fusion differs
    shipped = tmp_path / "shipped.json"
    p2 = run("simulate", "--env", "local-gloo-1gbit", "--model", "resnet50", *knobs,
             "--timeline-filename", str(shipped), "--timeline-steps", "3", "--json")
    assert p2.returncode == 0, p2.stderr
    assert json.loads(p2.stdout)["step_time_ms"] == pytest.approx(json.loads(p.stdout)["step_time_ms"], rel=1e-3)
    p2 = run("compare", str(REAL_P3), str(shipped), "--json")
    assert p2.returncode == 0, p2.stderr
    assert any("fusion differs" in n for n in json.loads(p2.stdout)["notes"])
    p = run("compare", str(REAL_P3), str(sim), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    real, simd = d["real"], d["sim"]
    assert d["notes"] == []  # same tensor names on both sides
    assert real["steps_used"] >= 5 and simd["steps_used"] == 3 and real["tensors"] == simd["tensors"] == 161
    assert real["bytes_per_step"] == simd["bytes_per_step"]  # same layout, same bytes
    assert real["responses_per_step"] == pytest.approx(rec["timeline"]["responses_per_step"], abs=0.5)
    assert d["ratio"]["collective_ms_per_step"] == pytest.approx(1.0, abs=0.35)  # the fitted env
    assert sum(b["real_per_step"] for b in d["by_size"]) == pytest.approx(real["responses_per_step"])
    # the rich view prints the same tables
    p = run("compare", str(REAL_P3), str(sim))
    assert p.returncode == 0, p.stderr
    assert "per step" in p.stdout and "by response size" in p.stdout


def test_compare_a_timeline_with_itself_matches_everything():
    tl = read_timeline(REAL_P3)
    d = compare(tl, tl, skip_real=1, skip_sim=1)
    assert d["unmatched_real"] == d["unmatched_sim"] == 0 and d["n_matched"] > 0
    assert all(m["diff_ms"] == 0 for m in d["matched"])
    assert all(v == pytest.approx(1.0) for v in d["ratio"].values() if v is not None)


def test_split_steps_refuses_a_timeline_without_allreduces(tmp_path):
    p = tmp_path / "t.json"
    p.write_text('[\n{"ph": "i", "name": "CYCLE_START", "ts": 1, "s": "g"}]')
    with pytest.raises(TimelineError, match="no allreduce responses"):
        split_steps(read_timeline(p))


def test_compare_bad_input_one_line_errors(tmp_path):
    notl = tmp_path / "x.json"
    notl.write_text('{"traceEvents": []}')
    badgz = tmp_path / "x.json.gz"
    badgz.write_bytes(gzip.compress(b"[\n{")[:12])
    assert_one_line_error(run("compare", str(tmp_path / "missing.json"), str(REAL_P3)), "cannot read")
    assert_one_line_error(run("compare", str(REAL_P3), str(notl)), "not a Horovod timeline")
    assert_one_line_error(run("compare", str(badgz), str(REAL_P3)), "x.json.gz")
    assert_one_line_error(run("compare", str(REAL_P3), str(REAL_P3), "--skip-real", "50"), "none left")
    assert_one_line_error(run("compare", str(REAL_P3), str(REAL_P3), "--top", "-1"), ">= 0")


def test_simulate_timeline_bad_input_one_line_errors(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_one_line_error(run("simulate", "--model", "resnet50", "--timeline-filename", str(blocker / "sim.json")),
                          "cannot write")
    assert_one_line_error(run("simulate", "--model", "resnet50", "--timeline-filename", str(tmp_path / "s.json"),
                              "--timeline-steps", "0"), "--timeline-steps: 0: must be >= 1")
    assert not (tmp_path / "s.json").exists()
