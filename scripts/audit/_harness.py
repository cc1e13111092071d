"""What the rerun scripts of the reliability audits (2026-11-28:
the *_cases.py scripts; 2026-12-07: the r1207_*.py scripts) share: the verdicts,
the checks of an error, the environment the auditors ran in, the loop that runs each case in its
own process (a crash or a hang is caught: 150 s limit) and prints `ID | handled/NOT | evidence`,
then `<surface>: N / M handled`, and the fixtures several surfaces need (a page opened in
headless Chromium, a command run as the unprivileged user, a C++ program or plugin built
against the source tree's headers and the release build's library).

A surface's script defines its cases as functions named by their row ids (A01, B09b, ...), each
taking a fresh temporary directory and ending in ok(evidence) or bad(evidence), and ends with

    if __name__ == "__main__":
        sys.exit(harness.main("surface name", harness.cases(globals()), __file__))

Verdicts as the audit's: handled = a clear error naming what is wrong and what to do, or the
right behaviour; NOT = a crash, a hang, data loss, a silent wrong result or an unclear error.
A case that ends without a verdict, or raises anything else, is NOT."""

from __future__ import annotations

import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Callable, Dict, Iterable, List, Optional, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests" / "python"
BUILD = pathlib.Path(os.environ.get("ACCGRAPH_BUILD_DIR", ROOT / "build"))
LIMIT_S = 150
CASE_NAME = re.compile(r"^[A-Z][0-9]{2}[a-z]?$")

# The drivers the auditor ran the device backends on, as scripts/test.sh part_python does:
# Mesa's lavapipe for vulkan, the in-tree CPU driver for level_zero.
LAVAPIPE = "/usr/share/vulkan/icd.d/lvp_icd.x86_64.json"
ZE_CPU_DRIVER = BUILD / "lib" / "libze_accgraph_cpu.so"


def device_env(base: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ if base is None else base)
    env.setdefault("VK_DRIVER_FILES", LAVAPIPE)
    env.setdefault("ZE_ENABLE_ALT_DRIVERS", str(ZE_CPU_DRIVER))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def program() -> pathlib.Path:
    """The `accgraph` program of the release build (ACCGRAPH_PROGRAM overrides)."""
    return pathlib.Path(os.environ.get("ACCGRAPH_PROGRAM", BUILD / "bin" / "accgraph"))


class Verdict(BaseException):  # passes through the cases' `except Exception`
    def __init__(self, handled: bool, evidence: str) -> None:
        super().__init__(evidence)
        self.handled, self.evidence = handled, evidence


def ok(evidence: str) -> None:
    raise Verdict(True, evidence)


def bad(evidence: str) -> None:
    raise Verdict(False, evidence)


def check(condition: bool, evidence: str) -> None:
    """ok(evidence) when `condition` holds, else bad(evidence)."""
    (ok if condition else bad)(evidence)


def short(e: BaseException, n: int = 160) -> str:
    text = f"{type(e).__name__}: {e}"
    return text if len(text) <= n else text[:n] + "..."


def clip(text: str, n: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "..."


def expect_error(call: Callable[[], object], names: Iterable[object] = (),
                 cls_name: str = "InvalidArgumentError") -> str:
    """The message when `call` raises accgraph's `cls_name` (a name of an accgraph error class,
    or of a builtin exception) naming every string of `names` (the file, the argument);
    otherwise bad(): another exception is a raw error, none at all a silent acceptance."""
    import builtins

    import accgraph

    cls = getattr(accgraph, cls_name, None) or getattr(builtins, cls_name)
    try:
        result = call()
    except cls as e:
        missing = [n for n in names if str(n) not in str(e)]
        if missing:
            bad(f"{cls_name} not naming {missing}: {short(e)}")
        if "incompatible function arguments" in str(e):
            bad(f"a binding's signature dump: {short(e)}")
        return str(e)
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    bad(f"no error: {result!r}"[:200])
    return ""  # not reached


def run(cmd: Sequence[object], *, env: Optional[Dict[str, str]] = None, timeout: float = 120,
        cwd: Optional[object] = None, input: Optional[str] = None
        ) -> subprocess.CompletedProcess:
    """Runs a command (text output); a timeout is a hang: bad()."""
    try:
        return subprocess.run([str(c) for c in cmd], capture_output=True, text=True,
                              errors="replace", timeout=timeout, env=env or device_env(),
                              cwd=None if cwd is None else str(cwd), input=input)
    except subprocess.TimeoutExpired:
        bad(f"hang: {' '.join(str(c) for c in cmd)[:120]} did not end within {timeout} s")
        raise  # not reached


def python(*args: object, **kwargs) -> subprocess.CompletedProcess:
    """This interpreter (the package's venv) on `args`."""
    return run([sys.executable, *args], **kwargs)


def crashed(done: subprocess.CompletedProcess) -> bool:
    """Killed by a signal or aborted (a C++ terminate, a sanitizer, a Python fatal error)."""
    return done.returncode < 0 or done.returncode in (134, 139) or \
        "Fatal Python error" in done.stderr or "terminate called" in done.stderr


def without_torch(d: pathlib.Path) -> Dict[str, str]:
    """An environment (this process's, unbuffered) whose `import torch` fails as a missing
    torch does: a `torch` package under `d` raising ModuleNotFoundError on PYTHONPATH (so the
    "no torch" cases hold where torch is installed too)."""
    shadow = pathlib.Path(d) / "notorch" / "torch"
    shadow.mkdir(parents=True, exist_ok=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'torch'\", name='torch')\n")
    return {**os.environ, "PYTHONPATH": str(shadow.parent), "PYTHONUNBUFFERED": "1"}


def in_threads(targets: Sequence[Callable[[], None]]) -> "tuple[list, list]":
    """Starts a thread per target; (the threads, the exceptions they raised)."""
    import threading

    errors: List[BaseException] = []

    def guarded(f: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                f()
            except BaseException as e:  # noqa: BLE001
                errors.append(e)
        return run

    threads = [threading.Thread(target=guarded(f)) for f in targets]
    for t in threads:
        t.start()
    return threads, errors


def temporaries(d: pathlib.Path) -> List[str]:
    """Files an atomic writer left behind (FILE.tmp.XXXXXX)."""
    return [p.name for p in pathlib.Path(d).iterdir() if ".tmp." in p.name]


def cases(namespace: Dict[str, object]) -> Dict[str, Callable[[pathlib.Path], None]]:
    """The case functions of a module's namespace (named by row id), in row order."""
    return {name: f for name, f in sorted(namespace.items())
            if CASE_NAME.match(name) and callable(f)}


def run_one(name: str, case: Callable[[pathlib.Path], None]) -> None:
    d = pathlib.Path(tempfile.mkdtemp(prefix=f"audit-{name}-"))
    try:
        case(d)
        print(f"{name} | NOT | the case ended without a verdict")
    except Verdict as v:
        print(f"{name} | {'handled' if v.handled else 'NOT'} | {v.evidence}")
    except BaseException as e:  # noqa: BLE001
        print(f"{name} | NOT | raw {short(e, 300)}")
    finally:
        sys.stdout.flush()
        shutil.rmtree(d, ignore_errors=True)


def main(surface: str, all_cases: Dict[str, Callable[[pathlib.Path], None]], script: str,
         heavy: Iterable[str] = (), argv: Optional[List[str]] = None) -> int:
    """`script [--skip-heavy] [ID...]`: each case in a process of its own (`script --case ID`),
    one line each, then `<surface>: N / M handled`; 0 when every case was handled, 1 when one
    was not, 2 on a usage error."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) == 2 and args[0] == "--case":
        run_one(args[1], all_cases[args[1]])
        return 0
    skip_heavy = "--skip-heavy" in args
    names = [a for a in args if a != "--skip-heavy"]
    names = names or [n for n in all_cases if not (skip_heavy and n in set(heavy))]
    unknown = [n for n in names if n not in all_cases]
    if unknown:
        print(f"unknown case(s) {unknown}: the cases are {', '.join(all_cases)}",
              file=sys.stderr)
        return 2
    handled = 0
    for name in names:
        try:
            done = subprocess.run([sys.executable, script, "--case", name], capture_output=True,
                                  text=True, errors="replace", timeout=LIMIT_S,
                                  env=device_env())
            line = next((x for x in done.stdout.splitlines() if x.startswith(name + " |")),
                        None)
            if line is None:
                line = (f"{name} | NOT | exit {done.returncode} without a verdict: "
                        f"{clip(done.stderr or done.stdout, 200)}")
        except subprocess.TimeoutExpired:
            line = f"{name} | NOT | hang: no verdict within {LIMIT_S} s"
        handled += " | handled | " in line
        print(line, flush=True)
    print(f"{surface}: {handled} / {len(names)} handled", flush=True)
    return 0 if handled == len(names) else 1


# --- fixtures of the 2026-12-07 audit's surfaces ------------------------------------------------

NOBODY = 65534  # the unprivileged user the permission cases drop to


def as_nobody(cmd: Sequence[object]) -> List[str]:
    """`cmd` run as uid/gid 65534, as the audit's permission cases did (where this process is
    root; otherwise as this user, for whom a mode-000 file is unreadable too)."""
    cmd = [str(c) for c in cmd]
    if os.geteuid() != 0:
        return cmd
    return ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", *cmd]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        bad("chromium is not installed (scripts/ensure-packages.sh chromium): case not run")
    return str(found)


class Page:
    """What the audit checked of a page headless Chromium drew (`--dump-dom`): the elements by
    tag, the body's data attributes (data-ready: the page drew; data-pwned: a payload ran) and
    the visible text."""

    def __init__(self, dom: str) -> None:
        from html.parser import HTMLParser

        self.dom, self.tags, self.body, self.text = dom, [], {}, []
        page = self

        class Parser(HTMLParser):
            def __init__(self) -> None:
                super().__init__()
                self.skip = 0

            def handle_starttag(self, tag, attrs):  # type: ignore[no-untyped-def]
                page.tags.append(tag)
                if tag == "body":
                    page.body = {k: v for k, v in attrs if k.startswith("data-")}
                if tag in ("script", "style"):
                    self.skip += 1

            def handle_endtag(self, tag):  # type: ignore[no-untyped-def]
                if tag in ("script", "style") and self.skip:
                    self.skip -= 1

            def handle_data(self, data):  # type: ignore[no-untyped-def]
                if not self.skip:
                    page.text.append(data)

        Parser().feed(dom)
        self.text = " ".join(" ".join(self.text).split())

    @property
    def drew(self) -> bool:
        return "data-ready" in self.body

    @property
    def pwned(self) -> bool:
        return "data-pwned" in self.body

    def summary(self) -> str:
        return (f"drew {self.drew}, payload ran {self.pwned}, "
                f"{len(self.tags)} elements")


def browse(page: object, query: str = "", timeout: float = 120) -> Page:
    """`page` (+ `query`) opened in headless Chromium: the DOM after its script ran."""
    profile = tempfile.mkdtemp(prefix="audit-chromium-")
    try:
        done = run([chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--disable-extensions", f"--user-data-dir={profile}",
                    "--window-size=1200,900", "--virtual-time-budget=10000", "--dump-dom",
                    f"file://{page}{query}"], timeout=timeout)
    finally:
        shutil.rmtree(profile, ignore_errors=True)
    if done.returncode != 0 or "<body" not in done.stdout:
        bad(f"chromium exit {done.returncode}: {clip(done.stderr, 150)}")
    return Page(done.stdout)


def cxx(d: pathlib.Path, sources: Sequence[object], output: str, *, include: object = None,
        plugin: bool = False, flags: Sequence[str] = ()) -> pathlib.Path:
    """Builds `sources` (a program, or with `plugin` a plugin module exporting only its entry
    point, as accgraph_add_plugin does) against the headers under `include` (default: the
    source tree's include/, which the install copies) and the release build's libaccgraph;
    bad() with the compiler's message when it fails."""
    out = pathlib.Path(d) / output
    lib = BUILD / "lib"
    cmd = ["g++", "-std=c++17", "-O1", "-fPIC", "-I", str(include or ROOT / "include"),
           *flags, *[str(s) for s in sources], "-o", str(out), "-L", str(lib), "-laccgraph",
           f"-Wl,-rpath,{lib}", "-pthread"]
    if plugin:
        cmd[1:1] = ["-shared", "-fvisibility=hidden", "-fvisibility-inlines-hidden",
                    f"-Wl,--version-script={ROOT / 'cmake' / 'accgraph_plugin.map'}"]
    done = run(cmd, timeout=600)
    if done.returncode != 0:
        bad(f"building {output} failed: {clip(done.stderr, 300)}")
    return out
