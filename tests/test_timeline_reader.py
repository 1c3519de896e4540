"""Timeline reader on real Horovod 0.28.1 timelines (runs/local-gloo-1gbit/fixtures) and variants."""
import json
import math
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotuner.readers.timeline import (Timeline, TimelineError, parse_timeline, read_timeline,
                                        samples)

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
