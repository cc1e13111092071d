// The umbrella header: the whole public API of accgraph.
#pragma once

#include "accgraph/backend.hpp"
#include "accgraph/clock.hpp"
#include "accgraph/error.hpp"
#include "accgraph/foreign_graph.hpp"
#include "accgraph/graph.hpp"
#include "accgraph/hooks.hpp"
#include "accgraph/output_file.hpp"
#include "accgraph/registry.hpp"
#include "accgraph/report.hpp"
#include "accgraph/stream.hpp"
#include "accgraph/timing.hpp"
#include "accgraph/types.hpp"
#include "accgraph/version.hpp"
