"""The repo explains itself and keeps its layering (issue 25): no tracked file points outside the
clone for documentation, docs/ covers every key, event field and metric, the README's layout
lists every folder, and imports only point down (docs/architecture.md, Rules)."""

from __future__ import annotations

import ast
import dataclasses
import re
import subprocess
from pathlib import Path

import pytest

from rmqproxy.core.config import SETTINGS
from rmqproxy.observe.pull_events import PullEvent

ROOT = Path(__file__).resolve().parents[1]
# Built, so that this file does not match itself.
OUTSIDE_DOCS = ("shared" + "/", "PROTOCOL" + ".md", "DESIGN" + ".md", "STYLE" + ".md")


def tracked_files() -> list[Path]:
    try:
        out = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [ROOT / line for line in out.splitlines() if line]


def python_files(*folders: str) -> list[Path]:
    return [p for p in tracked_files() if p.suffix == ".py" and p.relative_to(ROOT).parts[0] in folders]


def test_no_tracked_file_points_at_documents_outside_the_repo() -> None:
    offenders = []
    for path in tracked_files():
        if path == Path(__file__).resolve() or path.suffix in (".png", ".parquet", ".gz"):
            continue
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):
            continue
        for number, line in enumerate(text.splitlines(), 1):
            if any(marker in line for marker in OUTSIDE_DOCS):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not offenders, "\n".join(offenders)


def test_every_docs_path_named_in_the_repo_exists() -> None:
    named = set()
    for path in tracked_files():
        if path.suffix in (".py", ".md"):
            named |= set(re.findall(r"docs/[a-z_]+\.md", path.read_text()))
    assert named >= {"docs/architecture.md", "docs/protocol.md", "docs/operations.md"}
    assert [name for name in sorted(named) if not (ROOT / name).exists()] == []


def test_operations_doc_lists_every_key_event_field_and_metric() -> None:
    text = (ROOT / "docs" / "operations.md").read_text()
    missing = [f"key {s.key}" for s in SETTINGS if f"`{s.key}`" not in text]
    missing += [f"event field {f.name}" for f in dataclasses.fields(PullEvent) if f"`{f.name}`" not in text]
    metrics_source = (ROOT / "rmqproxy" / "observe" / "metrics.py").read_text()
    for name in sorted(set(re.findall(r'"((?:rmqproxy|rocketmq)_[a-z_]+)"', metrics_source))):
        if name not in text:
            missing.append(f"metric {name}")
    assert not missing, missing


def test_readme_layout_lists_every_top_level_and_tests_folder() -> None:
    readme = (ROOT / "README.md").read_text()
    layout = readme[readme.index("## Layout") :]
    layout = layout[: layout.index("\n## ", 4)]
    folders = {p.relative_to(ROOT).parts[0] for p in tracked_files() if len(p.relative_to(ROOT).parts) > 1}
    folders -= {".ci", ".github"}
    tests = {p.relative_to(ROOT).parts[1] for p in tracked_files()
             if p.relative_to(ROOT).parts[0] == "tests" and len(p.relative_to(ROOT).parts) > 2}  # fmt: skip
    missing = [f"{f}/" for f in sorted(folders) if f"`{f}/`" not in layout]
    missing += [f"tests/{t}/" for t in sorted(tests) if f"`tests/{t}/`" not in layout]
    assert not missing, f"README's Layout does not list {missing}"
    assert "docs/architecture.md" in layout


def _imports(path: Path) -> set[str]:
    """Absolute module names ``path`` imports (relative imports resolved)."""
    package = list(path.relative_to(ROOT).parts[:-1])  # a module's and an __init__'s package alike
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def _violations(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    found = []
    for path in files:
        for name in _imports(path):
            if any(name == f or name.startswith(f + ".") for f in forbidden):
                found.append(f"{path.relative_to(ROOT)} imports {name}")
    return found


def test_the_codec_imports_nothing_of_the_project_and_no_twisted() -> None:
    assert _violations(python_files("codec"), ("rmqproxy", "dashboards", "spark_jobs", "tests", "bench",
                                                "twisted")) == []  # fmt: skip


def test_processors_and_the_store_never_import_the_composition_root_or_the_network() -> None:
    processors = [p for p in python_files("rmqproxy") if "processors" in p.parts]
    store = [p for p in python_files("rmqproxy") if "store" in p.parts]
    assert _violations(processors, ("rmqproxy.broker.server",)) == []
    assert _violations(store, ("rmqproxy.broker.server", "rmqproxy.net", "rmqproxy.broker.processors",
                               "twisted.internet")) == []  # fmt: skip


#: What each part of rmqproxy/ may import of the project besides itself (and codec/): the gRPC
#: schema (a leaf, like codec/), the shared core, the network layer, observation, the runtime every
#: front end builds on, and the two front ends, which never import each other (docs/architecture.md,
#: Rules). cli.py composes them all.
LAYERS: dict[str, tuple[str, ...]] = {
    "grpc_wire": (),
    "core": (),
    "net": ("core",),
    "observe": ("core", "net"),
    "runtime": ("core", "net", "observe"),
    "broker": ("core", "net", "observe", "runtime", "grpc_wire"),
    "proxy": ("core", "net", "observe", "runtime", "grpc_wire"),
}


def layer_of(module: str) -> str:
    """The part of rmqproxy a dotted module name belongs to ("core", "broker", ...; "" for the package itself)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[0] == "rmqproxy" else ""


def crosses_layers(importer: str, imported: str) -> bool:
    """Whether module ``importer`` importing ``imported`` breaks ``LAYERS``."""
    mine, theirs = layer_of(importer), layer_of(imported)
    if not imported.startswith("rmqproxy.") or theirs in ("", "__version__", mine) or mine not in LAYERS:
        return False
    return theirs not in LAYERS[mine]


def test_each_part_of_rmqproxy_imports_only_the_parts_below_it() -> None:
    files = python_files("rmqproxy")
    assert {layer_of(_module_name(p)) for p in files} >= set(LAYERS) | {"cli"}
    found = [f"{_module_name(p)} imports {name}" for p in files for name in sorted(_imports(p))
             if crosses_layers(_module_name(p), name)]  # fmt: skip
    assert found == []


def test_the_layer_rule_refuses_back_pointing_imports() -> None:
    assert crosses_layers("rmqproxy.core.config", "rmqproxy.broker.store.StoreConfig")
    assert crosses_layers("rmqproxy.proxy.session", "rmqproxy.broker.clients")
    assert crosses_layers("rmqproxy.broker.server", "rmqproxy.proxy.nodes")
    assert crosses_layers("rmqproxy.observe.metrics", "rmqproxy.broker.topics")
    assert crosses_layers("rmqproxy.runtime", "rmqproxy.broker.server")
    assert not crosses_layers("rmqproxy.broker.server", "rmqproxy.runtime")
    assert not crosses_layers("rmqproxy.proxy.pull_relay", "rmqproxy.core.hold.HeldPull")
    assert not crosses_layers("rmqproxy.cli", "rmqproxy.proxy.server")


def test_the_product_never_imports_tests_or_benchmarks() -> None:
    assert _violations(python_files("codec", "rmqproxy", "dashboards", "spark_jobs"), ("tests", "bench")) == []


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(*folders: str) -> dict[str, set[str]]:
    """Module -> the project modules it imports (``TYPE_CHECKING`` imports included: a circle hidden
    there is still a circle a reader has to untie)."""
    modules = {_module_name(p): p for p in python_files(*folders)}
    return {name: {m for m in _imports(path) if m in modules and m != name} for name, path in modules.items()}


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            members = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                members.append(member)
                if member == node:
                    break
            if len(members) > 1:
                circles.append(sorted(members))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return circles


def test_no_import_circle_in_the_product() -> None:
    assert import_circles(import_graph("codec", "rmqproxy")) == []


def test_the_circle_finder_finds_a_circle() -> None:
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_import_checker_sees_relative_imports() -> None:
    """The checks above would pass vacuously if relative imports were not resolved."""
    assert "rmqproxy.broker.server" in _imports(ROOT / "rmqproxy" / "cli.py")
    assert "rmqproxy.broker.store" in _imports(ROOT / "rmqproxy" / "broker" / "processors" / "pull.py")


def test_protocol_doc_lists_exactly_the_codes_the_server_answers(tmp_path) -> None:
    from tests.server.harness import make_server

    server, _reactor = make_server(tmp_path)
    server.stop()
    text = (ROOT / "docs" / "protocol.md").read_text()
    section = text[text.index("## Codes rmqproxy answers") :]
    section = section[: section.index("\n## ", 4)]
    table = section[section.index("| role |") : section.index("Any other code")]
    documented = {int(n) for n in re.findall(r"\b(\d+) [A-Z_]{4,}", table)}
    assert documented == set(server.dispatcher.handlers)


def test_a_request_code_cannot_have_two_handlers() -> None:
    from rmqproxy.net.dispatch import Dispatcher, Route

    with pytest.raises(ValueError, match="two handlers"):
        Dispatcher([Route(11, print), Route(11, print)])
