#include "analysis/experiment_catalog.h"

#include <cctype>

#include "core/base/error.h"

namespace draftlab::analysis {

namespace {

const char* kAblationHeads = "bash scripts/train_ablation_heads.sh";

}  // namespace

const std::vector<ExperimentEntry>& experiment_catalog() {
  // name, paper item, table heading, figures, reproduce.sh's runs (run, note), what must run first, driver
  static const std::vector<ExperimentEntry> catalog = {
      {"speed", "EAGLE-2 Table 1", "speedup and average acceptance length τ per dataset", {"speed"},
       {{"speed", "its seven methods x six datasets x T in {0, 1}; speed-llama-cpp.md: beside llama.cpp's speculative types"}}, ""},
      {"eagle3", "EAGLE-3 Table 1", "EAGLE-2 beside EAGLE-3 at the same tree settings: speedup and τ per dataset",
       {"speed"}, {{"eagle3", "EAGLE-2 beside EAGLE-3, same trees, six sets, T 0 and 1"}}, ""},
      {"eagle3-alpha", "EAGLE-3 Figure 7", "acceptance rate n-α of 8-token chains, EAGLE-2 head vs EAGLE-3 head",
       {"n_alpha"}, {{"eagle3-alpha", "n-α, n = 0..7, EAGLE-2 head vs EAGLE-3 head"}}, ""},
      {"data-scaling", "EAGLE-3 Figure 1", "speedup and τ of heads trained on more and more data", {"scaling"},
       {{"data-scaling", "speedup and τ against training data"}}, "bash scripts/train_scaling_heads.sh"},
      {"alpha", "EAGLE Table 2", "average acceptance length τ and acceptance rate n-α", {"ablation"},
       {{"alpha", "τ and 0-α .. 4-α of chain drafts"}}, ""},
      {"calibration", "EAGLE-2 Figure 6", "acceptance rate per draft-confidence bin (width 0.05)", {"reliability"},
       {{"calibration", "acceptance per draft-confidence bin, ECE"}}, ""},
      {"positions", "EAGLE-2 Figure 5", "acceptance rate of static tree positions per question", {"positions"},
       {{"positions", "acceptance of static-tree positions per query"}}, ""},
      {"ablate-eagle2", "EAGLE-2 Table 3", "ablation of value and reranking", {"ablation"},
       {{"ablate-eagle2", "w/o value, w/o reranking, w/o both"}}, ""},
      {"tree-vs-chain", "EAGLE Table 5", "τ with tree and chain drafts", {"ablation"},
       {{"tree-vs-chain", "static tree vs chain, same head"}}, ""},
      {"sweep", "", "speedup and τ over the grid (best point in bold)", {"sweep"},
       {{"sweep", "total_tokens x depth x top_k: the best point for this machine"}}, ""},
      {"ablate-inputs", "EAGLE Figure 8", "draft heads with different inputs", {"ablation"},
       {{"ablate-inputs", "one head per input variant"}}, kAblationHeads},
      {"train-data", "EAGLE Table 6", "speedup and τ by the head's training data", {"ablation"},
       {{"train-data", "heads trained on fixed vs target-generated data"}}, kAblationHeads},
      {"ablate-eagle3", "EAGLE-3 Table 2", "EAGLE-2 head, TTT with the top-layer feature only, TTT + fusion",
       {"ablation"}, {{"ablate-eagle3", "EAGLE-2 head / TTT, top layer only / TTT + fusion"}}, kAblationHeads},
      {"moe", "EAGLE Table 3", "speedup, τ, n-α and experts read per verification", {"ablation"},
       {{"moe", "the mixture-of-experts ts-moe"}, {"moe-dense", "the same drafts on the dense ts-target"}}, ""},
      {"quantized", "EAGLE Table 4", "every method per weight storage beside llama.cpp's plain and speculative decoding on the same GGUF files",
       {}, {{"quantized", "f32 / f16 / q8_0 / q4_0 (float and int8 dot), 1 and 2 threads, beside llama.cpp's plain and speculative decoding"}}, "", false},
      {"batch", "EAGLE Table 7", "speedup, τ and throughput per batch size", {"batch"},
       {{"batch", "batch sizes 1-4 and 8, speedup and throughput"}}, ""},
      {"drafters", "2026 drafters", "drafters of K tokens per forward beside EAGLE-2 / EAGLE-3: speedup and τ per dataset",
       {"speed", "profile"}, {{"drafters", "PARD, DFlash (B 4 / 8 / 16), DDTree, suffix beside EAGLE-2 / EAGLE-3 4 / 4 / 1; drafters-llama-cpp.md: beside llama.cpp's speculative types"}}, ""},
      {"compare", "", "speedup and average acceptance length τ of the methods compared", {"speed"}, {}, ""},
  };
  return catalog;
}

const ExperimentEntry& find_catalog_entry(const std::string& name) {
  for (const ExperimentEntry& e : experiment_catalog())
    if (e.name == name) return e;
  std::string known;
  for (const ExperimentEntry& e : experiment_catalog()) known += (known.empty() ? "" : ", ") + e.name;
  throw Error("expected an experiment of the catalog (" + known + "), got '" + name + "'");
}

std::vector<std::string> driver_names() {
  std::vector<std::string> names;
  for (const ExperimentEntry& e : experiment_catalog())
    if (e.driver) names.push_back(e.name);
  return names;
}

std::string paper_item_or_name(const ExperimentEntry& entry) {
  if (!entry.paper_item.empty()) return entry.paper_item;
  std::string name = entry.name;
  name[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(name[0])));
  return name;
}

std::string reproduce_list_text() {
  std::string out;
  for (const ExperimentEntry& e : experiment_catalog())
    for (const ExperimentEntry::Run& run : e.runs)
      out += run.name + "\t" + run.name + (e.driver ? ".h5" : ".md") + "\t" + e.name + "\t" + paper_item_or_name(e) +
             "\t" + (e.prepare.empty() ? "-" : e.prepare) + "\t" + run.note + "\n";
  return out;
}

}  // namespace draftlab::analysis
