// LaunchEnvironment - who this process is in a multi-process job, as its launcher says in the environment.
//
// Three launch contracts, tried in this order:
//   torchrun (and `draftlab launch`)  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT; torchrun's agent
//                                     already serves a store there (TORCHELASTIC_USE_AGENT_STORE=True): then every
//                                     rank is its client, under /worker/attempt_$TORCHELASTIC_RESTART_COUNT
//   Slurm (a task of `srun`)          SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID; the rendezvous host is the first
//                                     host of SLURM_JOB_NODELIST (or MASTER_ADDR), the port MASTER_PORT or
//                                     29500 + SLURM_JOB_ID % 1000 (two jobs sharing a node do not collide)
//   Open MPI (`mpirun`)               OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK;
//                                     MASTER_ADDR (127.0.0.1 when every rank is on this node), MASTER_PORT or 29500
// None of them: one process (world size 1). A Slurm batch script outside srun (no SLURM_STEP_ID) is one process
// too, whatever SLURM_NTASKS says: its tasks are started by srun, not by sbatch.
#pragma once

#include <functional>
#include <string>

namespace draftlab {

struct LaunchEnvironment {
  int rank = 0, world_size = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string launcher = "none";  // torchrun, slurm, openmpi or none
  // Set when torchrun's agent hosts the store at the master address (rank 0 must not bind it): its keys' prefix.
  std::string store_prefix;

  bool launcher_hosts_store() const { return !store_prefix.empty(); }

  bool distributed() const { return world_size > 1; }
  // "rank 1 of 2 (slurm, rendezvous at node01:29517)"
  std::string describe() const;
};

// Reads the variables through `get` (std::getenv by default; tests pass a map). Throws Error naming the variable
// and the expected value on a malformed or inconsistent one (a rank outside 0..size-1, a port outside 1..65535).
LaunchEnvironment read_launch_environment(const std::function<const char*(const char*)>& get = {});

// The first host of a Slurm node list: "node[01-04,07],gpu5" -> "node01", "a,b" -> "a". Throws Error on an
// empty or malformed list.
std::string first_slurm_host(const std::string& nodelist);

}  // namespace draftlab
