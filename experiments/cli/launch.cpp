// draftlab launch: start N ranks of a draftlab command on this machine with torchrun's contract (RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT), for machines without torchrun. Like torchrun, the
// first rank to fail ends the others (SIGTERM, then SIGKILL after --grace seconds) and its exit code is ours.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "core/base/error.h"
#include "experiments/cli/commands.h"
#include "experiments/cli/model_loading.h"

namespace po = boost::program_options;

namespace draftlab::cli {

namespace {

// The ranks' process ids (-1 once ended). Global for the signal handler: a SIGTERM or SIGINT to the launcher
// (scancel, Ctrl-C, a time limit) is passed on, so no rank is left behind.
pid_t g_ranks[1024];
volatile sig_atomic_t g_rank_count = 0;
void pass_on(int signal) {
  for (int i = 0; i < g_rank_count; ++i)
    if (g_ranks[i] > 0) ::kill(g_ranks[i], signal);
}

// A TCP port on loopback that is free now (the kernel's pick; rank 0's store binds it a moment later).
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  check(fd >= 0, "launch: cannot open a socket to find a free port");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  check(ok, "launch: cannot find a free port on 127.0.0.1 (give --master-port)");
  return ntohs(a.sin_port);
}

std::string self_executable() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  check(n > 0, "launch: cannot find the draftlab executable (/proc/self/exe)");
  path[n] = '\0';
  return path;
}

int exit_code(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

}  // namespace

int run_launch(int argc, char** argv) {
  int nproc = 2, master_port = 0;
  double grace = 10;
  po::options_description desc(
      "draftlab launch: start N ranks of a draftlab command on this machine (torchrun's environment)\n\n"
      "usage: draftlab launch [--nproc N] COMMAND [ARGS...]\n"
      "  e.g. draftlab launch --nproc 2 train-head --model M --corpus C --out DIR\n\noptions");
  desc.add_options()
      ("help,h", "show this help")
      ("nproc", po::value(&nproc)->default_value(nproc), "ranks to start")
      ("master-port", po::value(&master_port)->default_value(master_port), "rank 0's rendezvous port (0 = a free one)")
      ("grace", po::value(&grace)->default_value(grace),
       "seconds the other ranks get to end after one fails, before SIGKILL");
  // Everything from the first non-option (the command) on belongs to the ranks.
  int own = 1;
  while (own < argc && argv[own][0] == '-') own += (std::strchr(argv[own], '=') || !std::strcmp(argv[own], "-h") ||
                                                    !std::strcmp(argv[own], "--help")) ? 1 : 2;
  po::variables_map vm;
  if (!parse_command_line(desc, std::min(own, argc), argv, "launch", vm)) return 0;
  check(own < argc, "launch: expected a draftlab command to run (e.g. train-head ...)");
  check(nproc >= 1 && nproc <= 1024, "--nproc: expected 1..1024, got " + std::to_string(nproc));
  check(master_port >= 0 && master_port <= 65535, "--master-port: expected 0..65535, got " + std::to_string(master_port));
  const std::string exe = self_executable();
  check(exe.find("draftlab") != std::string::npos,
        "launch: runs the draftlab executable; from " + exe + " (e.g. Python) start the ranks with torchrun instead");
  const int port = master_port > 0 ? master_port : free_port();
  // Threads per rank: the cores shared out, unless the caller chose (torchrun sets 1).
  const long cores = std::max(1L, ::sysconf(_SC_NPROCESSORS_ONLN));
  const std::string threads = std::to_string(std::max(1L, cores / nproc));

  for (int r = 0; r < nproc; ++r) {
    const pid_t pid = ::fork();
    check(pid >= 0, "launch: fork failed: " + std::string(std::strerror(errno)));
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      ::setenv("OMP_NUM_THREADS", threads.c_str(), 0);
      std::vector<char*> args = {const_cast<char*>(exe.c_str())};
      for (int i = own; i < argc; ++i) args.push_back(argv[i]);
      args.push_back(nullptr);
      ::execv(exe.c_str(), args.data());
      std::fprintf(stderr, "launch: cannot run %s: %s\n", exe.c_str(), std::strerror(errno));
      ::_exit(127);
    }
    g_ranks[r] = pid;
    g_rank_count = r + 1;
  }
  struct sigaction action {};
  action.sa_handler = pass_on;
  ::sigaction(SIGTERM, &action, nullptr);
  ::sigaction(SIGINT, &action, nullptr);
  // Wait for every rank; the first failure ends the rest.
  int result = 0;
  int running = nproc;
  bool stopping = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, stopping ? WNOHANG : 0);
    if (pid > 0) {
      const auto it = std::find(g_ranks, g_ranks + nproc, pid);
      if (it == g_ranks + nproc) continue;
      --running;
      const int rank = static_cast<int>(it - g_ranks);
      *it = -1;
      if (exit_code(status) != 0 && !stopping) {
        result = exit_code(status);
        std::fprintf(stderr, "launch: rank %d %s %d: ending the other ranks\n", rank,
                     WIFEXITED(status) ? "exited with" : "was killed by signal",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        stopping = true;
        pass_on(SIGTERM);
        deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(static_cast<int64_t>(grace * 1000));
      }
    } else if (pid < 0 && errno != EINTR) {
      break;
    } else if (stopping) {
      if (std::chrono::steady_clock::now() > deadline) pass_on(SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  return result;
}

}  // namespace draftlab::cli
