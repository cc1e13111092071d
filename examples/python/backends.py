"""The registry: which backends are registered, which are available here and why not, and
loading a plugin library.

    python examples/python/backends.py [PLUGIN.so ...]
"""

import sys

import accgraph


def main() -> None:
    for path in sys.argv[1:]:
        try:
            accgraph.load_plugin(path)
        except accgraph.PluginError as e:  # names the file and the reason
            print(f"rejected: {e}")
    print(f"accgraph {accgraph.__version__}; default backend: {accgraph.default_backend()}")
    for info in accgraph.backends():
        if info.available:
            caps = info.capabilities
            devices = ", ".join(d.name for d in info.devices)
            print(f"{info.name:12} priority {info.priority:3}  {devices}")
            print(f"{'':12} host calls {caps.host_calls}, delays {caps.timed_delay}, "
                  f"markers {caps.marker_strategies}, ring {caps.marker_ring_depth}")
        else:
            print(f"{info.name:12} unavailable: {info.reason}")
    for failure in accgraph.plugin_failures():
        print(f"rejected plugin {failure.path}: {failure.reason}")


if __name__ == "__main__":
    main()
