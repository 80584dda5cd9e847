"""The docs stay a front door: every page short enough to read at one sitting, and every link
in them, and every `docs/<page>.md#anchor` the code and config name, pointing at a page and a
heading that exist; the lake's reference names every column the catalog has."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
MAX_PAGE_BYTES = 20 * 1024
# Written by `python -m bench`: each "## " section is rewritten by the command that measures it
# and the rest carried over (bench/report.py, KEPT_SECTIONS), so its length is the generator's,
# not the docs'. Splitting it means changing the generator, not the page.
GENERATED_LONG = {"benchmarks.md"}
PAGES = sorted(DOCS.glob("*.md"))
FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|<img [^>]*src=\"([^\"]+)\"")
# docs/<page>.md with an optional anchor, as code comments, docstrings and config name a page.
DOCS_REFERENCE = re.compile(r"\bdocs/([\w.-]+\.md)(#[\w-]+)?")
# Where the project's own text lives (not a data dir a run leaves behind).
SCANNED = ("README.md", "run.py", "pyproject.toml", ".ci", "assets", "bench", "dashboard", "docs", "jars",
           "streaming", "tests")
SUFFIXES = {".py", ".yml", ".yaml", ".json", ".md", ".toml", ".txt", ".sh", ".js", ".css", ""}


def outside_code(text: str) -> list[str]:
    """The lines of a Markdown page outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    for line in outside_code(page.read_text()):
        heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            base = slug(heading.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def broken(source: Path, target: str) -> str | None:
    """Why `target`, as written in `source`, does not resolve, or None."""
    path_part, _, anchor = target.partition("#")
    page = source if not path_part else (source.parent / path_part).resolve()
    if not page.exists():
        return f"{target}: no such file"
    if anchor and page.suffix == ".md" and anchor not in anchors(page):
        return f"{target}: no heading #{anchor} in {page.relative_to(REPO)}"
    return None


def project_files() -> list[Path]:
    found = []
    for name in SCANNED:
        top = REPO / name
        for path in [top] if top.is_file() else top.rglob("*"):
            if path.is_file() and path.suffix in SUFFIXES and "__pycache__" not in path.parts:
                found.append(path)
    return found


def test_every_page_is_short_enough_to_read_at_one_sitting():
    long = {page.name: size for page in PAGES
            if page.name not in GENERATED_LONG and (size := len(page.read_bytes())) > MAX_PAGE_BYTES}
    assert long == {}, f"split these pages by the question each part answers (at most {MAX_PAGE_BYTES} bytes)"


def test_every_relative_link_in_the_readme_and_the_docs_resolves():
    problems = []
    for source in [REPO / "README.md", *PAGES]:
        text = "\n".join(outside_code(source.read_text()))
        for match in LINK.finditer(text):
            target = match.group(1) or match.group(2)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto: ...
                continue
            if (why := broken(source, target)) is not None:
                problems.append(f"{source.relative_to(REPO)}: {why}")
    assert problems == []


def test_every_docs_page_the_code_and_config_name_exists_with_its_anchor():
    problems = []
    for source in project_files():
        for number, line in enumerate(source.read_text(errors="replace").splitlines(), 1):
            for match in DOCS_REFERENCE.finditer(line):
                target = match.group(1) + (match.group(2) or "")
                if (why := broken(DOCS / "x", target)) is not None:
                    problems.append(f"{source.relative_to(REPO)}:{number}: {why}")
    assert problems == []


def test_the_readme_names_every_page_under_docs():
    readme = (REPO / "README.md").read_text()
    read_on = readme.split("## Read on", 1)[1]
    missing = [page.name for page in PAGES if f"(docs/{page.name})" not in read_on]
    assert missing == []


def test_slugs_follow_github():
    assert slug("`python run.py load`") == "python-runpy-load"
    assert slug("Embedded broker: Apache Kafka 4.4.0") == "embedded-broker-apache-kafka-440"
    assert slug("The chart's history") == "the-charts-history"
    assert slug("/metrics") == "metrics"


def test_the_lakes_reference_names_every_column_of_every_table():
    from streaming.lake.tables import ALL

    page = (DOCS / "lake.md").read_text()

    def named(column: str, row: str) -> bool:
        paired = re.sub(r"_(before|after)$", "_before/after", column)  # corrections' pairs, as one
        return f"`{column}`" in row or f"`{paired}`" in row

    missing = {}
    for table in ALL:
        rows = [line for line in page.splitlines() if line.startswith(f"| `{table.name}` |")]
        best = max(rows, key=lambda row: sum(named(c, row) for c in table.columns), default="")
        if absent := [c for c in table.columns if not named(c, best)]:
            missing[table.name] = absent
    assert missing == {}, "the table of columns in docs/lake.md lacks these"
