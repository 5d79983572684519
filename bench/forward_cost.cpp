// forward_cost: wall time of one target forward of n new tokens over a filled KV cache, n = 1, 2, 4, ..., 64,
// as ratios to n = 1. This curve decides how large a draft tree a machine can afford: a tree of n nodes pays
// cost(n + 1) / cost(1) per cycle and must win back that ratio in accepted tokens.
//
//   forward_cost --model PATH                     # a checkpoint
//   forward_cost --dim 288 --layers 6 --vocab 32000 ...   # random weights of a given shape
//   forward_cost --model PATH --cache 64,256,1024 --n 1,2,3,4,5,6,8,12,16,24,32,48,64 --out cost.json
//                                                 # the cost model `draftlab bounds --cost` reads (one curve per
//                                                 # cached length; format "draftlab-cost/1")
//
// Method: --warmup untimed forwards, then --repeats timed ones per n; the median is reported. The new rows are
// dropped after each forward (truncate) so every measurement sees the same cache length. The n new tokens form
// a causal chain (a tree of the same size costs the same: only the mask differs).
//
// Roofline columns: GFLOP/s counts the products (2 flops per weight per row, LM head included) and attention
// (4 flops per head dimension per visible cached row); "of peak" divides it by the FMA rate this core reaches with
// the native kernels' vectors (measured here, bench/fma_peak.h). A forward near the peak cannot get cheaper without
// fewer or cheaper flops; one far below it is waiting on memory or on overhead.
#include <ATen/Parallel.h>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"
#include "core/base/platform.h"
#include "core/model/llama_model.h"
#include "bench/fma_peak.h"

namespace po = boost::program_options;
using namespace draftlab;

int main(int argc, char** argv) {
  prepare_process_environment(argc, argv);
  std::string model_path, out_path, dtype = "float32", path = "auto", weights = "auto", kv_cache = "auto",
              quant_dot = "float";
  ModelConfig c;
  c.hidden_size = 288;
  c.num_hidden_layers = 6;
  c.num_attention_heads = 6;
  c.num_key_value_heads = 6;
  c.intermediate_size = 768;
  c.vocab_size = 32000;
  c.max_position_embeddings = 1024;
  int threads = 2, warmup = 5, repeats = 21;
  double touch_mb = 0;
  int64_t max_n = 64;
  std::string cache_list = "256", n_list;

  po::options_description desc("forward_cost: target forward cost versus number of new tokens\n\noptions");
  desc.add_options()("help,h", "show this help")
      ("model", po::value(&model_path), "checkpoint (HF folder or llama2.c .bin); else random weights of --dim ...")
      ("dim", po::value(&c.hidden_size)->default_value(c.hidden_size), "hidden size (random weights)")
      ("layers", po::value(&c.num_hidden_layers)->default_value(c.num_hidden_layers), "layers")
      ("heads", po::value(&c.num_attention_heads)->default_value(c.num_attention_heads), "attention heads")
      ("kv-heads", po::value(&c.num_key_value_heads)->default_value(c.num_key_value_heads), "kv heads")
      ("hidden", po::value(&c.intermediate_size)->default_value(c.intermediate_size), "MLP intermediate size")
      ("vocab", po::value(&c.vocab_size)->default_value(c.vocab_size), "vocabulary size")
      ("cache", po::value(&cache_list)->default_value(cache_list),
       "tokens already in the KV cache; a comma-separated list measures one curve per length")
      ("max-n", po::value(&max_n)->default_value(max_n), "largest n (powers of two from 1) unless --n")
      ("n", po::value(&n_list), "comma-separated new-token counts, increasing from 1 (default: powers of two)")
      ("threads", po::value(&threads)->default_value(threads), "intra-op threads")
      ("dtype", po::value(&dtype)->default_value(dtype), "float32 or bfloat16")
      ("path", po::value(&path)->default_value(path), "CPU forward: auto, native, reference")
      ("weights", po::value(&weights)->default_value(weights),
       "native weight storage: auto (as stored), float32, float16, bfloat16, q8_0, q4_0")
      ("quant-dot", po::value(&quant_dot)->default_value(quant_dot), "q8_0 / q4_0 weights: float or int8 dot products")
      ("kv-cache", po::value(&kv_cache)->default_value(kv_cache), "KV cache storage: auto, float32, float16")
      ("warmup", po::value(&warmup)->default_value(warmup), "untimed forwards per n")
      ("repeats", po::value(&repeats)->default_value(repeats), "timed forwards per n (median reported)")
      ("touch-mb", po::value(&touch_mb)->default_value(touch_mb),
       "between forwards (untimed) read this many MB of other memory, as a draft model's work between verify "
       "forwards does: what evicting the target's weights and cache from the CPU caches costs the next forward")
      ("out", po::value(&out_path), "write the results as JSON here");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(vm);

    // Comma-separated positive integers, increasing ("--cache 64,256": the cached lengths; "--n 1,2,3").
    auto parse_list = [](const std::string& flag, const std::string& text, int64_t min_first) {
      std::vector<int64_t> out;
      size_t pos = 0;
      while (pos <= text.size()) {
        const size_t comma = std::min(text.find(',', pos), text.size());
        const std::string item = text.substr(pos, comma - pos);
        size_t used = 0;
        int64_t v = -1;
        try {
          v = std::stoll(item, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        check(used == item.size() && !item.empty() && v >= (out.empty() ? min_first : out.back() + 1),
              flag + ": expected increasing integers" + (min_first > 0 ? " from 1" : " >= 0") + ", got '" + text + "'");
        out.push_back(v);
        pos = comma + 1;
      }
      return out;
    };
    const std::vector<int64_t> caches = parse_list("--cache", cache_list, 0);
    std::vector<int64_t> ns;
    if (n_list.empty()) {
      for (int64_t n = 1; n <= max_n; n *= 2) ns.push_back(n);
    } else {
      ns = parse_list("--n", n_list, 1);
      check(ns.front() == 1, "--n: expected the list to start at 1 (the plain decoding step), got '" + n_list + "'");
    }
    max_n = ns.back();

    at::set_num_threads(threads);
    ComputeOptions compute;
    compute.dtype = parse_compute_dtype(dtype);
    compute.cpu_path = parse_cpu_path(path);
    compute.weights = parse_weight_storage(weights);
    compute.kv_cache = parse_kv_cache_storage(kv_cache);
    compute.block_dot = parse_block_dot(quant_dot);
    check_supported(compute);
    std::unique_ptr<LlamaModel> model;
    if (!model_path.empty()) {
      model = LlamaModel::load(model_path, compute);
    } else {
      c.head_dim = c.hidden_size / c.num_attention_heads;
      c.max_position_embeddings = std::max<int64_t>(1024, caches.back() + max_n);
      c.validate("command line");
      model = std::make_unique<LlamaModel>(c, random_llama_weights(c, 1234, compute), compute);
    }
    const ModelConfig& mc = model->config();
    check(caches.back() + max_n <= mc.max_position_embeddings,
          "--cache + --max-n exceed the model's context " + std::to_string(mc.max_position_embeddings));

    std::printf("model: %s | d=%ld layers=%ld heads=%ld/%ld I=%ld vocab=%ld params=%.2fM | %s | threads=%d\n",
                model_path.empty() ? "random" : model_path.c_str(), (long)mc.hidden_size, (long)mc.num_hidden_layers,
                (long)mc.num_attention_heads, (long)mc.num_key_value_heads, (long)mc.intermediate_size,
                (long)mc.vocab_size, model->num_parameters() / 1e6, dtype.c_str(), at::get_num_threads());
    std::printf("forward: %s\n", model->path_description().c_str());
    std::printf("blas: %s\ncpu: %s\nwarmup %d, repeats %d (median)\n", blas_description().c_str(),
                cpu_model_name().c_str(), warmup, repeats);
    const int64_t d = mc.hidden_size, hd = mc.head_dim, H = mc.num_attention_heads, KVH = mc.num_key_value_heads;
    const double weights_per_row =
        static_cast<double>(mc.num_hidden_layers) * (d * (H + 2 * KVH) * hd + H * hd * d + 3 * d * mc.intermediate_size) +
        static_cast<double>(mc.vocab_size) * d;
    const bool native = model->path_description().rfind("native", 0) == 0;
    const double peak = native ? bench::measured_fma_peak_gflops(best_kernel_isa()) : 0.0;
    if (peak > 0)
      std::printf("FMA peak of one core with %s vectors (measured): %.1f GFLOP/s\n", kernel_isa_name(best_kernel_isa()),
                  peak);

    check(touch_mb >= 0 && touch_mb <= 4096, "--touch-mb: expected 0..4096");
    std::vector<float> other(static_cast<size_t>(touch_mb * 1024 * 1024 / sizeof(float)), 1.0f);
    volatile float sink = 0;  // keeps the reads
    nlohmann::json curves = nlohmann::json::array();
    for (const int64_t cache_len : caches) {
      KvCache cache = model->make_cache(cache_len + max_n);
      std::vector<int64_t> prefix(cache_len);
      for (int64_t i = 0; i < cache_len; ++i) prefix[i] = (i * 7919 + 1) % mc.vocab_size;
      if (cache_len > 0) model->forward_chain(cache, prefix, {ForwardOptions::Logits::None, {}, {}});
      // Flops of one forward of n rows over cache_len cached rows (row j sees cache_len + j + 1).
      auto forward_flops = [&](int64_t n) {
        const double seen = static_cast<double>(n) * cache_len + n * (n + 1) / 2.0;
        return 2.0 * weights_per_row * n + 4.0 * mc.num_hidden_layers * H * hd * seen;
      };
      std::printf("\ncache: %ld tokens\n%6s %12s %10s %14s %10s %8s\n", (long)cache_len, "n", "median_ms", "ratio",
                  "ms_per_token", "GFLOP/s", "of_peak");
      nlohmann::json rows = nlohmann::json::array();
      double base = 0.0;
      for (const int64_t n : ns) {
        std::vector<int64_t> toks(n);
        for (int64_t i = 0; i < n; ++i) toks[i] = (i * 31 + 7) % mc.vocab_size;
        std::vector<double> ms;
        for (int r = 0; r < warmup + repeats; ++r) {
          if (!other.empty()) {  // one read per cache line of the other buffer, as a drafter reads its weights
            float sum = 0;
            for (size_t i = 0; i < other.size(); i += 16) sum += other[i];
            sink = sum;
          }
          auto t0 = std::chrono::steady_clock::now();
          // Logits for every new row: a verifier needs them all.
          model->forward_chain(cache, toks);
          double dt = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
          cache.truncate(cache_len);
          if (r >= warmup) ms.push_back(dt);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        if (n == 1) base = med;
        const double rate = forward_flops(n) / (med * 1e-3) / 1e9;
        std::printf("%6ld %12.3f %10.2f %14.3f %10.1f %7.0f%%\n", (long)n, med, med / base, med / n, rate,
                    peak > 0 ? 100.0 * rate / peak : 0.0);
        rows.push_back({{"n", n}, {"median_ms", med}, {"ratio_to_n1", med / base}, {"min_ms", ms.front()},
                        {"max_ms", ms.back()}, {"gflops", rate}});
      }
      curves.push_back({{"cached", cache_len}, {"results", rows}});
    }
    if (!out_path.empty()) {
      std::time_t now = std::time(nullptr);
      char date[64];
      std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
      nlohmann::json j = {{"format", "draftlab-cost/1"},
                          {"benchmark", "forward_cost"},
                          {"model", model_path.empty() ? "random" : model_path},
                          {"config", mc.to_hf_json(dtype)},
                          {"threads", at::get_num_threads()},
                          {"dtype", dtype},
                          {"parameters", model->num_parameters()},
                          {"forward", model->path_description()},
                          {"kv_cache", compute_dtype_name(compute.kv_cache_dtype())},
                          {"blas", blas_description()},
                          {"cpu", cpu_model_name()},
                          {"isa", kernel_isa_name(best_kernel_isa())},
                          {"fma_peak_gflops", peak},
                          {"warmup", warmup},
                          {"repeats", repeats},
                          {"touch_mb", touch_mb},
                          {"date", date},
                          {"curves", curves}};
      write_file_atomically(out_path, j.dump(2) + "\n");
      std::printf("\nwrote %s\n", out_path.c_str());
    }
  } catch (const po::error& e) {
    std::cerr << "forward_cost: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "forward_cost: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
