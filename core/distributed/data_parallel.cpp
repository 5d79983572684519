// The only translation unit that includes c10d (and through it Gloo's headers).
#include "core/distributed/data_parallel.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <algorithm>
#include <csignal>
#include <cstdlib>

#include "core/base/error.h"

namespace draftlab {

struct DataParallel::Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroup> group;
};

namespace {

bool is_loopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string seconds(std::chrono::milliseconds t) {
  char text[32];
  std::snprintf(text, sizeof text, "%g s", static_cast<double>(t.count()) / 1000.0);
  return text;
}

// c10d's messages go on with a C++ backtrace after the first line.
std::string first_line(const std::exception& e) {
  const std::string what = e.what();
  return what.substr(0, what.find('\n'));
}

}  // namespace

DataParallel::DataParallel(const LaunchEnvironment& env, const Options& options, at::Device device)
    : env_(env), options_(options), device_(device), group_(std::make_unique<Group>()) {
  const std::string where = env_.describe();
  const auto deadline = std::chrono::steady_clock::now() + options_.timeout;
  check(env_.world_size >= 1 && env_.rank >= 0 && env_.rank < env_.world_size,
        "data parallel: " + where + ": rank outside 0..world size - 1");
  // A rank that dies closes its sockets; the next write to one would raise SIGPIPE and end this process at once
  // (exit 141, no message: seen when rank 1 was killed mid-step). Ignored, the write fails with EPIPE and the
  // collective throws, so this rank reports the failure and exits 1 like for any other lost peer.
  std::signal(SIGPIPE, SIG_IGN);
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(env_.master_port);
    so.isServer = env_.rank == 0 && !env_.launcher_hosts_store();
    so.waitWorkers = false;  // the check-in below waits for every rank, within the same deadline
    so.timeout = options_.timeout;
    group_->store = c10::make_intrusive<c10d::TCPStore>(env_.master_addr, so);
  } catch (const std::exception& e) {
    throw Error("data parallel: " + where + ": rendezvous failed within " + seconds(options_.timeout) +
                " (are all ranks started, and is " + env_.master_addr + ":" + std::to_string(env_.master_port) +
                " reachable and free?): " + first_line(e));
  }
  c10::intrusive_ptr<c10d::Store> base = group_->store;
  if (!env_.store_prefix.empty()) base = c10::make_intrusive<c10d::PrefixStore>(env_.store_prefix, base);
  auto store = c10::make_intrusive<c10d::PrefixStore>("draftlab", base);
  // Every rank checks in and waits for the others within what is left of the timeout (the process group would
  // otherwise start waiting a whole timeout of its own).
  try {
    store->set("arrived/" + std::to_string(env_.rank), {1});
    std::vector<std::string> keys;
    for (int r = 0; r < env_.world_size; ++r) keys.push_back("arrived/" + std::to_string(r));
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    store->wait(keys, std::max(left, std::chrono::milliseconds(1)));
  } catch (const std::exception& e) {
    throw Error("data parallel: " + where + ": not every rank arrived within " + seconds(options_.timeout) + ": " +
                first_line(e));
  }
  try {
#ifdef USE_C10D_NCCL
    if (device.is_cuda()) {
      auto o = c10d::ProcessGroupNCCL::Options::create();
      o->timeout = options_.timeout;
      group_->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env_.rank, env_.world_size, o);
    }
#endif
    if (!group_->group) {
      auto o = c10d::ProcessGroupGloo::Options::create(options_.timeout);
      // One node: loopback. Several: the interface GLOO_SOCKET_IFNAME names, else the one this host's name
      // resolves to (torch.distributed's rule).
      if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
        o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
      else if (is_loopback(env_.master_addr))
        o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
      else
        o->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
      o->threads = 2;
      group_->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env_.rank, env_.world_size, o);
    }
  } catch (const std::exception& e) {
    throw Error("data parallel: " + where + ": process group not formed within " + seconds(options_.timeout) + ": " +
                first_line(e));
  }
}

DataParallel::~DataParallel() = default;

void DataParallel::wait(const std::string& what, const std::function<void()>& collective) {
  try {
    collective();
  } catch (const std::exception& e) {
    const std::string reason = first_line(e);
    throw Error("data parallel: rank " + std::to_string(env_.rank) + " of " + std::to_string(env_.world_size) + ": " +
                what + " failed (another rank ended or stopped answering for " + seconds(options_.timeout) +
                "): " + reason);
  }
}

std::string DataParallel::traffic_line() const {
  const Traffic& t = traffic_;
  const double steps = static_cast<double>(std::max<int64_t>(t.gradient_syncs, 1));
  char line[400];
  std::snprintf(line, sizeof line,
                "data parallel: %d ranks; per step %.3f MB of gradients all-reduced in %.0f bucket(s) (%.1f ms, waits "
                "included) and %.0f small reductions (%.0f bytes); %.1f MB broadcast, %.1f MB gathered in all",
                env_.world_size, static_cast<double>(t.gradient_bytes) / steps / 1e6,
                static_cast<double>(t.gradient_buckets) / steps, t.gradient_seconds / steps * 1e3,
                static_cast<double>(t.other_all_reduce_calls) / steps,
                static_cast<double>(t.other_all_reduce_bytes) / steps, static_cast<double>(t.broadcast_bytes) / 1e6,
                static_cast<double>(t.gather_bytes) / 1e6);
  return line;
}

void DataParallel::broadcast_from_main(const std::vector<at::Tensor>& tensors) {
  at::NoGradGuard no_grad;
  for (const at::Tensor& t : tensors) {
    std::vector<at::Tensor> one = {t.is_contiguous() ? t.detach() : t.detach().contiguous()};
    wait("broadcast", [&] { group_->group->broadcast(one)->wait(); });
    if (!t.is_contiguous()) t.detach().copy_(one[0]);
    traffic_.broadcast_bytes += static_cast<int64_t>(t.nbytes());
  }
}

void DataParallel::sum_gradients(const std::vector<at::Tensor>& parameters) {
  at::NoGradGuard no_grad;
  const auto start = std::chrono::steady_clock::now();
  // Which parameters have a gradient anywhere (a mixture of experts' unused expert has none on some ranks).
  std::vector<double> has(parameters.size());
  for (size_t i = 0; i < parameters.size(); ++i) has[i] = parameters[i].grad().defined() ? 1.0 : 0.0;
  has = sum(has);
  std::vector<at::Tensor> grads;
  for (size_t i = 0; i < parameters.size(); ++i) {
    if (has[i] == 0) continue;
    const at::Tensor& p = parameters[i];
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p, at::MemoryFormat::Preserve);
    grads.push_back(p.grad());
  }
  // Buckets of consecutive gradients of one dtype and device, flattened into one tensor each: a few large
  // messages instead of one per parameter.
  size_t i = 0;
  while (i < grads.size()) {
    std::vector<at::Tensor> bucket = {grads[i]};
    int64_t bytes = static_cast<int64_t>(grads[i].nbytes());
    size_t j = i + 1;
    for (; j < grads.size() && grads[j].scalar_type() == grads[i].scalar_type() &&
           grads[j].device() == grads[i].device() && bytes + static_cast<int64_t>(grads[j].nbytes()) <= options_.bucket_bytes;
         ++j) {
      bucket.push_back(grads[j]);
      bytes += static_cast<int64_t>(grads[j].nbytes());
    }
    std::vector<at::Tensor> flat_parts;
    for (const at::Tensor& g : bucket) flat_parts.push_back(g.reshape({-1}));
    std::vector<at::Tensor> flat = {at::cat(flat_parts)};
    wait("all-reduce of the gradients", [&] { group_->group->allreduce(flat)->wait(); });
    int64_t offset = 0;
    for (const at::Tensor& g : bucket) {
      g.copy_(flat[0].narrow(0, offset, g.numel()).view(g.sizes()));
      offset += g.numel();
    }
    traffic_.gradient_bytes += bytes;
    ++traffic_.gradient_buckets;
    i = j;
  }
  ++traffic_.gradient_syncs;
  traffic_.gradient_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::vector<double> DataParallel::sum(std::vector<double> values) {
  if (values.empty()) return values;
  std::vector<at::Tensor> t = {at::tensor(values, at::TensorOptions().dtype(at::kDouble)).to(device_)};
  wait("all-reduce", [&] { group_->group->allreduce(t)->wait(); });
  const at::Tensor host = t[0].to(at::kCPU);
  std::copy(host.data_ptr<double>(), host.data_ptr<double>() + values.size(), values.begin());
  traffic_.other_all_reduce_bytes += static_cast<int64_t>(values.size() * sizeof(double));
  ++traffic_.other_all_reduce_calls;
  return values;
}

std::vector<at::Tensor> DataParallel::gather_to_main(const at::Tensor& tensor) {
  std::vector<at::Tensor> input = {tensor.contiguous()};
  std::vector<std::vector<at::Tensor>> output;
  if (is_main()) {
    output.emplace_back();
    for (int r = 0; r < env_.world_size; ++r) output[0].push_back(at::empty_like(input[0]));
  }
  wait("gather", [&] { group_->group->gather(output, input)->wait(); });
  traffic_.gather_bytes += static_cast<int64_t>(tensor.nbytes());
  return is_main() ? output[0] : std::vector<at::Tensor>{};
}

std::vector<std::vector<int64_t>> DataParallel::gather_to_main(const std::vector<int64_t>& values) {
  // Gloo gathers equal shapes: pad to the longest, the true length first.
  std::vector<double> lengths(static_cast<size_t>(env_.world_size), 0.0);
  lengths[static_cast<size_t>(env_.rank)] = static_cast<double>(values.size());
  lengths = sum(lengths);
  const auto longest = static_cast<int64_t>(*std::max_element(lengths.begin(), lengths.end()));
  at::Tensor padded = at::zeros({longest + 1}, at::TensorOptions().dtype(at::kLong));
  padded[0] = static_cast<int64_t>(values.size());
  std::copy(values.begin(), values.end(), padded.data_ptr<int64_t>() + 1);
  std::vector<std::vector<int64_t>> out;
  for (const at::Tensor& t : gather_to_main(padded)) {
    const int64_t* p = t.data_ptr<int64_t>();
    out.emplace_back(p + 1, p + 1 + p[0]);
  }
  return out;
}

bool DataParallel::all_ok(bool ok) { return sum(ok ? 0.0 : 1.0) == 0.0; }

void DataParallel::barrier() {
  wait("barrier", [&] { group_->group->barrier()->wait(); });
}

}  // namespace draftlab
