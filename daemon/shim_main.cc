// tpud-shim: started by tpud for one attempt; keeps the trainer running across
// tpud restarts (see daemon/shim/shim.h). Usage: tpud-shim ATTEMPT_DIR, or
// tpud-shim --standby with the directory sent later on stdin.
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <iostream>

#include "daemon/shim/shim.h"

int main(int argc, char** argv) {
  const bool standby = argc == 2 && std::strcmp(argv[1], "--standby") == 0;
  if (argc != 2 || (argv[1][0] == '-' && !standby)) {
    std::cerr << "usage: tpud-shim ATTEMPT_DIR | tpud-shim --standby (then the directory on stdin)\n"
                 "Started by tpud for one attempt; not meant to be run by hand.\n";
    return 2;
  }
  spdlog::set_default_logger(spdlog::stderr_logger_mt("tpud-shim"));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e%z %l [%P] %v");
  return standby ? tpud::shim::RunStandbyShim() : tpud::shim::RunShim(argv[1]);
}
