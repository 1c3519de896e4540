"""Timeline reader on real Horovod 0.28.1 timelines (runs/local-gloo-1gbit/fixtures) and variants."""
import json
import math
import re
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotuner.readers.timeline import (Timeline, TimelineError, parse_timeline, read_timeline,
                                        samples)
from autotuner.readers.timeline_steps import host_samples

from conftest import ROOT

FIX = ROOT / "runs" / "local-gloo-1gbit" / "fixtures"
FUSION = FIX / "timeline-hvd0.28.1-gloo-2ranks-fusion-cycles.json"
NOFUSION = FIX / "timeline-hvd0.28.1-gloo-2ranks-nofusion.json"
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "int64": 8, "int32": 4}
# The fixture model's gradients (record_fixture.py): 64-256-128-10 MLP, float32.
GRAD_BYTES = sorted([256 * 64 * 4, 256 * 4, 128 * 256 * 4, 128 * 4, 10 * 128 * 4, 10 * 4])


def raw_events(path):
    return json.loads(path.read_text())


def raw_allreduce_sizes(events):
    """Independent computation: bytes of every allreduce op, from the E args."""
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name" and "name" in e["args"]}
    out = []
    for e in events:
        if e["ph"] == "E" and "args" in e and names[e["pid"]].startswith("allreduce."):
            shape = json.loads(e["args"]["shape"])
            out.append(math.prod(shape) * ITEMSIZE[e["args"]["dtype"]])
    return out


def to_unclosed_0_20_0(events):
    """Rewrite as Horovod <= 0.20.0 wrote it: '[\\n' then 'record,\\n' each, never closed."""
    return "[\n" + "".join(json.dumps(e) + ",\n" for e in events)


@pytest.fixture(scope="module")
def fused():
    return read_timeline(FUSION)


@pytest.fixture(scope="module")
def unfused():
    return read_timeline(NOFUSION)


# ---------------------------------------------------------------- real files


def test_fixtures_are_real_closed_form():
    for p in (FUSION, NOFUSION):
        text = p.read_text()
        assert text.startswith("[\n") and text.endswith("}]")
        assert p.stat().st_size < 200_000


def test_fused_timeline_responses(fused):
    assert fused.horovod_form == "closed"
    assert len(fused.responses) == 4  # 4 steps, all 6 gradients fused into one response each
    for r in fused.responses:
        assert r.op == "allreduce"
        assert len(r.tensors) == 6 and len(set(r.tensors)) == 6
        assert all(t.startswith("allreduce.") for t in r.tensors)
        assert sorted(r.tensor_nbytes) == GRAD_BYTES
        assert r.nbytes == sum(GRAD_BYTES) == 203_304
        assert r.activity == "GLOO_ALLREDUCE"
        assert r.duration_us > 0 and r.memcpy_in_us > 0 and r.memcpy_out_us > 0
    starts = [r.start_us for r in fused.responses]
    assert starts == sorted(starts)
    # responses do not overlap
    for a, b in zip(fused.responses, fused.responses[1:]):
        assert a.start_us + a.duration_us <= b.start_us


def test_total_bytes_equal_recorded_tensor_sizes(fused, unfused):
    for tl, path in ((fused, FUSION), (unfused, NOFUSION)):
        sizes = raw_allreduce_sizes(raw_events(path))
        assert len(sizes) == 24
        assert tl.total_bytes == sum(sizes) == 4 * 203_304
        assert sum(len(r.tensors) for r in tl.responses) == len(sizes)


def test_fused_durations_match_raw_gloo_interval(fused):
    # Independent: the GLOO_ALLREDUCE B/E pairs of one tensor (pid of allreduce.0.weight).
    events = raw_events(FUSION)
    pid = next(e["pid"] for e in events if e["ph"] == "M" and e["args"].get("name") == "allreduce.0.weight")
    mine = [e for e in events if e.get("pid") == pid and e["ph"] in "BE"]
    spans = []
    for i, e in enumerate(mine):
        if e["ph"] == "B" and e["name"] == "GLOO_ALLREDUCE":
            spans.append((e["ts"], mine[i + 1]["ts"]))
    assert len(spans) == 4
    for (b, e), r in zip(spans, fused.responses):
        assert r.start_us <= b and e <= r.start_us + r.duration_us
        assert r.duration_us - (e - b) <= 20  # the 6 tensors' B/E are written microseconds apart


def test_unfused_timeline_has_one_tensor_per_response(unfused):
    assert unfused.horovod_form == "closed"
    assert len(unfused.responses) == 24
    assert all(len(r.tensors) == 1 for r in unfused.responses)
    assert sorted(r.nbytes for r in unfused.responses) == sorted(GRAD_BYTES * 4)
    # no fusion buffer: single-tensor Gloo responses are not copied
    assert all(r.memcpy_in_us == 0 and r.memcpy_out_us == 0 for r in unfused.responses)
    assert unfused.cycle_starts_us == []  # recorded without --timeline-mark-cycles


def test_single_tensor_durations_are_exact(unfused):
    events = raw_events(NOFUSION)
    names = {e["pid"]: e["args"]["name"] for e in events
             if e["ph"] == "M" and e["name"] == "process_name" and "name" in e["args"]}
    open_b, got = {}, []
    for e in events:
        if e["ph"] == "B" and e["name"] == "GLOO_ALLREDUCE":
            open_b[e["pid"]] = e["ts"]
        elif e["ph"] == "E" and e["pid"] in open_b:
            got.append((e["pid"], e["ts"] - open_b.pop(e["pid"])))
    assert sorted((names[p], d) for p, d in got) == sorted(
        (r.tensors[0], r.duration_us) for r in unfused.responses)


def test_cycle_marks_and_negotiations(fused):
    events = raw_events(FUSION)
    n_cycles = sum(1 for e in events if e["ph"] == "i" and e["name"] == "CYCLE_START")
    assert n_cycles > 100
    assert len(fused.cycle_starts_us) == n_cycles
    assert fused.cycle_starts_us == sorted(fused.cycle_starts_us)
    n_neg = sum(1 for e in events if e["ph"] == "B" and e["name"].startswith("NEGOTIATE_"))
    assert len(fused.negotiations) == n_neg == 30
    ops = Counter(n.op for n in fused.negotiations)
    assert ops == {"allreduce": 24, "broadcast": 6}
    readies = [n for n in fused.negotiations if n.ready]
    assert readies and all(sorted(r for r, _ in n.ready) == [0, 1] for n in readies)
    assert fused.start_time_since_epoch_us is not None


def test_broadcast_without_args_is_reported(fused):
    # On the root rank Horovod writes no dtype/shape for broadcasts (output tensor is null).
    assert any("6 broadcast operation(s) ended without dtype/shape" in p for p in fused.problems)
    assert all(str(FUSION) in p for p in fused.problems)
    assert all(r.op == "allreduce" for r in fused.responses)


def test_samples_dataframe(fused, unfused):
    df = samples(fused)
    assert list(df.columns) == ["nbytes", "duration_s", "n_tensors"]
    assert len(df) == 4 and (df.nbytes == 203_304).all() and (df.n_tensors == 6).all()
    assert df.duration_s.tolist() == [r.duration_us / 1e6 for r in fused.responses]
    df2 = samples(unfused)
    assert len(df2) == 24 and df2.nbytes.sum() == 4 * 203_304 and (df2.n_tensors == 1).all()
    assert len(samples(unfused, op="broadcast")) == 0


# ---------------------------------------------------------------- other forms


def test_unclosed_0_20_0_form_gives_same_result(fused, unfused):
    for tl, path in ((fused, FUSION), (unfused, NOFUSION)):
        old = parse_timeline(to_unclosed_0_20_0(raw_events(path)), source="old.json")
        assert old.horovod_form == "unclosed"
        assert old.responses == tl.responses
        assert old.cycle_starts_us == tl.cycle_starts_us
        assert not any("cut short" in p for p in old.problems)


def test_closing_bracket_replaced_by_comma_newline_is_unclosed(unfused):
    text = NOFUSION.read_text()
    t = parse_timeline(text[:-1] + ",\n", source="x")
    assert t.horovod_form == "unclosed" or t.horovod_form == "truncated"
    assert t.responses == unfused.responses


def test_stripped_closing_bracket_keeps_every_record(unfused):
    text = NOFUSION.read_text()
    t = parse_timeline(text[:-1], source="x")
    assert t.horovod_form == "truncated"
    assert t.responses == unfused.responses
    assert any("cut short" in p for p in t.problems)


def test_truncated_at_many_offsets_is_a_prefix(unfused):
    text = NOFUSION.read_text()
    full_ops = unfused.tensor_ops
    seen_partial = 0
    for cut in range(1, len(text) - 1, 61):
        try:
            t = parse_timeline(text[:cut], source="cut.json")
        except TimelineError:
            assert cut < 3  # only '[' / '[\n' cannot be an error; nothing else should be
            continue
        assert t.horovod_form in ("truncated", "unclosed")
        assert t.tensor_ops == full_ops[:len(t.tensor_ops)]
        assert t.total_bytes <= unfused.total_bytes
        seen_partial += any("inside a record" in p for p in t.problems)
    assert seen_partial > 50


def test_truncated_mid_fused_response(fused):
    text = FUSION.read_text()
    # cut just after the 3rd tensor of the last response closed
    marker = '"shape": "[128]"}}'
    cut = text.rindex(marker) + len(marker) + 5
    t = parse_timeline(text[:cut], source="cut.json")
    assert t.horovod_form == "truncated"
    assert len(t.responses) == 4
    assert [len(r.tensors) for r in t.responses] == [6, 6, 6, 3]
    assert any("still in flight" in p for p in t.problems)
    assert any("inside a record" in p for p in t.problems)


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize("text,msg", [
    ("", "empty"),
    ("   \n", "empty"),
    ("hello", "does not start"),
    ('{"ph": "B"}', "does not start"),
    ("[1, 2, 3]", "not an event object"),
    ('[{"a": 1}]', "no 'ph'"),
    ('[{"ph": "B", "ts": 1}] trailing', "after the closing"),
    ('[{"ph": "B"} {"ph": "E"}]', "expected ','"),
    ('[{"ph": "B"}, garbage, {"ph": "E"}]', "invalid JSON"),
    ("[" + "[" * 100_000, "nesting too deep"),
])
def test_not_a_timeline(text, msg):
    with pytest.raises(TimelineError) as ei:
        parse_timeline(text, source="bad.json")
    assert msg in str(ei.value) and "bad.json" in str(ei.value)
    assert "\n" not in str(ei.value)


def test_empty_array_and_bare_bracket_are_empty_timelines():
    for text in ("[]", "[\n"):
        t = parse_timeline(text, source="e.json")
        assert t.responses == [] and t.n_records == 0
        assert any("no events" in p for p in t.problems)


def test_shape_missing_and_bad_dtype_reported():
    ev = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "allreduce.a"}},
          {"name": "process_name", "ph": "M", "pid": 2, "args": {"name": "allreduce.b"}},
          {"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "allreduce.c"}}]
    for pid, args in ((1, {"dtype": "float32"}), (2, {"dtype": "complex128", "shape": "[2]"}),
                      (3, {"dtype": "float64", "shape": "[3, 5]"})):
        ev += [{"ph": "B", "name": "ALLREDUCE", "ts": 10 * pid, "pid": pid},
               {"ph": "B", "name": "MPI_ALLREDUCE", "ts": 10 * pid + 1, "pid": pid},
               {"ph": "E", "ts": 10 * pid + 5, "pid": pid},
               {"ph": "E", "ts": 10 * pid + 6, "pid": pid, "args": args}]
    t = parse_timeline(json.dumps(ev), source="s.json")
    assert [(r.tensors, r.nbytes, r.duration_us, r.activity) for r in t.responses] == [
        (("allreduce.c",), 3 * 5 * 8, 4.0, "MPI_ALLREDUCE")]
    assert any("allreduce operation(s) ended without dtype/shape" in p for p in t.problems)
    assert any("complex128" in p for p in t.problems)


def test_read_errors(tmp_path):
    with pytest.raises(TimelineError, match="cannot read"):
        read_timeline(tmp_path / "missing.json")
    p = tmp_path / "empty.json"
    p.write_bytes(b"")
    with pytest.raises(TimelineError, match="empty"):
        read_timeline(p)
    p.write_bytes(b"[\xff\xfe]")
    with pytest.raises(TimelineError, match="not UTF-8"):
        read_timeline(p)
    with pytest.raises(TimelineError, match="limit"):
        read_timeline(FUSION, max_bytes=1000)


@pytest.mark.parametrize("head", [b"", b"[", b"[{", b"[\n" + FUSION.read_bytes()[2:5000]])
def test_huge_garbage_file_fails_fast(tmp_path, head):
    p = tmp_path / "huge.json"
    with open(p, "wb") as f:
        f.write(head)
        f.truncate(100 * 1024 * 1024)  # sparse: 100 MB of NUL bytes after the head
    t0 = time.monotonic()
    with pytest.raises(TimelineError) as ei:
        read_timeline(p)
    assert time.monotonic() - t0 < 20
    assert "\n" not in str(ei.value) and str(p) in str(ei.value)


def test_huge_garbage_text_with_brackets(tmp_path):
    p = tmp_path / "huge2.json"
    p.write_bytes(b"[" + b'{"ph": "B", "x": [1, 2}, ' * 4_000_000)  # ~100 MB, invalid records
    with pytest.raises(TimelineError, match="invalid JSON"):
        read_timeline(p)


# ---------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=400))
def test_arbitrary_text_never_crashes(text):
    try:
        t = parse_timeline(text, source="h.json")
    except TimelineError as e:
        assert "\n" not in str(e)
    else:
        assert isinstance(t, Timeline)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=400))
def test_arbitrary_bytes_file_never_crashes(tmp_path, data):
    p = tmp_path / "b.json"
    p.write_bytes(data)
    try:
        read_timeline(p)
    except TimelineError:
        pass


_FUSION_TEXT = FUSION.read_text()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(_FUSION_TEXT)), st.integers(0, len(_FUSION_TEXT) - 1),
       st.characters(codec="utf-8"), st.booleans())
def test_truncated_or_corrupted_real_file(cut, pos, ch, corrupt):
    text = _FUSION_TEXT
    if corrupt:
        text = text[:pos] + ch + text[pos + 1:]
    text = text[:cut]
    try:
        t = parse_timeline(text, source="c.json")
    except TimelineError:
        return
    assert t.total_bytes == sum(r.nbytes for r in t.responses)
    for r in t.responses:
        assert r.nbytes == sum(r.tensor_nbytes) and len(r.tensors) == len(r.tensor_nbytes)


_event = st.fixed_dictionaries(
    {"ph": st.sampled_from(["B", "E", "X", "i", "M"])},
    optional={"name": st.one_of(st.sampled_from(["ALLREDUCE", "GLOO_ALLREDUCE", "NEGOTIATE_ALLREDUCE",
                                                 "process_name", "CYCLE_START", "0", "1"]),
                                st.text(max_size=5)),
              "ts": st.one_of(st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=3)),
              "pid": st.one_of(st.integers(0, 4), st.booleans(), st.none()),
              "args": st.one_of(st.none(), st.fixed_dictionaries(
                  {}, optional={"name": st.text(max_size=5),
                                "dtype": st.sampled_from(["float32", "int8", "bogus", 3]),
                                "shape": st.one_of(st.text(max_size=8),
                                                   st.lists(st.integers(-2, 50), max_size=3).map(str))}))})


@settings(max_examples=300, deadline=None)
@given(st.lists(_event, max_size=40), st.booleans())
def test_arbitrary_event_streams(events, closed):
    text = json.dumps(events, allow_nan=True) if closed else to_unclosed_0_20_0(events)
    try:
        t = parse_timeline(text, source="ev.json")
    except TimelineError:
        return
    for r in t.responses:
        assert r.nbytes == sum(r.tensor_nbytes) >= 0


# ---------------------------------------------------------------- bad numbers


def _one_op(pid=1, b=10, act_b=11, act_e=15, e=16, shape="[3, 5]", extra=()):
    """A one-tensor timeline: process_name, ALLREDUCE B, MPI_ALLREDUCE B/E, ALLREDUCE E."""
    return [{"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"allreduce.t{pid}"}},
            {"ph": "B", "name": "ALLREDUCE", "ts": b, "pid": pid},
            {"ph": "B", "name": "MPI_ALLREDUCE", "ts": act_b, "pid": pid},
            {"ph": "E", "ts": act_e, "pid": pid},
            {"ph": "E", "ts": e, "pid": pid, "args": {"dtype": "float64", "shape": shape}}, *extra]


@pytest.mark.parametrize("bad", [10**400, -(10**400), float("inf"), float("-inf"), float("nan"), -5, 2.0**60,
                                 "12", None])
def test_bad_ts_drops_the_record_and_names_it(bad):
    ev = _one_op(1) + _one_op(2, b=bad)
    t = parse_timeline(json.dumps(ev, allow_nan=True), source="ts.json")
    assert [r.tensors for r in t.responses] == [("allreduce.t1",)]
    p = next(p for p in t.problems if "'ts' is" in p)
    assert p.startswith("ts.json: record 6 at offset") and "not a time in 0..2**53" in p and "\n" not in p
    assert len(samples(t)) == 1


@pytest.mark.parametrize("shape", [f"[{10**400}]", "[1099511627776, 2]", "[1e999]", "[-1]", "[NaN]"],
                         ids=["huge-int", "over-1TiB", "inf", "negative", "nan"])
def test_huge_shape_never_overflows(shape):
    ev = _one_op(1) + _one_op(2, shape=shape)
    t = parse_timeline(json.dumps(ev, allow_nan=True), source="a.json")
    assert [r.tensors for r in t.responses] == [("allreduce.t1",)]
    assert samples(t)["nbytes"].tolist() == [3 * 5 * 8]
    assert any("allreduce.t2" in p for p in t.problems)


@pytest.mark.parametrize("value", [10**400, float("inf"), float("nan")], ids=["huge-int", "inf", "nan"])
def test_huge_start_time_is_ignored(value):
    ev = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"start_time_since_epoch_in_micros": value}}]
    t = parse_timeline(json.dumps(ev + _one_op(1), allow_nan=True), source="a.json")
    assert t.start_time_since_epoch_us is None and len(t.responses) == 1


@pytest.mark.parametrize("where", ["activity", "op", "negotiation"])
def test_negative_duration_drops_the_operation_and_counts_it(where):
    bad = {"activity": {"act_b": 14, "act_e": 12}, "op": {"b": 30, "act_b": 31, "act_e": 32, "e": 20},
           "negotiation": {}}[where]
    ev = _one_op(1) + _one_op(2, **bad)
    if where == "negotiation":
        ev += [{"name": "process_name", "ph": "M", "pid": 3, "args": {"name": "allreduce.t3"}},
               {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 50, "pid": 3},
               {"ph": "E", "ts": 40, "pid": 3}]
    t = parse_timeline(json.dumps(ev), source="neg.json")
    assert [r.tensors for r in t.responses] == ([("allreduce.t1",), ("allreduce.t2",)] if where == "negotiation"
                                                else [("allreduce.t1",)])
    assert t.negotiations == []
    p = [p for p in t.problems if "ended before it began" in p]
    assert len(p) == 1 and p[0].startswith("neg.json: 1 operation(s)") and "negative duration" in p[0]
    assert all(r.duration_us >= 0 for r in t.responses)


def test_negative_or_non_finite_dur_on_a_rank_ready_mark_is_dropped():
    ev = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "allreduce.t1"}},
          {"ph": "B", "name": "NEGOTIATE_ALLREDUCE", "ts": 1, "pid": 1},
          {"ph": "X", "name": "0", "ts": 2, "pid": 1, "dur": -3},
          {"ph": "X", "name": "1", "ts": 2, "pid": 1, "dur": float("inf")},
          {"ph": "X", "name": "1", "ts": 3, "pid": 1, "dur": 0},
          {"ph": "E", "ts": 4, "pid": 1}]
    t = parse_timeline(json.dumps(ev, allow_nan=True), source="x.json")
    assert [n.ready for n in t.negotiations] == [((1, 3.0),)]
    assert sum("'dur' is" in p for p in t.problems) == 2


def test_a_file_whose_every_event_has_a_bad_time_is_one_line_error():
    ev = _one_op(1, b=20, e=5) + _one_op(2, act_b=14, act_e=12)
    with pytest.raises(TimelineError) as e:
        parse_timeline(json.dumps(ev), source="all.json")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("all.json: no usable event: 2 dropped")
    assert "allreduce.t1, record 4: ALLREDUCE ended at 5 µs, before its start at 20 µs" in msg
    ev = [{"name": "process_name", "ph": "M", "pid": 1, "args": {"name": "allreduce.t1"}},
          {"ph": "B", "name": "ALLREDUCE", "ts": -1, "pid": 1}, {"ph": "E", "ts": 1e999, "pid": 1}]
    with pytest.raises(TimelineError, match=r"^b.json: no usable event: 2 dropped .*\(first: record 1 at "
                                            r"offset \d+ \('B'\), field 'ts', value -1\)$"):
        parse_timeline(json.dumps(ev), source="b.json")


def test_real_file_with_one_op_reversed_keeps_the_rest(unfused):
    events = raw_events(NOFUSION)
    # reverse the first GLOO_ALLREDUCE activity: its E now comes 1 s before its B
    i = next(k for k, e in enumerate(events) if e["ph"] == "B" and e.get("name") == "GLOO_ALLREDUCE")
    j = next(k for k in range(i + 1, len(events)) if events[k]["ph"] == "E" and events[k]["pid"] == events[i]["pid"])
    events[j]["ts"] = events[i]["ts"] - 1_000_000
    t = parse_timeline(json.dumps(events), source="r.json")
    assert len(t.responses) == len(unfused.responses) - 1
    assert any("1 operation(s) had an event that ended before it began" in p for p in t.problems)


# ---------------------------------------------------------------- in-process fuzz

_NUM_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_BAD_NUMBERS = ["1e999", "-1e999", "NaN", "Infinity", "-Infinity", "1e308", "-1e308", "9" * 400, "-" + "9" * 30,
                "0", "-1", "-5", "1.5", "99999999999999999999", "1e20", "-0", "1e-320", '"7"', "null", "true"]
_FIXTURE_TEXTS = [NOFUSION.read_text(), FUSION.read_text()]


@st.composite
def _mutated_fixture(draw):
    """A real timeline with 1-4 of its numbers replaced by huge, negative, non-finite or
    non-numeric values, sometimes with a span cut out."""
    text = draw(st.sampled_from(_FIXTURE_TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        spans = [m.span() for m in _NUM_RE.finditer(text)]
        a, b = spans[draw(st.integers(0, len(spans) - 1))]
        text = text[:a] + draw(st.sampled_from(_BAD_NUMBERS)) + text[b:]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + text[i + draw(st.integers(1, 60)):]
    return text


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_fixture())
def test_fuzz_mutated_fixtures_only_timeline_error_escapes(text):
    """Only TimelineError (one line) escapes the reader and what reads its result; whatever is
    returned has no negative or non-finite time and int64 byte counts."""
    try:
        t = parse_timeline(text, source="f.json")
        df = samples(t, None)
        steps = None
        try:
            steps = host_samples(t, cycle_time_ms=5.0)
        except TimelineError:
            pass
    except TimelineError as e:
        assert "\n" not in str(e)
        return
    assert all(0 <= r.duration_us < math.inf and r.memcpy_in_us >= 0 and r.memcpy_out_us >= 0 for r in t.responses)
    assert all(n.duration_us >= 0 for n in t.negotiations)
    assert all(e >= s for o in t.tensor_ops for _, s, e in o.activities)
    assert df["duration_s"].map(math.isfinite).all() and (df["nbytes"] >= 0).all()
    if steps is not None:
        assert all(math.isfinite(g[2]) for g in steps.gaps) and all(math.isfinite(m[1]) for m in steps.memcpy)
