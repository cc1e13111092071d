"""accgraph.measure_host_clock_offset: the extension's ping-pong (accgraph/host_clock.hpp,
Note [Host clock offsets]) under a timeout of its own, for transports that have none."""

from __future__ import annotations

import math
import threading
from typing import Any, Callable, Dict, Optional

from ._accgraph import HostClockOffset
from ._native import measure_host_clock_offset as _measure
from ._errors import InvalidArgumentError, make_error

__all__ = ["measure_host_clock_offset"]


def measure_host_clock_offset(rank: int, world_size: int, send: Callable[[int, int], None],
                              receive: Callable[[int], int], rounds: int = 64, *,
                              timeout: Optional[float] = 300.0) -> HostClockOffset:
    """Measures this host's clock offset against rank 0's over the job's own transport,
    collectively (every rank calls it): `send(peer, value)` delivers one int (0 to 2**64-1) to
    rank `peer`, `receive(peer)` returns the next one that rank sent here. Rank 0 answers
    `rounds` pings of each rank in turn with its clock; each rank keeps the shortest round trip:
    offset = its midpoint - rank 0's time, uncertainty = half of it + the clock's resolution.
    Call it at profiling start and again at flush and pass both to
    write_trace(host_clock_offsets=[...]); the merge interpolates the drift between them.
    accgraph.torch.measure_host_clock_offset() does it over torch.distributed.

    `timeout`: seconds for the whole measurement (rank 0 serves the ranks one after another,
    so rank k waits for ranks 1..k-1 too); TimeoutError when a peer never answers. The callbacks
    then run in a helper thread, and a receive that never returns is left waiting there (a
    daemon thread): give a transport with a timeout of its own and ``timeout=None`` to call them
    on this thread. An exception of a callback reaches the caller unchanged.

    InvalidArgumentError for a rank outside 0..world_size-1, rounds outside 1..100000, a missing
    send or receive, a receive that returns an int outside 0..2**64-1; TypeError for one that
    returns no int; BackendError when rank 0's answers cannot be its clock (0, or values that
    do not advance as a clock does).
    """
    if timeout is None:
        return _measure(rank, world_size, send, receive, rounds)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not (
            math.isfinite(timeout) and timeout > 0):
        raise make_error(InvalidArgumentError,
                         f"measure_host_clock_offset: timeout is {timeout!r}: give a number of "
                         "seconds above 0, or None to wait for as long as the transport does")
    outcome: Dict[str, Any] = {}
    done = threading.Event()

    def measure() -> None:
        try:
            outcome["offset"] = _measure(rank, world_size, send, receive, rounds)
        except BaseException as e:  # handed to the caller as it is
            outcome["error"] = e
        finally:
            done.set()

    threading.Thread(target=measure, name="accgraph.measure_host_clock_offset",
                     daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(
            f"measure_host_clock_offset: rank {rank} of {world_size} got no answer within "
            f"{timeout} s: check that every rank of the job calls measure_host_clock_offset "
            "with the same rounds and that the transport delivers, or give a larger timeout= "
            "(rank 0 serves the ranks one after another); the unanswered receive is left "
            "waiting in a daemon thread")
    if "error" in outcome:
        error = outcome.pop("error")
        raise error
    return outcome["offset"]
