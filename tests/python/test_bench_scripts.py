"""Nothing under bench/ reaches accgraph's private names (issue 44: bench_torch.py called the
removed accgraph.torch._require_backend() and CI never ran it that far)."""

from __future__ import annotations

import ast
import pathlib
from typing import List, Tuple

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "bench"


# --- private names -------------------------------------------------------------------------------


def is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def private_uses(source: str) -> List[Tuple[int, str]]:
    """(line, what) for each reach into accgraph's private names in `source`: a private module
    imported (accgraph._x, accgraph.torch._y), a private name imported from an accgraph module,
    or a private attribute of accgraph or of a module of it (accgraph.torch._z), also through
    an alias (import accgraph.torch as t; from accgraph import torch)."""
    tree = ast.parse(source)
    modules = {"accgraph"}  # local names bound to accgraph or one of its modules
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "accgraph":
                    continue
                if any(is_private(part) for part in alias.name.split(".")):
                    found.append((node.lineno, f"import {alias.name}"))
                modules.add(alias.asname or "accgraph")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "accgraph":
                continue
            if any(is_private(part) for part in node.module.split(".")):
                found.append((node.lineno, f"from {node.module} import ..."))
            for alias in node.names:
                if is_private(alias.name):
                    found.append((node.lineno, f"from {node.module} import {alias.name}"))
                elif alias.name in ("torch", "testing"):  # modules of accgraph
                    modules.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        chain = [node.attr]
        value = node.value
        while isinstance(value, ast.Attribute):
            chain.append(value.attr)
            value = value.value
        if isinstance(value, ast.Name) and value.id in modules and is_private(node.attr):
            found.append((node.lineno, ".".join([value.id, *reversed(chain)])))
    return sorted(set(found))


def test_private_name_check_finds_each_form():
    source = ("import accgraph\nimport accgraph.torch as at\nfrom accgraph import torch as t\n"
              "import accgraph._accgraph\nfrom accgraph.torch._runtime import BACKEND\n"
              "from accgraph.torch import _lock, load_torch\n"
              "accgraph.torch._require_backend()\nat._installed\nt._runtime.TORCH\n"
              "accgraph.torch.load_torch()\nx.__version__\nobj._other\n")
    assert [line for line, _ in private_uses(source)] == [4, 5, 6, 7, 8, 9]


@pytest.mark.parametrize("script", sorted(BENCH.rglob("*.py")),
                         ids=lambda p: p.relative_to(BENCH).as_posix())
def test_bench_reaches_no_private_name(script):
    assert private_uses(script.read_text()) == [], script
