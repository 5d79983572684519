#include "analysis/paper_tables.h"

#include "analysis/experiment_catalog.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include "analysis/acceptance.h"
#include "analysis/experiment_catalog.h"
#include "analysis/paper_table_parts.h"
#include "analysis/run_metrics.h"
#include "core/base/error.h"

namespace draftlab::analysis {

namespace {

using namespace table_parts;


// Notes shared by the speed-like tables: vanilla's own speed, and the lossless check at T = 0.
std::vector<std::string> speed_notes(const Context& ctx, double t) {
  std::vector<std::string> notes;
  std::string vanilla = "Vanilla tokens/s:";
  bool any = false;
  int64_t identical = 0, checked = 0;
  for (size_t i = 0; i < ctx.results.runs.size(); ++i) {
    const RunRecord& run = ctx.results.runs[i];
    if (run.temperature != t) continue;
    if (is_baseline(run)) {
      vanilla += std::string(any ? "," : "") + " " + dataset_display_name(run.dataset) + " " +
                 fixed(ctx.summaries[i].tokens_per_second, 1);
      any = true;
    }
    identical += ctx.summaries[i].identical;
    checked += ctx.summaries[i].checked;
  }
  notes.push_back(any ? vanilla + "." : "No vanilla run at this temperature: speedups are not available.");
  if (checked > 0)
    notes.push_back("Output identical to vanilla on " + std::to_string(identical) + "/" + std::to_string(checked) +
                    " question turns.");
  return notes;
}

// EAGLE-2 Table 1 layout: rows = methods, column pairs (speedup, τ) per dataset, and their mean.
std::vector<Table> method_by_dataset_tables(const Context& ctx) {
  std::vector<Table> tables;
  for (double t : ctx.temperatures) {
    Table table;
    table.title = "Temperature = " + temperature_text(t);
    table.groups.push_back({"", 1});
    table.columns.push_back("Method");
    std::vector<std::string> datasets;
    for (const std::string& d : ctx.datasets) {
      bool present = false;
      for (const std::string& m : ctx.methods) present = present || ctx.find(m, d, t) >= 0;
      if (!present) continue;
      datasets.push_back(d);
      table.groups.push_back({dataset_display_name(d), 2});
      table.columns.insert(table.columns.end(), {"Speedup", "τ"});
    }
    const bool mean = datasets.size() > 1;
    if (mean) {
      table.groups.push_back({"Mean", 2});
      table.columns.insert(table.columns.end(), {"Speedup", "τ"});
    }
    for (const std::string& m : ctx.methods) {
      std::vector<Cell> row{Cell(m)};
      double speed_sum = 0, tau_sum = 0;
      int speed_n = 0, tau_n = 0, found = 0;
      for (const std::string& d : datasets) {
        const int i = ctx.find(m, d, t);
        if (i < 0) {
          row.insert(row.end(), {"–", "–"});
          continue;
        }
        ++found;
        row.insert(row.end(), {ctx.speedup(i), ctx.tau(i)});
        if (std::isfinite(ctx.summaries[i].speedup.value)) speed_sum += ctx.summaries[i].speedup.value, ++speed_n;
        if (std::isfinite(ctx.summaries[i].tau.value)) tau_sum += ctx.summaries[i].tau.value, ++tau_n;
      }
      if (found == 0) continue;
      if (mean) {
        row.push_back(speed_n ? fixed(speed_sum / speed_n, 2, "x") : "–");
        row.push_back(tau_n ? fixed(tau_sum / tau_n, 2) : "–");
      }
      table.rows.push_back(row);
    }
    table.notes = speed_notes(ctx, t);
    tables.push_back(table);
  }
  return tables;
}

// EAGLE Table 7 layout: per (T, dataset) one table of speedup over batched vanilla, τ and drafted nodes per cycle for
// each batch size (a budget that shrinks as the batch grows shows in the last), and one of throughput.
std::vector<Table> batch_tables(const Context& ctx) {
  std::vector<int64_t> sizes;
  for (const RunRecord& run : ctx.results.runs)
    if (std::find(sizes.begin(), sizes.end(), run.batch_size) == sizes.end()) sizes.push_back(run.batch_size);
  std::sort(sizes.begin(), sizes.end());
  auto find = [&](const std::string& method, const std::string& d, double t, int64_t b, bool baseline) {
    for (size_t i = 0; i < ctx.results.runs.size(); ++i) {
      const RunRecord& run = ctx.results.runs[i];
      if (run.dataset == d && run.temperature == t && run.batch_size == b &&
          (baseline ? is_baseline(run) : run.method == method))
        return static_cast<int>(i);
    }
    return -1;
  };
  std::vector<Table> tables;
  for (double t : ctx.temperatures)
    for (const std::string& d : ctx.datasets) {
      const std::string where = dataset_display_name(d) + ", T = " + temperature_text(t);
      Table speed;
      speed.title = "Speedup over batched vanilla: " + where;
      speed.groups.push_back({"", 1});
      speed.columns.push_back("Method");
      Table throughput;
      throughput.title = "Throughput (tokens/s, every sequence's tokens over the batch's wall time): " + where;
      throughput.columns.push_back("Method");
      for (int64_t b : sizes) {
        speed.groups.push_back({"Batch size " + std::to_string(b), 3});
        speed.columns.insert(speed.columns.end(), {"Speedup", "τ", "Drafted / cycle"});
        throughput.columns.push_back("B = " + std::to_string(b));
      }
      std::vector<std::string> rows{""};  // "" = the baseline
      rows.insert(rows.end(), ctx.methods.begin(), ctx.methods.end());
      for (const std::string& m : rows) {
        std::vector<Cell> srow{Cell(m.empty() ? std::string("vanilla") : m)}, trow = srow;
        bool any = false;
        for (int64_t b : sizes) {
          const int i = find(m, d, t, b, m.empty());
          if (i < 0) {
            srow.insert(srow.end(), {"–", "–", "–"});
            trow.push_back("–");
            continue;
          }
          any = true;
          const RunRecord& run = ctx.results.runs[i];
          double drafted = 0;
          for (size_t c = 0; c < run.cycles.size(); ++c) drafted += run.cycles.drafted[c];
          srow.push_back(m.empty() ? std::string("1.00x") : ctx.speedup(i));
          srow.push_back(m.empty() ? std::string("–") : ctx.tau(i));
          srow.push_back(run.cycles.size() ? fixed(drafted / static_cast<double>(run.cycles.size()), 1) : "–");
          trow.push_back(fixed(ctx.summaries[i].tokens_per_second, 1));
        }
        if (!any) continue;
        if (!m.empty()) speed.rows.push_back(srow);
        throughput.rows.push_back(trow);
      }
      speed.notes = speed_notes(ctx, t);
      speed.notes.erase(speed.notes.begin());  // vanilla's speed per batch size is the throughput table's first row
      speed.notes.push_back(
          "Each batch size is its own run of every method beside batched vanilla of that size (consecutive questions "
          "decoded together, one target forward per cycle for every sequence's tree; EAGLE drafts share each head "
          "forward across the batch).");
      tables.push_back(speed);
      tables.push_back(throughput);
    }
  return tables;
}

// EAGLE Table 3 layout: per method (the baseline first) speedup, τ, 0-α..4-α and the experts a cycle's
// verification reads, per cycle and per emitted token; a dense target reads none.
Table moe_table(const Context& ctx) {
  Table table;
  table.columns = {"T", "Dataset", "Method", "Speedup", "τ"};
  for (const std::string& h : alpha_headers(4)) table.columns.push_back(h);
  table.columns.insert(table.columns.end(), {"Experts read / cycle", "Experts read / token"});
  for (double t : ctx.temperatures)
    for (const std::string& d : ctx.datasets) {
      std::vector<int> runs;
      for (size_t i = 0; i < ctx.results.runs.size(); ++i) {
        const RunRecord& run = ctx.results.runs[i];
        if (run.dataset == d && run.temperature == t) runs.push_back(static_cast<int>(i));
      }
      std::stable_partition(runs.begin(), runs.end(), [&](int i) { return is_baseline(ctx.results.runs[i]); });
      for (int i : runs) {
        const RunRecord& run = ctx.results.runs[i];
        std::vector<Cell> row{Cell(temperature_text(t)), Cell(dataset_display_name(d)), Cell(run.method),
                              Cell(ctx.speedup(i)), Cell(ctx.tau(i))};
        for (const AlphaCount& a : n_alpha(run, 4))
          row.push_back(is_baseline(run) ? std::string("–") : fixed(a.alpha(), 2));
        double experts = 0, tokens = 0;
        for (size_t c = 0; c < run.cycles.size(); ++c) {
          experts += run.cycles.experts_read[c];
          tokens += run.cycles.accept_length[c];
        }
        const double cycles = static_cast<double>(run.cycles.size());
        row.push_back(cycles > 0 ? fixed(experts / cycles, 1) : "–");
        row.push_back(tokens > 0 ? fixed(experts / tokens, 1) : "–");
        table.rows.push_back(row);
      }
    }
  table.notes.push_back(
      "Experts read: the (layer, expert) pairs whose weights a cycle's verification forward ran (rows that chose the "
      "same expert share one pass); decoding one token reads layers x experts per token. 0 on a dense target.");
  table.notes.push_back(
      "n-α: acceptance rate of the drafts' most probable tokens at depth n + 1 whose parent was accepted.");
  return table;
}

bool is_chain(const RunRecord& run) { return run.draft_shape == draft_shapes::chain; }

// EAGLE-3 Figure 1 as a table: per (T, dataset) each head's speedup and τ beside what its training log says of it
// (family, training tokens, the data, last validation top-1), ordered by family and training tokens.
std::vector<Table> data_scaling_tables(const Context& ctx) {
  struct Head {
    std::string method, family = "–", data;
    double tokens = NAN, top1 = NAN;
  };
  std::vector<Head> heads;
  for (const std::string& m : ctx.methods) {
    Head h;
    h.method = m;
    if (const auto it = ctx.results.training.find(m); it != ctx.results.training.end()) {
      const auto& attrs = it->second.attributes;
      auto attr = [&](const char* key) { const auto a = attrs.find(key); return a == attrs.end() ? "" : a->second; };
      if (!attr("family").empty()) h.family = attr("family");
      if (!attr("train_tokens").empty()) h.tokens = std::stod(attr("train_tokens"));
      h.data = attr("data");
      if (const auto* acc = it->second.metric("accuracy"); acc && !acc->empty()) h.top1 = acc->back().front();
    }
    heads.push_back(h);
  }
  std::stable_sort(heads.begin(), heads.end(), [](const Head& a, const Head& b) {
    return a.family != b.family ? a.family < b.family : a.tokens < b.tokens;
  });
  std::vector<Table> tables;
  for (double t : ctx.temperatures)
    for (const std::string& d : ctx.datasets) {
      Table table;
      table.title = dataset_display_name(d) + ", T = " + temperature_text(t);
      table.columns = {"Head", "Family", "Training tokens", "Validation top-1", "Speedup", "τ"};
      for (const Head& h : heads) {
        const int i = ctx.find(h.method, d, t);
        if (i < 0) continue;
        table.rows.push_back({Cell(h.method), Cell(h.family), Cell(fixed(h.tokens, 0)), Cell(fixed(h.top1, 3)),
                              Cell(ctx.speedup(i)), Cell(ctx.tau(i))});
      }
      for (const Head& h : heads)
        if (!h.data.empty()) table.notes.push_back(h.method + ": " + h.data + ".");
      for (const std::string& n : speed_notes(ctx, t)) table.notes.push_back(n);
      tables.push_back(table);
    }
  return tables;
}

// EAGLE Table 5 layout: per dataset and temperature, τ (and speedup) of each method; tree methods show their
// gain over the first chain method.
Table tree_vs_chain_table(const Context& ctx) {
  Table table;
  table.groups.push_back({"", 2});
  table.columns = {"Dataset", "T"};
  for (const std::string& m : ctx.methods) {
    table.groups.push_back({m, 2});
    table.columns.insert(table.columns.end(), {"τ", "Speedup"});
  }
  for (double t : ctx.temperatures)
    for (const std::string& d : ctx.datasets) {
      std::vector<Cell> row{Cell(dataset_display_name(d)), Cell(temperature_text(t))};
      double chain_tau = NAN;
      for (const std::string& m : ctx.methods) {
        const int i = ctx.find(m, d, t);
        if (i >= 0 && is_chain(ctx.results.runs[i])) {
          chain_tau = ctx.summaries[i].tau.value;
          break;
        }
      }
      int found = 0;
      for (const std::string& m : ctx.methods) {
        const int i = ctx.find(m, d, t);
        if (i < 0) {
          row.insert(row.end(), {"–", "–"});
          continue;
        }
        ++found;
        std::string tau = ctx.tau(i);
        const double gain = ctx.summaries[i].tau.value - chain_tau;
        if (!is_chain(ctx.results.runs[i]) && std::isfinite(gain))
          tau += std::string(" (") + (gain >= 0 ? "+" : "") + fixed(gain, 2) + ")";
        row.insert(row.end(), {tau, ctx.speedup(i)});
      }
      if (found) table.rows.push_back(row);
    }
  table.notes.push_back("In brackets: the tree's τ gain over the first chain draft (draft_shape chain).");
  return table;
}

std::string json_scalar_text(const nlohmann::ordered_json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

Table sweep_table(const Context& ctx, const std::string& source) {
  // The grid point of each run: its `grid` attribute (sweeps), else its options; ordered_json keeps the
  // driver's key order (total_tokens, depth, top_k) for the columns.
  // Grid points only: when some runs carry a `grid`, runs without one (baselines timed beside the sweep) are
  // not points of it.
  const bool any_grid = std::any_of(ctx.results.runs.begin(), ctx.results.runs.end(),
                                    [](const RunRecord& r) { return !r.grid_json.empty(); });
  std::vector<nlohmann::ordered_json> grid(ctx.results.runs.size());
  std::vector<std::string> keys;
  for (size_t i = 0; i < ctx.results.runs.size(); ++i) {
    const RunRecord& run = ctx.results.runs[i];
    const std::string& text = run.grid_json.empty() ? run.options_json : run.grid_json;
    try {
      grid[i] = text.empty() ? nlohmann::ordered_json::object() : nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::ordered_json::exception&) {
      throw Error::in_file(source, "runs/" + std::to_string(i) + " grid", "a JSON object", text);
    }
    if (is_baseline(run) || !grid[i].is_object() || (!run.grid_json.empty()) != any_grid) continue;
    for (const auto& item : grid[i].items())  // "index" numbers the point for sharding; not a setting
      if (item.key() != "index" && std::find(keys.begin(), keys.end(), item.key()) == keys.end())
        keys.push_back(item.key());
  }
  std::vector<size_t> order;
  for (size_t i = 0; i < ctx.results.runs.size(); ++i)
    if (!is_baseline(ctx.results.runs[i]) && (!any_grid || !ctx.results.runs[i].grid_json.empty()))
      order.push_back(i);
  auto group = [&](size_t i) { return std::make_pair(ctx.results.runs[i].dataset, ctx.results.runs[i].temperature); };
  auto dataset_rank = [&](size_t i) {
    return std::find(ctx.datasets.begin(), ctx.datasets.end(), ctx.results.runs[i].dataset) - ctx.datasets.begin();
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (group(a) != group(b))
      return std::make_pair(dataset_rank(a), group(a).second) < std::make_pair(dataset_rank(b), group(b).second);
    for (const std::string& k : keys) {
      const nlohmann::ordered_json va = grid[a].value(k, nlohmann::ordered_json()), vb = grid[b].value(k, nlohmann::ordered_json());
      if (va != vb) return va < vb;
    }
    return false;
  });
  // Best per (dataset, T): highest speedup, or tokens/s when there is no vanilla run to compare with.
  std::map<std::pair<std::string, double>, size_t> best;
  auto score = [&](size_t i) {
    const double s = ctx.summaries[i].speedup.value;
    return std::isfinite(s) ? s : ctx.summaries[i].tokens_per_second;
  };
  for (size_t i : order) {
    const auto it = best.find(group(i));
    if (it == best.end() || score(i) > score(it->second)) best[group(i)] = i;
  }
  Table table;
  table.columns = keys;
  table.columns.insert(table.columns.end(), {"Dataset", "T", "Method", "Speedup", "τ", "tokens/s", "Best"});
  for (size_t i : order) {
    const bool is_best = best[group(i)] == i;
    std::vector<Cell> row;
    for (const std::string& k : keys)
      row.emplace_back(grid[i].contains(k) ? json_scalar_text(grid[i][k]) : "–", is_best);
    const RunRecord& run = ctx.results.runs[i];
    row.emplace_back(dataset_display_name(run.dataset), is_best);
    row.emplace_back(temperature_text(run.temperature), is_best);
    row.emplace_back(run.method, is_best);
    row.emplace_back(ctx.speedup(static_cast<int>(i)), is_best);
    row.emplace_back(ctx.tau(static_cast<int>(i)), is_best);
    row.emplace_back(fixed(ctx.summaries[i].tokens_per_second, 1), is_best);
    row.emplace_back(is_best ? "←" : "", false);
    table.rows.push_back(row);
  }
  for (const auto& [g, i] : best) {
    std::string point;
    for (const std::string& k : keys)
      if (grid[i].contains(k)) point += (point.empty() ? "" : ", ") + k + "=" + json_scalar_text(grid[i][k]);
    table.notes.push_back("Best on this machine for " + dataset_display_name(g.first) + " at T = " +
                          temperature_text(g.second) + ": " + point + " (" + fixed(ctx.summaries[i].speedup.value, 2, "x") +
                          ", τ " + fixed(ctx.summaries[i].tau.value, 2) + ", " +
                          fixed(ctx.summaries[i].tokens_per_second, 1) + " tokens/s).");
  }
  return table;
}

// The builder of each experiment's tables, by the catalog's name (analysis/experiment_catalog.h: what it reproduces
// and the heading are there). Every driver of the catalog has one (test PaperTables.EveryDriverOfTheCatalogHasTables).
struct ExperimentTables {
  const char* experiment;
  std::vector<Table> (*build)(const Context& ctx, const std::string& source);
};

const std::vector<ExperimentTables>& experiment_tables() {
  auto by_dataset = [](const Context& ctx, const std::string&) { return method_by_dataset_tables(ctx); };
  static const std::vector<ExperimentTables> table = {
      {"speed", by_dataset},
      {"eagle3", by_dataset},
      {"drafters",
       [](const Context& ctx, const std::string&) {
         std::vector<Table> tables = method_by_dataset_tables(ctx);
         for (Table& t : draft_cost_tables(ctx)) tables.push_back(std::move(t));
         return tables;
       }},
      {"ablate-eagle3", by_dataset},
      {"data-scaling", [](const Context& ctx, const std::string&) { return data_scaling_tables(ctx); }},
      {"eagle3-alpha",
       [](const Context& ctx, const std::string&) {
         return std::vector<Table>{alpha_table(ctx, false, 7), alpha_table(ctx, false, 7, true)};
       }},
      {"ablate-eagle2", by_dataset},
      {"train-data", by_dataset},
      {"alpha",
       [](const Context& ctx, const std::string&) {
         return std::vector<Table>{alpha_table(ctx, false, 4), alpha_table(ctx, false, 4, true)};
       }},
      {"ablate-inputs", [](const Context& ctx, const std::string&) { return std::vector<Table>{alpha_table(ctx, true, 1)}; }},
      {"tree-vs-chain", [](const Context& ctx, const std::string&) { return std::vector<Table>{tree_vs_chain_table(ctx)}; }},
      {"moe", [](const Context& ctx, const std::string&) { return std::vector<Table>{moe_table(ctx)}; }},
      {"batch", [](const Context& ctx, const std::string&) { return batch_tables(ctx); }},
      {"calibration", [](const Context& ctx, const std::string&) { return calibration_tables(ctx); }},
      {"positions", [](const Context& ctx, const std::string&) { return position_tables(ctx); }},
      {"sweep", [](const Context& ctx, const std::string& source) { return std::vector<Table>{sweep_table(ctx, source)}; }},
      {"compare", by_dataset},
  };
  return table;
}

std::string short_sha(const nlohmann::json& model) {
  if (!model.is_object() || !model.contains("sha256") || !model["sha256"].is_string()) return "";
  return " [sha256 " + model["sha256"].get<std::string>().substr(0, 8) + "]";
}

std::string base_name(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string dataset_display_name(const std::string& dataset) {
  static const std::map<std::string, std::string> names = {
      {"mt_bench", "MT-bench"}, {"humaneval", "HumanEval"}, {"gsm8k", "GSM8K"},
      {"alpaca", "Alpaca"},     {"sum", "CNN/DM"},          {"qa", "Natural Ques."}};
  const auto it = names.find(dataset);
  return it == names.end() ? dataset : it->second;
}

std::string machine_caption(const ResultsFile& results) {
  auto attr = [&](const std::string& name) {
    const auto it = results.attributes.find(name);
    return it == results.attributes.end() || it->second.empty() ? std::string("unknown") : it->second;
  };
  std::string caption = "Machine: " + attr("host") + " (" + attr("cpu") + "), " + std::to_string(results.threads) +
                        (results.threads == 1 ? " thread" : " threads") + ", " + attr("blas") + ", " +
                        attr("device") + " " + attr("dtype") +
                        (results.attributes.count("forward") ? ", forward: " + attr("forward") : std::string()) +
                        ". Models:";
  nlohmann::json models;
  try {
    models = nlohmann::json::parse(attr("models"));
  } catch (const nlohmann::json::exception&) {
    models = nlohmann::json();
  }
  if (models.is_object() && !models.empty()) {
    bool first = true;
    for (const auto& item : models.items()) {
      const std::string path = item.value().is_object() && item.value().contains("path") && item.value()["path"].is_string()
                                   ? item.value()["path"].get<std::string>()
                                   : item.value().dump();
      caption += std::string(first ? " " : "; ") + item.key() + " " + base_name(path) + short_sha(item.value());
      first = false;
    }
  } else {
    caption += " unknown";
  }
  caption += ". Commit " + attr("git_commit") + ", " + attr("date") + ".";
  return caption;
}

Report paper_tables(const ResultsFile& results, const std::string& source, const TableOptions& options) {
  const auto it = results.attributes.find("experiment");
  const std::string experiment = it == results.attributes.end() ? "" : it->second;
  for (const ExperimentTables& e : experiment_tables()) {
    if (experiment != e.experiment) continue;
    const ExperimentEntry& entry = find_catalog_entry(experiment);
    const Context ctx(results, options);
    Report report;
    report.caption = machine_caption(results);
    report.heading = paper_item_or_name(entry) + ": " + entry.heading;
    report.tables = e.build(ctx, source);
    return report;
  }
  std::string known;
  for (const std::string& name : driver_names()) known += (known.empty() ? "" : ", ") + name;
  throw Error::in_file(source, "experiment", "one of " + known, "'" + experiment + "'");
}

}  // namespace draftlab::analysis
