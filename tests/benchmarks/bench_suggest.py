"""Wall time of `autotuner suggest --model M` (the whole command, as a user runs it).

Run by hand: python tests/benchmarks/bench_suggest.py [--repeat 3] [--env v100-16gbit]. Not part of CI
pass/fail. The env must have both models calibrated (the first fitted env by name, local-gloo-1gbit,
has only resnet50).
"""
import argparse
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--models", default="vgg16,resnet50")
    ap.add_argument("--env", default="v100-16gbit")
    a = ap.parse_args()
    print(f"# suggest wall time, {platform.node()} ({platform.processor() or platform.machine()}), "
          f"python {platform.python_version()}, {time.strftime('%Y-%m-%d')}")
    for m in a.models.split(","):
        walls = []
        for _ in range(a.repeat):
            t0 = time.perf_counter()
            p = subprocess.run([sys.executable, "-m", "autotuner.cli", "suggest", "--model", m, "--env", a.env, "--json"],
                               cwd=ROOT, capture_output=True, text=True)
            walls.append(time.perf_counter() - t0)
            if p.returncode != 0:
                sys.exit(f"suggest failed for {m}: {p.stderr.strip()}")
        print(f"{a.env}/{m}: median {statistics.median(walls):.2f} s, min {min(walls):.2f} s, max {max(walls):.2f} s "
              f"over {a.repeat} runs")


if __name__ == "__main__":
    main()
