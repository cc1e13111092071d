"""Errors: one class per accgraph error code, each also a built-in exception.

    python examples/python/errors.py
"""

import accgraph


def main() -> None:
    g = accgraph.Graph("host")
    try:
        g.replay()  # nothing captured yet
    except accgraph.InvalidStateError as e:  # also a RuntimeError
        print(f"{type(e).__name__}: code={e.code.name} backend={e.backend!r}\n  {e.message}")
    try:
        accgraph.Stream("no_such_backend")
    except ValueError as e:  # InvalidArgumentError derives from ValueError
        print(f"{type(e).__name__} is a ValueError: {str(e).splitlines()[0]}")
    try:
        accgraph.Stream("host").fill(accgraph.Buffer.allocate("host", 0, 8, kind="host"), 300)
    except accgraph.Error as e:  # catch every accgraph error at once
        print(f"{type(e).__name__}: {e.message}")


if __name__ == "__main__":
    main()
