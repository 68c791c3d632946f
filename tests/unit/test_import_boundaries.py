"""Dependencies point one way: kmq <- app <- tables <- agents <- web (README, Layout).

Checked statically over every module, lazy imports (inside functions) included, so an
import that only runs on some path cannot slip through. ``bench/`` and ``tests/`` may use
anything.

And no module reaches another folder's module globals: what the tracker builds at run
time (owned partitions, redeliverer, dispatcher, queue settings) is the one
``agents.runtime.TrackerRuntime``, constructed in agents/runtime.py only and reached by
``runtime()``. Across folders a module imports modules, classes, functions and
constants; the only objects are the composition root's: the app, its settings and
its topic (``COMPOSITION_ROOT``).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["kmq", "app", "tables", "agents", "web"]  # each may import only those before it
SERVICE = set(LAYERS[1:])
OPTIONAL = {"faust", "mode", "aiokafka", "pyspark", "pyarrow", "pandas", "rocksdict", "prometheus_client"}
# Inside kmq: the SDK proper never reaches the dev tooling, the CLI or the Spark extra.
SDK_FORBIDDEN = ("kmq.dev", "kmq.cli", "kmq.spark")
# What app/ declares on the Faust app at import: built once, changed by nothing.
COMPOSITION_ROOT = {"app": {"app", "settings"}, "app.topics": {"markers_topic"}}
# The runtime's parts: constructed in RUNTIME_HOME only (tests may build their own).
RUNTIME_CLASSES = {"TrackerRuntime", "OwnedPartitions", "Redeliverer", "Dispatcher"}
RUNTIME_HOME = "agents/runtime.py"


def imports_of(path: Path) -> list[tuple[int, str]]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            out.append((node.lineno, node.module))
    return out


def modules(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def violations() -> list[str]:
    bad = []
    for i, layer in enumerate(LAYERS):
        allowed = set(LAYERS[:i + 1])
        for path in modules(layer):
            rel = path.relative_to(ROOT)
            in_spark = rel.parts[:2] == ("kmq", "spark")
            sdk = layer == "kmq" and rel.parts[1] not in ("dev", "cli", "spark")
            for line, name in imports_of(path):
                top = name.split(".")[0]
                if top in SERVICE and top not in allowed:
                    bad.append(f"{rel}:{line} imports {name} ({layer} comes before {top})")
                if layer == "kmq" and top in OPTIONAL and not (in_spark and top in ("pyspark", "pyarrow", "pandas")):
                    bad.append(f"{rel}:{line} imports {name} (the SDK never imports {top})")
                if sdk and any(name == f or name.startswith(f + ".") for f in SDK_FORBIDDEN):
                    bad.append(f"{rel}:{line} imports {name} (the SDK never reaches dev/cli/spark)")
    return bad


def module_file(root: Path, name: str) -> Path | None:
    """The file of module ``name`` under ``root`` (None: not a module of ours)."""
    base = root.joinpath(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    for node in body:  # module statements, also those under a top-level if/try
        yield node
        for field in ("body", "orelse", "finalbody"):
            yield from _top_level(getattr(node, field, []) if isinstance(node, (ast.If, ast.Try)) else [])
        for handler in getattr(node, "handlers", []):
            yield from _top_level(handler.body)


def bindings(path: Path) -> dict[str, tuple]:
    """Each top-level name of a module: ("class",), ("function",), ("object",),
    ("module", name) or ("from", module, name) for a name it imported (the last binding wins)."""
    out: dict[str, tuple] = {}
    for node in _top_level(ast.parse(path.read_text(), str(path)).body):
        if isinstance(node, ast.ClassDef):
            out[node.name] = ("class",)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # @app.agent, @app.page, @app.timer ... make an object of the function.
            faust = any(isinstance(d, (ast.Call, ast.Attribute)) and "app." in ast.unparse(d)
                        for d in node.decorator_list)
            out[node.name] = ("object",) if faust else ("function",)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for name in ast.walk(t):
                    if isinstance(name, ast.Name):
                        out[name.id] = ("object",)
        elif isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = ("module", a.name if a.asname else a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            for a in node.names:
                out[a.asname or a.name] = ("from", node.module, a.name)
    return out


def kind_of(root: Path, module: str, name: str, depth: int = 0) -> str:
    """What ``from module import name`` gives: module, class, function, object or unknown."""
    path = module_file(root, module)
    bound = None if path is None or depth > 5 else bindings(path).get(name)
    if bound is None:  # a package's submodule, unless the package binds the name otherwise
        return "module" if module_file(root, f"{module}.{name}") is not None else "unknown"
    if bound[0] == "from":
        if bound[1].split(".")[0] in SERVICE:
            return kind_of(root, bound[1], bound[2], depth + 1)
        return "object"  # re-exported from outside: not a name to reach through this module
    return bound[0]


def is_lowercase(name: str) -> bool:
    """A lowercase name (``owned``, ``_runtime``), not a constant (``MAX_LIMIT``) or a type."""
    bare = name.lstrip("_")
    return bool(bare) and bare[0].islower()


def reached_globals(path: Path, root: Path) -> list[str]:
    """Lowercase module-level objects of another service folder that ``path`` imports or reads."""
    folder = path.relative_to(root).parts[0]
    rel = path.relative_to(root)
    tree = ast.parse(path.read_text(), str(path))
    bad = []
    modules: dict[str, str] = {}  # local dotted name -> another folder's module

    def check(line: int, module: str, name: str, how: str) -> None:
        if is_lowercase(name) and name not in COMPOSITION_ROOT.get(module, ()) \
                and kind_of(root, module, name) in ("object", "unknown"):
            bad.append(f"{rel}:{line} {how} {module}.{name} (a module global of {module.split('.')[0]}/)")

    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            top = node.module.split(".")[0]
            if top not in SERVICE or top == folder:
                continue
            for a in node.names:
                if kind_of(root, node.module, a.name) == "module":
                    modules[a.asname or a.name] = f"{node.module}.{a.name}"
                else:
                    check(node.lineno, node.module, a.name, "imports")
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] in SERVICE and a.name.split(".")[0] != folder:
                    modules[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = ast.unparse(node.value)
            if owner in modules:
                check(node.lineno, modules[owner], node.attr, "reads")
    return bad


def global_violations(root: Path | None = None) -> list[str]:
    root = root or ROOT
    return [v for layer in LAYERS[1:] for path in sorted((root / layer).rglob("*.py"))
            for v in reached_globals(path, root)]


def construction_sites(root: Path | None = None) -> list[str]:
    """Where a service module constructs one of the runtime's parts."""
    root = root or ROOT
    out = []
    for layer in LAYERS[1:]:
        for path in sorted((root / layer).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Call):
                    called = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                    if called in RUNTIME_CLASSES:
                        out.append(f"{path.relative_to(root)}:{node.lineno} {called}")
    return out


def test_imports_point_one_way_in_every_module_lazy_ones_included():
    assert violations() == []


def test_the_checker_sees_a_lazy_import_against_the_order(tmp_path, monkeypatch):
    fake = tmp_path / "kmq" / "sneaky.py"
    fake.parent.mkdir()
    fake.write_text("def f():\n    from agents import track_markers\n    import faust\n")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    for layer in LAYERS[1:]:
        (tmp_path / layer).mkdir()
    assert len(violations()) == 2


def test_no_module_reaches_another_folders_module_globals():
    assert global_violations() == []


def test_the_runtime_is_constructed_in_one_place():
    assert {site.split(":")[0] for site in construction_sites()} == {RUNTIME_HOME}


def test_the_checker_sees_globals_reached_across_folders(tmp_path):
    """Today's pattern before agents/runtime.py: views importing the agent module's objects."""
    for layer in LAYERS[1:]:
        (tmp_path / layer).mkdir()
    files = {
        "app/__init__.py": "import faust\nsettings = load()\napp = faust.App('x')\nlog = get()\n",
        "app/topics.py": "from app import app\nmarkers_topic = app.topic('m')\n",
        "tables/tracker.py": "from app import app\ntracker_state = app.Table('t')\nINDEX = 1\n",
        "agents/track_markers.py": (
            "from app import app, settings\nfrom app.topics import markers_topic\n"
            "owned = Owned()\nMAX_N = 3\nclass Owned: ...\ndef helper(): ...\n"
            "@app.agent(markers_topic)\nasync def track(stream): ...\n"),
        "agents/propose_ticks.py": "from agents.track_markers import owned\n",  # same folder
        "agents/partitions.py": "from tables.tracker import INDEX, tracker_state\n",
        "web/views.py": ("from agents.track_markers import owned, Owned, helper, MAX_N\n"
                         "from app import app, settings, log\n"
                         "def f():\n    from agents.track_markers import track\n"),
        "web/api.py": "import agents.track_markers as tm\nfrom agents import track_markers\n"
                      "x = tm.owned, tm.helper, track_markers.owned\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    found = sorted(v.split(" (")[0] for v in global_violations(tmp_path))
    assert found == ["agents/partitions.py:1 imports tables.tracker.tracker_state",
                     "web/api.py:3 reads agents.track_markers.owned",
                     "web/api.py:3 reads agents.track_markers.owned",
                     "web/views.py:1 imports agents.track_markers.owned",
                     "web/views.py:2 imports app.log",
                     "web/views.py:4 imports agents.track_markers.track"]


def test_import_kmq_loads_no_service_or_optional_extra_code():
    code = ("import sys, kmq; kmq.Client; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('faust', 'mode', 'pyspark', 'app', 'agents', 'tables', 'web', 'aiokafka')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd="/")
    assert out.stdout.strip() == "[]"
