"""nccl-tests ``all_reduce_perf`` output as an environment source.

The fixtures (tests/data/nccl_tests/) are written from nccl-tests' documented format, not
measured (no GPU was lent): their headers say so, and these tests check it. Expected numbers
are computed here from the fixture rows themselves.
"""
from __future__ import annotations

import importlib.util
import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from autotuner.errors import AutotunerError, NcclTestsError
from autotuner.frameworks.horovod.fit.fitters import GPU_MEMCPY_BPS, fit_env
from autotuner.frameworks.horovod.fit.nccl_tests import fit_tier
from autotuner.readers.nccl_tests import (
    parse_all_reduce_perf,
    parse_json_output,
    parse_stdout,
    read_all_reduce_perf,
    resolution,
)
from autotuner.frameworks.horovod.readers.runs import read_env
from autotuner.frameworks.horovod.schemas import check_env_toml
from cli_helpers import assert_one_line_error, run

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data" / "nccl_tests"
EXAMPLE = DATA / "h100-2x8-ib400"
INTER = EXAMPLE / "all_reduce_perf-2x8.txt"
INTRA = EXAMPLE / "all_reduce_perf-1x8.txt"
INTER_JSON = DATA / "all_reduce_perf-2x8.json"
NAME = "h100-2x8-ib400"
GB = 1e9


def fixtures_module():
    spec = importlib.util.spec_from_file_location("nccl_tests_make_fixtures", DATA / "make_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def copy_env(tmp_path: Path, name: str = NAME, edit: dict[str, callable] | None = None) -> Path:
    """The example env under ``tmp_path/runs/name``; ``edit`` maps a file name to text -> text."""
    d = tmp_path / "runs" / name
    shutil.copytree(EXAMPLE, d)
    toml = d / "env.toml"
    toml.write_text(toml.read_text().replace(f'name = "{NAME}"', f'name = "{name}"'))
    for fname, f in (edit or {}).items():
        (d / fname).write_text(f((d / fname).read_text()))
    return d


def row_line(path: Path, size: int) -> tuple[int, str]:
    """(1-based line number, text) of the row of ``size`` bytes."""
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.split()[:1] == [str(size)]:
            return n, line
    raise AssertionError(size)


def edit_row(size: int, f):
    """An edit replacing the row of ``size`` bytes by ``f(tokens) -> tokens``."""
    def edit(text: str) -> str:
        lines = text.splitlines()
        for i, line in enumerate(lines):
            if line.split()[:1] == [str(size)]:
                lines[i] = "  ".join(f(line.split()))
                return "\n".join(lines) + "\n"
        raise AssertionError(size)
    return edit


def set_col(i: int, value: str):
    def f(tok: list[str]) -> list[str]:
        tok = list(tok)
        tok[i] = value
        return tok
    return f


# --- the fixtures say what they are ---------------------------------------------------------

@pytest.mark.parametrize("path", [INTER, INTRA], ids=lambda p: p.name)
def test_text_fixtures_say_they_are_not_measured_and_match_the_documented_layout(path):
    lines = path.read_text().splitlines()
    head = "\n".join(lines[:5])
    assert "NOT MEASURED" in head and "documented" in head and "make_fixtures.py" in head
    # src/util.cu writeResultHeader's two header lines, byte for byte
    assert "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   " \
           "busbw  #wrong " in lines
    assert any(l.startswith("#        (B)    (elements)") and "(us)  (GB/s)  (GB/s)" in l for l in lines)
    # writeBenchmarkLinePreamble: %12li  %12li  %8s  %6s  %6s; then 2 x (  %7s  %6s  %6s  %6g)
    n, row = row_line(path, 1024)
    assert re.fullmatch(r" {8}1024 {11}256 {5}float {5}sum {6}-1(  [ .\d]{7}  [ .\d]{6}  [ .\d]{6}  [ \d]{6}){2}", row)
    assert "# Out of bounds values : 0 OK" in lines


def test_json_fixture_says_it_is_not_measured():
    doc = json.loads(INTER_JSON.read_text())
    assert list(doc)[0] == "fixture_note" and "NOT MEASURED" in doc["fixture_note"]
    assert doc["version"] == 3 and doc["args"][0].endswith("all_reduce_perf")


def test_nothing_shipped_comes_from_these_fixtures():
    """A shipped environment must be measured: no env under runs/ reads nccl-tests fixtures."""
    for runs in (ROOT / "runs", ROOT / "autotuner" / "reference"):
        for toml in runs.glob("*/env.toml") if runs.is_dir() else []:
            for f in toml.parent.rglob("*"):
                if f.is_file() and f.suffix in (".txt", ".json", ".toml", ".log"):
                    assert "FIXTURE, NOT MEASURED" not in f.read_text(errors="replace"), f


def test_fixtures_are_reproducible(tmp_path, monkeypatch):
    mod = fixtures_module()
    monkeypatch.setattr(mod, "HERE", tmp_path)
    monkeypatch.setattr(mod, "ENV", tmp_path / NAME)
    mod.main()
    for rel in (f"{NAME}/{INTER.name}", f"{NAME}/{INTRA.name}", INTER_JSON.name):
        assert (tmp_path / rel).read_text() == (DATA / rel).read_text(), rel


# --- the reader -----------------------------------------------------------------------------

def test_stdout_reader_reads_ranks_hosts_and_rows():
    perf = read_all_reduce_perf(INTER, "inter.txt")
    assert perf.form == "stdout" and perf.version == "2.19.6"
    assert perf.ranks == 16 and perf.ranks_per_host == {"gpu-n01": 8, "gpu-n02": 8}
    assert perf.ranks_where == "inter.txt:11-26"
    assert [r.size_bytes for r in perf.rows] == [2 ** k for k in range(10, 30)]
    n, line = row_line(INTER, 536870912)
    last = perf.rows[-1]
    tok = line.split()
    assert last.line == n and last.where == f"inter.txt:{n}"
    assert (last.count, last.dtype, last.redop) == (134217728, "float", "sum")
    assert (last.time_us, last.algbw_gbs, last.busbw_gbs) == (float(tok[5]), float(tok[6]), float(tok[7]))
    assert last.in_place_time_us == float(tok[9]) and last.in_place_busbw_gbs == float(tok[11])
    # the units: algbw = bytes / 1e9 / s with the time in µs; busbw = algbw x 2(n-1)/n, n = 16
    assert last.size_bytes / (last.time_us * 1e-6) / GB == pytest.approx(last.algbw_gbs, abs=0.006)
    assert last.algbw_gbs * 2 * 15 / 16 == pytest.approx(last.busbw_gbs, abs=0.02)
    # the footer's average is the mean busbw of every row, both halves (src/common.cu BenchTime)
    mean = np.mean([b for r in perf.rows for b in (r.busbw_gbs, r.in_place_busbw_gbs)])
    assert perf.avg_busbw_gbs == pytest.approx(mean, abs=0.01)


def test_one_node_reader():
    perf = read_all_reduce_perf(INTRA)
    assert perf.ranks == 8 and perf.ranks_per_host == {"gpu-n01": 8} and len(perf.rows) == 20


def test_json_and_stdout_of_the_same_run_agree():
    text, js = read_all_reduce_perf(INTER), read_all_reduce_perf(INTER_JSON)
    assert js.form == "json" and js.version == "3" and js.ranks == 16
    assert js.ranks_per_host == text.ranks_per_host
    assert [r.size_bytes for r in js.rows] == [r.size_bytes for r in text.rows]
    for a, b in zip(text.rows, js.rows):
        assert a.time_us == pytest.approx(b.time_us, abs=resolution(f"{a.time_us}") * 1.01 + 0.05)
        assert a.busbw_gbs == pytest.approx(b.busbw_gbs, abs=0.006)
    ta, ia = fit_tier(text)
    tb, ib = fit_tier(js)
    assert ia["latency_us"] == pytest.approx(ib["latency_us"], rel=0.01)
    assert ia["busbw_gbytes_per_s"] == pytest.approx(ib["busbw_gbytes_per_s"], rel=0.01)


def test_resolution_of_printed_numbers():
    assert resolution("  12.34") == pytest.approx(0.005)
    assert resolution("10899.8") == pytest.approx(0.05)
    assert resolution("1066") == pytest.approx(0.5)
    assert resolution("1.2e+04") == pytest.approx(500)
    assert resolution("45.413994") == pytest.approx(5e-7)


def _edited(path: Path, f) -> str:
    return f(path.read_text())


REJECTS = [
    # (edit of the 2x8 stdout, words in the error; a row's error also names its line)
    ("time", edit_row(536870912, set_col(5, "22l65.7")), ["time (out-of-place)", "'22l65.7'", "not a number"]),
    ("nan", edit_row(4096, set_col(7, "nan")), ["busbw (out-of-place)", "not a finite number"]),
    ("missing column", edit_row(65536, lambda t: t[:-1]), ["12 columns", "has 13"]),
    ("extra column", edit_row(65536, lambda t: t + ["7"]), ["14 columns", "has 13"]),
    ("busbw", edit_row(536870912, set_col(7, "47.41")), ["busbw (out-of-place): 47.41", "2(n-1)/n", "n = 16"]),
    ("algbw", edit_row(8388608, set_col(10, "21.52")), ["algbw (in-place): 21.52", "not size / time"]),
    ("count", edit_row(1024, set_col(1, "257")), ["size: 1024: not count x 4 bytes"]),
    ("wrong", edit_row(2048, set_col(8, "3")), ["#wrong (out-of-place): 3", "wrong results"]),
]


@pytest.mark.parametrize("edit,needles", [(e, n) for _, e, n in REJECTS], ids=[k for k, _, _ in REJECTS])
def test_a_bad_row_is_one_line_naming_the_file_and_line(edit, needles):
    text = _edited(INTER, edit)
    bad = next(n for n, (a, b) in enumerate(zip(text.splitlines(), INTER.read_text().splitlines()), 1) if a != b)
    with pytest.raises(NcclTestsError) as e:
        parse_stdout(text, "x/inter.txt")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"x/inter.txt:{bad}: "), msg
    for needle in needles:
        assert needle in msg, (needle, msg)


def test_a_row_with_a_non_numeric_size_is_named():
    # a row whose first cell is not a size: still inside the table, so it is named, not skipped
    text = _edited(INTER, edit_row(2048, set_col(0, "2K")))
    with pytest.raises(NcclTestsError, match=r"inter.txt:\d+: size: '2K': not a whole number of bytes"):
        parse_stdout(text, "inter.txt")


def _sub(old: str, new: str):
    def f(t: str) -> str:
        assert old in t, old
        return t.replace(old, new, 1)
    return f


FILE_REJECTS = [
    ("no rank lines", lambda t: "\n".join(l for l in t.splitlines() if "Rank" not in l), "rank count is unknown"),
    ("rank twice", _sub("#  Rank  1 Group  0", "#  Rank  0 Group  0"), "rank 0 is listed twice"),
    ("split groups", _sub("#  Rank  8 Group  0", "#  Rank  8 Group  1"), "NCCL_TESTS_SPLIT"),
    ("cputime", _sub("root     time", "root  cputime"), "-C 1"),
    ("other test", _sub("starting: all_reduce_perf", "starting: all_gather_perf"), "not all_reduce_perf"),
    ("no table", lambda t: "\n".join(l for l in t.splitlines() if "size" not in l), "no all_reduce_perf table"),
    ("no rows", lambda t: "\n".join(l for l in t.splitlines() if not l[:1].isspace()), "has no rows"),
    ("second table", lambda t: t + t, "a second table"),
    ("two types", edit_row(4096, set_col(2, "int32")), "differs from the first row's float sum"),
    ("stray line", _sub("# Out of bounds", "Test NCCL failure common.cu:1:'unhandled'\n# Out of bounds"),
     "not a row of the table"),
]


@pytest.mark.parametrize("edit,needle", [(e, n) for _, e, n in FILE_REJECTS], ids=[k for k, _, _ in FILE_REJECTS])
def test_a_bad_file_is_one_line(edit, needle):
    with pytest.raises(NcclTestsError) as e:
        parse_stdout(_edited(INTER, edit), "inter.txt")
    assert "\n" not in str(e.value) and needle in str(e.value) and str(e.value).startswith("inter.txt"), str(e.value)


def test_logs_banners_and_options_around_the_table_are_read():
    """NCCL INFO lines (also inside the table), mpirun banners, -S timestamps and -I columns."""
    text = INTER.read_text()
    text = "Warning: Permanently added 'gpu-n02' (ED25519) to the list of known hosts.\n" + text
    n, _ = row_line(INTER, 4096)
    lines = text.splitlines()
    lines.insert(n, "gpu-n01:41250:41250 [0] NCCL INFO comm 0x55d0 rank 0 nranks 16 - Init COMPLETE")
    perf = parse_stdout("\n".join(lines), "inter.txt")
    assert len(perf.rows) == 20 and perf.rows[2].size_bytes == 4096 and perf.rows[2].line == n + 2
    # -S 1: a trailing timestamp column (two tokens per row)
    ts = text.replace("  #wrong \n", "  #wrong timestamp\n", 1)
    ts = "\n".join(l + "  2026-07-20 10:00:01" if l[:1] == " " and l.split()[:1] != [] else l
                   for l in ts.splitlines())
    assert [r.time_us for r in parse_stdout(ts, "ts.txt").rows] == [r.time_us for r in perf.rows]


def test_per_iteration_columns_are_read():
    """-I 1 (src/util.cu writeResultHeader): i_min i_max i_p99 i_cv% after each #wrong."""
    extra = "  i_min    i_max    i_p99    i_cv%"
    lines = []
    for l in INTER.read_text().splitlines():
        if l.startswith("#       size"):
            t = l.split("#wrong")
            l = t[0] + "#wrong" + extra + t[1] + "#wrong" + extra
        elif l[:1] == " ":
            tok = l.split()
            l = "  ".join(tok[:9] + ["1.0", "2.0", "2.0", "0.5"] + tok[9:] + ["1.0", "2.0", "2.0", "0.5"])
        lines.append(l)
    perf = parse_stdout("\n".join(lines), "i.txt")
    assert [r.busbw_gbs for r in perf.rows] == [r.busbw_gbs for r in read_all_reduce_perf(INTER).rows]


JSON_REJECTS = [
    ("version", lambda d: d.update(version=9), "version: 9: not a known nccl-tests JSON version"),
    ("nan", lambda d: d["results"][2]["out_of_place"].update(time="nan"), "results[2].out_of_place.time: 'nan'"),
    ("cpu time", lambda d: d["results"][0]["out_of_place"].update(cpu_time=1.0), "-C 1"),
    ("busbw", lambda d: d["results"][19]["out_of_place"].update(bus_bw=40.0), "results[19]: busbw (out-of-place)"),
    ("devices", lambda d: d["config"].pop("devices"), "config.devices"),
    ("no results", lambda d: d.update(results=[]), "results: []"),
    ("other test", lambda d: d["args"].__setitem__(0, "./build/all_gather_perf"), "not all_reduce_perf"),
]


@pytest.mark.parametrize("edit,needle", [(e, n) for _, e, n in JSON_REJECTS], ids=[k for k, _, _ in JSON_REJECTS])
def test_bad_json_is_one_line(edit, needle):
    doc = json.loads(INTER_JSON.read_text())
    edit(doc)
    with pytest.raises(NcclTestsError) as e:
        parse_all_reduce_perf(json.dumps(doc), "x.json")
    assert "\n" not in str(e.value) and needle in str(e.value), str(e.value)


def test_cut_json_is_one_line():
    with pytest.raises(NcclTestsError, match=r"x.json: not JSON \(.* at line 1 column"):
        parse_json_output(INTER_JSON.read_text()[:-40], "x.json")


def test_json_ranks_are_processes_times_gpus():
    """One device entry per process (src/util.cu parseRankInfo reads each process's first line)."""
    doc = json.loads(INTER_JSON.read_text())
    doc["config"]["devices"] = doc["config"]["devices"][::8]  # 2 processes ...
    doc["config"]["ngpus"] = 8                               # ... of 8 GPUs each
    perf = parse_json_output(json.dumps(doc), "x.json")
    assert perf.ranks == 16 and perf.ranks_per_host == {"gpu-n01": 8, "gpu-n02": 8}


# --- the fit --------------------------------------------------------------------------------

def _two_point_busbw(perf, lo_size: int, p: int) -> float:
    """Busbw (GB/s) of the line through the rows of ``lo_size`` and the largest size:
    B = 2(p-1)/p / slope (bytes/s), computed by hand from the printed times."""
    lo = next(r for r in perf.rows if r.size_bytes == lo_size)
    hi = perf.rows[-1]
    slope = (hi.time_us - lo.time_us) * 1e-6 / (hi.size_bytes - lo.size_bytes)  # s per byte
    return 2 * (p - 1) / p / slope / GB


def test_fit_of_the_example_env_matches_the_rows(tmp_path):
    d = fit_env(read_env(copy_env(tmp_path)))
    inter, intra = d["cost_model"]["inter"], d["cost_model"]["intra"]
    f = d["fit"]
    text, one = read_all_reduce_perf(INTER), read_all_reduce_perf(INTRA)
    # the knee the piecewise fit chose, and the busbw of the line through the knee row and the
    # largest row, by hand: 2x8 4 MiB 259.67 us .. 512 MiB 22165.7 us -> 45.6 GB/s;
    # 1x8 16 MiB 120.09 us .. 512 MiB 2097.89 us -> 460.2 GB/s
    assert f["piecewise"]["knee_bytes"] == 4 * 2 ** 20 and f["intra"]["piecewise"]["knee_bytes"] == 16 * 2 ** 20
    hand_inter = _two_point_busbw(text, 4 * 2 ** 20, 16)
    hand_intra = _two_point_busbw(one, 16 * 2 ** 20, 8)
    assert hand_inter == pytest.approx(45.6, abs=0.05) and hand_intra == pytest.approx(460.2, abs=0.1)
    assert inter["large_bandwidth_gbps"] / 8 == pytest.approx(hand_inter, rel=0.015)
    assert intra["large_bandwidth_gbps"] / 8 == pytest.approx(hand_intra, rel=0.015)
    assert f["busbw_gbytes_per_s"] == pytest.approx(inter["large_bandwidth_gbps"] / 8)
    # above the busbw printed for the largest size (45.41, 447.84: latency still counts there)
    assert text.rows[-1].busbw_gbs < f["busbw_gbytes_per_s"] < 1.05 * text.rows[-1].busbw_gbs
    assert one.rows[-1].busbw_gbs < f["intra"]["busbw_gbytes_per_s"] < 1.05 * one.rows[-1].busbw_gbs
    # small-message latency: the mean time of the 1-4 KiB rows (38.57 and 21.05 us), within 10 %;
    # per ring step alpha = latency / (2(p-1))
    small_inter = np.mean([r.time_us for r in text.rows[:3]])
    small_intra = np.mean([r.time_us for r in one.rows[:3]])
    assert small_inter == pytest.approx(38.57, abs=0.01) and small_intra == pytest.approx(21.05, abs=0.01)
    assert f["latency_us"] == pytest.approx(small_inter, rel=0.10)
    assert f["intra"]["latency_us"] == pytest.approx(small_intra, rel=0.10)
    assert inter["alpha_us"] == pytest.approx(f["latency_us"] / 30)
    assert intra["alpha_us"] == pytest.approx(f["intra"]["latency_us"] / 14)
    # the fitted curves follow the rows: mean error (recomputed here) 5-6 %, none over 25 %
    # (two lines for NCCL's three protocols: the LL -> LL128 switch at 64 KiB-1 MiB bends the
    # small segment; the worst rows are 17.6 % (2x8, 128 KiB) and 20.4 % (1x8, 512 KiB) below it)
    for fi in (f, f["intra"]):
        err = [abs(s["pred_ms"] - s["time_ms"]) / s["time_ms"] for s in fi["samples"]]
        assert np.mean(err) * 100 == pytest.approx(fi["piecewise"]["mape_percent"])
        assert fi["piecewise"]["mape_percent"] < 6
        assert max(err) < 0.25
    assert f["p"] == 16 and f["intra"]["p"] == 8 and f["n_samples"] == 20


def test_fit_recovers_an_exact_alpha_beta_line(tmp_path):
    """A sweep printed from T(n) = a + n·2(p-1)/p / B: the fit gives back a and B."""
    mod = fixtures_module()
    for p, a, bus in ((16, 40e-6, 46e9), (8, 20e-6, 450e9)):
        tier = {"ranks": p, "protocols": [(a, bus)], "phase": 0.0}
        rows = mod.rows_for(tier)
        for r in rows:  # no ripple: recompute exactly
            t = a + r["size"] * 2 * (p - 1) / p / bus
            for k in ("out_of_place", "in_place"):
                alg = r["size"] / 1e9 / t
                r[k] = {"time": t * 1e6, "alg_bw": alg, "bus_bw": alg * 2 * (p - 1) / p, "nwrong": 0.0}
        perf = parse_stdout(mod.text_output(tier, rows, p <= 8, "x", "x"), "exact.txt")
        tr, info = fit_tier(perf)
        assert info["latency_us"] == pytest.approx(a * 1e6, rel=0.01)
        assert info["busbw_gbytes_per_s"] == pytest.approx(bus / GB, rel=0.005)
        assert info["mape_percent"] < 0.5


def test_what_nccl_tests_cannot_measure_is_borrowed_and_said(tmp_path):
    d = fit_env(read_env(copy_env(tmp_path)))
    cm, f = d["cost_model"], d["fit"]
    assert cm["memcpy_gbytes_per_s"] == GPU_MEMCPY_BPS / 1e9
    assert "GPU_MEMCPY_BPS" in f["borrowed"]["memcpy_gbytes_per_s"]
    # negotiation: the fitted time of a 64-byte allreduce on all 16 ranks (small segment)
    inter = cm["inter"]
    assert cm["negotiation"]["ctrl_op_us"] == pytest.approx(30 * inter["alpha_us"] + 64 * 30 / 16 / (
        inter["bandwidth_gbps"] * 1e9 / 8) * 1e6)
    assert "negotiation" in f["borrowed"] and f["async_collectives"] is True
    assert d["workloads"] == {} and d["cluster"]["backend"] == "nccl" and d["cluster"]["nodes"] == 2


def test_one_node_env(tmp_path):
    d = tmp_path / "runs" / "h100-1x8"
    d.mkdir(parents=True)
    shutil.copy(INTRA, d / INTRA.name)
    (d / "env.toml").write_text(f'format = "nccl-tests"\nsource = "{INTRA.name}"\nnodes = 1\ngpus_per_node = 8\n'
                                'link_gbps = 400.0\n')
    m = fit_env(read_env(d))
    assert m["cost_model"]["inter"] == m["cost_model"]["intra"]
    assert m["cluster"]["backend"] == "nccl" and "not measured" in m["fit"]["notes"][0]


@pytest.mark.parametrize("toml_edit,needle", [
    (lambda t: t.replace("nodes = 2", "nodes = 4").replace("gpus_per_node = 8", "gpus_per_node = 4"),
     "8 ranks, but env.toml's intra_source must be a run on nodes x gpus_per_node = 1 x 4 = 4"),
    (lambda t: t.replace("nodes = 2", "nodes = 3"), "16 ranks, but env.toml's source must be a run on"),
    (lambda t: t.replace('intra_source = "all_reduce_perf-1x8.txt"', 'intra_source = "all_reduce_perf-2x8.txt"'),
     "16 ranks, but env.toml's intra_source must be a run on nodes x gpus_per_node = 1 x 8 = 8"),
    (lambda t: t.replace('intra_source = "all_reduce_perf-1x8.txt"', 'intra_source = "nope.txt"'),
     "intra_source: 'nope.txt': file not found"),
])
def test_rank_count_is_checked_against_env_toml(tmp_path, toml_edit, needle):
    env = read_env(copy_env(tmp_path, edit={"env.toml": toml_edit}))
    with pytest.raises(AutotunerError) as e:
        fit_env(env)
    assert "\n" not in str(e.value) and needle in str(e.value), str(e.value)


def test_a_host_layout_that_differs_is_named(tmp_path):
    env = read_env(copy_env(tmp_path, edit={INTER.name: lambda t: t.replace(" gpu-n02 ", " gpu-n03 ", 3)}))
    fit_env(env)
    assert any("ranks per host (gpu-n01: 8, gpu-n02: 5, gpu-n03: 3)" in p for p in env.problems), env.problems


def test_env_toml_checks():
    base = {"format": "nccl-tests", "source": "a.txt", "nodes": 1, "gpus_per_node": 1, "link_gbps": 100.0}
    with pytest.raises(AutotunerError, match="needs nodes x gpus_per_node >= 2"):
        check_env_toml(base, "env.toml")
    with pytest.raises(AutotunerError, match="intra_source: 'b.txt'"):
        check_env_toml({**base, "gpus_per_node": 8, "intra_source": "b.txt"}, "env.toml")
    with pytest.raises(AutotunerError, match="nodes: \\(missing\\)"):
        check_env_toml({k: v for k, v in base.items() if k != "nodes"}, "env.toml")


def test_the_docs_env_toml_is_valid_and_names_the_commands():
    doc = (ROOT / "docs" / "how-to" / "nccl-tests.md").read_text()
    import tomllib
    toml = doc.split("```toml\n", 1)[1].split("```", 1)[0]
    check_env_toml(tomllib.loads(toml), "docs/how-to/nccl-tests.md")
    for cmd in ("./build/all_reduce_perf -b 1K -e 512M -f 2 -g 8", "mpirun -np 16 -N 8", "make MPI=1",
                "autotuner fit my-runs/", "--compute-ms"):
        assert cmd in doc, cmd


# --- through the command line ---------------------------------------------------------------

def test_cli_fit_then_simulate_with_compute_ms(tmp_path):
    copy_env(tmp_path)
    out = tmp_path / "model"
    p = run("fit", str(tmp_path / "runs"), "--out", str(out))
    assert p.returncode == 0, p.stderr
    model = json.loads((out / f"{NAME}.json").read_text())
    assert model["workloads"] == {} and model["fit"]["intra"]["p"] == 8
    s = run("simulate", "--model", "resnet50", "--env", NAME, "--model-dir", str(out), "--compute-ms", "100", "--json")
    assert s.returncode == 0, s.stderr
    r = json.loads(s.stdout)
    assert r["env"] == NAME and r["nodes"] == 2 and r["gpus_per_node"] == 8
    assert 100.0 <= r["step_time_ms"] < 110.0 and r["comm_ms"] > 0
    # no workload: the model needs --compute-ms, said in one line
    assert_one_line_error(run("simulate", "--model", "resnet50", "--env", NAME, "--model-dir", str(out)),
                          "pass --compute-ms")


def test_an_env_without_workloads_keeps_nccl_collectives_async(tmp_path):
    from autotuner.frameworks.horovod.predict import make_scenario
    copy_env(tmp_path)
    assert run("fit", str(tmp_path / "runs"), "--out", str(tmp_path / "model")).returncode == 0
    sc, _ = make_scenario(tmp_path / "model", NAME, "resnet50", compute_ms=100.0)
    assert sc.workload.async_collectives is True


CLI_BAD = [
    ("non-number", INTER.name, edit_row(536870912, set_col(5, "22l65.7")), 536870912, "'22l65.7': not a number"),
    ("missing column", INTER.name, edit_row(65536, lambda t: t[:-1]), 65536, "12 columns"),
    ("busbw", INTER.name, edit_row(536870912, set_col(7, "47.41")), 536870912, "not algbw x 2(n-1)/n"),
    ("intra busbw", INTRA.name, edit_row(1048576, set_col(7, "53.40")), 1048576, "n = 8 ranks"),
]


@pytest.mark.parametrize("fname,edit,size,needle", [c[1:] for c in CLI_BAD], ids=[c[0] for c in CLI_BAD])
def test_cli_bad_row_fails_that_env_only(tmp_path, fname, edit, size, needle):
    bad = copy_env(tmp_path, "bad", edit={fname: edit})
    line, _ = row_line(bad / fname, size)
    where = f"bad/{fname}:{line}:"
    out = tmp_path / "model"
    # the only env: exit 2, one line naming file:line
    only = tmp_path / "only"
    shutil.copytree(tmp_path / "runs", only)
    p = run("fit", str(only), "--out", str(out))
    assert_one_line_error(p, where)
    assert needle in p.stderr and not (out / "bad.json").exists()
    # beside a good env: the good one is fitted, the bad one named
    copy_env(tmp_path, "good")
    p = run("fit", str(tmp_path / "runs"), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert (out / "good.json").exists() and not (out / "bad.json").exists()
    assert where in p.stderr and "bad: not fitted" in p.stderr


def test_older_layout_without_root_and_with_error_columns():
    """nccl-tests before the ``root`` column named ``#wrong`` ``error``: the columns are found by name."""
    lines = []
    for l in INTER.read_text().splitlines():
        if l.startswith("#       size"):
            l = l.replace("    root", "").replace("#wrong", " error")
        elif l[:1] == " ":
            tok = l.split()
            l = "  ".join(tok[:4] + tok[5:])
        lines.append(l.replace("Group  0 ", ""))
    perf = parse_stdout("\n".join(lines), "old.txt")
    assert perf.ranks == 16 and [r.time_us for r in perf.rows] == [r.time_us for r in read_all_reduce_perf(INTER).rows]
