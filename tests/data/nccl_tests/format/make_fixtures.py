"""Write the nccl-tests format fixtures of this folder (run: ``python tests/data/nccl_tests/format/make_fixtures.py``).

FORMAT TESTS, NOT MEASUREMENTS (README.md here). No GPU was at hand when they were written, so
these files are written from the documented output format of NVIDIA/nccl-tests (mirror at commit a0b82b2,
NCCL_TESTS_VERSION "2.19.6"), not taken from a run:

- stdout: ``src/util.cu`` ``writeDeviceReport`` (the ``# nccl-tests version``, ``# nThread``,
  ``# Using devices`` and ``#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s``
  lines), ``writeResultHeader`` (the two column-header lines, ``# %10s  %12s  %8s  %6s  %6s  %7s ...``),
  ``writeBenchmarkLinePreamble`` (``%12li  %12li  %8s  %6s  %6s``: size in bytes, count in
  elements, type, redop, root = -1 for all_reduce), ``writeBenchmarkLineBody``
  (``  %7s  %6s  %6s  %6g``: time in µs, algbw and busbw in GB/s, #wrong; each float through
  ``getFloatStr``: ``%*.2f``, else ``%*.1f``, else ``%*.0f``, else ``%*.1e``), ``writeResultFooter``
  (``# Out of bounds values : 0 OK``, ``# Avg bus bandwidth    : %g``: the mean busbw of every
  out-of-place and in-place row, ``src/common.cu`` ``BenchTime``: ``args->bw[0] += busBw``);
- JSON (``-J file.json``): ``src/util.cu`` ``jsonOutputInit``, ``writeDeviceReport``,
  ``writeBenchmarkLine*``, ``writeResultFooter`` (version 3 keys, doubles as ``%lf``);
- numbers: ``src/all_reduce.cu`` ``AllReduceGetBw``: algbw = bytes / 1e9 / s, busbw = algbw ·
  2(n-1)/n; ``src/common.cu`` ``BenchTime``: time = seconds · 1e6 (µs).

Times come from a plausible model, not from hardware: NCCL picks per size the fastest of its
three protocols, each a line ``t = a + S · 2(n-1)/n / busbw`` (LL for small messages, LL128 in
the middle, Simple for large ones), times a deterministic ±1.2 % ripple. Parameters:

- one node, 8 x H100 SXM over NVLink 4 / NVSwitch: LL 21 µs, 60 GB/s; LL128 30 µs, 300 GB/s;
  Simple 55 µs, 460 GB/s busbw (~450 GB/s at 512 MiB; published DGX H100 runs: 350-480 GB/s);
- two such nodes over one 400 Gbit/s (50 GB/s) InfiniBand link each: LL 38 µs, 8 GB/s;
  LL128 55 µs, 30 GB/s; Simple 90 µs, 46 GB/s busbw (~46 GB/s at 512 MiB).
"""
from __future__ import annotations

import json
import math
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = HERE / "generated-2x8"
SIZES = [2 ** k for k in range(10, 30)]  # -b 1K -e 512M -f 2
BUS_IDS = [0x18, 0x2a, 0x3a, 0x5d, 0x9a, 0xab, 0xba, 0xdb]
GPU = "NVIDIA H100 80GB HBM3"
VERSION_LINE = "# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703"

INTRA = {"ranks": 8, "protocols": [(21e-6, 60e9), (30e-6, 300e9), (55e-6, 460e9)], "phase": 0.3}
INTER = {"ranks": 16, "protocols": [(38e-6, 8e9), (55e-6, 30e9), (90e-6, 46e9)], "phase": 1.1}


def float_str(value: float, width: int) -> str:
    """``getFloatStr`` of src/util.cu."""
    for fmt in ("%*.2f", "%*.1f", "%*.0f"):
        s = fmt % (width, value)
        if len(s) <= width:
            return s
    return ("%*.1e" if width >= 7 else "%*.0e") % (width, value)


def g_fmt(x: float) -> str:
    return "%g" % x


def rows_for(tier: dict) -> list[dict]:
    n = tier["ranks"]
    f = 2 * (n - 1) / n
    out = []
    for k, size in enumerate(SIZES):
        t = min(a + size * f / bus for a, bus in tier["protocols"])
        t_oop = t * (1 + 0.012 * math.sin(2.3 * k + tier["phase"]))
        t_ip = t_oop * (1 + 0.004 * math.cos(1.1 * k))
        row = {"size": size, "count": size // 4}
        for key, sec in (("out_of_place", t_oop), ("in_place", t_ip)):
            alg = size / 1.0e9 / sec
            row[key] = {"time": sec * 1e6, "alg_bw": alg, "bus_bw": alg * f, "nwrong": 0.0}
        out.append(row)
    return out


def header(what: str, command: str) -> list[str]:
    return [
        "# FIXTURE, NOT MEASURED: written by tests/data/nccl_tests/format/make_fixtures.py from the documented",
        "# stdout format of NVIDIA/nccl-tests (src/util.cu print statements, commit a0b82b2); no GPU was",
        f"# available to run it. It stands for {what}:",
        f"#   {command}",
        "# The numbers come from a protocol model (see make_fixtures.py), not from hardware.",
    ]


def devices(ranks: int, one_process: bool) -> list[str]:
    lines = []
    for r in range(ranks):
        host = f"gpu-n{r // 8 + 1:02d}"
        pid = 41250 if one_process else 41250 + 17 * r
        dev = r % 8
        lines.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s"
                     % (r, 0, pid, host, dev, 0, BUS_IDS[dev], 0, GPU))
    return lines


def text_output(tier: dict, rows: list[dict], one_process: bool, what: str, command: str) -> str:
    n = tier["ranks"]
    lines = header(what, command) + [
        VERSION_LINE,
        "# Collective test starting: all_reduce_perf",
        "# nThread %d nGpus %d minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: %d agg iters: %d "
        "validation: %d graph: %d unalign: %d" % (1, n if one_process else 1, SIZES[0], SIZES[-1], 2, "factor",
                                                  1, 20, 1, 1, 0, 0),
        "#",
        "# Using devices",
        *devices(n, one_process),
        "#",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
        % ("", "", "", "", ""),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
        % ("size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw",
           "#wrong", 0, ""),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s"
        % ("(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "", 0, ""),
    ]
    for r in rows:
        s = "%12li  %12li  %8s  %6s  %6s" % (r["size"], r["count"], "float", "sum", "%6i" % -1)
        for key in ("out_of_place", "in_place"):
            b = r[key]
            s += "  %7s  %6s  %6s  %6g" % (float_str(b["time"], 7), float_str(b["alg_bw"], 6),
                                            float_str(b["bus_bw"], 6), b["nwrong"])
        lines.append(s)
    avg = sum(r[k]["bus_bw"] for r in rows for k in ("out_of_place", "in_place")) / (2 * len(rows))
    lines += ["# %-20s : %d %s" % ("Out of bounds values", 0, "OK"),
              "# %-20s : %s %s" % ("Avg bus bandwidth", g_fmt(avg), ""),
              "#",
              "# Collective test concluded: all_reduce_perf",
              "#",
              ""]
    return "\n".join(lines) + "\n"


def json_output(tier: dict, rows: list[dict], command: str) -> str:
    """The ``-J`` file of the same run (src/util.cu: one line, doubles ``%lf``), plus a leading
    ``fixture_note`` key (not written by nccl-tests; readers ignore unknown keys)."""
    n = tier["ranks"]
    argv = command.split()
    argv = argv[argv.index("./build/all_reduce_perf"):]

    def dbl(x: float) -> float:
        return float("%lf" % x)

    results = []
    for r in rows:
        e = {"size": r["size"], "count": r["count"], "type": "float", "redop": "sum", "root": "%6i" % -1}
        for key in ("out_of_place", "in_place"):
            b = r[key]
            e[key] = {"time": dbl(b["time"]), "alg_bw": dbl(b["alg_bw"]), "bus_bw": dbl(b["bus_bw"]),
                      "nwrong": dbl(b["nwrong"])}
        e.update(actual_iterations=20, experiment_name="")
        results.append(e)
    avg = sum(r[k]["bus_bw"] for r in rows for k in ("out_of_place", "in_place")) / (2 * len(rows))
    devs = [{"rank": r, "group": 0, "pid": 41250 + 17 * r, "hostname": f"gpu-n{r // 8 + 1:02d}", "device": r % 8,
             "device_hex": "%04x:%02x:%02x" % (0, BUS_IDS[r % 8], 0), "device_info": GPU} for r in range(n)]
    doc = {
        "fixture_note": "FIXTURE, NOT MEASURED: written by tests/data/nccl_tests/format/make_fixtures.py from the "
                        "documented JSON output of NVIDIA/nccl-tests (src/util.cu, JSON_FILE_VERSION 3, commit "
                        "a0b82b2); no GPU was available to run it",
        "version": 3, "start_time": "2026-07-20 10:00:00", "args": argv,
        "env": ["NCCL_IB_HCA=mlx5_0"], "nccl_version": 22703,
        "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": SIZES[0], "maximum_bytes": SIZES[-1],
                   "step_factor": 2, "warmup_iters": 1, "iterations": 20, "aggregated_iterations": 1,
                   "validation": 1, "graph": 0, "blocking_collectives": "false", "per_iter_timing": "false",
                   "per_iter_skip": 0, "parallel_init": "false", "devices": devs},
        "results": results,
        "out_of_bounds": {"count": 0, "okay": "true"},
        "average_bus_bandwidth": {"bandwidth": dbl(avg), "okay": "unchecked"},
        "errors": [], "end_time": "2026-07-20 10:00:41",
    }
    return json.dumps(doc, separators=(",", ":"))


def main() -> None:
    ENV.mkdir(exist_ok=True)
    one = "./build/all_reduce_perf -b 1K -e 512M -f 2 -g 8"
    two = "mpirun -np 16 -N 8 -H gpu-n01:8,gpu-n02:8 ./build/all_reduce_perf -b 1K -e 512M -f 2 -g 1"
    intra, inter = rows_for(INTRA), rows_for(INTER)
    (ENV / "all_reduce_perf-1x8.txt").write_text(
        text_output(INTRA, intra, True, "one node, 8 GPUs (one process, -g 8)", one))
    (ENV / "all_reduce_perf-2x8.txt").write_text(
        text_output(INTER, inter, False, "2 nodes x 8 GPUs (16 MPI processes, -g 1)", two))
    (HERE / "all_reduce_perf-2x8.json").write_text(json_output(INTER, inter, two + " -J all_reduce_perf-2x8.json"))


if __name__ == "__main__":
    main()
