"""Readers for lab reports 002, 003 and 004.

Every expected value below was typed from the report line it names (runs/*/report-00N.md are the
reports copied verbatim), and each record is also checked against the text of its own line.
"""
import math
import random
import re

import pytest

from autotuner.readers.labreport import (
    ReportError,
    WallClock,
    parse_backend_runs,
    parse_compression_runs,
    parse_cpu_scaling,
    parse_number,
    parse_percent,
    parse_wall_clock,
)

from conftest import ROOT

SEEDS = ROOT.parent / "shared" / "seeds"  # where the task keeps the originals (absent in a clone)
R002 = ROOT / "runs" / "t4x4-pcie" / "report-002.md"
R003 = ROOT / "runs" / "laptop-cpu" / "report-003.md"
R004 = ROOT / "runs" / "t4x4-compression" / "report-004.md"
TEXT002, TEXT003, TEXT004 = R002.read_text(), R003.read_text(), R004.read_text()
MODELS003 = ["resnet50", "resnet18"]
_PROBLEM = re.compile(r"^r\.md(:\d+)?: \S")


def _line(text: str, no: int) -> str:
    return text.splitlines()[no - 1]


def _mmss(seconds: float) -> str:
    """Seconds as the shell's ``time`` prints them (``1m53.525s``)."""
    m = int(seconds // 60)
    return f"{m}m{seconds - 60 * m:.3f}s"


def _replace_line(text: str, no: int, old: str, new: str) -> str:
    lines = text.splitlines(keepends=True)
    assert old in lines[no - 1], (no, old, lines[no - 1])
    lines[no - 1] = lines[no - 1].replace(old, new, 1)
    return "".join(lines)


@pytest.mark.parametrize("path, seed", [(R002, "002_c8dd48a019aaa23c.txt"), (R003, "003_7db5cbcdc4c01390.txt"),
                                        (R004, "004_34e9505d679377eb.txt")])
def test_reports_are_verbatim_copies_read_by_their_env_toml(path, seed):
    if (SEEDS / seed).exists():
        assert path.read_bytes() == (SEEDS / seed).read_bytes()
    toml = path.parent / "env.toml"  # each report's folder is an environment: its env.toml reads the report
    assert toml.exists() and f'source = "{path.name}"' in toml.read_text()
    assert path.name in (path.parent / "README.md").read_text()


# ---------------------------------------------------------------- cells

def test_wall_clock_cell():
    w = parse_wall_clock("real\t1m53.525s<br/>user\t0m29.322s<br/>sys\t0m4.397s")
    assert w == WallClock(113.525, 29.322, 4.397)
    assert parse_wall_clock("<center>sys 0m1s <br> real 1h2m3.5s<BR />user 12.25s") == WallClock(3723.5, 12.25, 1.0)


@pytest.mark.parametrize("cell, why", [
    ("real\t1m5x.2s<br/>user\t0m29.322s<br/>sys\t0m4.397s", "not a time"),
    ("real\t1m53.525s<br/>user\t0m29.322s", "no sys time"),
    ("real\t1m60.000s<br/>user\t0m29.322s<br/>sys\t0m4.397s", "60 seconds or more"),
    ("real\t0m0.000s<br/>user\t0m0s<br/>sys\t0m0s", "real time is 0"),
    ("real 1s<br/>real 2s<br/>sys 0s", "real given twice"),
    ("wall 1s<br/>user 1s<br/>sys 0s", "'wall' is not real, user or sys"),
    ("real 1m53.525s user", "is not 'real <t> user <t> sys <t>'"),
    ("real " + "9" * 400 + "s user 1s sys 1s", "not a finite time"),
    ("", "empty wall-clock cell"),
    ("530.97 images/sec", "'530.97' is not real, user or sys"),
])
def test_wall_clock_cell_that_is_not_a_time(cell, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        parse_wall_clock(cell)


def test_numbers_and_percentages():
    assert parse_number("1,084.56 images/sec", ["images/sec"]) == 1084.56
    assert parse_number("1,226.99") == 1226.99
    assert parse_number("<center> 86.4") == 86.4 and parse_number("<center>5.4  ") == 5.4
    assert parse_number("<center>1</center>") == 1.0
    assert parse_number(" 1,000,000 ") == 1e6
    assert parse_percent("98.35%") == 0.9835 and parse_percent("9.58%") == 0.0958
    assert parse_percent("100%") == 1.0


@pytest.mark.parametrize("cell", ["1,08", "1,0845.6", "-1", "1e5", "abc", "", "12 34", "1.2.3", "9" * 400,
                                  "530.97 images/min", "<center>", "٣"])
def test_not_numbers(cell):
    with pytest.raises(ValueError):
        parse_number(cell, ["images/sec"])


@pytest.mark.parametrize("cell", ["98.35", "101%", "-1%", "x%", "%"])
def test_not_percentages(cell):
    with pytest.raises(ValueError):
        parse_percent(cell)


# ---------------------------------------------------------------- report 002

#: (line, backend, device, per server, real, user, sys, throughput, speedup), typed from report-002.md
EXPECTED_002 = [
    (25, "MPI", "CPU", 1, 173.341, 170.806, 3.649, 346.82, None),
    (26, "MPI", "CPU", 2, 98.953, 224.813, 8.718, None, None),
    (27, "MPI", "CPU", 4, 53.875, 214.885, 9.433, None, None),
    (29, "MPI", "GPU", 1, 113.525, 29.322, 4.397, 530.97, 1.0),
    (30, "MPI", "GPU", 2, 68.494, 90.942, 17.767, 882.35, 1.66),
    (31, "MPI", "GPU", 3, 55.322, 123.882, 23.796, 1084.56, 2.04),
    (32, "MPI", "GPU", 4, 48.933, 185.696, 30.887, 1226.99, 2.31),
    (34, "Gloo", "CPU", 1, 175.241, 173.243, 4.006, None, None),
    (35, "Gloo", "CPU", 2, 102.106, 201.320, 21.370, None, None),
    (36, "Gloo", "CPU", 4, 56.182, 224.350, 42.000, None, None),
    (38, "Gloo", "GPU", 1, 113.752, 30.322, 4.645, None, None),
    (39, "Gloo", "GPU", 2, 70.358, 71.627, 28.830, None, None),
    (40, "Gloo", "GPU", 4, 49.046, 95.980, 59.422, None, None),
    (42, "NCCL", "GPU", 1, 112.536, 29.208, 4.673, None, None),
    (43, "NCCL", "GPU", 2, 68.814, 121.194, 22.052, None, None),
    (44, "NCCL", "GPU", 4, 48.482, 212.790, 34.929, None, None),
]


def test_report_002_every_value_on_its_line():
    runs, problems = parse_backend_runs(TEXT002, "r.md")
    got = [(r.line, r.backend, r.device, r.per_server, r.real_s, r.user_s, r.sys_s, r.throughput_img_s, r.speedup)
           for r in runs]
    assert got == EXPECTED_002
    assert all(r.servers == 1 and r.processes == r.per_server for r in runs)
    counts = {}
    for r in runs:
        counts[r.backend, r.device] = counts.get((r.backend, r.device), 0) + 1
    assert counts == {("MPI", "CPU"): 3, ("MPI", "GPU"): 4, ("Gloo", "CPU"): 3, ("Gloo", "GPU"): 3, ("NCCL", "GPU"): 3}
    for r in runs:  # and each record against the text of its own line
        line = _line(TEXT002, r.line)
        assert f"| {r.backend} " in line
        for label, v in (("real", r.real_s), ("user", r.user_s), ("sys", r.sys_s)):
            assert f"{label}\t{_mmss(v)}" in line
        if r.throughput_img_s is not None:
            assert f"{r.throughput_img_s:,.2f} images/sec" in line
        if r.speedup is not None:
            assert f"| {r.speedup:g} " in line
        assert (f"| {r.device} " in line) != r.device_inferred


def test_report_002_inferred_devices_and_the_blank_table_are_noted():
    runs, problems = parse_backend_runs(TEXT002, "r.md")
    assert [(r.line, r.device_line) for r in runs if r.device_inferred] == [(35, 34), (36, 34)]
    assert problems == [
        "r.md:35: empty Devices cell read as 'CPU' from line 34 (same block and backend)",
        "r.md:36: empty Devices cell read as 'CPU' from line 34 (same block and backend)",
        "r.md:52: table left blank: its 6 rows (lines 53-58) carry no step time, throughput or speedup "
        "(text before it: '（暂时还没钱开多个服务器.jpg）'); nothing read",
    ]
    assert "没钱" in _line(TEXT002, 48)


@pytest.mark.parametrize("no, old, new, why", [
    (29, "real\t1m53.525s", "real\t1m5x.2s", "real '1m5x.2s' is not a time"),
    (39, "|                     |        | GPU     |", "|        | GPU     |",
     "missing column: 6 cells, the header at line 24 names 7"),
    (30, "882.35 images/sec", "n/a images/sec", "throughput: 'n/a images/sec' is not a number"),
    (31, "| 2.04   |", "| fast   |", "speedup: 'fast' is not a number"),
    (43, "| NCCL     |", "| NCC      |", "unknown backend 'NCC' (did you mean 'NCCL'?)"),
    (26, "| CPU     |", "| TPU     |", "device 'TPU' is not CPU or GPU"),
    (27, "| 1          |", "| 0          |", "server count '0' is 0"),
    (42, "real\t1m52.536s<br/>user\t0m29.208s<br/>sys\t0m4.673s", "", "empty wall-clock cell"),
])
def test_report_002_bad_row_is_reported_and_the_rest_still_parsed(no, old, new, why):
    runs, problems = parse_backend_runs(_replace_line(TEXT002, no, old, new), "r.md")
    assert [r.line for r in runs] == [e[0] for e in EXPECTED_002 if e[0] != no]
    assert any(x.startswith(f"r.md:{no}: skipped row (") and why in x for x in problems), problems
    assert len(problems) == 4 and all(_PROBLEM.match(p) for p in problems)


def test_report_002_device_inference_within_a_block():
    # the first row of a block empty: the device comes from the row below it
    runs, p = parse_backend_runs(_replace_line(TEXT002, 38, "| GPU     |", "|         |"), "r.md")
    r38 = next(r for r in runs if r.line == 38)
    assert (r38.device, r38.device_line) == ("GPU", 39)
    assert "r.md:38: empty Devices cell read as 'GPU' from line 39 (same block and backend)" in p
    # a block naming no device: its rows are skipped, each named
    text = TEXT002
    for no in (42, 43, 44):
        text = _replace_line(text, no, "| GPU     |", "|         |")
    runs, p = parse_backend_runs(text, "r.md")
    assert {r.backend for r in runs} == {"MPI", "Gloo"} and len(runs) == 13
    for no in (42, 43, 44):
        assert f"r.md:{no}: skipped row: Devices cell empty and no NCCL row of its block names a device" in p
    # a row of another backend in the block does not lend its device
    text = _replace_line(TEXT002, 35, "| Gloo     |", "| NCCL     |")
    runs, p = parse_backend_runs(text, "r.md")
    assert 35 not in [r.line for r in runs] and [r.device_line for r in runs if r.line == 36] == [34]
    assert "r.md:35: skipped row: Devices cell empty and no NCCL row of its block names a device" in p


def test_report_002_repeated_row_and_filled_second_table():
    text = _replace_line(TEXT002, 27, "| 4                  |", "| 2                  |")
    runs, p = parse_backend_runs(text, "r.md")
    assert "r.md:27: skipped row: MPI on CPU, 1 x 2 repeats line 26" in p and len(runs) == 15
    text = _replace_line(TEXT002, 53, "| 1                  |              |", "| 1                  | 1.5 s        |")
    runs, p = parse_backend_runs(text, "r.md")
    assert "r.md:52: table has no wall-clock column '耗时'; its rows with values (line 53) are skipped" in p
    assert len(runs) == 16


def test_report_002_without_a_results_table_is_a_report_error():
    with pytest.raises(ReportError, match="no results table"):
        parse_backend_runs(TEXT004, "r.md")
    with pytest.raises(ReportError, match="no backend run read"):
        parse_backend_runs(TEXT002.replace("real\t", "reel\t"), "r.md")


# ---------------------------------------------------------------- report 003

#: (line, table, processes, step time, per process, total, speedup), typed from report-003.md
EXPECTED_003 = [
    (26, 0, 1, 244.66, 2.5, 2.5, 1.0), (27, 0, 2, 143.76, 2.5, 5.0, 1.72),
    (28, 0, 4, 77.44, 1.6, 6.2, 3.15), (29, 0, 8, 82.46, 0.6, 5.4, 3.04),
    (49, 1, 1, 86.4, 7.5, 7.7, 1.0), (50, 1, 2, 55.6, 5.9, 11.7, 1.55),
    (51, 1, 4, 37.4, 4.5, 17.3, 2.34), (52, 1, 8, 40.3, 2.2, 16.9, 2.16),
]


def test_report_003_every_value_on_its_line():
    rows, problems = parse_cpu_scaling(TEXT003, MODELS003, "r.md")
    assert problems == []
    assert [(r.line, r.table, r.processes, r.step_time, r.per_process, r.total, r.speedup) for r in rows] == EXPECTED_003
    assert [r.model for r in rows] == ["resnet50"] * 4 + ["resnet18"] * 4
    assert {r.backend for r in rows} == {"MPI"}
    for r in rows:
        cells = [c.replace("<center>", "").strip() for c in _line(TEXT003, r.line).strip().strip("|").split("|")]
        assert cells == ["MPI", str(r.processes), f"{r.step_time:g}", f"{r.per_process:g}",
                         f"{r.total:.1f}" if cells[4].endswith(".0") else f"{r.total:g}", f"{r.speedup:g}"]


@pytest.mark.parametrize("no, old, new, why", [
    (27, "<center> 143.76", "<center> 14x.76", "step time: '<center> 14x.76' is not a number"),
    (50, "| <center> 11.7 | <center>1.55 |", "| <center> 11.7 |", "missing column: 5 cells, the header at line 48 "
                                                                      "names 6"),
    (28, "<center> 1.6 ", "<center> fast", "throughput per process: '<center> fast' is not a number"),
    (29, "<center> 8 ", "<center> 8.5", "process count '8.5' is not a whole number"),
    (51, "<center> 4 ", "<center> 2 ", "2 processes repeats line 50"),
])
def test_report_003_bad_row_is_reported_and_the_rest_still_parsed(no, old, new, why):
    rows, problems = parse_cpu_scaling(_replace_line(TEXT003, no, old, new), MODELS003, "r.md")
    assert [r.line for r in rows] == [e[0] for e in EXPECTED_003 if e[0] != no]
    assert len(problems) == 1 and problems[0].startswith(f"r.md:{no}: skipped row of the ")
    assert why in problems[0], problems


def test_report_003_tables_and_model_names():
    rows, p = parse_cpu_scaling(TEXT003, ["resnet50"], "r.md")
    assert len(rows) == 4 and p == ["r.md:46: table 2 has no model name (the caller names 1); skipped"]
    rows, p = parse_cpu_scaling(TEXT003, MODELS003 + ["vgg16"], "r.md")
    assert len(rows) == 8 and p == ["r.md: model 'vgg16' has no table (the report has 2)"]
    # a damaged header: that table is skipped but still takes its place, the next keeps its model
    text = _replace_line(TEXT003, 25, "| 通信后端 | 使用CPU数量 |", "| 通信后段 | 使用CPU数 |")
    rows, p = parse_cpu_scaling(text, MODELS003, "r.md")
    assert {r.model for r in rows} == {"resnet18"} and len(rows) == 4
    assert p == ["r.md:23: the 'resnet50' table (table 1) has no header row naming '通信后端' or '使用CPU数量'; "
                 "its rows are skipped"]
    text = _replace_line(TEXT003, 48, "| 使用CPU数量 |", "| 使用CPU数 |")
    rows, p = parse_cpu_scaling(text, MODELS003, "r.md")
    assert {r.model for r in rows} == {"resnet50"} and len(rows) == 4
    assert p == ["r.md:46: the 'resnet18' table (table 2) has no '使用CPU数量' header cell; its rows are skipped"]
    with pytest.raises(ReportError, match="no CPU scaling row"):
        parse_cpu_scaling(TEXT003, [], "r.md")
    with pytest.raises(ReportError):
        parse_cpu_scaling(TEXT002, MODELS003, "r.md")


# ---------------------------------------------------------------- report 004

#: (line, algorithm, devices, real, user, sys, accuracy, label line), typed from report-004.md
EXPECTED_004 = [
    (36, "serial", 1, 142.338, 190.260, 15.421, 0.9835, 36),
    (37, "horovod", 2, 73.832, 129.092, 28.114, 0.9829, 37),
    (38, "horovod", 4, 51.258, 217.314, 42.107, 0.9827, 37),
    (39, "int8", 2, 59.423, 217.949, 29.238, 0.0958, 39),
    (40, "int8", 4, 37.815, 282.188, 44.879, 0.0958, 39),
    (41, "fp16", 2, 58.941, 191.445, 32.193, 0.9827, 41),
    (42, "fp16", 4, 38.347, 261.195, 54.429, 0.9830, 41),
]


def test_report_004_every_value_on_its_line():
    runs, problems = parse_compression_runs(TEXT004, "r.md")
    assert problems == []
    assert [(r.line, r.algorithm, r.devices, r.real_s, r.user_s, r.sys_s, r.accuracy, r.label_line)
            for r in runs] == EXPECTED_004
    for r in runs:
        line = _line(TEXT004, r.line)
        for label, v in (("real", r.real_s), ("user", r.user_s), ("sys", r.sys_s)):
            assert f"{label}\t{_mmss(v)}" in line
        assert f"| {r.accuracy * 100:.2f}%" in line
        assert (f"Device# == {r.devices}" in line) == (r.algorithm != "serial")
        assert r.label in _line(TEXT004, r.label_line)
    assert {r.label for r in runs} == {"串行训练", "用Horovod并行", "float8(8bit)压缩", "float16(16bit)压缩"}


@pytest.mark.parametrize("no, old, new, skipped, why", [
    (38, "real\t0m51.258s", "real\t0m5x.2s", [38], "real '0m5x.2s' is not a time"),
    (41, "| 98.27%     |", "| 98.27      |", [41], "'98.27' is not a percentage"),
    (37, "Device# == 2", "Devices: 2  ", [37], "device cell 'Devices: 2' is not 'Device# == N'"),
    (40, "| 9.58%      |", "", [40], "missing column: 3 cells, the header at line 35 names 4"),
    (42, "| 98.30%     |", "| high%      |", [42], "'high' is not a number"),
    (39, "float8(8bit)压缩  ", "float4(4bit)压缩  ", [39, 40], "unknown training algorithm 'float4(4bit)压缩'"),
    (36, "|              |", "| Device# == 2 |", [36], "serial training on 2 devices"),
    (41, "| Device# == 2 |", "|              |", [41], "no device count for 'float16(16bit)压缩' (empty cell)"),
])
def test_report_004_bad_row_is_reported_and_the_rest_still_parsed(no, old, new, skipped, why):
    runs, problems = parse_compression_runs(_replace_line(TEXT004, no, old, new), "r.md")
    assert [r.line for r in runs] == [e[0] for e in EXPECTED_004 if e[0] not in skipped]
    assert problems[0].startswith(f"r.md:{no}: skipped row (") and why in problems[0], problems
    assert len(problems) == len(skipped)
    if len(skipped) > 1:
        assert problems[1] == ("r.md:40: skipped row (empty training-algorithm cell continuing the group of "
                               "line 39, whose label was not read)")


def test_report_004_a_row_continuing_no_group_and_a_bad_label_row_keeping_its_group():
    text = _replace_line(TEXT004, 39, "float8(8bit)压缩", "                ")
    lines = text.splitlines(keepends=True)
    text = "".join(lines[:38] + ["|  |  |  |  |\n"] + lines[38:])  # a blank row: line 39 is now 40
    runs, p = parse_compression_runs(text, "r.md")
    assert "r.md:40: skipped row (empty training-algorithm cell and no group above it in its block)" in p
    # a label row skipped for its wall clock still opens its group
    runs, p = parse_compression_runs(_replace_line(TEXT004, 39, "real\t0m59.423s", "real\t?"), "r.md")
    assert [(r.line, r.algorithm, r.label_line) for r in runs if r.algorithm == "int8"] == [(40, "int8", 39)]


def test_report_004_without_its_table_is_a_report_error():
    with pytest.raises(ReportError, match="no results table"):
        parse_compression_runs(TEXT003, "r.md")
    with pytest.raises(ReportError, match="no compression run read"):
        parse_compression_runs(TEXT004.replace("%", ""), "r.md")


@pytest.mark.parametrize("text", ["", "no tables here\n", "| a | b |\n|---|---|\n| 1 | 2 |\n"])
def test_no_table_is_a_report_error_for_each_reader(text):
    for call in (lambda: parse_backend_runs(text), lambda: parse_cpu_scaling(text, MODELS003),
                 lambda: parse_compression_runs(text)):
        with pytest.raises(ReportError):
            call()


# ---------------------------------------------------------------- fuzz-ish: random byte mutations

_BAD = [b"9" * 400, b"0", b"-1", b"1,0", b"x", b"", b"1.2.3", b"|", b"\n", b"<center>", b"\xff\xfe", b"\t", b"%"]


def _mutate(data: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.randint(1, 6)):
        i = rng.randrange(len(data))
        op = rng.randrange(5)
        if op == 0:    # one byte replaced by any byte
            data = data[:i] + bytes([rng.randrange(256)]) + data[i + 1:]
        elif op == 1:  # a span cut out
            data = data[:i] + data[i + rng.randint(1, 120):]
        elif op == 2:  # random bytes inserted
            data = data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 8))) + data[i:]
        else:          # a number replaced by trouble
            spans = [m.span() for m in re.finditer(rb"[0-9]+(?:[.,][0-9]+)?", data)]
            if spans:
                a, b = rng.choice(spans)
                data = data[:a] + rng.choice(_BAD) + data[b:]
    return data


def _check_values(*values):
    for v in values:
        if v is not None:
            assert isinstance(v, (int, float)) and math.isfinite(v) and v >= 0, values


@pytest.mark.parametrize("which", ["002", "003", "004"])
def test_random_byte_mutations_only_report_error_escapes(which):
    data = {"002": R002, "003": R003, "004": R004}[which].read_bytes()
    rng = random.Random(13)
    for i in range(400):
        text = _mutate(data, rng).decode("utf-8", errors=rng.choice(["replace", "surrogateescape"]))
        n_lines = len(text.splitlines())
        try:
            if which == "002":
                recs, p = parse_backend_runs(text, "r.md")
                for r in recs:
                    _check_values(r.real_s, r.user_s, r.sys_s, r.throughput_img_s, r.speedup)
                    assert r.real_s > 0 and r.servers >= 1 and r.per_server >= 1 and r.device in ("CPU", "GPU")
                    assert r.backend in ("MPI", "Gloo", "NCCL") and 1 <= r.device_line <= n_lines
            elif which == "003":
                recs, p = parse_cpu_scaling(text, MODELS003, "r.md")
                for r in recs:
                    _check_values(r.step_time, r.per_process, r.total, r.speedup)
                    assert r.processes >= 1 and r.step_time > 0 and r.model == MODELS003[r.table]
            else:
                recs, p = parse_compression_runs(text, "r.md")
                for r in recs:
                    _check_values(r.real_s, r.user_s, r.sys_s, r.accuracy)
                    assert r.devices >= 1 and r.accuracy <= 1 and r.algorithm in ("serial", "horovod", "int8", "fp16")
        except ReportError as e:
            assert "\n" not in str(e)
            continue
        except Exception as e:  # noqa: BLE001 - the point of the test
            pytest.fail(f"mutation {i} of report {which}: {type(e).__name__}: {e}")
        assert all(1 <= r.line <= n_lines for r in recs)
        assert all(_PROBLEM.match(x) and "\n" not in x and "\r" not in x for x in p), p
