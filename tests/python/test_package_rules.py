"""Rules of the Python package that no single module test sees (Note [One torch package] in
accgraph/torch/_runtime.py), checked on the installed package's source with an AST walk:

- a module uses only the public names of another accgraph module (no ``mod._name``, no ``from
  accgraph.x import _name``; private modules themselves may be imported), and only the modules
  that wrap the extension reach its private entry points;
- no module decides anything by an error's message text (``"..." in str(e)``, ``re.search(...,
  e.message)``): C++ errors carry their reason as data (``Error.reason``);
- the old import paths accgraph.torch_trace and accgraph.torch_distributed still work, with a
  DeprecationWarning, and give the same objects.

The checkers are tested on small sources too, so that a checker that finds nothing cannot pass
for a clean package."""

from __future__ import annotations

import ast
import importlib
import pathlib
import subprocess
import sys
import warnings
from typing import Dict, List, Optional, Set

import pytest

import accgraph

PACKAGE = pathlib.Path(accgraph.__file__).parent
# The modules that wrap the extension accgraph._accgraph: they alone may use its private names.
EXTENSION = "accgraph._accgraph"
EXTENSION_WRAPPERS = {"accgraph", "accgraph._default_stream", "accgraph._native"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def package_sources(root: pathlib.Path = PACKAGE) -> Dict[str, str]:
    """Dotted module name -> source of every .py file under `root` (the package accgraph)."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(["accgraph"] + parts)] = path.read_text()
    return out


class _PrivateUses(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, modules: Set[str]) -> None:
        self.module = module
        self.package = module if is_package else module.rsplit(".", 1)[0]
        self.modules = modules
        self.aliases: Dict[str, str] = {}  # local name -> accgraph module
        self.found: List[str] = []

    def _absolute(self, node: ast.ImportFrom) -> Optional[str]:
        if node.level == 0:
            return node.module
        base = self.package.split(".")
        if node.level > 1:
            base = base[:-(node.level - 1)]
        return ".".join(base + ([node.module] if node.module else []))

    def _check(self, owner: str, name: str, node: ast.AST) -> None:
        if f"{owner}.{name}" in self.modules or not _is_private(name) or owner == self.module:
            return
        if owner == EXTENSION and self.module in EXTENSION_WRAPPERS:
            return
        self.found.append(f"{self.module}:{node.lineno}: {owner}.{name}")

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name.split(".")[0] != "accgraph":
                continue
            if alias.asname:
                self.aliases[alias.asname] = alias.name
            else:
                self.aliases["accgraph"] = "accgraph"

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        owner = self._absolute(node)
        if owner is None or owner.split(".")[0] != "accgraph":
            return
        for alias in node.names:
            self._check(owner, alias.name, node)
            if f"{owner}.{alias.name}" in self.modules:
                self.aliases[alias.asname or alias.name] = f"{owner}.{alias.name}"

    def _resolve(self, node: ast.AST) -> Optional[str]:
        """The accgraph module `node` names, if it names one."""
        if isinstance(node, ast.Name):
            return self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            owner = self._resolve(node.value)
            if owner is not None and f"{owner}.{node.attr}" in self.modules:
                return f"{owner}.{node.attr}"
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        owner = self._resolve(node.value)
        if owner is not None:
            self._check(owner, node.attr, node)
        self.generic_visit(node)


def private_uses(sources: Dict[str, str], packages: Set[str]) -> List[str]:
    """`module:line: owner._name` for every use of another accgraph module's private name."""
    modules = set(sources) | {EXTENSION}
    found = []
    for module, source in sources.items():
        visitor = _PrivateUses(module, module in packages, modules)
        visitor.visit(ast.parse(source))
        found += visitor.found
    return found


_TEXT_ATTRIBUTES = {"message", "args", "strerror"}
_MATCHERS = {"search", "match", "fullmatch", "sub", "subn", "findall", "finditer", "split"}
_TEXT_TESTS = {"startswith", "endswith", "find", "rfind", "index", "rindex", "count"}


def _is_error_annotation(annotation: Optional[ast.AST]) -> bool:
    name = (annotation.id if isinstance(annotation, ast.Name) else
            annotation.attr if isinstance(annotation, ast.Attribute) else "")
    return name.endswith(("Error", "Exception"))


class _MessageMatching(ast.NodeVisitor):
    """Per function: names bound to an exception (`except ... as e`, a parameter annotated as an
    error), the text taken from them (str(e), repr(e), e.message, e.args, and names assigned
    from those), and any test of that text (a comparison, a regular expression, startswith)."""

    def __init__(self, module: str) -> None:
        self.module = module
        self.found: List[str] = []

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        errors = {a.arg for a in node.args.args + node.args.kwonlyargs
                  if _is_error_annotation(a.annotation)}
        errors |= {h.name for h in ast.walk(node) if isinstance(h, ast.ExceptHandler) and h.name}
        texts: Set[str] = set()
        for _ in range(3):  # names assigned from names assigned from an error's text
            for sub in ast.walk(node):
                if isinstance(sub, ast.Assign) and self._text(sub.value, errors, texts):
                    texts |= {t.id for t in sub.targets if isinstance(t, ast.Name)}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Compare) and any(
                    self._text(x, errors, texts) for x in [sub.left] + sub.comparators):
                self.found.append(f"{self.module}:{sub.lineno}: compares an error's text")
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                if sub.func.attr in _MATCHERS and any(self._text(a, errors, texts)
                                                      for a in sub.args):
                    self.found.append(f"{self.module}:{sub.lineno}: matches an error's text")
                elif sub.func.attr in _TEXT_TESTS and self._text(sub.func.value, errors, texts):
                    self.found.append(f"{self.module}:{sub.lineno}: searches an error's text")

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def _text(self, node: ast.AST, errors: Set[str], texts: Set[str]) -> bool:
        if isinstance(node, ast.Name):
            return node.id in texts
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                node.func.id in ("str", "repr", "format") and node.args:
            arg = node.args[0]
            return (isinstance(arg, ast.Name) and arg.id in errors) or self._text(arg, errors,
                                                                                   texts)
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id in errors:
                return node.attr in _TEXT_ATTRIBUTES
            return self._text(node.value, errors, texts)  # e.message.lower
        if isinstance(node, ast.Subscript):
            return self._text(node.value, errors, texts)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            return self._text(node.func.value, errors, texts)  # str(e).lower()
        if isinstance(node, ast.IfExp):
            return self._text(node.body, errors, texts) or self._text(node.orelse, errors, texts)
        return False


def message_matching(sources: Dict[str, str]) -> List[str]:
    found = []
    for module, source in sources.items():
        visitor = _MessageMatching(module)
        visitor.visit(ast.parse(source))
        found += visitor.found
    return found


def _packages(sources: Dict[str, str]) -> Set[str]:
    return {m for m in sources if (PACKAGE / pathlib.Path(*m.split(".")[1:]) / "__init__.py")
            .exists() or m == "accgraph"}


# --- the package -------------------------------------------------------------------------------


def test_the_package_holds_the_torch_modules():
    sources = package_sources()
    assert {"accgraph.torch", "accgraph.torch._runtime", "accgraph.torch._trace",
            "accgraph.torch._distributed", "accgraph.torch._modules"} <= set(sources)
    # annotate_trace, split by concern: its package is the face, its modules the parts.
    assert {"accgraph.torch._trace._sources", "accgraph.torch._trace._kineto",
            "accgraph.torch._trace._match", "accgraph.torch._trace._annotate",
            "accgraph.torch._trace._output"} <= set(sources)
    assert "accgraph.torch._trace" in _packages(sources)


def test_no_module_uses_another_modules_private_names():
    sources = package_sources()
    assert private_uses(sources, _packages(sources)) == []


def test_no_module_decides_by_an_errors_message_text():
    assert message_matching(package_sources()) == []


# --- the checkers find what they look for ------------------------------------------------------


def test_the_private_name_checker_finds_each_form():
    sources = {
        "accgraph": "",
        "accgraph.torch": "from .._accgraph import _OwnerReplay\nfrom . import _runtime\n"
                          "from ._runtime import load_torch\n",
        "accgraph.torch._runtime": "def load_torch(): pass\ndef _hidden(): pass\n",
        "accgraph.torch.__main__": "import accgraph\nimport accgraph.torch as at\n"
                                   "at._uninstrument(force=True)\n"
                                   "accgraph._accgraph._check_output_file('x')\n"
                                   "accgraph.torch._runtime._hidden()\n"
                                   "accgraph.torch._runtime.load_torch()\n",
        "accgraph.torch_distributed": "from . import torch as t\nt._load_torch()\n",
        "accgraph._default_stream": "from . import _accgraph\n"
                                    "_accgraph._set_default_stream_provider(None)\n",
    }
    found = private_uses(sources, {"accgraph", "accgraph.torch"})
    assert [f.split(": ", 1)[1] for f in found] == [
        "accgraph._accgraph._OwnerReplay",          # a from-import of the extension's
        "accgraph.torch._uninstrument",             # through an alias
        "accgraph._accgraph._check_output_file",    # through the package
        "accgraph.torch._runtime._hidden",          # a private name of a private module
        "accgraph.torch._load_torch",               # a sibling module's
    ], found


def test_the_message_checker_finds_each_form():
    source = '''
import re
def reason_of(error: Error) -> str:
    message = str(error)
    if "not told about" in message:
        return "fork"
    return re.sub(r"\\d+", "N", message)

def handler():
    try:
        pass
    except accgraph.Error as e:
        if e.message.startswith("begin"):
            pass
        if re.search("ring", e.args[0]):
            pass
        text = e.args[1] if len(e.args) > 1 else str(e)  # display only: fine
        print(f"failed: {text}", len(e.args) > 1)
'''
    found = message_matching({"accgraph.x": source})
    assert [f.split(": ", 1)[0] for f in found] == [
        "accgraph.x:5", "accgraph.x:7", "accgraph.x:13", "accgraph.x:15"], found


# --- the old import paths ----------------------------------------------------------------------


@pytest.mark.parametrize("old, names", [
    ("accgraph.torch_trace", ["annotate_trace"]),
    ("accgraph.torch_distributed", ["collective_metadata", "measure_host_clock_offset"]),
])
def test_the_old_import_paths_warn_and_give_the_same_objects(old, names):
    import accgraph.torch

    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated and goes in accgraph "
                                                r"0\.3: use accgraph\.torch\."):
        module = importlib.import_module(old)
    assert module.__all__ == names
    for name in names:
        assert getattr(module, name) is getattr(accgraph.torch, name), name


def test_importing_the_package_imports_neither_torch_nor_an_old_path():
    code = ("import sys, warnings\nwarnings.simplefilter('error')\nimport accgraph.torch\n"
            "assert 'torch' not in sys.modules\n"
            "old = {'accgraph.torch_trace', 'accgraph.torch_distributed'}\n"
            "assert not old & set(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_no_module_getattr_hook_is_left():
    import accgraph.torch

    assert "__getattr__" not in vars(accgraph.torch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert accgraph.torch.annotate_trace.__module__ == "accgraph.torch._trace"


# Audit D05: 0.2's constants of accgraph.torch_trace stay, each with a DeprecationWarning saying
# where the knowledge went, attributed to the user's line.
@pytest.mark.parametrize("name, value", [("CATEGORY", "gpu_user_annotation"),
                                         ("RECORD_KERNEL", "marker_record_kernel"),
                                         ("END_KERNEL", "marker_end_kernel")])
def test_the_old_modules_constants_stay_with_a_warning(name, value):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import accgraph.torch_trace
    with pytest.warns(DeprecationWarning, match=rf"accgraph.torch_trace.{name} is deprecated and "
                                                r"goes in accgraph 0\.3: .*; write its value") as w:
        exec(f"from accgraph.torch_trace import {name} as got", {}, scope := {})
    assert scope["got"] == value
    assert w[0].filename == "<string>"
    with pytest.raises(AttributeError, match=r"has no attribute 'NOPE': it re-exports "
                                             r"annotate_trace only"):
        accgraph.torch_trace.NOPE
