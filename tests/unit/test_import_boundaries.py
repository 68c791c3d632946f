"""Dependencies point one way: kmq <- app <- tables <- agents <- web (README, Layout).

Checked statically over every module, lazy imports (inside functions) included, so an
import that only runs on some path cannot slip through. ``bench/`` and ``tests/`` may use
anything.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ["kmq", "app", "tables", "agents", "web"]  # each may import only those before it
SERVICE = set(LAYERS[1:])
OPTIONAL = {"faust", "mode", "aiokafka", "pyspark", "pyarrow", "pandas", "rocksdict", "prometheus_client"}
# Inside kmq: the SDK proper never reaches the dev tooling, the CLI or the Spark extra.
SDK_FORBIDDEN = ("kmq.dev", "kmq.cli", "kmq.spark")


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


def test_import_kmq_loads_no_service_or_optional_extra_code():
    code = ("import sys, kmq; kmq.Client; "
            "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('faust', 'mode', 'pyspark', 'app', 'agents', 'tables', 'web', 'aiokafka')); print(bad)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd="/")
    assert out.stdout.strip() == "[]"
