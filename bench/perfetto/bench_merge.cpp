// accgraph-bench-merge: merge_perfetto_traces at scale (Note [Merge streaming]): time and peak
// resident memory of merging `ranks` traces of `replays` replays each, against the sum of the
// input sizes, at the given size and at a tenth of the replays (the baseline of the same run).
// Prints numbers, not pass/fail.
//
//   accgraph-bench-merge                      # 64 ranks x 100,000 replays (about 2 GB of input)
//   accgraph-bench-merge --ranks 1024 --replays 100
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "accgraph/perfetto.hpp"
#include "merge_workload.hpp"

namespace {

struct Figures {
  double seconds = 0;
  double cpu_seconds = 0;  // user + system: what a shared machine's load does not inflate
  long peak_rss_kib = 0;
  bool ok = false;
};

// Merges `paths` into /dev/null in a child process: the child's peak RSS is the merge's (plus
// what it inherited), not this process's generation of the inputs.
Figures merge_in_child(const std::vector<std::string>& paths) {
  Figures f;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      std::ofstream out("/dev/null", std::ios::binary);
      accgraph::timing::merge_perfetto_traces(out, paths);
      ::_exit(0);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "merge failed: %s\n", e.what());
      ::_exit(1);
    }
  }
  int status = 0;
  rusage usage{};
  ::wait4(pid, &status, 0, &usage);
  f.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  f.peak_rss_kib = usage.ru_maxrss;
  f.cpu_seconds = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                  1e-6 * static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
  f.ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  return f;
}

long self_rss_kib() {
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  int ranks = 64;
  size_t replays = 100000;
  std::string dir = (std::filesystem::temp_directory_path() / "accgraph-bench-merge").string();
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    if (arg == "--ranks")
      ranks = std::atoi(argv[i + 1]);
    else if (arg == "--replays")
      replays = static_cast<size_t>(std::atoll(argv[i + 1]));
    else if (arg == "--dir")
      dir = argv[i + 1];
    else {
      std::fprintf(stderr, "usage: accgraph-bench-merge [--ranks N] [--replays R] [--dir D]\n");
      return 2;
    }
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it is measured
  std::filesystem::create_directories(dir);
  rlimit files{};
  ::getrlimit(RLIMIT_NOFILE, &files);
  std::printf("merge of %d ranks; descriptor limit %llu; process RSS before %ld KiB\n", ranks,
              static_cast<unsigned long long>(files.rlim_cur), self_rss_kib());
  std::printf("%10s  %14s  %12s  %9s  %9s  %12s  %14s\n", "replays", "input bytes", "packets ~",
              "seconds", "cpu s", "cpu ns/byte", "peak RSS KiB");
  for (const size_t r : {replays / 10 > 0 ? replays / 10 : 1, replays}) {
    std::vector<std::string> paths;
    for (int rank = 0; rank < ranks; ++rank)
      paths.push_back(dir + "/rank" + std::to_string(rank) + ".pftrace");
    // Written by a child, so that this process (and the merging child it forks) does not keep
    // the generator's memory.
    const pid_t writer = ::fork();
    if (writer == 0) {
      for (int rank = 0; rank < ranks; ++rank)
        accgraph::bench::write_rank_trace(paths[static_cast<size_t>(rank)], rank, ranks, r);
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(writer, &status, 0);
    uint64_t bytes = 0;
    for (const std::string& p : paths) bytes += std::filesystem::file_size(p);
    const Figures f = merge_in_child(paths);
    std::printf("%10zu  %14llu  %12llu  %9.3f  %9.3f  %12.2f  %14ld%s\n", r,
                static_cast<unsigned long long>(bytes),
                static_cast<unsigned long long>(r * 4 * static_cast<size_t>(ranks)), f.seconds,
                f.cpu_seconds, 1e9 * f.cpu_seconds / static_cast<double>(bytes), f.peak_rss_kib,
                f.ok ? "" : "  (the merge FAILED)");
    for (const std::string& p : paths) std::filesystem::remove(p);
  }
  std::printf(
      "(peak RSS is the merging child's, which inherits this process's %ld KiB; cpu s "
      "is its user + system time, seconds the wall time)\n",
      self_rss_kib());
  return 0;
}
