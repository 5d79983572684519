#include "core/distributed/launch_environment.h"

#include <cstdlib>

#include "core/base/error.h"

namespace draftlab {

namespace {

int parse_int(const char* name, const char* value, int low, int high) {
  const std::string text = value;
  size_t used = 0;
  long v = 0;
  try {
    v = std::stol(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < low || v > high)
    throw Error("environment variable " + std::string(name) + ": expected an integer in " + std::to_string(low) +
                ".." + std::to_string(high) + ", got '" + text + "'");
  return static_cast<int>(v);
}

}  // namespace

std::string LaunchEnvironment::describe() const {
  return "rank " + std::to_string(rank) + " of " + std::to_string(world_size) + " (" + launcher +
         ", rendezvous at " + master_addr + ":" + std::to_string(master_port) + ")";
}

std::string first_slurm_host(const std::string& nodelist) {
  // Hosts are separated by commas outside brackets; a bracket holds ranges of numbers with their zero padding.
  const size_t bracket = nodelist.find('['), comma = nodelist.find(',');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket)) {
    const std::string host = nodelist.substr(0, comma);
    check(!host.empty(), "SLURM_JOB_NODELIST: expected a host list such as node[01-04],gpu5, got '" + nodelist + "'");
    return host;
  }
  const size_t close = nodelist.find(']', bracket);
  check(bracket > 0 && close != std::string::npos && close > bracket + 1,
        "SLURM_JOB_NODELIST: expected a host list such as node[01-04],gpu5, got '" + nodelist + "'");
  const std::string ranges = nodelist.substr(bracket + 1, close - bracket - 1);
  const std::string first = ranges.substr(0, ranges.find_first_of(",-"));
  check(!first.empty() && first.find_first_not_of("0123456789") == std::string::npos,
        "SLURM_JOB_NODELIST: expected numbers in brackets, got '" + nodelist + "'");
  return nodelist.substr(0, bracket) + first;
}

LaunchEnvironment read_launch_environment(const std::function<const char*(const char*)>& get_in) {
  const auto get = [&](const char* name) -> const char* {
    const char* v = get_in ? get_in(name) : std::getenv(name);
    return v && *v ? v : nullptr;
  };
  LaunchEnvironment env;
  constexpr int kMaxRanks = 1 << 20;
  auto take = [&](const char* rank, const char* size, const char* local) {
    env.world_size = parse_int(size, get(size), 1, kMaxRanks);
    env.rank = parse_int(rank, get(rank), 0, env.world_size - 1);
    env.local_rank = get(local) ? parse_int(local, get(local), 0, kMaxRanks) : 0;
  };
  if (get("RANK") || get("WORLD_SIZE")) {
    for (const char* name : {"RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"})
      check(get(name) != nullptr, std::string("environment variable ") + name +
                                      ": expected it set beside RANK and WORLD_SIZE (torchrun's contract)");
    env.launcher = "torchrun";
    take("RANK", "WORLD_SIZE", "LOCAL_RANK");
    if (get("TORCHELASTIC_USE_AGENT_STORE") && std::string(get("TORCHELASTIC_USE_AGENT_STORE")) == "True") {
      const char* attempt = get("TORCHELASTIC_RESTART_COUNT");
      env.store_prefix = "/worker/attempt_" + std::string(attempt ? attempt : "0");
    }
  } else if (get("SLURM_PROCID") && get("SLURM_NTASKS") && get("SLURM_STEP_ID")) {
    env.launcher = "slurm";
    take("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID");
    if (!get("MASTER_ADDR")) {
      const char* nodes = get("SLURM_STEP_NODELIST") ? get("SLURM_STEP_NODELIST") : get("SLURM_JOB_NODELIST");
      check(nodes != nullptr, "environment variable SLURM_JOB_NODELIST: expected the job's hosts (or set MASTER_ADDR)");
      env.master_addr = first_slurm_host(nodes);
    }
    if (!get("MASTER_PORT") && get("SLURM_JOB_ID"))
      env.master_port = 29500 + static_cast<int>(std::strtoul(get("SLURM_JOB_ID"), nullptr, 10) % 1000);
  } else if (get("OMPI_COMM_WORLD_RANK")) {
    env.launcher = "openmpi";
    take("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK");
    const char* local_size = get("OMPI_COMM_WORLD_LOCAL_SIZE");
    const bool one_node = local_size && parse_int("OMPI_COMM_WORLD_LOCAL_SIZE", local_size, 1, kMaxRanks) == env.world_size;
    check(one_node || get("MASTER_ADDR"),
          "environment variable MASTER_ADDR: expected the host of rank 0 when the ranks span several nodes "
          "(mpirun -x MASTER_ADDR=HOST)");
  }
  if (get("MASTER_ADDR")) env.master_addr = get("MASTER_ADDR");
  if (get("MASTER_PORT")) env.master_port = parse_int("MASTER_PORT", get("MASTER_PORT"), 1, 65535);
  return env;
}

}  // namespace draftlab
