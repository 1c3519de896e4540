import math
import re
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autotuner.readers.labreport import ReportError, parse_breakdown, parse_responses

from conftest import ROOT

GOOD = """03-10-13-resnet50-e20-b20_rank_0

**训练总时间119.8s, 单个batch 299.5ms**

|   |个数|平均大小/MB|速率/Mbps|总时间/s|平均时间/ms|时间占比|
|---|---|---|---|---|---|---|
|(1KB, 1MB]|117|0.46|4630.69|0.12|1.06|0.16%|
|(1MB, 10MB]|391|3.32|6588.35|2.57|6.57|3.30%|
"""


def test_parses_buckets_and_step_time_with_line_numbers():
    b, s, p = parse_responses(GOOD)
    assert [x.count for x in b] == [117, 391]
    assert b[0].lo_bytes == 1024 and b[0].hi_bytes == 1024 ** 2 and b[0].line == 7
    assert s[0].step_ms == 299.5 and s[0].line == 3
    assert p == []


def test_broken_row_is_reported_and_skipped():
    text = GOOD + "|(10MB, 20MB]|abc|16.14|6211.20|11.72|32.19|15.04%|\n|(20MB, 30MB]|300|25.66|\n"
    b, s, p = parse_responses(text, "r.md")
    assert len(b) == 2
    assert len(p) == 2 and p[0].startswith("r.md:9: skipped broken row")


def test_breakdown_tolerates_the_double_decimal_typo():
    text = "|(vgg16)  |a |b|c|\n|---|---|---|---|\n|单个batch平均时长|196.7ms|1359.3.9ms|218.7ms|\n|receving|6.9Kb/s|5.12Gb/s|6.3Kb/s|\n"
    cells, problems = parse_breakdown(text, ["1x1", "4x1", "1x4"])
    step = {c.column: c.value for c in cells if c.row == "step"}
    assert step == {"1x1": 196.7, "4x1": 1359.3, "1x4": 218.7}
    recv = {c.column: c.value for c in cells if c.row == "recv"}
    assert abs(recv["4x1"] - 5.12) < 1e-9 and abs(recv["1x1"] - 6.9e-6) < 1e-12
    assert any("1359.3.9ms" in p for p in problems)


# ---------------------------------------------------------------- every skip is reported

R000 = ROOT / "runs" / "v100-16gbit" / "report-000.md"
R001 = ROOT / "runs" / "v100-5gbit" / "report-001.md"
TEXT000, TEXT001 = R000.read_text(), R001.read_text()
RUN_IDS = [r["id"] for r in tomllib.loads((R000.parent / "env.toml").read_text())["run"]]
COLUMNS = ["1x1", "4x1", "1x4"]
MODELS = ["resnet50", "vgg16"]
_PROBLEM = re.compile(r"^r\.md(:\d+)?: \S")


def test_real_reports_read_cleanly_with_the_env_ids():
    b, s, p = parse_responses(TEXT000, "r.md", RUN_IDS)
    assert (len(b), len(s), p) == (26, 4, [])
    cells, p = parse_breakdown(TEXT001, COLUMNS, "r.md", MODELS)
    assert len(cells) == 54 and p == ["r.md:29: read '1359.3.9ms' as 1359.3 ms (typo in report)"]


def test_typo_in_a_run_header_is_named_not_silently_dropped():
    text = TEXT000.replace("fusion0_rank_0", "fusionO_rank_0", 1)
    b, s, p = parse_responses(text, "r.md", RUN_IDS)
    assert (len(b), len(s)) == (23, 3)
    assert p[0].startswith("r.md:51: run '03-10-13-resnet50-e20-b20-fusionO_rank_0' is not a [[run]] id of "
                           "env.toml (did you mean '03-10-13-resnet50-e20-b20-fusion0_rank_0'?)")
    assert p[1].startswith("r.md: run '03-10-13-resnet50-e20-b20-fusion0_rank_0' of env.toml has no header")
    assert len(p) == 2
    assert len(parse_responses(text, "r.md")[0]) == 26  # without the ids every run is kept


def test_unrecognised_header_does_not_give_its_table_to_the_run_before():
    text = TEXT000.replace("b20-fusion0_rank_0", "b20-fusion0 rank_0", 1)
    b, s, p = parse_responses(text, "r.md", RUN_IDS)
    assert {x.run for x in b} == set(RUN_IDS) - {"03-10-13-resnet50-e20-b20-fusion0_rank_0"}
    assert len(b) == 23 and len(s) == 3
    text_p = "\n".join(p)
    assert "r.md:51: '03-10-13-resnet50-e20-b20-fusion0 rank_0' looks like a run header" in text_p
    assert "r.md:53: second step-time line for run '03-10-13-resnet50-e20-b20_rank_0'" in text_p
    assert "r.md:55: table has no run header of its own" in text_p
    assert all(_PROBLEM.match(x) for x in p)


@pytest.mark.parametrize("row, why", [
    ("|(1KB, 1MB]|" + "9" * 400 + "|0.46|4630.69|0.12|1.06|0.16%|", "count"),
    ("|(1KB, 1MB]|117|" + "9" * 400 + "|4630.69|0.12|1.06|0.16%|", "not a finite"),
    ("|(1KB, 1MB]|117|0.46|-4630.69|0.12|1.06|0.16%|", "not a finite non-negative"),
    ("|(1KB, " + "9" * 30 + "MB]|117|0.46|4630.69|0.12|1.06|0.16%|", "bucket bound"),
    ("|(1MB, 1KB]|117|0.46|4630.69|0.12|1.06|0.16%|", "lo < hi"),
    ("|(1KB, 1MB]|0|0.46|4630.69|0.12|1.06|0.16%|", "no sample"),
    ("|(1KB, 1MB]|117|0.46|4630.69|0.12|0|0.16%|", "no sample"),
    ("| (1KB, 1MB ]|117.5|0.46|4630.69|0.12|1.06|0.16%|", "count"),
    ("|total|117|0.46|4630.69|0.12|1.06|0.16%|", "bad size bucket"),
])
def test_bad_bucket_row_is_skipped_and_named(row, why):
    b, _, p = parse_responses(GOOD + row + "\n", "r.md")
    assert len(b) == 2 and len(p) == 1
    assert p[0].startswith("r.md:9: skipped broken row (") and why in p[0]


@pytest.mark.parametrize("text, line, why", [
    ("|   |a|b|c|d|e|f|\n|---|---|---|---|---|---|---|\n|(1KB, 1MB]|1|0.4|4.6|0.1|1.0|0.1%|\n" + GOOD, 3,
     "size-bucket row before any run header"),
    ("**训练总时间1.0s, 单个batch 2.0ms**\n" + GOOD, 1, "step-time line before any run header"),
    (GOOD.replace("299.5ms", "299,5ms"), 3, "unreadable step-time line"),
    (GOOD.replace("299.5ms", "0ms"), 3, "a time of 0"),
    (GOOD.replace("119.8s", "9" * 400 + "s"), 3, "not a finite"),
    (GOOD + GOOD.splitlines()[0] + "\n", 9, "repeats line 1"),
    (GOOD.replace("**训练总时间119.8s, 单个batch 299.5ms**", ""), 1, "has no step-time line"),
])
def test_skipped_step_lines_tables_and_runs_are_named(text, line, why):
    p = parse_responses(text, "r.md")[2]
    assert any(x.startswith(f"r.md:{line}: ") and why in x for x in p), p


def test_breakdown_tables_without_their_own_model_are_named():
    b, p = parse_breakdown(TEXT001.replace("(vgg16)", "(vgg 16)"), COLUMNS, "r.md", MODELS)
    assert {c.model for c in b} == {"resnet50"}
    assert p == [("r.md:28: table of breakdown rows (e.g. '总训练时长') without a '(model)' header cell; "
                  "its rows are skipped"), "r.md: model 'vgg16' of env.toml has no '(vgg16)' table in the report"]
    b, p = parse_breakdown(TEXT001.replace("(vgg16)", "(vgg15)"), COLUMNS, "r.md", MODELS)
    assert "r.md:26: model 'vgg15' is not a [[model]] of env.toml (did you mean 'vgg16'?); its table is skipped" in p
    b, p = parse_breakdown(TEXT001.replace("(vgg16)", "(resnet50)"), COLUMNS, "r.md", MODELS)
    assert "r.md:26: second table for model 'resnet50' (first at line 12); its rows are skipped" in p


@pytest.mark.parametrize("old, new, why", [
    ("|单个batch平均时长|128.4ms|", "|单个batch平均时长|" + "9" * 400 + "ms|", "not finite"),
    ("|单个batch平均时长|128.4ms|", "|单个batch平均时长|0ms|", "is 0"),
    ("|单个batch平均时长|128.4ms|", "|单个batch平均时长|0.1284s|", "is in s, the step row is in ms"),
    ("|foword平均时长   |13.3ms|", "|单个batch平均时长|13.3ms|", "repeats line 15"),
])
def test_breakdown_bad_cells_are_skipped_and_named(old, new, why):
    text = TEXT001.replace(old, new, 1)
    b, p = parse_breakdown(text, COLUMNS, "r.md", MODELS)
    assert any(x.startswith("r.md:1") and why in x for x in p), p
    assert all(math.isfinite(c.value) and c.value >= 0 for c in b)


def test_breakdown_column_count_mismatch_is_noted():
    p = parse_breakdown(TEXT001, ["1x1", "4x1"], "r.md", MODELS)[1]
    assert "r.md:12: the 'resnet50' table has 3 value columns, env.toml's [[column]] entries name 2; " \
           "reading them left to right" in p


# ---------------------------------------------------------------- in-process fuzz

_NUM_RE = re.compile(r"\d+(?:\.\d+)?")
_BAD = ["9" * 400, "9" * 30, "0", "-1", "1.5", "0.0", "1e5", "99999999999999999999", "", "x", "1.2.3"]


@st.composite
def _mutated_report(draw):
    """Report 000 or 001 with 1-4 numbers replaced by huge, zero, negative or non-numeric text,
    sometimes with a span cut out or a character of a run header changed."""
    fmt = draw(st.sampled_from(["responses", "breakdown"]))
    text = TEXT000 if fmt == "responses" else TEXT001
    for _ in range(draw(st.integers(1, 4))):
        spans = [m.span() for m in _NUM_RE.finditer(text)]
        a, b = spans[draw(st.integers(0, len(spans) - 1))]
        text = text[:a] + draw(st.sampled_from(_BAD)) + text[b:]
    if draw(st.booleans()):
        i = draw(st.integers(0, len(text) - 1))
        text = text[:i] + text[i + draw(st.integers(1, 80)):]
    return fmt, text


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated_report())
def test_fuzz_mutated_reports_only_report_error_escapes(case):
    """Only ReportError (one line) escapes; every value kept is finite and non-negative, counts
    and times positive, and every problem is one ``source:line: ...`` line."""
    fmt, text = case
    try:
        if fmt == "responses":
            b, s, p = parse_responses(text, "r.md", RUN_IDS)
        else:
            b, p = parse_breakdown(text, COLUMNS, "r.md", MODELS)
            s = []
    except ReportError as e:
        assert "\n" not in str(e)
        return
    assert all(_PROBLEM.match(x) and "\n" not in x for x in p)
    for x in b:
        vals = ([x.count, x.mean_mib, x.rate_mbps, x.total_s, x.mean_ms] if fmt == "responses" else [x.value])
        assert all(math.isfinite(v) and v >= 0 for v in vals)
        if fmt == "responses":
            assert x.count > 0 and x.mean_ms > 0 and 0 <= x.lo_bytes < x.hi_bytes <= 2**53 and x.run in RUN_IDS
    assert all(x.total_s > 0 and x.step_ms > 0 and math.isfinite(x.step_ms) for x in s)
