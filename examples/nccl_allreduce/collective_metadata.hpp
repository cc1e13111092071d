// The metadata eager NCCL traces show for a collective (PyTorch profiler's field names), for a
// region around a collective captured into a graph, where the profiler sees only a kernel.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nccl.h>

#include "accgraph/report.hpp"

namespace nccl_example {

/// NCCL's data type as PyTorch names it ("float32", "bfloat16", ...).
inline std::string dtype_name(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
      return "int8";
    case ncclUint8:
      return "uint8";
    case ncclInt32:
      return "int32";
    case ncclUint32:
      return "uint32";
    case ncclInt64:
      return "int64";
    case ncclUint64:
      return "uint64";
    case ncclFloat16:
      return "float16";
    case ncclFloat32:
      return "float32";
    case ncclFloat64:
      return "float64";
#if defined(NCCL_VERSION_CODE) && NCCL_VERSION_CODE >= 21000
    case ncclBfloat16:
      return "bfloat16";
#endif
    default:
      return "nccl type " + std::to_string(static_cast<int>(type));
  }
}

/// The region metadata of one collective call: "collective", "In msg nelems", "Out msg nelems",
/// "dtype", "Group size", "Process Group Name", "Process Group Ranks" (as "[0, 1]", which the
/// Perfetto exporter writes as a list of ints; the numbers become ints too).
///
///   auto meta = collective_metadata("all_reduce", n, n, ncclFloat32, "default", {0, 1});
///   auto region = profiler.region(stream, "all_reduce", meta, "comm");
///   ncclAllReduce(send, recv, n, ncclFloat32, ncclSum, comm, native_stream);
inline accgraph::timing::Metadata collective_metadata(const std::string& collective,
                                                      size_t in_nelems, size_t out_nelems,
                                                      ncclDataType_t dtype,
                                                      const std::string& group_name,
                                                      const std::vector<int>& group_ranks) {
  std::string ranks = "[";
  for (size_t i = 0; i < group_ranks.size(); ++i)
    ranks += (i == 0 ? "" : ", ") + std::to_string(group_ranks[i]);
  ranks += "]";
  return {{"collective", collective},
          {"In msg nelems", std::to_string(in_nelems)},
          {"Out msg nelems", std::to_string(out_nelems)},
          {"dtype", dtype_name(dtype)},
          {"Group size", std::to_string(group_ranks.size())},
          {"Process Group Name", group_name},
          {"Process Group Ranks", ranks}};
}

}  // namespace nccl_example
