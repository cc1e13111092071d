// Deprecated path, kept for accgraph 0.2 only: WorkerQueue moved to accgraph/spi/worker_queue.hpp;
// this forwarding header goes in 0.3. See Note [Forwarding headers] in accgraph/backend.hpp.
#pragma once

#if defined(ACCGRAPH_WARN_DEPRECATED_HEADERS)
#pragma message( \
    "accgraph/worker_queue.hpp is deprecated and goes in accgraph 0.3: include accgraph/spi/worker_queue.hpp")
#endif

// The old header brought in all of backend_support.hpp.
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
#include "accgraph/spi/worker_queue.hpp"
