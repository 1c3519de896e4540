#!/usr/bin/env python3
"""Reproduce every number in docs/lab-reports-002-004-arithmetic.md.

Reads the lab reports 002, 003 and 004: by default the verbatim copies committed under runs/
(t4x4-pcie/report-002.md, laptop-cpu/report-003.md, t4x4-compression/report-004.md), or the
seed files in the folder given as the first argument (e.g. ../shared/seeds), parses their tables (with line numbers) and
prints the arithmetic section by section. Standard library + numpy only.

Values read from the reports are never typed in here. What *is* typed in is outside
knowledge, each item named with its source in EXTERNAL below: dataset sizes, the MNIST
example's network and defaults (Horovod examples/pytorch/pytorch_mnist.py and its copy in
microsoft/AI-System Labs/BasicLabs/Lab4/pytorch_mnist_horovod.py), assumed link bandwidths
and latencies, and Intel's spec for the i7-9750H.
"""
from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from autotuner.readers.labreport import (  # noqa: E402  (the package's parsers: one reader of the reports)
    parse_backend_runs,
    parse_compression_runs,
    parse_cpu_scaling,
)

# --------------------------------------------------------------------------- outside facts
EXTERNAL = {
    # dataset sizes (training images per epoch, test images)
    "mnist_train": 60_000,          # MNIST / Fashion-MNIST / KMNIST training sets
    "mnist_test": 10_000,
    "cifar10_train": 50_000,
    # MNIST test-set label counts (t10k-labels-idx1-ubyte), digits 0..9
    "mnist_test_label_counts": [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009],
    # Horovod examples/pytorch/pytorch_mnist.py (0.19.4 .. 0.28.1; same in AI-System Lab4 copy)
    "batch_size": 64,
    "default_epochs": 10,
    "test_batch_size": 1000,
    # Net: (name, weight shape, bias length)
    "net_layers": [
        ("conv1", (10, 1, 5, 5), 10),
        ("conv2", (20, 10, 5, 5), 20),
        ("fc1", (50, 320), 50),
        ("fc2", (10, 50), 10),
    ],
    # pytorch/examples mnist/main.py Net (= AI-System Labs/BasicLabs/Lab1/mnist_basic.py), for comparison
    "basic_net_layers": [
        ("conv1", (32, 1, 3, 3), 32),
        ("conv2", (64, 32, 3, 3), 64),
        ("fc1", (128, 9216), 128),
        ("fc2", (10, 128), 10),
    ],
    "bytes_per_fp32": 4,
    "bytes_per_fp16": 2,
    # assumed transfer rates (bytes/s) and per-hop latencies (s) -- assumptions, not measurements
    "pcie_bw": [10e9, 12e9],        # PCIe 3.0 x16, achievable
    "slow_bw": [1e9],               # a pessimistic host-staged path
    "hop_latency": [5e-6, 20e-6],   # per ring step, intra-node
    # Intel ARK: Core i7-9750H, 6 cores / 12 threads, base 2.60 GHz, turbo 4.50 GHz
    "i7_9750h_cores": 6,
    "i7_9750h_threads": 12,
}


# --------------------------------------------------------------------------- parsing helpers
def cells(line: str) -> list[str]:
    parts = line.strip().split("|")
    return [p.strip() for p in parts[1:-1]]


def num(s: str) -> float | None:
    s = re.sub(r"<[^>]+>", "", s).replace(",", "").strip()
    m = re.match(r"^([\d.]+)", s)
    return float(m.group(1)) if m else None


def round_half_up(x: float, nd: int) -> float:
    q = 10 ** nd
    return math.floor(x * q + 0.5) / q


def fmt(x: float, nd: int = 3) -> str:
    return f"{x:,.{nd}f}"


def pct(a: float, b: float) -> str:
    return f"{100.0 * (a - b) / b:+.2f}%"


# --------------------------------------------------------------------------- report 002
@dataclass
class Run002:
    line: int
    backend: str
    n: int
    real: float
    user: float
    sys: float
    thr: float | None
    speedup: float | None
    device: str
    device_inferred: bool = False


def read_002(path: Path) -> list[Run002]:
    """Report 002's runs, read by the package's parser (:func:`autotuner.readers.labreport.parse_backend_runs`)."""
    runs, _ = parse_backend_runs(path.read_text(encoding="utf-8"), path.name)
    return [Run002(r.line, r.backend, r.processes, r.real_s, r.user_s, r.sys_s, r.throughput_img_s, r.speedup,
                   r.device, r.device_inferred) for r in runs]


def steps_per_rank(n: int, epochs: int, train: int, batch: int) -> int:
    """DistributedSampler pads to ceil(train/n) per rank; DataLoader keeps the last partial batch."""
    return epochs * math.ceil(math.ceil(train / n) / batch)


def net_params() -> list[tuple[str, int]]:
    out = []
    for name, wshape, b in EXTERNAL["net_layers"]:
        out.append((name, int(np.prod(wshape)) + b))
    return out


def section_002(path: Path) -> dict:
    E = EXTERNAL
    runs = read_002(path)
    print("=" * 90)
    print(f"REPORT 002  ({path.name})")
    print("=" * 90)
    print("\n[002-a] rows as parsed (line, backend, N, device, real, user, sys, throughput, speedup)")
    for r in runs:
        d = r.device + (" (inferred from block)" if r.device_inferred else "")
        print(f"  L{r.line:<3} {r.backend:<5} N={r.n} {d:<24} real={fmt(r.real)} user={fmt(r.user)} "
              f"sys={fmt(r.sys)} thr={r.thr} speedup={r.speedup}")

    print("\n[002-b] throughput x real, and 60,000 / throughput (the 'time' the throughput implies)")
    print("  line  dev  N  real      thr       thr*real   60000/thr  real-60000/thr  50000/thr")
    for r in runs:
        if r.thr is None:
            continue
        implied = E["mnist_train"] / r.thr
        print(f"  L{r.line:<3} {r.device:<4} {r.n}  {fmt(r.real):>8}  {fmt(r.thr, 2):>8}  "
              f"{fmt(r.thr * r.real, 0):>9}  {fmt(implied, 4):>9}  {fmt(r.real - implied, 4):>8}  "
              f"{fmt(E['cifar10_train'] / r.thr, 3):>8}")
    print("  real truncated to whole seconds / to 0.1 s, and 60000 divided by it:")
    for r in runs:
        if r.thr is None:
            continue
        t0, t1 = math.floor(r.real), math.floor(r.real * 10) / 10
        print(f"  L{r.line:<3} real={fmt(r.real)}  floor={t0} -> {E['mnist_train'] / t0:.2f}   "
              f"floor0.1={t1:.1f} -> {E['mnist_train'] / t1:.2f}   exact -> {E['mnist_train'] / r.real:.2f}"
              f"   reported {r.thr:.2f}")

    used = {}
    for r in runs:
        if r.thr is None:
            continue
        cands = {"floor 1 s": math.floor(r.real), "floor 0.1 s": math.floor(r.real * 10) / 10, "exact": r.real}
        best = min(cands, key=lambda k: abs(r.thr * cands[k] - E["mnist_train"]))
        used[r.line] = cands[best]
        print(f"  L{r.line:<3} images = thr x T for T = floor/floor0.1/exact: "
              + ", ".join(f"{r.thr * v:,.2f}" for v in cands.values()) + f"  -> closest to 60,000 with T {best}")
    print("  images per run / (epochs x dataset): " + "; ".join(
        f"L{r.line}: " + ", ".join(f"{r.thr * r.real / (e * d):.3f}" for e, d in
                                   ((1, E['mnist_train']), (10, E['mnist_train']), (1, E['cifar10_train']), (10, E['cifar10_train'])))
        for r in runs if r.thr) + "   [MNIST x1, MNIST x10, CIFAR x1, CIFAR x10]")
    xs = np.array([1.0 / r.thr for r in runs if r.thr])
    ys = np.array([r.real for r in runs if r.thr])
    slope, icpt = np.polyfit(xs, ys, 1)
    print(f"  regression real = a + b/thr over the {len(xs)} rows: b = {slope:,.0f} images, a = {icpt:.3f} s "
          f"(the throughput is derived from real, so a only reflects the truncation)")

    print("\n[002-c] speedup column vs throughput ratio vs wall-time ratio (MPI GPU)")
    g = {r.n: r for r in runs if r.backend == "MPI" and r.device == "GPU"}
    for n in sorted(g):
        r = g[n]
        print(f"  N={n} L{r.line}: reported={r.speedup}  thr ratio={r.thr / g[1].thr:.4f}  "
              f"wall ratio={g[1].real / r.real:.4f}  ideal={n}")

    print("\n[002-d] epochs: steps per rank and wall/steps for 1 vs 10 epochs")
    for epochs in (1, E["default_epochs"]):
        for r in runs:
            if r.backend != "MPI":
                continue
            s = steps_per_rank(r.n, epochs, E["mnist_train"], E["batch_size"])
            print(f"  epochs={epochs:<2} L{r.line:<3} {r.device} N={r.n}: steps/rank={s:>5}  "
                  f"wall/steps={1e3 * r.real / s:8.2f} ms  images/rank/s={epochs * math.ceil(E['mnist_train'] / r.n) / r.real:8.1f}")

    print("\n[002-e] user+sys as share of real (the `time` totals of the launched tree)")
    for r in runs:
        print(f"  L{r.line:<3} {r.backend:<4} {r.device} N={r.n}: (user+sys)/real = {(r.user + r.sys) / r.real:5.2f}"
              f"  per process = {(r.user + r.sys) / r.real / r.n:5.2f}")

    print("\n[002-f] fixed + per-step fits, wall = F + steps_per_rank * t  (10 epochs, batch 64)")
    fits = {}
    groups: dict[tuple[str, str], dict[int, Run002]] = {}
    for r in runs:
        groups.setdefault((r.backend, r.device), {})[r.n] = r
    for key, gr in groups.items():
        if 2 in gr and 4 in gr:
            s2 = steps_per_rank(2, 10, E["mnist_train"], E["batch_size"])
            s4 = steps_per_rank(4, 10, E["mnist_train"], E["batch_size"])
            t = (gr[2].real - gr[4].real) / (s2 - s4)
            F = gr[4].real - s4 * t
            line = f"  {key[0]:<4} {key[1]}: from N=2 (L{gr[2].line}) & N=4 (L{gr[4].line}): t={1e3 * t:.3f} ms/step F={F:.2f} s"
            if 1 in gr:
                s1 = steps_per_rank(1, 10, E["mnist_train"], E["batch_size"])
                pred1 = F + s1 * t
                t1 = (gr[1].real - F) / s1
                line += (f"; N=1 predicted {pred1:.2f} vs measured {gr[1].real:.3f} (L{gr[1].line}); "
                         f"t at N=1 with same F = {1e3 * t1:.3f} ms -> t(N>=2)-t(N=1) = {1e3 * (t - t1):+.3f} ms")
            if 3 in gr:
                s3 = steps_per_rank(3, 10, E["mnist_train"], E["batch_size"])
                line += f"; N=3 predicted {F + s3 * t:.2f} vs measured {gr[3].real:.3f}"
            print(line)
            fits[key] = (F, t)
    # Amdahl-style two-point fixed parts for MPI GPU: T = F + W/N using (1, n)
    print("  MPI GPU, T = F + W/N from pairs (1, n):")
    for n in (2, 3, 4):
        W = (g[1].real - g[n].real) * n / (n - 1)
        F = g[1].real - W
        print(f"    (1,{n}): W={W:.2f} s  F={F:.2f} s")
    A = np.array([[1.0, 1.0 / n] for n in sorted(g)])
    y = np.array([g[n].real for n in sorted(g)])
    (F_ls, W_ls), *_ = np.linalg.lstsq(A, y, rcond=None)
    res = y - A @ np.array([F_ls, W_ls])
    print(f"    least squares over N=1..4: F={F_ls:.2f} s W={W_ls:.2f} s residuals={np.round(res, 2).tolist()}")
    r4 = g[4]
    print(f"  4-GPU budget: measured {r4.real:.3f} s; ideal {g[1].real:.3f}/4 = {g[1].real / 4:.2f} s; "
          f"excess {r4.real - g[1].real / 4:.2f} s")
    for label, F in (("F from (1,2)", g[1].real - (g[1].real - g[2].real) * 2),
                     ("F from N=2,4 fit", fits[("MPI", "GPU")][0])):
        print(f"    {label} = {F:.2f} s -> {100 * F / r4.real:.0f}% of the 4-GPU wall; "
              f"per-step part {r4.real - F:.2f} s; Amdahl limit {g[1].real / F:.2f}x")

    for label, F in (("(1,2)", g[1].real - (g[1].real - g[2].real) * 2), ("N=2,4 fit", fits[("MPI", "GPU")][0])):
        s1_ = steps_per_rank(1, 10, E["mnist_train"], E["batch_size"])
        print(f"    {label}: fixed part's share of the excess over ideal = 0.75*F = {0.75 * F:.2f} s of "
              f"{r4.real - g[1].real / 4:.2f} s; true 1-GPU training rate = 600,000/(real-F) = "
              f"{E['default_epochs'] * E['mnist_train'] / (g[1].real - F):,.0f} img/s; t(N=1) = {1e3 * (g[1].real - F) / s1_:.2f} ms")
    print(f"  resolution: 1 s over {steps_per_rank(4, 10, E['mnist_train'], E['batch_size'])} steps = "
          f"{1e3 / steps_per_rank(4, 10, E['mnist_train'], E['batch_size']):.2f} ms/step")
    for cyc in (1e-3, 5e-3):
        st4_ = steps_per_rank(4, 10, E["mnist_train"], E["batch_size"])
        print(f"  unhidden cycle wait at cycle {cyc * 1e3:.0f} ms: ~cycle/2 = {cyc / 2 * 1e3:.1f} ms/step -> {cyc / 2 * st4_:.2f} s at N=4")

    print("\n[002-g] per-step communication estimate for the MNIST Net")
    params = net_params()
    P = sum(p for _, p in params)
    S = P * E["bytes_per_fp32"]
    print("  params: " + ", ".join(f"{n}={p:,}" for n, p in params) + f"; total={P:,}; fp32 bytes={S:,} ({S / 1024:.1f} KiB)")
    s1 = steps_per_rank(1, 10, E["mnist_train"], E["batch_size"])
    Ft = fits[("MPI", "GPU")]
    for n in (2, 4):
        wire = 2 * (n - 1) / n * S
        st = steps_per_rank(n, 10, E["mnist_train"], E["batch_size"])
        bw = "; ".join(f"{wire / b * 1e6:.1f} us @ {b / 1e9:.0f} GB/s" for b in E["pcie_bw"])
        host = "; ".join(f"{(wire + 2 * S) / b * 1e6:.1f} us" for b in E["pcie_bw"])
        lat = "; ".join(f"{2 * (n - 1) * a * 1e6:.0f} us @ alpha={a * 1e6:.0f} us" for a in E["hop_latency"])
        print(f"  N={n}: ring bytes/rank/step = 2(N-1)/N*S = {wire:,.0f} B; bandwidth term {bw}; "
              f"host-staged (+D2H+H2D of S) {host}; latency 2(N-1)*alpha = {lat}; steps/rank={st}")
        worst = (wire + 2 * S) / min(E["pcie_bw"]) + 2 * (n - 1) * max(E["hop_latency"])
        print(f"        worst of these per step = {worst * 1e3:.3f} ms; x steps = {worst * st:.2f} s per run; "
              f"share of an 8.36-8.98 ms step: {100 * worst / 8.98e-3:.1f}-{100 * worst / 8.359e-3:.1f}%")
    macs = 0
    h = w = 28
    c_in = 1
    for name, wshape, b in E["net_layers"]:
        if len(wshape) == 4:                        # conv k5 stride 1, then 2x2 max-pool
            k = wshape[2]
            h, w = h - k + 1, w - k + 1
            macs += h * w * wshape[0] * wshape[1] * k * k
            h, w = h // 2, w // 2
        else:
            macs += wshape[0] * wshape[1]
    flop_step = 3 * 2 * macs * E["batch_size"]      # forward + ~2x forward for backward
    print(f"  forward MACs per image = {macs:,}; train FLOP per step (batch {E['batch_size']}, 3x fwd) = {flop_step / 1e6:.1f} MFLOP")
    for r in (g[1], [x for x in runs if x.device == "CPU" and x.n == 1 and x.backend == "MPI"][0]):
        for epochs in (1, 10):
            s_ = steps_per_rank(1, epochs, E["mnist_train"], E["batch_size"])
            print(f"    {r.device} N=1 (L{r.line}), {epochs:>2} epochs: {1e3 * r.real / s_:7.2f} ms/step -> "
                  f"{flop_step / (r.real / s_) / 1e9:6.2f} GFLOP/s needed at most")
    print(f"  per-step time: 1-GPU wall/steps = {1e3 * g[1].real / s1:.2f} ms (no fixed part removed); "
          f"N=2,4 fit slope = {1e3 * Ft[1]:.2f} ms")

    print("\n[002-h] backends: same N and device, % vs MPI, and spread")
    out = {}
    for dev in ("GPU", "CPU"):
        for n in (1, 2, 4):
            row = {r.backend: r for r in runs if r.device == dev and r.n == n}
            if "MPI" not in row:
                continue
            vals = {b: row[b].real for b in row}
            spread = max(vals.values()) - min(vals.values())
            st = steps_per_rank(n, 10, E["mnist_train"], E["batch_size"])
            parts = "  ".join(f"{b} {row[b].real:.3f} (L{row[b].line}, {pct(row[b].real, row['MPI'].real)})" for b in row)
            if dev == "GPU" and n == 2:
                print(f"  GPU N=2 spread / GPU N=1 spread = {spread / (max(out[('GPU', 1)].values()) - min(out[('GPU', 1)].values())):.2f}; "
                      f"MPI-NCCL at N=4 per step computed below")
            print(f"  {dev} N={n}: {parts}; spread {spread:.3f} s = {100 * spread / min(vals.values()):.2f}% "
                  f"= {1e3 * spread / st:.3f} ms per step over {st} steps/rank")
            out[(dev, n)] = vals
    st4 = steps_per_rank(4, 10, E["mnist_train"], E["batch_size"])
    m4 = {r.backend: r.real for r in runs if r.device == "GPU" and r.n == 4}
    print(f"  GPU N=4 MPI-NCCL = {m4['MPI'] - m4['NCCL']:.3f} s = {1e3 * (m4['MPI'] - m4['NCCL']) / st4:.3f} ms/step")
    return {"runs": runs, "fits": fits, "S": S, "P": P}


# --------------------------------------------------------------------------- report 003
@dataclass
class Row003:
    line: int
    n: int
    step: float
    per: float
    total: float
    speedup: float


def read_003(path: Path) -> list[list[Row003]]:
    """Report 003's two tables, read by the package's parser (:func:`autotuner.readers.labreport.parse_cpu_scaling`)."""
    rows, _ = parse_cpu_scaling(path.read_text(encoding="utf-8"), ["table-1", "table-2"], path.name)
    return [[Row003(r.line, r.processes, r.step_time, r.per_process, r.total, r.speedup) for r in rows if r.table == t]
            for t in sorted({r.table for r in rows})]


def section_003(path: Path) -> None:
    text = path.read_text(encoding="utf-8").splitlines()
    print("\n" + "=" * 90)
    print(f"REPORT 003  ({path.name})")
    print("=" * 90)
    for i, l in enumerate(text, 1):
        if "×" in l or "核心" in l or re.search(r"[Rr]esnet", l):
            print(f"  L{i}: {l.strip()[:160]}")
    m = re.search(r"×\s*(\d+)", "\n".join(text))
    logical = int(m.group(1))
    print(f"  OS-visible logical CPUs ('x N' string): {logical}; Intel spec: "
          f"{EXTERNAL['i7_9750h_cores']} cores / {EXTERNAL['i7_9750h_threads']} threads")
    names = ["table 1 (ResNet50, by elimination from line 57)", "table 2 (ResNet18)"]
    for name, rows in zip(names, read_003(path)):
        print(f"\n[003] {name}, lines {rows[0].line}-{rows[-1].line}")
        b = rows[0]
        print("  line  N  step     per  total  spd  | N*per  total/N  round(total/N,1)  ok? | "
              "step1/stepN  totN/tot1  perN*N/per1 | per*step  total*step")
        for r in rows:
            tn = r.total / r.n
            ok = abs(round_half_up(tn, 1) - r.per) < 1e-9
            print(f"  L{r.line}  {r.n}  {r.step:7.2f} {r.per:4.1f} {r.total:5.1f} {r.speedup:4.2f} | "
                  f"{r.n * r.per:5.1f}  {tn:7.4f}  {round_half_up(tn, 1):4.1f}  {'yes' if ok else 'NO '} | "
                  f"{b.step / r.step:11.4f}  {r.total / b.total:9.4f}  {r.n * r.per / b.per:11.4f} | "
                  f"{r.per * r.step:8.2f}  {r.total * r.step:9.2f}")
        print("  speedup residuals (reported - ratio):")
        for r in rows[1:]:
            print(f"    N={r.n}: vs step ratio {r.speedup - b.step / r.step:+.4f} "
                  f"({100 * (r.speedup / (b.step / r.step) - 1):+.2f}%), vs total-thr ratio "
                  f"{r.speedup - r.total / b.total:+.4f}")
        print("  images per step if step is in seconds (per-CPU thr in [per-0.05, per+0.05)):")
        for r in rows:
            lo, hi = (r.per - 0.05) * r.step, (r.per + 0.05) * r.step
            tlo, thi = (r.total - 0.05) * r.step, (r.total + 0.05) * r.step
            print(f"    N={r.n}: per-process {lo:7.1f} .. {hi:7.1f}  (x N = {r.n * lo:7.1f} .. {r.n * hi:7.1f});"
                  f" from total {tlo:7.1f} .. {thi:7.1f}; if in ms: {r.per * r.step / 1e3:.3f} images")


# --------------------------------------------------------------------------- report 004
@dataclass
class Run004:
    line: int
    algo: str
    n: int
    real: float
    user: float
    sys: float
    acc: float


def read_004(path: Path) -> tuple[list[Run004], int, list[tuple[int, str]]]:
    """Report 004's runs (the package's parser, :func:`autotuner.readers.labreport.parse_compression_runs`;
    accuracy in percent as printed), its epoch count and its numbered comments (read here: the
    package reads no prose)."""
    text = path.read_text(encoding="utf-8")
    runs, _ = parse_compression_runs(text, path.name)
    epochs, comments, in_comment = None, [], False
    for i, line in enumerate(text.splitlines(), 1):
        m = re.search(r"Epoch size:\s*(\d+)", line)
        if m:
            epochs = int(m.group(1))
        if line.startswith("## Comment"):
            in_comment = True
        if in_comment and re.match(r"^\d+\.", line):
            comments.append((i, line.strip()))
    return ([Run004(r.line, r.label, r.devices, r.real_s, r.user_s, r.sys_s, round(r.accuracy * 100, 10))
             for r in runs], epochs, comments)


def section_004(path: Path, r002: dict, path_002: Path) -> None:
    E = EXTERNAL
    runs, epochs, comments = read_004(path)
    print("\n" + "=" * 90)
    print(f"REPORT 004  ({path.name}); epochs read from the report: {epochs}")
    print("=" * 90)
    for r in runs:
        print(f"  L{r.line:<3} {r.algo:<22} N={r.n} real={r.real:.3f} user={r.user:.3f} sys={r.sys:.3f} acc={r.acc}%")
    for ln, c in comments:
        print(f"  comment L{ln}: {c[:150]}")

    def find(pred):
        return [r for r in runs if pred(r)]

    serial = find(lambda r: r.n == 1)[0]
    base = {r.n: r for r in find(lambda r: r.n > 1 and "Horovod" in r.algo)}
    fp16 = {r.n: r for r in find(lambda r: "16" in r.algo)}
    b8 = {r.n: r for r in find(lambda r: "8" in r.algo and "16" not in r.algo)}

    print("\n[004-a] speedups")
    for n in (2, 4):
        print(f"  serial/N={n}: {serial.real:.3f}/{base[n].real:.3f} = {serial.real / base[n].real:.3f}")
    print(f"  N=2 -> N=4: {base[2].real / base[4].real:.3f}")
    runs002 = r002["runs"]
    g = {r.n: r for r in runs002 if r.backend == "MPI" and r.device == "GPU"}
    print(f"  if serial were 002's 1-GPU MPI run ({g[1].real:.3f} s): "
          f"{g[1].real / base[2].real:.3f} and {g[1].real / base[4].real:.3f}")

    print("\n[004-b] accuracy 9.58%: chance and MNIST test class shares")
    counts = E["mnist_test_label_counts"]
    tot = sum(counts)
    print(f"  1/10 = 10.00%; class shares: " + ", ".join(f"{d}:{100 * c / tot:.2f}%" for d, c in enumerate(counts)))
    hit = [d for d, c in enumerate(counts) if abs(100 * c / tot - b8[2].acc) < 0.005]
    print(f"  classes whose share equals {b8[2].acc}%: {hit}")

    print("\n[004-c] compression savings vs bytes")
    S = r002["S"]
    S16 = S * E["bytes_per_fp16"] // E["bytes_per_fp32"]
    print(f"  gradient bytes per step: fp32 {S:,} B, fp16 {S16:,} B, saved {S - S16:,} B")
    for n in (2, 4):
        st = steps_per_rank(n, epochs, E["mnist_train"], E["batch_size"])
        naive = epochs * E["mnist_train"] / (E["batch_size"] * n)
        saved_t = base[n].real - fp16[n].real
        ring = 2 * (n - 1) / n
        payload32 = S * st
        wire32 = ring * S * st
        wire_saved = ring * (S - S16) * st
        print(f"  N={n}: steps/rank = {epochs} x ceil(ceil({E['mnist_train']}/{n})/{E['batch_size']}) = {st} "
              f"(60000/(64*N)*10 = {naive:.2f})")
        print(f"    time saved = {base[n].real:.3f} (L{base[n].line}) - {fp16[n].real:.3f} (L{fp16[n].line}) = {saved_t:.3f} s "
              f"({100 * saved_t / base[n].real:.1f}%) = {1e3 * saved_t / st:.3f} ms per step")
        print(f"    payload over run fp32 = {payload32 / 1e6:.1f} MB; ring wire bytes/rank fp32 = {wire32 / 1e6:.1f} MB; "
              f"fp16 saves {wire_saved / 1e6:.1f} MB wire ({(S - S16) * st / 1e6:.1f} MB payload)")
        for b in E["pcie_bw"] + E["slow_bw"]:
            print(f"    at {b / 1e9:>4.0f} GB/s: saved wire bytes take {1e3 * wire_saved / b:8.2f} ms; "
                  f"ALL fp32 wire bytes take {1e3 * wire32 / b:8.2f} ms; per step saved {1e6 * ring * (S - S16) / b:.2f} us")
        print(f"    implied bandwidth / 1 Gbit/s (125 MB/s) = {wire_saved / saved_t / 125e6:.3f}")
        print(f"    implied bandwidth if the saving were bytes: {wire_saved / saved_t / 1e6:.2f} MB/s (wire), "
              f"{(S - S16) * st / saved_t / 1e6:.2f} MB/s (payload); "
              f"= 1/{min(E['pcie_bw']) / (wire_saved / saved_t):.0f} of 10 GB/s")
    s2 = base[2].real - fp16[2].real
    s4 = base[4].real - fp16[4].real
    st2 = steps_per_rank(2, epochs, E["mnist_train"], E["batch_size"])
    st4 = steps_per_rank(4, epochs, E["mnist_train"], E["batch_size"])
    print(f"  saving(N=4)/saving(N=2) = {s4:.3f}/{s2:.3f} = {s4 / s2:.3f}; predicted by: per-run constant 1.000, "
          f"per-step constant {st4 / st2:.3f}, ring bytes {st4 * 1.5 / (st2 * 1.0):.3f}")
    print("  8-bit vs fp16 (8-bit moves half of fp16's bytes):")
    for n in (2, 4):
        print(f"    N={n}: {b8[n].real:.3f} (L{b8[n].line}) vs {fp16[n].real:.3f} (L{fp16[n].line}): "
              f"{pct(b8[n].real, fp16[n].real)}")
    print("  two-point fits wall = F + steps*t per variant (N=2, N=4):")
    fit4 = {}
    for name, d in (("uncompressed", base), ("fp16", fp16), ("8-bit", b8)):
        t = (d[2].real - d[4].real) / (st2 - st4)
        F = d[4].real - st4 * t
        fit4[name] = (F, t)
        print(f"    {name:<12} t={1e3 * t:.3f} ms/step  F={F:.2f} s")
    for name in ("fp16", "8-bit"):
        dF = fit4["uncompressed"][0] - fit4[name][0]
        dt = fit4["uncompressed"][1] - fit4[name][1]
        print(f"    uncompressed - {name}: dF = {dF:.2f} s; dt = {1e3 * dt:.3f} ms/step -> "
              f"{dt * st2:.2f} s at N=2, {dt * st4:.2f} s at N=4")
    print("  user time (CPU work of the launched tree):")
    for n in (2, 4):
        for name, d in (("uncompressed", base), ("fp16", fp16), ("8-bit", b8)):
            r = d[n]
            print(f"    N={n} {name:<12} L{r.line}: user {r.user:.3f} s sys {r.sys:.3f} s (user+sys)/real {(r.user + r.sys) / r.real:.2f}")

    print("\n[004-d] same workload as 002?")
    for n in (2, 4):
        for r in [r for r in runs002 if r.device == "GPU" and r.n == n]:
            print(f"  N={n}: 004 {base[n].real:.3f} (L{base[n].line}) vs 002 {r.backend} {r.real:.3f} (L{r.line}): "
                  f"{pct(base[n].real, r.real)}")
    print(f"  N=2->4 ratio: 004 {base[2].real / base[4].real:.3f}; 002 MPI {g[2].real / g[4].real:.3f}")
    print(f"  004 serial {serial.real:.3f} (L{serial.line}) vs 002 1-GPU MPI {g[1].real:.3f} (L{g[1].line}): "
          f"{pct(serial.real, g[1].real)}; user {serial.user:.3f} vs {g[1].user:.3f} ({serial.user / g[1].user:.2f}x)")
    F2, t2 = r002["fits"][("MPI", "GPU")]
    pb = sum(int(np.prod(w)) + b for _, w, b in E["basic_net_layers"])
    print(f"  (for comparison) mnist_basic.py Net: {pb:,} params = {pb * E['bytes_per_fp32']:,} B fp32")
    t = (base[2].real - base[4].real) / (st2 - st4)
    F = base[4].real - st4 * t
    s1 = steps_per_rank(1, epochs, E["mnist_train"], E["batch_size"])
    print(f"  004 Horovod fit (N=2,4): t={1e3 * t:.3f} ms F={F:.2f} s -> N=1 extrapolated {F + s1 * t:.2f} s vs serial {serial.real:.3f}")
    print(f"  vs 002 MPI GPU fit: F {F2:.2f} s (diff {F - F2:+.2f} s), t {1e3 * t2:.3f} ms (ratio {t / t2:.3f})")
    labels = ("服务器数目", "网卡", "GPU型号", "GPU连接", "OS版本", "GPU driver", "深度学习框架", "CUDA版本", "NCCL版本")

    def env_rows(p: Path) -> dict[str, tuple[int, str]]:
        out = {}
        for i, l in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
            c = cells(l) if l.strip().startswith("|") else []
            if len(c) >= 3 and any(c[1].startswith(x) for x in labels):
                out[re.sub(r"\s+", " ", c[1])] = (i, re.sub(r"\s+", " ", c[2]))
        return out

    e2, e4 = env_rows(path_002), env_rows(path)
    for k, (ln4, v4) in e4.items():
        ln2, v2 = e2.get(k, (None, None))
        print(f"  env '{k}': 004 L{ln4} '{v4}' | 002 L{ln2} '{v2}' -> {'same' if v2 == v4 else 'DIFFERENT'}")
    for k in e2.keys() - e4.keys():
        print(f"  env '{k}' only in 002 (L{e2[k][0]}): '{e2[k][1]}'")


def main() -> None:
    if len(sys.argv) > 1:
        seeds = Path(sys.argv[1])
        p2, p3, p4 = (seeds / "002_c8dd48a019aaa23c.txt", seeds / "003_7db5cbcdc4c01390.txt",
                      seeds / "004_34e9505d679377eb.txt")
    else:
        runs = Path(__file__).resolve().parents[2] / "runs"
        p2, p3, p4 = (runs / "t4x4-pcie" / "report-002.md", runs / "laptop-cpu" / "report-003.md",
                      runs / "t4x4-compression" / "report-004.md")
    r002 = section_002(p2)
    section_003(p3)
    section_004(p4, r002, p2)


if __name__ == "__main__":
    main()
