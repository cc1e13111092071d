// Deprecated path, kept for accgraph 0.2 only: its helpers moved to accgraph/spi/, one concept
// per header (ownership, stream_cast, device_index, handle_table, first_failure, run_every_node,
// host_delay, host_memory_buffer, debug_dump); this forwarding header goes in 0.3.
// See Note [Forwarding headers] in accgraph/backend.hpp.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/backend_support.hpp is deprecated and goes in accgraph 0.3: include the accgraph/spi/ header of each helper (ownership.hpp, stream_cast.hpp, device_index.hpp, handle_table.hpp, first_failure.hpp, run_every_node.hpp, host_delay.hpp, host_memory_buffer.hpp, debug_dump.hpp)")
#endif

#include "accgraph/clock.hpp"
#include "accgraph/spi/backend.hpp"
#include "accgraph/spi/clock_sampling.hpp"
#include "accgraph/spi/debug_dump.hpp"
#include "accgraph/spi/device_index.hpp"
#include "accgraph/spi/first_failure.hpp"
#include "accgraph/spi/handle_table.hpp"
#include "accgraph/spi/host_delay.hpp"
#include "accgraph/spi/host_memory_buffer.hpp"
#include "accgraph/spi/ownership.hpp"
#include "accgraph/spi/run_every_node.hpp"
#include "accgraph/spi/stream_cast.hpp"
