// The `accgraph` program's entry point; everything else is in accgraph_cli_core (cli.hpp).
#include <string>
#include <vector>

#include "cli.hpp"

int main(int argc, char** argv) {
  return accgraph::cli::run_program(std::vector<std::string>(argv + 1, argv + argc));
}
