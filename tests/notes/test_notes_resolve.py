#!/usr/bin/env python3
"""notes_resolve's own tests: each kind of finding is planted in a small tree and the check must
fail naming its file, line and kind; a clean tree must pass, so a checker that finds nothing
cannot pass. Needs only python3 (git too for the one case that lists files with git ls-files).

The planted texts are built from pieces (note(), SHARED, MACHINE) so that this file itself cites
no Note and names no path that notes_resolve would then check in the real tree.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import notes_resolve  # noqa: E402

SHARED = "sha" + "red/reviews/old-review.md"
MACHINE = "/" + "root/.env-file"


def note(name):
    return "Note " + "[" + name + "]"


# A tree in which everything resolves: definitions in each comment style, citations bare, with
# "in FILE" (backticked, by suffix, by folder, wrapped onto the next line) and with "(FILE)", a
# wrapped name, and comments naming existing paths and patterns that name no file.
CLEAN = {
    "include/lib/api.hpp": (
        "// The public API.\n"
        f"// {note('Pool sharing')}: graphs share a pool when they say so.\n"
        "//\n"
        f"/// {note('Whole line')}\n"
        "/// A name alone on its line defines it too.\n"
        "// - (core.gates) [core] " + note("Capability gates") + ": rule list items define.\n"
        "int api();  // version 1.2.3, 0x1A2B, an H100, an L40, an H20 and sm_90 are no history\n"),
    "core/pool.cpp": (
        "// Pools.\n"
        f"// Shares them ({note('Pool sharing')} in `lib/api.hpp`), see\n"
        f"// {note('Pool sharing')} (include/lib/api.hpp) and {note('Whole line')}.\n"
        f"// {note('Capability gates')} in include/lib, a folder.\n"
        f"// And {note('Pool sharing')} in\n"
        "//   api.hpp, wrapped. Its tests: tests/unit/test_pool.cpp, tests/unit/, and\n"
        "// backends/<name>/markers.cpp, bench/*.json and tests/... are patterns, not files.\n"
        "int pool = 0;  // the built binary tests/unit/pool_test names no source file\n"),
    "core/wrapped.hpp": (
        "// " + "Note " + "[Wrapped\n"
        "// name]: defined over two lines, and cited over two: (" + "Note " + "[Wrapped\n"
        "//   name] in core/wrapped.hpp).\n"),
    "scripts/tool.py": (
        '"""A tool (' + note("Pool sharing") + ' in include/lib/api.hpp)."""\n'
        f"# {note('Script note')}: scripts define Notes with #.\n"
        "x = 1  # " + note("Script note") + "\n"),
    "tests/unit/test_pool.cpp": (
        "// The pool's tests (audit row A03, 2026-11-25, issue 21: tests may name history).\n"),
    "README.md": (
        "# lib\n\nPools: " + note("Pool sharing") + " in `include/lib/api.hpp`, tested by\n"
        "`tests/unit/test_pool.cpp`. A pattern: " + note("...") + ".\n"),
}


class PlantedTree(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="notes_resolve_")
        self.addCleanup(shutil.rmtree, self.root)
        self.write(CLEAN)

    def write(self, files):
        for path, text in files.items():
            full = os.path.join(self.root, path)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "w", encoding="utf-8") as f:
                f.write(text)

    def findings(self):
        return [f"{p}:{line}: {kind}: {msg}" for p, line, kind, msg in
                notes_resolve.check(self.root)]

    def assert_only(self, where, kind, *words):
        """The check fails with exactly one finding, at `where` (file:line), of `kind`, whose
        message holds each of `words`."""
        found = self.findings()
        self.assertEqual(len(found), 1, "\n".join(found))
        self.assertTrue(found[0].startswith(f"{where}: {kind}: "), found[0])
        for word in words:
            self.assertIn(word, found[0])

    def test_clean_tree_passes(self):
        self.assertEqual(self.findings(), [])
        self.assertEqual(notes_resolve.main(["--root", self.root]), 0)

    def test_dangling_note(self):
        self.write({"core/new.cpp": "// First line.\n// See " + note("Gone away") + ".\n"})
        self.assert_only("core/new.cpp:2", "dangling-note", "Gone away", "defined nowhere")
        self.assertEqual(notes_resolve.main(["--root", self.root]), 1)

    def test_dangling_note_in_markdown(self):
        self.write({"bench/README.md": "# bench\n\nAs " + note("Detached") + " says.\n"})
        self.assert_only("bench/README.md:3", "dangling-note", "Detached")

    def test_wrapped_name_dangling(self):
        self.write({"core/new.cpp": "// x\n// (" + note("Two").replace("]", "") +
                    "\n//   lines]) is cited.\n"})
        self.assert_only("core/new.cpp:2", "dangling-note", "Two lines")

    def test_name_wrapped_in_a_string_literal(self):
        # A binding's docstring, split over two C++ string literals.
        self.write({"bindings/b.cpp": '// x\nm.def("f", "doc (' + note("Gone").replace("]", " ")
                    + '"\n        "wrapped]) more");\n'})
        self.assert_only("bindings/b.cpp:2", "dangling-note", "Gone wrapped")

    def test_in_file_that_lacks_the_note(self):
        self.write({"core/new.cpp": "// x\n// " + note("Pool sharing") + " in core/pool.cpp.\n"})
        self.assert_only("core/new.cpp:2", "wrong-file", "core/pool.cpp", "include/lib/api.hpp")

    def test_parenthesised_file_that_lacks_the_note(self):
        self.write({"core/new.cpp": "// x\n// " + note("Pool sharing") + " (pool.cpp): y\n"})
        self.assert_only("core/new.cpp:2", "wrong-file", "pool.cpp", "include/lib/api.hpp")

    def test_wrapped_file_that_lacks_the_note(self):
        self.write({"core/new.cpp": "// x\n// (" + note("Pool sharing") + " in\n"
                    "//   `core/wrapped.hpp`) wraps.\n"})
        self.assert_only("core/new.cpp:2", "wrong-file", "core/wrapped.hpp")

    def test_in_file_that_does_not_exist(self):
        self.write({"README.md": CLEAN["README.md"] + note("Pool sharing") +
                    " in `lib/pool_table.hpp`.\n"})
        self.assert_only("README.md:5", "wrong-file", "lib/pool_table.hpp", "no file")

    def test_missing_repository_path(self):
        self.write({"tests/unit/test_pool.cpp": "// x\nint y;  // as bench/gone.cpp does\n"})
        self.assert_only("tests/unit/test_pool.cpp:2", "missing-path", "bench/gone.cpp")

    def test_missing_folder(self):
        self.write({"scripts/run.sh": "#!/bin/sh\n# writes to examples/gone/\n"})
        self.assert_only("scripts/run.sh:2", "missing-path", "examples/gone/")

    def test_path_outside_the_repository(self):
        self.write({"backends/x/x.cpp": "// x\n// measured in " + SHARED + " once\n"})
        self.assert_only("backends/x/x.cpp:2", "missing-path", SHARED, "outside the repository")

    def test_machine_path(self):
        self.write({"scripts/README.md": "# s\n\nFirst `source " + MACHINE + "`.\n"})
        self.assert_only("scripts/README.md:3", "missing-path", MACHINE, "one machine")

    def test_code_is_not_a_comment(self):
        # A path in C++ code (a string literal) is the program's business, not a reference.
        self.write({"core/io.cpp": '// x\nconst char* p = "bench/made_at_run_time.json";\n'})
        self.assertEqual(self.findings(), [])

    def test_history_in_library_code(self):
        for text, what in (("as measured on 2026-11-28", "2026-11-28"),
                           ("asked by issue 21", "issue 21"),
                           ("(audit 3.13)", "audit"),
                           ("rows X03 and X09", "X03")):
            with self.subTest(text=text):
                self.write({"registry/r.cpp": f"// x\nint r;  // {text}\n"})
                self.assert_only("registry/r.cpp:2", "history", what, "bench/README.md")

    def test_history_in_installed_header(self):
        self.write({"include/lib/g.hpp": "// x\n  // (audit 2026-11-25, a rule broken)\n"})
        self.assert_only("include/lib/g.hpp:2", "history", "bench/README.md")

    def test_listed_by_git(self):
        """With git, the files git lists count: tracked ones that exist and untracked ones it
        does not ignore (a copied working tree whose index lags behind, as on the GPU machines);
        an ignored file (a build tree) or a tracked file deleted from disk resolves no path."""
        if shutil.which("git") is None:
            self.skipTest("git is not installed")
        git = ["git", "-C", self.root, "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "-A"], check=True)
        self.assertEqual(self.findings(), [])
        self.write({".gitignore": "bench/out/\n", "bench/out/ignored.cpp": "// x\n",
                    "bench/untracked.cpp": "// x\n", "bench/deleted.cpp": "// x\n",
                    "scripts/run.sh": "#!/bin/sh\n# see bench/untracked.cpp\n"})
        subprocess.run(git + ["add", "scripts/run.sh", "bench/deleted.cpp"], check=True)
        self.assertEqual(self.findings(), [])
        self.write({"scripts/run.sh": "#!/bin/sh\n# see bench/out/ignored.cpp\n"})
        self.assert_only("scripts/run.sh:2", "missing-path", "bench/out/ignored.cpp")
        os.remove(os.path.join(self.root, "bench", "deleted.cpp"))
        self.write({"scripts/run.sh": "#!/bin/sh\n# see bench/deleted.cpp\n"})
        self.assert_only("scripts/run.sh:2", "missing-path", "bench/deleted.cpp")

if __name__ == "__main__":
    unittest.main()
