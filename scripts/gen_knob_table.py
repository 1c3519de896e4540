"""Write docs/reference/knobs.md from the knob table (autotuner/frameworks/horovod/knobs.py); tests/test_knobs.py checks it is current."""
from pathlib import Path

from autotuner.frameworks.horovod.knobs import markdown_table

if __name__ == "__main__":
    path = Path(__file__).resolve().parents[1] / "docs" / "reference" / "knobs.md"
    path.write_text(markdown_table())
    print(f"wrote {path}")
