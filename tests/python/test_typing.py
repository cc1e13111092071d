"""Typing and docs: the installed package ships py.typed and stubs generated from the extension
that match it; every public name has a docstring."""

import ast
import importlib.util
import inspect
import pathlib
import subprocess
import sys

import pytest

import accgraph
from accgraph import _accgraph

PACKAGE = pathlib.Path(accgraph.__file__).parent
STUB = PACKAGE / "_accgraph.pyi"
# The stub entries stubgen cannot derive from the extension (passed by the wheel's install step).
PATTERNS = pathlib.Path(__file__).resolve().parents[2] / "bindings/python/stubgen_patterns.txt"
installed = STUB.exists()
needs_wheel = pytest.mark.skipif(
    not installed, reason="running from a build tree: stubs come with the installed wheel")


def test_py_typed_is_shipped():
    assert (PACKAGE / "py.typed").exists()


@needs_wheel
def test_stub_declares_every_public_name_of_the_extension():
    tree = ast.parse(STUB.read_text())
    declared = {node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef))}
    public = {name for name in dir(_accgraph) if not name.startswith("_")}
    assert public <= declared, public - declared


@needs_wheel
@pytest.mark.skipif(importlib.util.find_spec("nanobind") is None, reason="nanobind not installed")
def test_stub_is_what_stubgen_makes_of_this_extension(tmp_path):
    out = tmp_path / "_accgraph.pyi"
    subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-m", "accgraph._accgraph",
                    "-p", str(PATTERNS), "-o", str(out)], check=True)
    assert out.read_text() == STUB.read_text()


@needs_wheel
def test_stub_gives_graph_replay_its_typed_signature():
    # Graph.replay is a plain CPython method: its signature comes from stubgen_patterns.txt.
    assert "def replay(self, stream: Stream | None = None) -> None:" in STUB.read_text()


def _public_members():
    for name in accgraph.__all__:
        obj = getattr(accgraph, name)
        yield name, obj
        if inspect.isclass(obj) and not issubclass(obj, BaseException):
            for member, value in vars(obj).items():
                if member.startswith("_") and member not in ("__init__", "__enter__", "__exit__",
                                                             "__call__", "__dlpack__"):
                    continue
                yield f"{name}.{member}", value


def test_every_public_name_has_a_docstring():
    missing = [name for name, obj in _public_members()
               if not (getattr(obj, "__doc__", None) or "").strip()]
    assert missing == []


def test_all_lists_only_existing_names():
    for name in accgraph.__all__:
        assert hasattr(accgraph, name), name
