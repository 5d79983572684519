// The data-parallel flag and the join of a job, for the commands that run on several ranks (train-lm, train-head,
// gen-head-data). Who is who comes from the launcher's environment (core/distributed/launch_environment.h):
//   torchrun --nproc-per-node 2 $(which draftlab) train-head ...   (or: draftlab launch --nproc 2 train-head ...)
//   srun --ntasks 2 draftlab train-head ...
//   mpirun -n 2 draftlab train-head ...
#pragma once

#include <boost/program_options.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

#include "core/base/error.h"
#include "core/distributed/data_parallel.h"

namespace draftlab::cli {

inline void add_data_parallel_options(boost::program_options::options_description& desc, double& timeout_s) {
  desc.add_options()("dist-timeout", boost::program_options::value(&timeout_s)->default_value(timeout_s),
                     "several ranks (torchrun, srun, mpirun, draftlab launch): seconds the rendezvous and each "
                     "collective wait for the other ranks before every rank ends with an error");
}

// The job this process is a rank of, or null when the environment names none (one process).
inline std::shared_ptr<DataParallel> join_data_parallel(double timeout_s, at::Device device) {
  check(timeout_s > 0, "--dist-timeout: expected a positive number of seconds, got " + std::to_string(timeout_s));
  const LaunchEnvironment env = read_launch_environment();
  if (!env.distributed()) return nullptr;
  DataParallel::Options options;
  options.timeout = std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000));
  auto parallel = std::make_shared<DataParallel>(env, options, device);
  if (parallel->is_main())
    std::fprintf(stderr, "data parallel: %d ranks (%s, rendezvous at %s:%d)\n", env.world_size, env.launcher.c_str(),
                 env.master_addr.c_str(), env.master_port);
  return parallel;
}

}  // namespace draftlab::cli
