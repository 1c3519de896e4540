"""Write docs/reference/cli.md from the command line itself: every command of ``autotuner.cli``'s typer app,
its help text, usage line and options, read through typer's click command (``typer.main.get_command``).

    python scripts/gen_cli_reference.py [--check]

``--check`` writes nothing and exits 1 when docs/reference/cli.md differs from what the code gives (a maintainer
runs the script after changing a command, an option or its help). Nothing here runs a command.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference" / "cli.md"
sys.path.insert(0, str(ROOT))


def _esc(text: str) -> str:
    """Prose outside code: angle brackets and stars shown as typed, not read as HTML or emphasis."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("*", "\\*")


def _cell(text: object) -> str:
    """One Markdown table cell of prose: one line, pipes escaped."""
    return _esc(" ".join(str(text).split())).replace("|", "\\|")


def _help_text(text: str | None) -> str:
    """Click's help text as Markdown: ``\\b`` (keep-as-is) paragraphs become code blocks."""
    if not text:
        return ""
    out: list[str] = []
    for para in text.strip().split("\n\n"):
        if para.startswith("\b"):
            body = para[1:].strip("\n")
            lines = body.splitlines()
            indent = min((len(l) - len(l.lstrip()) for l in lines if l.strip()), default=0)
            out.append("```\n" + "\n".join(l[indent:] for l in lines) + "\n```")
        else:
            out.append(_esc(" ".join(para.split())))
    return "\n\n".join(out)


def _record(param, ctx) -> tuple[str, str]:
    """The option's line as ``--help`` prints it: its names with the value's type, and its help with
    ``[default: ...]`` / ``[required]`` (typer's own ``get_help_record``)."""
    rec = param.get_help_record(ctx)
    if rec is None:
        return "", ""
    return rec[0], rec[1] or ""


def _command_section(cmd, ctx, words: list[str]) -> list[str]:
    lines = [f"## `{' '.join(words)}`", ""]
    if cmd.short_help:
        lines += [f"*{_esc(cmd.short_help)}*", ""]
    usage = cmd.get_usage(ctx).strip().replace("Usage: ", "", 1)
    lines += ["```", usage, "```", ""]
    body = _help_text(cmd.help)
    if body:
        lines += [body, ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    for kind, title in (("Argument", "argument"), ("Option", "option")):
        rows = [_record(p, ctx) for p in params if type(p).__name__.endswith(kind)]
        rows = [r for r in rows if r[0]]
        if rows:
            lines += [f"| {title} | help |", "|---|---|"]
            lines += [f"| `{name.replace('|', chr(92) + '|')}` | {_cell(text)} |" for name, text in rows]
            lines.append("")
    return lines


def render() -> str:
    import typer.main
    from typer._click import Context

    from autotuner.cli import app

    root = typer.main.get_command(app)
    head = [
        "# Command-line reference",
        "",
        "Generated from the code (`autotuner.cli`'s typer app) by `python scripts/gen_cli_reference.py`; do not edit by",
        "hand. `autotuner COMMAND --help` prints the same text. Bad input to any command prints one line",
        "`error: <file or option>: <field>: <value>: <reason>` and exits with status 2; Ctrl-C prints one line and",
        "exits 130.",
        "",
        _help_text(root.help),
        "",
    ]
    sections: list[list[str]] = []
    index: list[str] = []

    def walk(cmd, ctx, words):
        subs = getattr(cmd, "commands", None)
        if subs:
            for name in subs:
                sub = subs[name]
                if getattr(sub, "hidden", False):
                    continue
                walk(sub, Context(sub, info_name=name, parent=ctx), [*words, name])
        else:
            title = " ".join(words)
            anchor = title.lower().replace(" ", "-")
            index.append(f"- [`{title}`](#{anchor}) — {cmd.short_help or ''}".rstrip(" —"))
            sections.append(_command_section(cmd, ctx, words))

    walk(root, Context(root, info_name="autotuner"), ["autotuner"])
    body = head + ["## Commands", "", *index, ""]
    for s in sections:
        body += s
    return "\n".join(body).rstrip() + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/reference/cli.md is stale; write nothing")
    a = ap.parse_args()
    text = render()
    if a.check:
        current = OUT.read_text() if OUT.is_file() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python scripts/gen_cli_reference.py", file=sys.stderr)
            return 1
        return 0
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
