"""Write docs/reference/knobs.md from the Horovod knob table (autotuner/frameworks/horovod/knobs.py) and
docs/reference/ddp-knobs.md from the DDP one (autotuner/frameworks/ddp/knobs.py); tests/test_knobs.py and
tests/test_docs_links.py check they are current.

    python scripts/gen_knob_table.py [--check]

``--check`` writes nothing and exits 1 when either page differs from what the knob tables give.
"""
import argparse
import sys
from pathlib import Path

from autotuner.frameworks.horovod.knobs import markdown_table

REFERENCE = Path(__file__).resolve().parents[1] / "docs" / "reference"


def _cell(v) -> str:
    return str(v).replace("|", "\\|")


def ddp_markdown_table() -> str:
    """The DDP knob table as Markdown: one row per :data:`autotuner.frameworks.ddp.knobs.DDP_KNOBS` entry."""
    from autotuner.frameworks.ddp.knobs import DDP_KNOBS, TORCH_VERSIONS

    def default(k) -> str:
        d = k.default
        if d is None:
            return "DDP's own (None)"
        if isinstance(d, bool):
            return "on" if d else "off"
        return f"`{d}`"

    def bounds(k) -> str:
        if k.low is None and k.high is None:
            return ""
        return f"{k.low:g}-{k.high:g}"

    searched = {"log": "0.25-256 MiB, 4 per octave, and DDP's default", "switch": "on / off",
                "choice": "allreduce / fp16_compress", None: "no"}
    lists = "2 or 3 non-decreasing caps of 1, 2, 4, ..., 128 MiB, with the view"
    lines = [
        "# DDP knobs",
        "",
        "Generated from `autotuner/frameworks/ddp/knobs.py` (`DDP_KNOBS`) by `python scripts/gen_knob_table.py`;",
        f"`tests/test_docs_links.py` fails when this file is stale. Defaults are torch {TORCH_VERSIONS[-1]}'s.",
        "`ddp suggest` prints the code that sets them; `autotuner.integrations.torch.ddp_kwargs` and `apply` set",
        "them from a pick.",
        "",
        "| knob | DDP's name | unit | range | default | searched by `ddp suggest` | what it does | torch source |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for k in DDP_KNOBS:
        lines.append(f"| `{k.field}` | `{k.argument}` | {_cell(k.unit)} | {bounds(k)} | {default(k)} "
                     f"| {lists if k.field == 'bucket_cap_mb_list' else searched.get(k.space, _cell(k.space))} "
                     f"| {_cell(k.doc)} | `{_cell(k.source)}` |")
    lines += [
        "",
        "The fp16 hook is searched where the environment measured float16 allreduces. `bf16_compress` and",
        "`powerSGD` are never proposed: torch refuses the bf16 hook on Gloo CPU ranks, and PowerSGD is lossy.",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when a knob page is stale; write nothing")
    a = ap.parse_args()
    pages = {REFERENCE / "knobs.md": markdown_table(), REFERENCE / "ddp-knobs.md": ddp_markdown_table()}
    if a.check:
        stale = [p for p, text in pages.items() if (p.read_text() if p.is_file() else "") != text]
        for p in stale:
            print(f"docs/reference/{p.name} is stale: run python scripts/gen_knob_table.py", file=sys.stderr)
        return 1 if stale else 0
    for path, text in pages.items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
