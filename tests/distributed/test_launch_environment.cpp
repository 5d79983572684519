// LaunchEnvironment: the three launch contracts (torchrun, Slurm, Open MPI) read from given variables, against
// the values each launcher documents; malformed values name the variable.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/base/error.h"
#include "core/distributed/launch_environment.h"
#include "test_errors.h"

namespace draftlab {
namespace {

LaunchEnvironment read(const std::map<std::string, std::string>& vars) {
  return read_launch_environment([&](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

void expect_error(const std::map<std::string, std::string>& vars, const std::string& variable) {
  testing::expect_error([&] { read(vars); }, {variable});
}

TEST(LaunchEnvironment, NoLauncherIsOneProcess) {
  const LaunchEnvironment env = read({});
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.rank, 0);
  EXPECT_FALSE(env.distributed());
  EXPECT_EQ(env.launcher, "none");
}

TEST(LaunchEnvironment, Torchrun) {
  const LaunchEnvironment env = read({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"},
                                      {"MASTER_ADDR", "node07"}, {"MASTER_PORT", "29400"}});
  EXPECT_EQ(env.launcher, "torchrun");
  EXPECT_EQ(env.rank, 3);
  EXPECT_EQ(env.world_size, 8);
  EXPECT_EQ(env.local_rank, 1);
  EXPECT_EQ(env.master_addr, "node07");
  EXPECT_EQ(env.master_port, 29400);
  EXPECT_FALSE(env.launcher_hosts_store());
}

TEST(LaunchEnvironment, TorchrunAgentStore) {
  // torchrun's elastic agent serves the store itself; its workers are clients under the attempt's prefix.
  const LaunchEnvironment env = read({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"},
                                      {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                                      {"TORCHELASTIC_RESTART_COUNT", "2"}});
  EXPECT_TRUE(env.launcher_hosts_store());
  EXPECT_EQ(env.store_prefix, "/worker/attempt_2");
}

TEST(LaunchEnvironment, SlurmTask) {
  const LaunchEnvironment env = read({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "2"},
                                      {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_ID", "123456"},
                                      {"SLURM_JOB_NODELIST", "gpu[017-019,023],login2"}});
  EXPECT_EQ(env.launcher, "slurm");
  EXPECT_EQ(env.rank, 5);
  EXPECT_EQ(env.world_size, 6);
  EXPECT_EQ(env.local_rank, 2);
  EXPECT_EQ(env.master_addr, "gpu017");
  EXPECT_EQ(env.master_port, 29500 + 123456 % 1000);
}

TEST(LaunchEnvironment, SlurmMasterOverrides) {
  const LaunchEnvironment env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "1"},
                                      {"SLURM_JOB_NODELIST", "a"}, {"MASTER_ADDR", "b"}, {"MASTER_PORT", "1234"}});
  EXPECT_EQ(env.master_addr, "b");
  EXPECT_EQ(env.master_port, 1234);
}

TEST(LaunchEnvironment, SlurmBatchScriptOutsideSrunIsOneProcess) {
  // What sbatch --ntasks=2 gives its batch shell (seen on slurm-wlm 22.05): no SLURM_STEP_ID.
  const LaunchEnvironment env = read({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "vm"}});
  EXPECT_EQ(env.world_size, 1);
  EXPECT_EQ(env.launcher, "none");
}

TEST(LaunchEnvironment, OpenMpi) {
  const LaunchEnvironment env = read({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "2"},
                                      {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}});
  EXPECT_EQ(env.launcher, "openmpi");
  EXPECT_EQ(env.rank, 1);
  EXPECT_EQ(env.world_size, 2);
  EXPECT_EQ(env.master_addr, "127.0.0.1");
  EXPECT_EQ(env.master_port, 29500);
}

TEST(LaunchEnvironment, OpenMpiAcrossNodesNeedsMasterAddr) {
  expect_error({{"OMPI_COMM_WORLD_RANK", "1"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
               "MASTER_ADDR");
}

TEST(LaunchEnvironment, MalformedValuesNameTheVariable) {
  const std::map<std::string, std::string> good = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "29500"}};
  auto with = [&](const std::string& key, const std::string& value) {
    auto v = good;
    v[key] = value;
    return v;
  };
  expect_error(with("RANK", "2"), "RANK");          // outside 0..world - 1
  expect_error(with("RANK", "-1"), "RANK");
  expect_error(with("WORLD_SIZE", "two"), "WORLD_SIZE");
  expect_error(with("WORLD_SIZE", "0"), "WORLD_SIZE");
  expect_error(with("MASTER_PORT", "70000"), "MASTER_PORT");
  expect_error(with("MASTER_PORT", "29500x"), "MASTER_PORT");
  auto no_port = good;
  no_port.erase("MASTER_PORT");
  expect_error(no_port, "MASTER_PORT");
  expect_error({{"SLURM_PROCID", "2"}, {"SLURM_NTASKS", "2"}, {"SLURM_STEP_ID", "0"}, {"SLURM_JOB_NODELIST", "a"}},
               "SLURM_PROCID");
}

TEST(FirstSlurmHost, Forms) {
  EXPECT_EQ(first_slurm_host("vm"), "vm");
  EXPECT_EQ(first_slurm_host("a,b,c"), "a");
  EXPECT_EQ(first_slurm_host("node[01-04,07],gpu5"), "node01");
  EXPECT_EQ(first_slurm_host("node[7]"), "node7");
  EXPECT_EQ(first_slurm_host("login1,node[3-4]"), "login1");
  EXPECT_EQ(first_slurm_host("rack1-node[009,012]"), "rack1-node009");
  EXPECT_THROW(first_slurm_host(""), Error);
  EXPECT_THROW(first_slurm_host("node[]"), Error);
  EXPECT_THROW(first_slurm_host("node[a-b]"), Error);
  EXPECT_THROW(first_slurm_host("node[01-04"), Error);
}

}  // namespace
}  // namespace draftlab
