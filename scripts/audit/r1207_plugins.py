"""Re-runs the plugin ABI cases (P01-P16) of the 2026-12-07 reliability audit
(area (g)), each in its own process
(scripts/audit/_harness.py). The fixture plugins are built as the review says: the toy backend
of examples/out_of_tree_backend (its backend, stream, graph and markers sources) with the entry
point each row names, against the source tree's headers (what the install copies) and the
release build's libaccgraph; P01 and P02 build the toy of the commits before plugin ABI 2.4 and
2.1 (ABI 2.3 and 2.0, found with `git log -G 'define ACCGRAPH_PLUGIN_ABI_MINOR'`) from git
history (`git archive`), against their own headers. The toy's objects are kept under
build/audit-1207/ between cases (keyed by the sources' hash). Plugins are loaded with
accgraph.load_plugin (P15: `accgraph backends` with ACCGRAPH_PLUGIN_PATH).

    build/venv/bin/python scripts/audit/r1207_plugins.py            # every case
    build/venv/bin/python scripts/audit/r1207_plugins.py P01 P08    # some

Choices where a row is vague:
- "times a graph" (P01, P02): a graph of one region around a fill, replayed 5 times, gives 5
  reports; "its own errors" (P01): a host_call that raises, reported by the toy's
  synchronize(), carries reason UNSPECIFIED;
- P04: "a newer minor than the core's" is the core's ACCGRAPH_PLUGIN_ABI_MINOR + 1 (2.6 today;
  the audit's core spoke 2.4, so it built 2.5);
- P05-P08: the plugin loads, backends() lists it unavailable with the reason the row names,
  and Stream() raises UnavailableError with it; the process then still works (a host stream);
- P13: the second file is rejected by load_plugin with a PluginError naming the first;
- P16: the toy linked against a library of its own that is deleted before loading."""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import sys
import tarfile

from _harness import (BUILD, ROOT, bad, cases, check, clip, crashed, cxx, device_env, main,
                      program, run, short)

TOY = ROOT / "examples" / "out_of_tree_backend"
TOY_SOURCES = ("backend.cpp", "stream.cpp", "graph.cpp", "markers.cpp")
CACHE = BUILD / "audit-1207"
HEADER = '#include <accgraph/spi/plugin.hpp>\n#include <stdexcept>\n#include "toy.hpp"\n'


def commit_before(minor):
    """The commit before the one that raised the plugin ABI's minor to `minor`."""
    log = subprocess.run(["git", "-C", str(ROOT), "log", "--format=%H", "-G",
                          f"define ACCGRAPH_PLUGIN_ABI_MINOR {minor}u", "--",
                          "include/accgraph/spi/plugin.h", "include/accgraph/plugin.h"],
                         capture_output=True, text=True, check=True).stdout.split()
    if not log:
        bad(f"no commit raised the plugin ABI to 2.{minor} (a shallow clone?)")
    return log[-1] + "^"


def old_tree(commit):
    """The include/ and toy of `commit`, extracted once under CACHE."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", commit], capture_output=True,
                         text=True, check=True).stdout.strip()
    tree = CACHE / f"tree-{sha[:12]}"
    if not (tree / "done").exists():
        data = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", sha, "include",
                               "examples/out_of_tree_backend"], capture_output=True,
                              check=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            tar.extractall(tree)
        (tree / "done").write_text(sha)
    return tree, sha


def toy_objects(toy_dir, include):
    """The toy's backend objects built against `include`, cached by the sources' hash."""
    key = hashlib.sha1()
    for name in TOY_SOURCES + ("toy.hpp",):
        key.update((toy_dir / name).read_bytes())
    for header in sorted((include / "accgraph").rglob("*")):
        if header.is_file():
            key.update(header.read_bytes())
    out = CACHE / f"toy-{key.hexdigest()[:12]}"
    out.mkdir(parents=True, exist_ok=True)
    objects = []
    for name in TOY_SOURCES:
        obj = out / (name + ".o")
        if not obj.exists():
            done = run(["g++", "-std=c++17", "-O1", "-fPIC", "-fvisibility=hidden",
                        "-fvisibility-inlines-hidden", "-I", str(include), "-c",
                        str(toy_dir / name), "-o", str(obj) + ".tmp"], timeout=600)
            if done.returncode != 0:
                bad(f"building the toy's {name} failed: {clip(done.stderr, 250)}")
            os.replace(str(obj) + ".tmp", obj)
        objects.append(obj)
    return objects


def toy_plugin(d, name, entry=None, *, toy_dir=TOY, include=ROOT / "include", extra=()):
    """lib<name>.so: the toy's backend with the entry point `entry` (C++ source appended to
    HEADER; the toy's own plugin.cpp when None)."""
    if entry is None:
        source = toy_dir / "plugin.cpp"
    else:
        source = d / f"{name}_plugin.cpp"
        source.write_text(HEADER + entry)
    return cxx(d, [source, *toy_objects(toy_dir, include), *extra], f"lib{name}.so",
               include=include, plugin=True, flags=["-I", str(toy_dir)])


def table(name, major="ACCGRAPH_PLUGIN_ABI_MAJOR", minor="ACCGRAPH_PLUGIN_ABI_MINOR",
          create=None, backend_name=None):
    """A hand-written entry point returning a table (as ACCGRAPH_DEFINE_PLUGIN would)."""
    create = create or ("[](void** backend, char* message, size_t capacity) noexcept {\n"
                        "  return accgraph::plugin::create_backend([] { return "
                        "toy::make_backend(); }, backend, message, capacity); }")
    return f"""
ACCGRAPH_PLUGIN_ABI_TAG();
extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* accgraph_plugin_entry(void) {{
  static const AccgraphPluginApi api = {{sizeof(AccgraphPluginApi), {major}, {minor},
      {backend_name or f'"{name}"'}, accgraph::priority::normal, "1.0", {create},
      &accgraph::plugin::destroy_backend}};
  return &api;
}}
"""


def define(name, make_backend):
    return f'ACCGRAPH_DEFINE_PLUGIN("{name}", accgraph::priority::normal, "1.0", {make_backend})\n'


def load_error(path, *needles):
    """load_plugin(path) must raise PluginError naming the file and `needles`; the process
    keeps working (a host stream)."""
    import accgraph

    try:
        accgraph.load_plugin(path)
    except accgraph.PluginError as e:
        missing = [n for n in needles if n not in str(e)]
        accgraph.Stream("host").synchronize()
        check(str(path) in str(e) and not missing,
              f"PluginError: {clip(str(e), 170)}{f' (lacks {missing})' if missing else ''}")
    except Exception as e:  # noqa: BLE001
        bad(f"raw {short(e)}")
    bad("loaded without an error")


def times_a_graph(backend):
    import accgraph

    s = accgraph.Stream(backend)
    prof = accgraph.Profiler()
    buf = accgraph.Buffer(s, 64)
    g = accgraph.Graph(backend)
    prof.attach(g)
    with g.capture(s):
        with prof.region(s, "step"):
            s.fill(buf, 7)
    for _ in range(5):
        g.replay()
    s.synchronize()
    prof.flush()
    return s, len(prof.reports())


def old_toy(d, minor):
    import accgraph

    tree, sha = old_tree(commit_before(minor))
    path = toy_plugin(d, "toy", toy_dir=tree / "examples" / "out_of_tree_backend",
                      include=tree / "include")
    accgraph.load_plugin(path)
    s, reports = times_a_graph("toy")
    return s, reports, sha


def P01(d):
    s, reports, sha = old_toy(d, 4)
    try:
        s.host_call(lambda: 1 / 0)
        s.synchronize()
        bad("the failing host_call raised nothing")
    except Exception as e:  # noqa: BLE001
        reason = getattr(e, "reason", None)
        check(reports == 5 and reason is not None and reason.name == "UNSPECIFIED",
              f"toy of {sha[:8]} (ABI 2.3): {reports}/5 reports; its error "
              f"{type(e).__name__} {getattr(reason, 'name', '-')}: {clip(str(e), 70)}")


def P02(d):
    s, reports, sha = old_toy(d, 1)
    check(reports == 5, f"toy of {sha[:8]} (ABI 2.0): {reports}/5 reports")


def P03(d):
    load_error(toy_plugin(d, "toy_major1", table("toy", major="1u")), "major")


def P04(d):
    import re

    path = toy_plugin(d, "toy_newer", table("toy", minor="ACCGRAPH_PLUGIN_ABI_MINOR + 1u"))
    header = (ROOT / "include" / "accgraph" / "spi" / "plugin.h").read_text()
    minor = int(re.search(r"define ACCGRAPH_PLUGIN_ABI_MINOR (\d+)u", header).group(1))
    load_error(path, f"2.{minor + 1}", f"2.{minor}")


def unavailable(path, name, *needles, unlike=()):
    import accgraph

    accgraph.load_plugin(path)
    info = {b.name: b for b in accgraph.backends()}.get(name)
    if info is None or info.available:
        bad(f"{name}: {'not listed' if info is None else 'available'}")
    missing = [n for n in needles if n not in info.reason]
    missing += [f"not {n!r}" for n in unlike if n in info.reason]
    try:
        accgraph.Stream(name)
        bad(f"Stream('{name}') worked")
    except accgraph.UnavailableError as e:
        stream_missing = [n for n in needles if n not in str(e)]
    except Exception as e:  # noqa: BLE001
        bad(f"Stream('{name}'): raw {short(e)}")
    accgraph.Stream("host").synchronize()
    check(not missing and not stream_missing,
          f"unavailable: {clip(info.reason, 150)}"
          f"{f' (lacks {missing or stream_missing})' if missing or stream_missing else ''}")


def P05(d):
    path = toy_plugin(d, "toy_throws", define(
        "toy_throws", "(throw std::runtime_error(\"no toy device here\"), toy::make_backend())"))
    unavailable(path, "toy_throws", "no toy device here")


def P06(d):
    path = toy_plugin(d, "toy_error", define(
        "toy_error", "(throw accgraph::Error(accgraph::ErrorCode::Unavailable, \"the toy "
        "driver is not loaded\", \"toy_error\"), toy::make_backend())"))
    unavailable(path, "toy_error", "the toy driver is not loaded")


def P07(d):
    path = toy_plugin(d, "toy_int", define("toy_int", "(throw 42, toy::make_backend())"))
    unavailable(path, "toy_int", "not a std::exception")


def P08(d):
    path = toy_plugin(d, "toy_null", define("toy_null", "std::unique_ptr<accgraph::Backend>{}"))
    unavailable(path, "toy_null", "no backend", unlike=("failed without a message",))


def P09(d):
    create = ("[](void** backend, char*, size_t) -> AccgraphStatus {\n"
              "  (void)backend; throw std::logic_error(\"the toy's create_backend broke\"); }")
    path = toy_plugin(d, "toy_logic", table("toy_logic", create=create))
    unavailable(path, "toy_logic", "logic_error")


def P10(d):
    load_error(toy_plugin(d, "toy_nulltable", 'extern "C" ACCGRAPH_PLUGIN_EXPORT const '
                          "AccgraphPluginApi* accgraph_plugin_entry(void) { return nullptr; }\n"),
               "returned no table")


def P11(d):
    load_error(toy_plugin(d, "toy_entry_throws", 'extern "C" ACCGRAPH_PLUGIN_EXPORT const '
                          "AccgraphPluginApi* accgraph_plugin_entry(void) { throw "
                          "std::runtime_error(\"the entry point broke\"); }\n"),
               "the entry point broke")


def P12(d):
    load_error(toy_plugin(d, "toy_noname", table("toy", backend_name="nullptr")), "name")


def P13(d):
    import accgraph

    first = toy_plugin(d, "toy_first", define("toy", "toy::make_backend()"))
    second = toy_plugin(d, "toy_second", define("toy", "toy::make_backend()"))
    accgraph.load_plugin(first)
    load_error(second, str(first), "toy")


def P14(d):
    import accgraph

    before = [(b.name, b.priority) for b in accgraph.backends() if b.name == "host"]
    path = toy_plugin(d, "toy_host", define("host", "toy::make_backend()"))
    try:
        accgraph.load_plugin(path)
        bad("a plugin named 'host' was loaded")
    except accgraph.PluginError as e:
        after = [(b.name, b.priority) for b in accgraph.backends() if b.name == "host"]
        s, reports = times_a_graph("host")
        check(before == after and reports == 5 and "host" in str(e),
              f"PluginError: {clip(str(e), 120)}; host unchanged {before == after}, "
              f"{reports}/5 reports")


def P15(d):
    plugins = d / "plugins"
    plugins.mkdir()
    variants = {
        "toy_major1": table("toy_major1", major="1u"),
        "toy_newer": table("toy_newer", minor="ACCGRAPH_PLUGIN_ABI_MINOR + 1u"),
        "toy_throws": define("toy_throws", "(throw std::runtime_error(\"no toy device here\"), "
                             "toy::make_backend())"),
        "toy_int": define("toy_int", "(throw 42, toy::make_backend())"),
        "toy_null": define("toy_null", "std::unique_ptr<accgraph::Backend>{}"),
        "toy_nulltable": 'extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* '
                         "accgraph_plugin_entry(void) { return nullptr; }\n",
        "toy_entry_throws": 'extern "C" ACCGRAPH_PLUGIN_EXPORT const AccgraphPluginApi* '
                            "accgraph_plugin_entry(void) { throw 1; }\n",
        "toy_noname": table("x", backend_name="nullptr"),
        "toy_host": define("host", "toy::make_backend()"),
    }
    for name, entry in variants.items():
        toy_plugin(plugins, name, entry)
    env = device_env()
    env["ACCGRAPH_PLUGIN_PATH"] = str(plugins)
    done = run([program(), "backends"], env=env)
    text = done.stdout + done.stderr
    unnamed = [n for n in variants if f"lib{n}.so" not in text and
               not (n in ("toy_throws", "toy_int", "toy_null") and f"{n} (" in text)]
    check(done.returncode == 0 and not crashed(done) and not unnamed and "host (priority 0" in text,
          f"exit {done.returncode}; {len(variants) - len(unnamed)}/{len(variants)} listed"
          f"{f', missing {unnamed}' if unnamed else ''}")


def P16(d):
    dep_source = d / "dep.cpp"
    dep_source.write_text("extern \"C\" int toy_dependency_value() { return 7; }\n")
    dep = cxx(d, [dep_source], "libtoydep.so", plugin=False, flags=["-shared"])
    path = toy_plugin(d, "toy_dep", 'extern "C" int toy_dependency_value();\n'
                      'static int used = toy_dependency_value();\n'
                      + define("toy_dep", "toy::make_backend()"),
                      extra=[f"-L{d}", "-ltoydep", f"-Wl,-rpath,{d}"])
    dep.unlink()
    load_error(path, "libtoydep.so")


if __name__ == "__main__":
    sys.exit(main("plugin ABI (P)", cases(globals()), __file__))
