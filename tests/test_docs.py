"""The documentation says what the code does: every `streamscale` command quoted in the README and
docs/ parses as written (options, arguments and their types, without running it), every spec quoted
there validates, and the spec reference in docs/benchmarking.md is the one the code generates."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
import yaml

ROOT = Path(__file__).parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"```(\w*)\n(.*?)```", re.S)
COMMAND = re.compile(r"^(?:\w+=\S+\s+)*(?:\.venv/bin/)?streamscale(?:\s|$)")


def blocks(kind: str):
    for page in PAGES:
        for lang, body in FENCE.findall(page.read_text()):
            if lang == kind or (kind == "sh" and lang in ("", "sh", "bash")):
                yield page, body


def commands():
    out = []
    for page, body in blocks("sh"):
        for raw in body.replace("\\\n", " ").splitlines():
            line = raw.split(" #", 1)[0].strip().rstrip("&").strip()
            for part in line.split("&&"):
                if not COMMAND.match(part.strip()):
                    continue
                words = shlex.split(part.strip())
                while words and "=" in words[0] and not words[0].startswith("-"):
                    words = words[1:]  # VAR=value prefixes
                if words and words[0] in ("streamscale", ".venv/bin/streamscale"):
                    out.append(pytest.param(words[1:], id=f"{page.name}: {' '.join(words)[:70]}"))
    return out


def _parse(args: list[str]) -> None:
    """Resolve ``args`` down the command tree and parse the leaf's options and arguments."""
    from streamscale.cli.main import root

    cmd = typer.main.get_command(root)
    name = "streamscale"
    while True:
        ctx = cmd.make_context(name, list(args), resilient_parsing=False)
        rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
        if not hasattr(cmd, "resolve_command"):  # a leaf (typer vendors its own click: no isinstance)
            return
        assert rest, f"{name}: a command is missing"
        sub_name, sub, args = cmd.resolve_command(ctx, rest)
        assert sub is not None, f"no command {sub_name!r}"
        cmd, name = sub, sub_name


@pytest.mark.parametrize("args", commands())
def test_every_quoted_command_parses(args, tmp_path, monkeypatch):
    # argument types such as existing paths are checked where the docs refer to files of this checkout
    monkeypatch.chdir(ROOT)
    if "--help" in args or "-h" in args:
        return
    _parse(args)


def test_the_docs_quote_commands_at_all():
    assert len(commands()) >= 20


def test_every_quoted_spec_validates():
    from streamscale.benchmark.spec import parse_spec
    from streamscale.reliability.spec import parse_spec as parse_reliability

    seen = 0
    for page, body in blocks("yaml"):
        data = yaml.safe_load(body)
        if not isinstance(data, dict):
            continue
        if "benchmark" in data:
            # a spec quoted from a file of the checkout ("# examples/jobs/x.yaml" on its first line)
            # names its job relative to that file's folder, as the file does
            first = body.splitlines()[0].lstrip("# ").split()[0] if body.startswith("#") else ""
            folder = (ROOT / first).parent if first and (ROOT / first).is_file() else ROOT
            parse_spec(data, page.name, folder)
            seen += 1
        elif "semantics" in data or "faults" in data:
            parse_reliability(data, page.name)
            seen += 1
    assert seen >= 1


def test_the_spec_reference_page_is_the_generated_one():
    from streamscale.benchmark.reference import reference_markdown, undocumented

    text = (ROOT / "docs" / "benchmarking.md").read_text()
    between = text.split("<!-- reference:start -->\n", 1)[1].split("<!-- reference:end -->", 1)[0]
    assert between == reference_markdown(), "docs/benchmarking.md: run `streamscale benchmark reference` and paste it"
    assert undocumented() == []


def test_no_page_speaks_of_how_the_work_was_organised():
    words = re.compile(r"\b(issue \d+|stop \d+|this session)\b", re.I)
    for page in [ROOT / "README.md", ROOT / "docs" / "benchmarking.md"]:
        assert not words.search(page.read_text()), page.name


def test_papers_are_cited_by_their_authors_not_by_a_file_name():
    # the source papers were once named "seed 00N" after files no reader has; a random seed is fine
    words = re.compile(r"\bseed (\d|paper)|\bseed's\b|\bthe seed\b(?! of)", re.I)
    files = [*PAGES, *(ROOT / "streamscale").rglob("*.py"), *(ROOT / "examples").rglob("*.yaml")]
    said = [f"{f.relative_to(ROOT)}: {m.group(0)}" for f in files for m in words.finditer(f.read_text())]
    assert said == []


def test_the_readme_leads_to_the_users_own_job_within_its_first_40_lines():
    head = "\n".join((ROOT / "README.md").read_text().splitlines()[:40])
    assert "own job" in head and "streamscale benchmark run examples/jobs/" in head
    assert "what-1-core-means" in head and "benchmark check" in head


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a page: lower case, punctuation dropped, spaces as hyphens."""
    text = FENCE.sub("", page.read_text())
    heads = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in heads}


def test_every_link_between_pages_reaches_its_page_and_section():
    broken = []
    for page in PAGES:
        for target, anchor in re.findall(r"\]\(([\w./-]*\.md)?(?:#([\w-]+))?\)", FENCE.sub("", page.read_text())):
            dest = (page.parent / target).resolve() if target else page
            if not dest.exists():
                broken.append(f"{page.name}: {target}")
            elif anchor and anchor not in _anchors(dest):
                broken.append(f"{page.name}: {target}#{anchor}")
    assert broken == []
