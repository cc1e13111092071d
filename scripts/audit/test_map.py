"""Which test of the regular suites (tests/: pytest, doctest, the CMake-driven CLI tests) covers
each row of the 2026-11-28 reliability audit, from the row ids the tests cite ("audit
2026-11-28 A21", "# A03"): an id in a test's body, or in the comments just above it, counts for
that test. Prints `ID | test, test...` for all 139 rows, then the rows no test cites; exits 1 when
there is one.

    python3 scripts/audit/test_map.py            # the table (scripts/audit/README.md holds it)
    python3 scripts/audit/test_map.py --missing  # only the rows without a test"""

from __future__ import annotations

import pathlib
import re
import sys
from typing import Dict, List

ROOT = pathlib.Path(__file__).resolve().parents[2]
ID = re.compile(r"\b([A-F][0-9]{2}[bc]?)\b")


def rows() -> List[str]:
    """The audit's 139 row ids (E01-E09 is one table row of nine cases)."""
    ids = [f"A{n:02d}" for n in range(1, 46) if n not in (28, 29)]
    ids += [f"B{n:02d}" for n in range(1, 21)]
    ids[ids.index("B09") + 1:ids.index("B09") + 1] = ["B09b", "B09c"]
    ids += [f"C{n:02d}" for n in range(1, 19)] + [f"D{n:02d}" for n in range(1, 12)]
    ids += [f"E{n:02d}" for n in range(1, 36) if n != 19] + [f"F{n:02d}" for n in range(1, 12)]
    return ids


def python_tests(path: pathlib.Path, found: Dict[str, List[str]]) -> None:
    pending: set = set()
    current = None
    for line in path.read_text(errors="replace").splitlines():
        top = line[:1] not in ("", " ", "\t")
        if top and re.match(r"(async\s+)?def test_\w+|class Test\w+", line):
            current = f"{path.relative_to(ROOT)}::{re.split(r'[ (:]', line.split()[1])[0]}"
            for i in pending:
                found.setdefault(i, []).append(current)
            pending = set()
        elif top:
            current = None  # a top-level comment, decorator or statement ends the test
        if "#" in line or '"""' in line or current is not None:
            ids = set(ID.findall(line if current is not None else line[line.find("#"):]))
            if current is not None:
                for i in ids:
                    if current not in found.setdefault(i, []):
                        found[i].append(current)
            else:
                pending |= ids


def cmake_tests(path: pathlib.Path, found: Dict[str, List[str]]) -> None:
    pending: set = set()
    text = path.read_text(errors="replace")
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#"):
            pending |= set(ID.findall(stripped))
            continue
        m = re.match(r"(\w*test)\s*\(\s*(?:NAME\s+)?([\w$.{}-]+)", stripped)
        if m:
            prefix = {"accgraph_cli_test": "cli_", "vulkan_cli_test": "vulkan_cli_",
                      "plugin_path_backends_test": "plugins_cli_",
                      "accgraph_plugin_cli_test": "plugins_cli_"}.get(m.group(1), "")
            for i in pending:
                found.setdefault(i, []).append(
                    f"{path.relative_to(ROOT)}: ctest {prefix}{m.group(2)}")
            pending = set()
        elif not stripped:
            pending = set()


def cpp_tests(path: pathlib.Path, found: Dict[str, List[str]]) -> None:
    pending: set = set()
    current = None
    for line in path.read_text(errors="replace").splitlines():
        m = re.match(r"\s*TEST_CASE\(\s*\"([^\"]*)\"", line)
        if m:
            current = f"{path.relative_to(ROOT)}: TEST_CASE \"{m.group(1)}\""
            for i in pending:
                found.setdefault(i, []).append(current)
            pending = set()
            continue
        if line.startswith("}"):
            current = None
            continue
        if "//" in line:
            ids = set(ID.findall(line[line.find("//"):]))
            if current is None:
                pending |= ids
            else:
                for i in ids:
                    if current not in found.setdefault(i, []):
                        found[i].append(current)


def scan() -> Dict[str, List[str]]:
    found: Dict[str, List[str]] = {}
    tests = ROOT / "tests"
    for path in sorted(tests.rglob("test_*.py")):
        python_tests(path, found)
    for path in sorted(tests.rglob("CMakeLists.txt")):
        cmake_tests(path, found)
    for path in sorted(tests.rglob("*.cpp")):
        cpp_tests(path, found)
    return found


def main() -> int:
    found = scan()
    missing = [r for r in rows() if not found.get(r)]
    if "--missing" not in sys.argv[1:]:
        for r in rows():
            print(f"| {r} | {', '.join(sorted(found.get(r, []))) or '**none**'} |")
    print(f"rows without a test: {len(missing)} of {len(rows())}"
          f"{': ' + ' '.join(missing) if missing else ''}")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
