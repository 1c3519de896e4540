"""Autotune-log reader on a real Horovod 0.28.1 log and variants derived from it."""
import csv
import io
import math
import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotuner.frameworks.horovod.knobs import CACHE_ON, MIB, Config
from autotuner.frameworks.horovod.autotune_log import (HEADER_0_20, HEADER_0_26, AutotuneLog, AutotuneLogError,
                                            best_config, explain, parse_autotune_log, read_autotune_log)

from conftest import ROOT

LOG = ROOT / "runs" / "local-gloo-1gbit" / "fixtures" / "autotune-log-hvd0.28.1-gloo-2ranks.csv"
TEXT = LOG.read_text()
LINES = TEXT.splitlines(keepends=True)


def to_0_20(text):
    """The 0.20-0.25 writer: no torus_allreduce column and no ', ' quirk."""
    rows = list(csv.reader(io.StringIO(text), skipinitialspace=True))
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    for r in rows:
        w.writerow(r[:2] + r[3:])
    return out.getvalue()


@pytest.fixture(scope="module")
def log():
    return read_autotune_log(LOG)


def test_fixture_is_the_real_0_28_format():
    assert LINES[0].strip() == ",".join(HEADER_0_26)
    assert all(", " in ln for ln in LINES[1:])  # the ", " quirk before cache_enabled


def test_real_log(log):
    assert log.columns_version == "0.26"
    assert log.problems == []
    assert log.finished is True
    assert len(log.samples) == len(LINES) - 2 == 24
    assert [s.line for s in log.samples] == list(range(2, 26))
    s0 = log.samples[0]
    assert (s0.hierarchical_allreduce, s0.hierarchical_allgather, s0.torus_allreduce, s0.cache_enabled,
            s0.cycle_time_ms, s0.fusion_threshold_mb, s0.score_bytes_per_us) == (
        False, False, False, False, 5.0, 4.0, 46.8487)
    assert s0.fusion_threshold_bytes == 4 * 1024 * 1024
    s4 = log.samples[4]
    assert (s4.cycle_time_ms, s4.fusion_threshold_mb, s4.score_bytes_per_us) == (9.99992, 8.00028, 51.8407)
    assert sum(s.cache_enabled for s in log.samples) == 12
    assert sum(s.hierarchical_allgather for s in log.samples) == 12
    assert not any(s.hierarchical_allreduce or s.torus_allreduce for s in log.samples)


def test_real_log_best_row(log):
    b = log.best
    assert b.line == 26
    assert (b.hierarchical_allreduce, b.hierarchical_allgather, b.torus_allreduce, b.cache_enabled,
            b.cycle_time_ms, b.fusion_threshold_mb, b.score_bytes_per_us) == (
        False, True, False, True, 10.0, 8.0, 53.3424)
    top = max(log.samples, key=lambda s: s.score_bytes_per_us)
    assert top.line == 23 and top.config == b.config and top.score_bytes_per_us == b.score_bytes_per_us


def test_unfinished_when_final_row_missing(log):
    t = parse_autotune_log("".join(LINES[:-1]), source="cut.csv")
    assert t.finished is False
    assert len(t.samples) == 24
    assert t.best.line == 23 and t.best.score_bytes_per_us == 53.3424
    t2 = parse_autotune_log("".join(LINES[:10]), source="cut.csv")
    assert t2.finished is False and len(t2.samples) == 9
    assert t2.best.line == 8 and t2.best.score_bytes_per_us == 52.9991


def test_last_row_not_duplicating_best_is_not_finished():
    # a final row with the best config but a different score is an ordinary sample
    text = "".join(LINES[:-1]) + "0,1,0, 1,10,8,53.3423\n"
    t = parse_autotune_log(text, source="x.csv")
    assert t.finished is False and len(t.samples) == 25
    # same score but a config never tried
    text = "".join(LINES[:-1]) + "0,1,0, 1,10,9,53.3424\n"
    assert parse_autotune_log(text, source="x.csv").finished is False


def test_0_20_columns(log):
    text = to_0_20(TEXT)
    assert text.splitlines()[0] == ",".join(HEADER_0_20)
    t = parse_autotune_log(text, source="old.csv")
    assert t.columns_version == "0.20" and t.finished and t.problems == []
    assert all(s.torus_allreduce is None for s in t.samples + [t.best])
    strip = lambda s: (s.hierarchical_allreduce, s.hierarchical_allgather, s.cache_enabled,  # noqa: E731
                       s.cycle_time_ms, s.fusion_threshold_mb, s.score_bytes_per_us, s.line)
    assert [strip(s) for s in t.samples] == [strip(s) for s in log.samples]


def test_header_only():
    for text in (LINES[0], LINES[0].rstrip("\n"), to_0_20(LINES[0])):
        t = parse_autotune_log(text, source="h.csv")
        assert t.samples == [] and t.best is None and t.finished is False
        assert any("header only" in p for p in t.problems)
        assert any("No trial was scored" in ln for ln in explain(t))


def test_bad_rows_skipped_with_line_numbers():
    text = (LINES[0] + LINES[1] + "0,0,0, 0,abc,4,46\n" + "0,0,0, 2,5,4,46\n" + LINES[2]
            + "0,0,0, 0,5,4,-1\n" + "0,0,0, 0,5,4,inf\n" + "0,0,0, 0,5\n")
    t = parse_autotune_log(text, source="b.csv")
    assert [s.line for s in t.samples] == [2, 5]
    assert [p.split(": ")[0] for p in t.problems] == ["b.csv:3", "b.csv:4", "b.csv:6", "b.csv:7", "b.csv:8"]
    assert "cycle_time_ms is 'abc'" in t.problems[0]
    assert "cache_enabled is '2'" in t.problems[1]
    assert "5 cells, expected 7" in t.problems[4]


def test_cut_last_line_of_killed_run():
    text = TEXT[:-12]  # the final row cut mid-line
    t = parse_autotune_log(text, source="k.csv")
    assert not t.finished and len(t.samples) == 24
    assert len(t.problems) == 1 and "no newline" in t.problems[0]


def test_cut_row_that_still_parses_is_not_trusted():
    # cut inside the score: "53.3424" -> "53.3" would parse, but the row has no newline
    text = TEXT[:TEXT.rindex("53.3424") + 4]
    t = parse_autotune_log(text, source="k.csv")
    assert len(t.samples) == 24 and all(s.score_bytes_per_us != 53.3 for s in t.samples)
    assert not t.finished and "no newline" in t.problems[-1]


def test_header_and_one_cut_row_is_not_an_error():
    t = parse_autotune_log(LINES[0] + "0,0,0, 0,5,", source="k.csv")
    assert t.samples == [] and t.best is None and not t.finished
    assert any("no newline" in p for p in t.problems)


@pytest.mark.parametrize("text,msg", [
    ("", "empty"),
    ("\n\n  \n", "empty"),
    ("a,b,c\n1,2,3\n", "header"),
    ("hierarchical_allreduce,hierarchical_allgather,cache_enabled,cycle_time_ms,score\n", "header"),
    (",".join(HEADER_0_26) + ",extra\n", "header"),
    (TEXT.replace("score", "scores"), "header"),
    (LINES[0] + "x,y,z, w,a,b,c\n" + "1,1,1, 1,q,1,1\n", "no usable rows"),
    ("\x00\x01\x02", "binary"),
    (",,,\n", "no header"),
])
def test_not_an_autotune_log(text, msg):
    with pytest.raises(AutotuneLogError) as ei:
        parse_autotune_log(text, source="bad.csv")
    assert msg in str(ei.value) and "bad.csv" in str(ei.value) and "\n" not in str(ei.value)


def test_read_errors(tmp_path):
    with pytest.raises(AutotuneLogError, match="cannot read"):
        read_autotune_log(tmp_path / "nope.csv")
    p = tmp_path / "e.csv"
    p.write_bytes(b"")
    with pytest.raises(AutotuneLogError, match="empty"):
        read_autotune_log(p)
    p.write_bytes(b"\xff\xfe\x00h")
    with pytest.raises(AutotuneLogError, match="not UTF-8"):
        read_autotune_log(p)
    with pytest.raises(AutotuneLogError, match="limit"):
        read_autotune_log(LOG, max_bytes=100)


def test_huge_file_fails_fast(tmp_path):
    p = tmp_path / "huge.csv"
    with open(p, "wb") as f:
        f.write(TEXT.encode())
        f.truncate(100 * 1024 * 1024)
    t0 = time.monotonic()
    with pytest.raises(AutotuneLogError, match="limit"):
        read_autotune_log(p)
    assert time.monotonic() - t0 < 5


def test_huge_garbage_under_limit(tmp_path):
    p = tmp_path / "big.csv"
    p.write_bytes(b"x" * (30 * 1024 * 1024))  # one 30 MB "cell"
    with pytest.raises(AutotuneLogError) as ei:
        read_autotune_log(p)
    assert len(str(ei.value)) < 400


def test_explain(log):
    lines = explain(log)
    text = "\n".join(lines)
    assert "24 scored trial(s)" in lines[0]
    assert "Tuning finished" in text and "line 26" in text and "(line 23)" in text
    assert "fusion threshold 8 MiB, cycle time 10 ms, response cache on" in text
    assert "53.3424 MB/s" in text and "per microsecond" in text
    assert not any("per training step" in ln for ln in lines)
    # 53.3424 bytes/µs: 53,342,400 bytes per step take 1,000,000 µs = 1000 ms
    with_step = explain(log, bytes_per_step=53_342_400)
    assert any("about 1000 ms per training step" in ln for ln in with_step)
    small = explain(log, bytes_per_step=203_304)  # the fixture model: 3.81 ms
    assert any("about 3.81 ms" in ln for ln in small)


def test_explain_unfinished():
    t = parse_autotune_log("".join(LINES[:-1]), source="cut.csv")
    text = "\n".join(explain(t))
    assert "did NOT finish" in text and "line 23" in text


# ---------------------------------------------------------------- properties


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text(text):
    try:
        t = parse_autotune_log(text, source="h.csv")
    except AutotuneLogError as e:
        assert "\n" not in str(e)
        return
    assert isinstance(t, AutotuneLog)


_cell = st.one_of(st.sampled_from(["0", "1", " 1", "5", "2.5", "nan", "-3", "", "x", '"1"', "1e400"]),
                  st.text(st.characters(exclude_characters=',\n\r"\x00'), max_size=4))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_cell, min_size=5, max_size=8), max_size=12), st.booleans())
def test_arbitrary_rows_under_a_real_header(rows, new):
    header = ",".join(HEADER_0_26 if new else HEADER_0_20)
    text = header + "\n" + "".join(",".join(r) + "\n" for r in rows)
    try:
        t = parse_autotune_log(text, source="r.csv")
    except AutotuneLogError as e:
        assert "no usable rows" in str(e)
        assert any(len(r) >= (7 if new else 6) for r in rows)  # some row was not merely cut short
        return
    assert len(t.samples) + t.finished + sum(1 for p in t.problems if "row skipped" in p) == len(
        [r for r in rows if any(c.strip() for c in r)]) or any("more bad rows" in p for p in t.problems)
    for s in t.samples:
        assert s.score_bytes_per_us >= 0 and s.cycle_time_ms >= 0
    if t.finished:
        assert t.best.score_bytes_per_us == max(s.score_bytes_per_us for s in t.samples)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, len(TEXT)))
def test_truncated_real_log(cut):
    try:
        t = parse_autotune_log(TEXT[:cut], source="t.csv")
    except AutotuneLogError:
        assert cut < len(LINES[0])  # only a cut inside the header can fail
        return
    assert not t.finished or cut >= len(TEXT) - 1
    assert len(t.samples) <= 24


# ---------------------------------------------------------------- best row and bad numbers


def test_best_config_of_the_real_log(log):
    cfg = best_config(log)
    assert cfg == Config(fusion_threshold_bytes=8 * MIB, cycle_time_ms=10.0, cache_capacity=CACHE_ON,
                         hierarchical_allreduce=False, hierarchical_allgather=True)
    assert best_config(parse_autotune_log(LINES[0], source="h.csv")) is None


@pytest.mark.parametrize("row, shown", [("0,0,0, 1,1000,8,60", "cycle"), ("0,0,0, 1,10,100000,60", "fusion"),
                                        ("0,0,0, 1,0.01,8,60", "cycle")])
def test_best_row_out_of_range_is_an_autotune_log_error_naming_file_row_and_value(row, shown):
    text = LINES[0] + "0,0,0, 0,5,4,46.8487\n" + row + "\n"
    t = parse_autotune_log(text, source="x.csv")
    assert t.best.line == 3
    with pytest.raises(AutotuneLogError) as e:
        best_config(t)
    msg = str(e.value)
    value = row.split(",")[4 if shown == "cycle" else 5]
    assert msg.startswith("x.csv:3: best row") and shown in msg and value in msg and "\n" not in msg
    notes = [ln for ln in explain(t, 10**6) if ln.startswith("Note: x.csv:3: best row")]
    assert len(notes) == 1  # explain notes it instead of failing


@pytest.mark.parametrize("cell, why", [("1e999", "not a finite"), ("nan", "not a finite"), ("-inf", "not a finite"),
                                       ("1e300", "int64"), ("9" * 400, "not a finite")])
def test_non_finite_or_huge_threshold_row_is_skipped_with_a_note(log, cell, why):
    text = LINES[0] + "0,0,0, 0,5,4,46.8487\n" + f"0,0,0, 0,5,{cell},47\n"
    t = parse_autotune_log(text, source="x.csv")
    assert len(t.samples) == 1
    assert any(p.startswith("x.csv:3: tensor_fusion_threshold is") and why in p for p in t.problems)
    assert [s.fusion_threshold_bytes for s in t.samples] == [4 * MIB]


def test_explain_with_extreme_scores_prints_no_inf_or_nan():
    text = LINES[0] + "0,0,0, 0,5,4,1e-300\n0,0,0, 0,10,8,1e300\n"
    lines = explain(parse_autotune_log(text, source="x.csv"), bytes_per_step=10**400)
    assert not any(re.search(r"\b(inf|nan)\b", ln) for ln in lines)
    assert any("no time per step can be derived" in ln for ln in lines)


# ---------------------------------------------------------------- in-process fuzz

_NUM_RE = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
_BAD_NUMBERS = ["1e999", "-1e999", "nan", "inf", "-inf", "1e308", "-1e308", "9" * 400, "-" + "9" * 30, "0", "-1",
                "1.5", "99999999999999999999", "1e20", "-0", "1e-320", "1000", "0.01", "x", ""]


@st.composite
def _mutated_log(draw):
    """The real log with 1-4 numbers replaced by huge, negative, non-finite or non-numeric values,
    sometimes with a span cut out."""
    text = TEXT
    for _ in range(draw(st.integers(1, 4))):
        spans = [m.span() for m in _NUM_RE.finditer(text)]
        a, b = spans[draw(st.integers(0, len(spans) - 1))]
        text = text[:a] + draw(st.sampled_from(_BAD_NUMBERS)) + text[b:]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + text[i + draw(st.integers(1, 40)):]
    return text


@settings(max_examples=300, deadline=None, derandomize=True)
@given(_mutated_log(), st.sampled_from([None, 0, 203_304, 10**400]))
def test_fuzz_mutated_log_only_autotune_log_error_escapes(text, nbytes):
    """Only AutotuneLogError (one line) escapes parse, explain and best_config; rows kept hold
    finite non-negative numbers whose byte threshold fits int64."""
    try:
        t = parse_autotune_log(text, source="f.csv")
        lines = explain(t, nbytes)  # notes quote bad cells as they are; the summary shows no inf/nan
        assert not any(re.search(r"\b(inf|nan)\b", ln) for ln in lines if not ln.startswith("Note:"))
        best_config(t)
    except AutotuneLogError as e:
        assert "\n" not in str(e)
        return
    for s in t.samples:
        assert all(math.isfinite(v) and v >= 0 for v in (s.cycle_time_ms, s.fusion_threshold_mb, s.score_bytes_per_us))
        assert 0 <= s.fusion_threshold_bytes < 2**63
