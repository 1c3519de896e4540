"""The user documentation holds together: every relative link in README.md, CHANGELOG.md and docs/ resolves to a
file (and, for a Markdown file, to a heading when it names one), the hand-written pages stay short, no page
narrates the work (issue numbers of this project, numbered work periods), and the DDP knob table is generated from
the code. Research notes (research/notes) are kept as written and not checked here."""
from __future__ import annotations

import importlib.util
import re
import unicodedata
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: generated pages (any length): the CLI reference, the knob tables, the accuracy page
GENERATED = {DOCS / "reference" / "cli.md", DOCS / "reference" / "knobs.md", DOCS / "reference" / "ddp-knobs.md",
             DOCS / "accuracy.md"}
PAGES = sorted([ROOT / "README.md", ROOT / "CHANGELOG.md", *DOCS.rglob("*.md")])

#: [text](target) outside code; the target up to whitespace or ')'
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """The page without fenced code blocks and inline code spans, where brackets are not links."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(re.sub(r"`[^`]*`", "", line))
    return "\n".join(out)


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (hyphens and underscores kept), spaces to
    hyphens."""
    text = re.sub(r"`", "", heading.strip().lower())
    text = "".join(c for c in text if c in " -_" or unicodedata.category(c)[0] in "LN")
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose_with_headings(path.read_text()):
        a = _anchor(line)
        n = seen.get(a, 0)
        out.add(a if n == 0 else f"{a}-{n}")
        seen[a] = n + 1
    return out


def _prose_with_headings(text: str) -> list[str]:
    heads, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced and re.match(r"^#{1,6} ", line):
            heads.append(line.lstrip("#").strip())
    return heads


def _links(path: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(path.read_text())) if not re.match(r"^[a-z][a-z0-9+.-]*:", t)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    dead = []
    for target in _links(page):
        path, _, frag = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            dead.append(f"{target}: no such file")
        elif frag and dest.suffix == ".md" and frag not in _anchors(dest):
            dead.append(f"{target}: no heading #{frag} in {dest.relative_to(ROOT)}")
    assert not dead, f"{page.relative_to(ROOT)}: " + "; ".join(dead)


def test_the_link_check_finds_dead_links_and_anchors(tmp_path):
    """The checker itself: a missing file and a missing heading are caught, code is not read as a link."""
    (tmp_path / "a.md").write_text("# Title\n\n## Some `code` heading, here\n")
    page = tmp_path / "b.md"
    page.write_text("[ok](a.md#some-code-heading-here) [gone](c.md) [bad](a.md#nope)\n`[x](y.md)`\n"
                    "```\n[z](w.md)\n```\n[web](https://example.com/x)\n")
    assert _links(page) == ["a.md#some-code-heading-here", "c.md", "a.md#nope"]
    assert "some-code-heading-here" in _anchors(tmp_path / "a.md")
    assert "nope" not in _anchors(tmp_path / "a.md")


@pytest.mark.parametrize("page", [p for p in PAGES if p not in GENERATED], ids=lambda p: str(p.relative_to(ROOT)))
def test_hand_written_pages_are_at_most_400_lines(page):
    assert len(page.read_text().splitlines()) <= 400


def test_the_readme_first_screen_holds_both_frameworks_paths():
    """The set-up command and both four-command paths come before the 'Learn more' list, within 60 lines."""
    lines = (ROOT / "README.md").read_text().splitlines()
    first = "\n".join(lines[:60])
    for needle in ("pip install -e . && autotuner fit runs/ && autotuner suggest --model vgg16",
                   "autotuner ddp suggest", "autotuner ddp validate", "autotuner suggest ", "autotuner validate ",
                   "DistributedDataParallel("):
        assert needle in first, needle
    assert any(l.startswith("## Learn more") for l in lines[:62])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_page_narrates_the_work(page):
    """No issue numbers of this project and no numbered work periods; upstream references such as
    pytorch#169026 or horovod#3996 name another project and are fine."""
    text = page.read_text()
    own = [m.group(0) for m in re.finditer(r"(?i)\bissue \d+|(?<![\w/])#\d{2,}\b|\bsession \d+", text)]
    assert not own, own


def test_the_ddp_knob_table_is_generated_from_the_code():
    """docs/reference/ddp-knobs.md is generated: run `python scripts/gen_knob_table.py` after changing DDP_KNOBS."""
    spec = importlib.util.spec_from_file_location("gen_knob_table", ROOT / "scripts" / "gen_knob_table.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    assert (DOCS / "reference" / "ddp-knobs.md").read_text() == gen.ddp_markdown_table()
