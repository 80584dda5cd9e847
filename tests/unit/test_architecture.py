"""The layout's rules, checked on the source: the product never imports its tools, no import
cycle, and no table path spelled outside the lake (ARCHITECTURE.md)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("streaming", "dashboard", "bench")


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            parts = path.relative_to(REPO).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The project modules a module imports, at any depth of its code."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in names if name in known}


def test_the_product_never_imports_the_dashboard_or_the_benchmark():
    known = set(modules())
    offenders = {name: sorted(i for i in imports_of(path, known) if i.split(".")[0] in ("dashboard", "bench"))
                 for name, path in modules().items() if name.startswith("streaming")}
    assert {name: found for name, found in offenders.items() if found} == {}


def test_no_module_imports_itself_through_others():
    known = set(modules())
    graph = {name: imports_of(path, known) - {name} for name, path in modules().items()}
    cycles = []

    def visit(name: str, trail: list[str]) -> None:
        for nxt in graph.get(name, ()):
            if nxt in trail:
                cycles.append(trail[trail.index(nxt):] + [nxt])
            elif len(trail) < 12:
                visit(nxt, trail + [nxt])

    for start in graph:
        visit(start, [start])
    # A package's __init__ is imported by its modules implicitly; only real cycles count.
    real = {" -> ".join(cycle) for cycle in cycles if not any("." not in m and m in PACKAGES for m in cycle)}
    assert real == set()


def test_no_table_path_is_spelled_outside_the_lake():
    # "gold/trade_summary", or a path joined as data_dir / "gold" / ...
    table_names = re.compile(r"""["'](bronze|silver|gold)/\w|/\s*["'](bronze|silver|gold)["']""")
    offenders = [f"{path.relative_to(REPO)}:{number}"
                 for name, path in modules().items() if not name.startswith("streaming.lake")
                 for number, line in enumerate(path.read_text().splitlines(), 1) if table_names.search(line)]
    assert offenders == []


def test_every_table_read_goes_through_the_lake_not_a_pyarrow_dataset():
    """A pyarrow dataset makes a fragment per file before filtering: slow on tables that gain a
    file per micro-batch (docs/lake.md#reads)."""
    offenders = [f"{path.relative_to(REPO)}:{number}"
                 for name, path in modules().items()
                 for number, line in enumerate(path.read_text().splitlines(), 1)
                 if "to_pyarrow_dataset" in line or "pyarrow.dataset" in line]
    assert offenders == []


# The stages' order (docs/architecture.md#the-stages): a room imports only rooms after it.
ROOM_ORDER = ("dashboard", "streaming.run", "streaming.jobs", "streaming.sink", "streaming.metrics",
              "streaming.simulation", "streaming.kafka", "streaming.medallion", "streaming.config", "streaming.lake",
              "streaming.rows", "streaming.jars")
MAX_PRODUCT_LINES = 400
MAX_BENCH_LINES = 450
SQL_TEXT = re.compile(r"""["'](SELECT|MERGE INTO|INSERT INTO|DELETE FROM|UPDATE)\s""")


def room_of(module: str) -> str | None:
    return next((room for room in ROOM_ORDER if module == room or module.startswith(room + ".")), None)


def product_files() -> list[Path]:
    return [path for name, path in modules().items() if not name.startswith("bench")]


def test_each_room_imports_only_the_rooms_after_it_in_the_stages_order():
    known = set(modules())
    rank = {room: place for place, room in enumerate(ROOM_ORDER)}
    upward = sorted(f"{name} -> {target}"
                    for name, path in modules().items() if room_of(name) is not None
                    for target in imports_of(path, known)
                    if room_of(target) is not None and rank[room_of(target)] < rank[room_of(name)])
    assert upward == []


def test_no_sql_text_is_spelled_outside_the_lake():
    offenders = [f"{path.relative_to(REPO)}:{number}"
                 for name, path in modules().items() if not name.startswith("streaming.lake")
                 for number, line in enumerate(path.read_text().splitlines(), 1) if SQL_TEXT.search(line)]
    assert offenders == []


def test_no_product_file_is_over_the_size_a_reader_holds_at_once():
    long = {str(path.relative_to(REPO)): n for path in product_files()
            if (n := len(path.read_text().splitlines())) > MAX_PRODUCT_LINES}
    assert long == {}


def test_no_bench_file_or_run_py_is_over_the_size_a_reader_holds_at_once():
    # The bench's tools hold a whole run and its report: a little more room than the product's.
    files = [path for name, path in modules().items() if name.startswith("bench")] + [REPO / "run.py"]
    long = {str(path.relative_to(REPO)): n for path in files
            if (n := len(path.read_text().splitlines())) > MAX_BENCH_LINES}
    assert long == {}


def test_no_two_modules_share_a_file_name():
    """A name says one thing: a reader (or a traceback) naming `layout.py` should not leave the
    page's and the lake's to guess between. Packages' __init__ and __main__ are alike by rule."""
    by_name: dict[str, list[str]] = {}
    for path in [*modules().values(), REPO / "run.py"]:
        if path.name not in ("__init__.py", "__main__.py"):
            by_name.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    shared = {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1}
    assert shared == {}


def test_no_two_test_modules_share_a_file_name():
    """The same for the suites: a failing test's file names one place (conftest.py is alike by rule)."""
    by_name: dict[str, list[str]] = {}
    for path in (REPO / "tests").rglob("*.py"):
        if path.name not in ("__init__.py", "conftest.py"):
            by_name.setdefault(path.name, []).append(str(path.relative_to(REPO)))
    assert {name: sorted(paths) for name, paths in by_name.items() if len(paths) > 1} == {}


def documented_tree() -> set[str]:
    """The paths in docs/architecture.md's tree: an entry per line, two spaces of indent a level."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = text.split("## The tree", 1)[1].split("```", 2)[1]
    paths, folders = set(), []
    for line in block.splitlines():
        entry = re.match(r"^( *)(\S+)", line)
        if not entry:
            continue
        depth = len(entry.group(1)) // 2
        folders = folders[:depth]
        path = "".join(folders) + entry.group(2)
        paths.add(path)
        if path.endswith("/"):
            folders.append(entry.group(2))
    return paths


def test_the_documented_tree_names_every_product_file_and_nothing_that_is_gone():
    shown = documented_tree()
    product = {str(path.relative_to(REPO)) for folder in ("streaming", "dashboard", "assets")
               for path in (REPO / folder).rglob("*") if path.is_file() and path.name != "__init__.py"
               and "__pycache__" not in path.parts}
    product.add("run.py")
    assert sorted(product - shown) == [], "files missing from docs/architecture.md's tree"
    gone = sorted(p for p in shown if not (REPO / p).exists())
    assert gone == [], "entries of docs/architecture.md's tree that are gone"


def test_every_module_and_package_says_what_it_owns_in_a_docstring():
    silent = [str(path.relative_to(REPO)) for path in modules().values()
              if not ast.get_docstring(ast.parse(path.read_text()))]
    assert silent == []
