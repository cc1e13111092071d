#!/usr/bin/env python3
"""notes_resolve: the tree's references resolve inside the repository.

Checks every tracked text file of the library, bindings, tools, tests, bench, examples, scripts,
cmake and docs (and the root README.md and CMakeLists.txt) for:
  dangling-note   a Note is cited but no file of the repository defines it;
  wrong-file      a citation names the file (or folder) that holds its Note, "... in FILE" or
                  "... (FILE)", and that file does not define it;
  missing-path    a comment names a repository path (backends/..., tests/..., accgraph/...)
                  that no tracked file or folder has, or a path outside the repository
                  (shared/..., /root/..., /work/..., /home/...);
  history         library code (include, core, registry, timing, backends, bindings, tools,
                  support, cmake) carries a date, an issue number or an audit id in a comment.

A definition is the Note's name opening a comment line, followed by ":" or the end of the line;
every other occurrence is a citation. A name or a file wrapped onto the next comment line is
joined to it first. Run from anywhere: python3 tests/notes/notes_resolve.py [--root DIR]. Exit 0
when everything resolves, 1 with one "file:line: kind: what to do" line per finding otherwise.
Needs only python3 (and git, to list the tracked files; without a git checkout every file under
--root is read). README.md, "Testing", says what it checks; tests/notes/test_notes_resolve.py
plants each kind of finding.
"""

import argparse
import os
import re
import subprocess
import sys

SCANNED_DIRS = ("include", "core", "registry", "timing", "backends", "bindings", "tools",
                "support", "cmake", "tests", "bench", "examples", "scripts", "docs")
SCANNED_ROOT_FILES = ("README.md", "CMakeLists.txt")
LIBRARY_DIRS = ("include", "core", "registry", "timing", "backends", "bindings", "tools",
                "support", "cmake")
# Folders a path in a comment may start with: the repository's top-level folders, plus shared/,
# which is outside it.
PATH_ROOTS = SCANNED_DIRS + ("shared",)
OUTSIDE_ROOTS = ("shared",)

C_LIKE = (".cpp", ".hpp", ".h", ".cu", ".c", ".cc", ".comp", ".glsl", ".vert", ".frag", ".in")
HASH_LIKE = (".py", ".pyi", ".cmake", ".sh", ".toml", ".cfg", ".txt")
PROSE = (".md", ".rst")
# What a file named in a citation may end with, when it names no folder.
FILE_SUFFIXES = C_LIKE + HASH_LIKE + PROSE + (".json",)

NOTE = re.compile(r"Note \[([^\]\n]+)\]")
# What may stand before a Note's name on the line that defines it.
# A rule list item may define one too: "- (core.gates) [core] Note [Capability gates]: ...".
DEFINITION_LEAD = re.compile(r"^\s*(?://+[!<]?|#+|/?\*+)?\s*"
                             r"(?:-\s+(?:\([\w.-]+\)\s*)?(?:\[\w+\]\s*)?)?$")
# What is dropped from the start of a continuation line before it is joined.
CONTINUATION_LEAD = re.compile(r"^\s*(?:///?<?|//!|#+|\*(?!/)|/\*+)?\s*")
PATH_CHARS = r"[A-Za-z0-9_.+/-]"
# "Note [X] in FILE", "Note [X] (FILE)", "Note [X] (in FILE)", with or without backticks.
CITED_FILE = re.compile(r"^\s*,?\s*(?:\(\s*(?:in\s+)?|in\s+)`?(" + PATH_CHARS + r"+)`?")
REPO_PATH = re.compile(r"(?<![A-Za-z0-9_.+/~$:-])((?:" + "|".join(PATH_ROOTS) + r")/"
                       + PATH_CHARS + r"*)")
MACHINE_PATH = re.compile(r"(?<![A-Za-z0-9_.+/~$-])(/(?:root|work|home)/" + PATH_CHARS + r"*)")
# A path that is a pattern, not a file: backends/<name>/, tests/{a,b}, bench/*.json, tests/...
PLACEHOLDER_NEXT = ("<", "{", "*", "…", "$", "%")

HISTORY = (
    (re.compile(r"\b20\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])\b"), "a date"),
    (re.compile(r"\bissues?\s+#?\d+", re.IGNORECASE), "an issue number"),
    (re.compile(r"\baudit(?:s|ed|'s)?\b", re.IGNORECASE), "an audit reference"),
    # A capital and two digits, but not an accelerator's model name (an L40, an A40, an H20).
    (re.compile(r"(?<![A-Za-z0-9_])(?!(?:A10|A16|A30|A40|H20|L20|L40|K80|M60|P40)\b)[A-Z]\d\d"
                r"(?![A-Za-z0-9_])"), "an audit row id"),
)
HISTORY_ADVICE = ("library code carries no history: keep the reason, move the figure to "
                  "bench/README.md or into the test that pins it, and cite that")


def tracked_files(root):
    """The repository's files: those git tracks that exist, and those it does not ignore (a
    copy of a working tree whose index lags behind its files, as the GPU machines get, has new
    files git does not track yet); or every file under root without git."""
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], check=True, capture_output=True).stdout
        if out:
            listed = out.decode("utf-8", "surrogateescape").split("\0")
            return sorted({p for p in listed if p and os.path.isfile(os.path.join(root, p))})
    except (OSError, subprocess.CalledProcessError):
        pass
    # No checkout: the scanned folders and the root's files, so that build trees, venvs and
    # caches beside the sources are not read.
    files = sorted(n for n in os.listdir(root) if os.path.isfile(os.path.join(root, n)))
    for top in SCANNED_DIRS:
        for folder, dirs, names in os.walk(os.path.join(root, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            rel = os.path.relpath(folder, root).replace(os.sep, "/")
            files += [f"{rel}/{n}" for n in sorted(names)]
    return files


def is_text(path):
    base = os.path.basename(path)
    return base == "CMakeLists.txt" or base.endswith(C_LIKE + HASH_LIKE + PROSE)


# The check and its tests spell the patterns they look for, so they are the one folder not read.
SELF = "tests/notes/"


def scanned(path):
    if path.startswith(SELF):
        return False
    return path in SCANNED_ROOT_FILES or path.split("/", 1)[0] in SCANNED_DIRS


def comment_parts(path, lines):
    """For each line, the text a reader takes as prose (a comment, a docstring, or all of it), and
    whether the whole line is prose (nothing but a comment), so that a wrap may be joined."""
    if path.endswith(PROSE):
        return [(line, True) for line in lines]
    c_like = path.endswith(C_LIKE)
    in_block = False
    in_docstring = False
    parts = []
    for line in lines:
        if c_like:
            was_in_block = in_block
            text = ""
            rest = line
            while rest:
                if in_block:
                    end = rest.find("*/")
                    text += rest if end < 0 else rest[:end]
                    if end < 0:
                        break
                    rest = rest[end + 2:]
                    in_block = False
                    continue
                line_comment = rest.find("//")
                block = rest.find("/*")
                if line_comment >= 0 and (block < 0 or line_comment < block):
                    text += rest[line_comment + 2:]
                    break
                if block < 0:
                    break
                rest = rest[block + 2:]
                in_block = True
            code = line.split("//", 1)[0].split("/*", 1)[0]
            parts.append((text, was_in_block or not code.strip()))
            continue
        quotes = line.count('"""') + line.count("'''")
        if in_docstring or quotes:
            parts.append((line, True))
        else:
            hash_at = line.find("#")
            parts.append((line[hash_at + 1:] if hash_at >= 0 else "",
                          hash_at >= 0 and not line[:hash_at].strip()))
        if quotes % 2:
            in_docstring = not in_docstring
    return parts


class Tree:
    def __init__(self, root):
        self.root = root
        self.files = tracked_files(root)
        self.file_set = set(self.files)
        self.folders = set()
        for f in self.files:
            parts = f.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                self.folders.add("/".join(parts[:i]))
        self.text = {}
        for f in self.files:
            if not is_text(f):
                continue
            try:
                with open(os.path.join(root, f), encoding="utf-8", errors="replace") as fh:
                    self.text[f] = fh.read().split("\n")
            except OSError:
                continue  # a tracked file deleted in the work tree

    def matches(self, name):
        """The tracked files a citation's FILE may mean: the path itself, a file whose path ends
        with it (kernels.cu, spi/backend.hpp), or the files of a folder of that name."""
        name = name.strip("/")
        hits = [f for f in self.files if f == name or f.endswith("/" + name)]
        if name in self.folders or any(d.endswith("/" + name) for d in self.folders):
            prefix_hits = [f for f in self.files
                           if f.startswith(name + "/") or ("/" + name + "/") in f]
            hits += prefix_hits
        return hits

    def exists(self, path):
        path = path.rstrip("/")
        return path in self.file_set or path in self.folders


def joined_lines(path, lines):
    """Each line, and the line with the next one appended when that continues it: a comment line
    (its comment lead dropped), or a string literal continued ("...Note [Default " "stream]")."""
    parts = comment_parts(path, lines)
    for i, line in enumerate(lines):
        following = ""
        if i + 1 < len(lines):
            nxt = lines[i + 1].strip()
            if parts[i + 1][1]:
                following = CONTINUATION_LEAD.sub("", lines[i + 1], count=1)
            elif nxt.startswith('"'):
                following = nxt
        yield i, line, line + " " + following


def normal(name):
    return " ".join(re.sub(r'"\s*"', "", name).split())


def find_notes(tree):
    """(definitions: name -> set of files, citations: list of (file, line, name, cited FILE))."""
    definitions = {}
    citations = []
    for path, lines in tree.text.items():
        for i, line, joined in joined_lines(path, lines):
            for m in NOTE.finditer(joined):
                if m.start() >= len(line):
                    break
                name = normal(m.group(1))
                if not name.strip(".…"):
                    continue  # "Note [...]": a pattern in prose, not a Note
                after = joined[m.end():]
                own_rest = line[m.end():] if m.end() <= len(line) else after[:0]
                ends_line = m.end() <= len(line) and not own_rest.strip()
                if m.end() > len(line):  # the name was wrapped: the line is the next one's rest
                    ends_line = not after.strip()
                if DEFINITION_LEAD.match(line[:m.start()]) and (
                        ends_line or after.lstrip().startswith(":")):
                    definitions.setdefault(name, set()).add(path)
                    continue
                if path.startswith(".") or not scanned(path):
                    continue
                cited = None
                f = CITED_FILE.match(after)
                if f:
                    candidate = f.group(1).rstrip(".,;:")
                    if "/" in candidate or candidate.endswith(FILE_SUFFIXES):
                        cited = candidate
                citations.append((path, i + 1, name, cited))
    return definitions, citations


def note_findings(tree):
    definitions, citations = find_notes(tree)
    findings = []
    for path, line, name, cited in citations:
        where = definitions.get(name)
        if not where:
            findings.append((path, line, "dangling-note",
                             f"Note [{name}] is defined nowhere in the repository: define it "
                             f"(a comment line opening with the name and a colon) or cite the "
                             f"Note that now holds the reason"))
            continue
        if cited is None:
            continue
        candidates = tree.matches(cited)
        if not candidates:
            findings.append((path, line, "wrong-file",
                             f"Note [{name}] is cited in '{cited}', which is no file or folder of "
                             f"the repository; it is defined in {', '.join(sorted(where))}: cite "
                             f"that"))
        elif not where.intersection(candidates):
            findings.append((path, line, "wrong-file",
                             f"Note [{name}] is cited in '{cited}', which does not define it; it "
                             f"is defined in {', '.join(sorted(where))}: cite that"))
    return findings


def path_findings(tree, path, lines):
    findings = []
    library = path.split("/", 1)[0] in LIBRARY_DIRS
    for i, (line, _) in enumerate(comment_parts(path, lines)):
        for m in REPO_PATH.finditer(line):
            token = m.group(1)
            following = line[m.end():m.end() + 1]
            if following in PLACEHOLDER_NEXT or "..." in token or "//" in token:
                continue
            token = token.rstrip(".,;:")
            root = token.split("/", 1)[0]
            if root in OUTSIDE_ROOTS:
                findings.append((path, i + 1, "missing-path",
                                 f"'{token}' is outside the repository: state what it showed "
                                 f"here or in bench/README.md, or cite a file of the repository"))
                continue
            # Only what is surely a source path: a built binary (tests/cli/accgraph_demo) or a
            # phrase (include/exclude) names no file, and a path "at commit X" is history.
            if not (token.endswith("/") or token.endswith(FILE_SUFFIXES)):
                continue
            if line[m.end():].lstrip(" `'\"").startswith("at commit"):
                continue
            if not tree.exists(token):
                findings.append((path, i + 1, "missing-path",
                                 f"'{token}' does not exist in the repository: cite the path "
                                 f"it has now, or drop the reference"))
        for m in MACHINE_PATH.finditer(line):
            findings.append((path, i + 1, "missing-path",
                             f"'{m.group(1)}' is a path on one machine: name the file by its "
                             f"repository path, or say how to make it"))
        if library:
            for pattern, what in HISTORY:
                m = pattern.search(line)
                if m:
                    findings.append((path, i + 1, "history",
                                     f"'{m.group(0)}' is history ({what}): {HISTORY_ADVICE}"))
                    break
    return findings


def check(root):
    tree = Tree(root)
    findings = note_findings(tree)
    for path, lines in tree.text.items():
        if scanned(path):
            findings += path_findings(tree, path, lines)
    return sorted(set(findings), key=lambda f: (f[0], f[1], f[2], f[3]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--root", default=os.path.dirname(os.path.dirname(here)),
                        help="the repository's root (default: the one this script is in)")
    args = parser.parse_args(argv)
    findings = check(args.root)
    for path, line, kind, message in findings:
        print(f"{path}:{line}: {kind}: {message}")
    if findings:
        kinds = {}
        for f in findings:
            kinds[f[2]] = kinds.get(f[2], 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        print(f"notes_resolve: {len(findings)} finding(s) ({summary}) in {args.root}; fix each "
              f"as its line says (README.md, 'Testing', says what is checked)", file=sys.stderr)
        return 1
    print(f"notes_resolve: every Note, cited file and repository path resolves in {args.root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
