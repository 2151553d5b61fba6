"""The rules of the house that a reader relies on: imports flow one way, and the text says why, not when.

The import graph is read from the source with ``ast`` (every ``import`` statement, at the top or inside a
function), so a lazy import cannot hide a cycle or a lower floor reaching up.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "bertkit"

# Floors, bottom up: a module may import its own floor and the ones below, never one above.
# errors, io, formats <- config, checkpoint files <- tokenizer, models <- data, features <- training, tasks <- inference <- serve, cli.
# (formats: the file-format layer under both the corpus reader in data/ and the labelled-data readers in tasks/.)
FLOORS: dict[str, int] = {
    "errors": 0, "io": 0, "formats": 0, "option_groups": 0, "progress": 0, "notices": 0, "cpu_features": 0,
    "threads": 0,
    "config": 1, "checkpoint_files": 1, "hub": 1,
    "tokenizer": 2, "models": 2, "weights": 2, "sentence_config": 2, "quantize": 2, "compiling": 2,
    "data": 3, "features": 3, "vocab": 3, "export": 3, "backends": 3,
    "training": 4, "tasks": 4,
    "inference": 5, "retrieval": 5, "jobs": 5,
    "serve": 6, "cli": 6, "demo": 6, "__main__": 6,
}  # fmt: skip
# Within a floor, these never import those: the model loads and saves itself through the checkpoint files
# below it, and knows nothing of the loader above them (weights: quantization, compilation, tokenizer files),
# of the tokenizer, or of files itself (io, formats).
FORBIDDEN: dict[str, set[str]] = {
    "models": {"weights", "quantize", "compiling", "io", "formats", "tokenizer"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imported(path: Path, name: str, known: set[str]) -> set[str]:
    """The bertkit modules ``path`` (module ``name``) imports; ``from pkg import mod`` counts as ``pkg.mod``."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):  # names defined in the module (or package) itself
                found.add(base)
    return {target for target in found if target in known and target != name}


def import_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imported(path, name, set(known)) for name, path in known.items()}


def floor_of(module: str) -> str:
    """The floor a module lives on: its first name under ``bertkit`` (``bertkit.training.loop`` -> training)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_reader_sees_lazy_imports_and_cycles():
    graph = import_graph()
    assert "bertkit.models.bert" in graph["bertkit.weights"]
    assert "bertkit.checkpoint_files" in graph["bertkit.models.bert"]  # from_pretrained/save_pretrained call down
    assert "bertkit.data.loader" in graph["bertkit.data"]  # imported inside the package's __getattr__
    # `from bertkit.tasks import metrics` imports the submodule (the package's __init__ runs, but it is the
    # parent of every submodule, not a dependency the importer chose)
    assert (
        "bertkit.tasks.metrics" in graph["bertkit.tasks.classification.task"]
        and "bertkit.tasks" not in graph["bertkit.tasks.classification.task"]
    )
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_in_a_cycle():
    assert cycles(import_graph()) == []


def test_every_module_has_a_floor():
    unplaced = sorted({floor_of(m) for m in modules()} - set(FLOORS) - {""})
    assert not unplaced, f"give these modules a floor in FLOORS: {unplaced}"


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    upward = []
    for module, targets in graph.items():
        here = floor_of(module)
        if not here:  # bertkit/__init__.py: the public API re-exports every floor (resolved on first use)
            continue
        for target in targets:
            there = floor_of(target)
            if there and (FLOORS[there] > FLOORS[here] or there in FORBIDDEN.get(here, set())):
                upward.append(f"{module} imports {target}")
    return sorted(upward)


def test_upward_imports_are_named():
    graph = {
        "bertkit.training.loop": {"bertkit.inference", "bertkit.models.bert"},
        "bertkit.models.bert": {"bertkit.weights"},
        "bertkit.inference": {"bertkit.training.loop"},
    }
    assert upward_imports(graph) == [
        "bertkit.models.bert imports bertkit.weights",
        "bertkit.training.loop imports bertkit.inference",
    ]


def test_lower_floors_never_import_upper_ones():
    upward = upward_imports(import_graph())
    assert not upward, "\n".join(upward)


# Serving a model never loads the training machinery: how a task reads, featurizes and restores itself lives in
# tasks/, below both.
KEPT_APART: dict[str, set[str]] = {"inference": {"training"}, "serve": {"training"}}


def imports_kept_apart(graph: dict[str, set[str]]) -> list[str]:
    return sorted(
        f"{module} imports {target}"
        for module, targets in graph.items()
        for target in targets
        if floor_of(target) in KEPT_APART.get(floor_of(module), set())
    )


def test_kept_apart_names_every_import_across():
    graph = {"bertkit.serve.app": {"bertkit.training.loop", "bertkit.tasks"}, "bertkit.training.loop": {"bertkit.data"}}
    assert imports_kept_apart(graph) == ["bertkit.serve.app imports bertkit.training.loop"]


def test_inference_and_serving_import_nothing_from_training():
    across = imports_kept_apart(import_graph())
    assert not across, "\n".join(across)


# ------------------------------------------------------------------------------------------ history words
HISTORY = re.compile(r"\b(session|issue)s?\s*#?\d+", re.IGNORECASE)
SEARCHED = ["src", "tests", "benchmarks", "docs", "README.md"]
TEXT_SUFFIXES = {".py", ".md", ".toml", ".yaml", ".yml", ".txt", ".html", ".js", ".css", ".cfg", ".json"}


def searched_files() -> list[Path]:
    files: list[Path] = []
    for name in SEARCHED:
        path = ROOT / name
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(
                p
                for p in sorted(path.rglob("*"))
                if p.is_file()
                and p.suffix in TEXT_SUFFIXES
                and "results" not in p.parts
                and "__pycache__" not in p.parts
                and "fixtures" not in p.parts
            )
    return files


@pytest.mark.parametrize(
    "text, found",
    [
        ("added in " + "session 12", True),
        ("see " + "issue #17", True),
        ("Is" + "sue 3 says", True),
        ("the session ends", False),
        ("no issue here", False),
        ("sessions of training", False),
    ],
)
def test_history_pattern(text, found):
    assert bool(HISTORY.search(text)) is found


def test_code_and_docs_say_why_not_when():
    """Comments, docstrings and docs explain the code as it is; the project's history lives in git. (An upstream
    bug is cited by its link, e.g. ``github.com/google-research/bert/issues/476``, which this does not match.)"""
    hits = []
    for path in searched_files():
        if path == Path(__file__).resolve():
            continue  # this file names the pattern it looks for
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if HISTORY.search(line):
                hits.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not hits, "history references (say why, not when):\n" + "\n".join(hits)


MAX_FUNCTION_LINES = 80


def long_functions(path: Path, limit: int) -> list[str]:
    """``file:line name (N lines)`` of every function in ``path`` longer than ``limit`` lines, docstring included."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [
        f"{path.name}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and node.end_lineno is not None
        and node.end_lineno - node.lineno + 1 > limit
    ]


def test_the_length_reader_finds_long_functions_and_methods(tmp_path):
    source = tmp_path / "long.py"
    body = "        x = 1\n" * 80
    source.write_text(f"def short():\n    pass\n\n\nclass C:\n    def long(self):\n{body}", encoding="utf-8")
    assert long_functions(source, 80) == ["long.py:6 long (81 lines)"]
    assert long_functions(source, 81) == []


def test_no_function_in_src_is_longer_than_80_lines():
    found = [entry for path in sorted(PACKAGE.rglob("*.py")) for entry in long_functions(path, MAX_FUNCTION_LINES)]
    assert found == [], "split these into named steps:\n" + "\n".join(found)
