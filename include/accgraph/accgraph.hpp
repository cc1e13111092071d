// The umbrella header: the whole user API of accgraph. The backend authors' kit is not in it:
// it lives in accgraph/spi/, and no header here includes it (tests/package checks that
// accgraph.hpp opens no spi/ header). Code that calls a Backend (accgraph::backend()) or
// implements one includes accgraph/spi/backend.hpp.
#pragma once

#include "accgraph/clock.hpp"
#include "accgraph/dlpack.hpp"
#include "accgraph/host_clock.hpp"
#include "accgraph/error.hpp"
#include "accgraph/exporters.hpp"
#include "accgraph/foreign_graph.hpp"
#include "accgraph/graph.hpp"
#include "accgraph/hooks.hpp"
#include "accgraph/output_file.hpp"
#include "accgraph/registry.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stats.hpp"
#include "accgraph/stream.hpp"
#include "accgraph/trace_file.hpp"
#include "accgraph/timing.hpp"
#include "accgraph/types.hpp"
#include "accgraph/version.hpp"
