// Runs a command and prints its peak resident set size: "maxrss_kib N". Exits with the
// command's exit code (127 when it cannot be started). For relative memory checks of the
// accgraph program (memory_growth.cmake).
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: maxrss PROGRAM [ARGS...]\n");
    return 2;
  }
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr, "maxrss: fork failed: %s\n", std::strerror(errno));
    return 127;
  }
  if (child == 0) {
    execv(argv[1], argv + 1);
    std::fprintf(stderr, "maxrss: cannot run %s: %s\n", argv[1], std::strerror(errno));
    _exit(127);
  }
  int status = 0;
  struct rusage usage {};
  if (wait4(child, &status, 0, &usage) < 0) {
    std::fprintf(stderr, "maxrss: wait4 failed: %s\n", std::strerror(errno));
    return 127;
  }
  std::printf("maxrss_kib %ld\n", usage.ru_maxrss);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
