from autotuner.readers.labreport import parse_breakdown, parse_responses

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
