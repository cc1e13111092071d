// Host clocks of a job on several hosts: each host's CLOCK_REALTIME against the reference host's
// (rank 0's), measured over the job's own transport (Note [Host clock offsets] in
// timing/engine/host_clock.cpp). Written into each rank's trace
// (PerfettoOptions::host_clock_offsets) and applied by merge_perfetto_traces, with the drift
// between two measurements interpolated.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "accgraph/export.hpp"

namespace accgraph::timing {

/// This host's reference clock as accgraph reads it for host offsets and device calibration:
/// CLOCK_REALTIME (realtime_ns, accgraph/spi/clock_sampling.hpp) in nanoseconds. In tests only,
/// ACCGRAPH_TEST_HOST_CLOCK_SKEW skews it (Note [Host clock skew hook]); InvalidArgument when
/// that variable is set but malformed. Never set it in production.
ACCGRAPH_API uint64_t host_clock_ns();

/// A CLOCK_REALTIME reading `realtime` as host_clock_ns would have read it at that instant: the
/// same value without ACCGRAPH_TEST_HOST_CLOCK_SKEW. calibrate_clock applies it to the host
/// reads of its samples. InvalidArgument as host_clock_ns.
ACCGRAPH_API uint64_t skew_host_time(uint64_t realtime);

/// This host's clock against the reference host's (rank 0's): reference_time = local_time -
/// offset_ns, true to within +-uncertainty_ns at local time measured_at_ns.
struct HostClockOffset {
  int64_t offset_ns = 0;
  uint64_t uncertainty_ns = 0;
  uint64_t measured_at_ns = 0;  ///< host_clock_ns of this host when it was measured
};

/// How measure_host_clock_offset talks to the other ranks: the job's own transport
/// (torch.distributed send/recv, MPI, a socket). send(peer, value) delivers one 64-bit value to
/// rank `peer`; receive(peer) returns the next value rank `peer` sent to this rank, in order.
/// Values are sent and received one at a time (a ping-pong). Either may throw; the exception
/// propagates out of measure_host_clock_offset unchanged.
struct HostClockTransport {
  std::function<void(int peer, uint64_t value)> send;
  std::function<uint64_t(int peer)> receive;
};

/// Measures this host's clock offset against rank 0's, collectively: every rank of the job
/// calls it with the same `rounds`. Rank 0 answers `rounds` pings of each other rank in turn
/// with its host_clock_ns; rank k keeps the round trip of least time (Note [Clock calibration]):
/// offset = its midpoint - rank 0's time, uncertainty = half that round trip (rounded up) plus
/// the host clock's resolution, measured_at = the midpoint. Rank 0 gets offset 0, uncertainty
/// 0. Call it when profiling starts and again at flush (drift: the merge interpolates between
/// the two); a round trip costs what the transport costs (tens of microseconds over Gloo or
/// loopback sockets, so rank 0 spends world_size x rounds of them).
///
///   HostClockTransport t{[&](int peer, uint64_t v) { my_send(peer, v); },
///                        [&](int peer) { return my_recv(peer); }};
///   options.host_clock_offsets.push_back(measure_host_clock_offset(rank, world, t));
///
/// InvalidArgument for rank outside 0..world_size-1, rounds outside 1..100,000 or a transport
/// without send or receive. BackendError when rank 0's answers cannot be its clock: an answer
/// of 0 (an unfilled receive buffer), or answers that do not advance as this host's clock does
/// between rounds (garbled values; Note [Implausible answers]). There is no timeout here: a
/// peer that never answers blocks in receive, so give the transport a timeout of its own (the
/// Python binding has timeout=).
ACCGRAPH_API HostClockOffset measure_host_clock_offset(int rank, int world_size,
                                                       const HostClockTransport& transport,
                                                       size_t rounds = 64);

/// The offset at local time `at`, on the line through two measurements (`first` then `last`,
/// measured_at increasing): the drift between them is taken as constant, and extrapolated
/// beyond them. With equal measured_at, `first`'s offset. What the merge applies per event.
ACCGRAPH_API int64_t interpolate_host_clock_offset(const HostClockOffset& first,
                                                   const HostClockOffset& last, uint64_t at);

}  // namespace accgraph::timing
