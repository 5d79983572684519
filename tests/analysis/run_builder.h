// Small hand-written runs for the analysis tests: each cycle is a list of drafted nodes, and the builder fills
// the three tables (offsets, accept lengths = accepted nodes + 1, values) the way docs/results-schema.md links them.
#pragma once

#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/results/results_file.h"

namespace draftlab::testing {

struct NodeSpec {
  int depth, tree_index, parent, rank;
  float confidence;
  int accepted;
};
using CycleSpec = std::vector<NodeSpec>;

// A 4-node chain (confidence 0.5 each) accepting its first `accepted` nodes (accept length accepted + 1).
inline CycleSpec chain(int accepted) {
  CycleSpec c;
  for (int d = 1; d <= 4; ++d) c.push_back({d, d, d - 1, 0, 0.5f, d <= accepted ? 1 : 0});
  return c;
}

struct QuestionSpec {
  int64_t id;
  int32_t turn;
  double wall_seconds;
  std::vector<CycleSpec> cycles;  // vanilla: empty cycles (one token each)
  int8_t identical = -1;
};

// The draft shape the experiment runner records for each strategy the tests use (analysis reads only the shape).
inline std::string draft_shape_of(const std::string& strategy) {
  if (strategy == "vanilla") return draft_shapes::none;
  if (strategy == "chain" || strategy == "eagle-chain" || strategy == "pld") return draft_shapes::chain;
  if (strategy == "static-tree") return draft_shapes::static_tree;
  if (strategy == "eagle2") return draft_shapes::dynamic_tree;
  throw std::invalid_argument("run_builder.h: no draft shape for strategy '" + strategy + "'");
}

inline RunRecord make_run(const std::string& method, const std::string& strategy, const std::string& dataset,
                          double temperature, const std::vector<QuestionSpec>& questions) {
  RunRecord run;
  run.method = method;
  run.strategy = strategy;
  run.draft_shape = draft_shape_of(strategy);
  run.dataset = dataset;
  run.temperature = temperature;
  for (size_t q = 0; q < questions.size(); ++q) {
    const QuestionSpec& spec = questions[q];
    QuestionRows& Q = run.questions;
    Q.question_id.push_back(spec.id);
    Q.category.push_back("");
    Q.turn.push_back(spec.turn);
    Q.prompt_tokens.push_back(10);
    Q.wall_seconds.push_back(spec.wall_seconds);
    Q.cycles.push_back(static_cast<int32_t>(spec.cycles.size()));
    Q.draft_seconds.push_back(0);
    Q.verify_seconds.push_back(0);
    Q.cycle_offset.push_back(static_cast<int64_t>(run.cycles.size()));
    Q.identical.push_back(spec.identical);
    Q.answer.push_back("answer");
    int32_t emitted = 0;
    for (const CycleSpec& cycle : spec.cycles) {
      CycleRows& C = run.cycles;
      int32_t accepted = 0;
      for (const NodeSpec& n : cycle) accepted += n.accepted;
      C.question.push_back(static_cast<int32_t>(q));
      C.accept_length.push_back(accepted + 1);
      C.drafted.push_back(static_cast<int32_t>(cycle.size()));
      C.draft_seconds.push_back(0);
      C.verify_seconds.push_back(0);
      C.experts_read.push_back(0);
      C.node_offset.push_back(static_cast<int64_t>(run.nodes.size()));
      emitted += accepted + 1;
      for (const NodeSpec& n : cycle) {
        NodeRows& N = run.nodes;
        N.cycle.push_back(static_cast<int64_t>(C.size() - 1));
        N.depth.push_back(n.depth);
        N.tree_index.push_back(n.tree_index);
        N.parent.push_back(n.parent);
        N.sibling_rank.push_back(n.rank);
        N.confidence.push_back(n.confidence);
        N.value.push_back(NAN);
        N.accepted.push_back(static_cast<int8_t>(n.accepted));
      }
    }
    Q.new_tokens.push_back(emitted);
  }
  return run;
}

// Oracle rows (results_schema.h's oracle table) for question row q: one per position, drafting `drafted` nodes.
inline void add_oracle(RunRecord& run, int32_t q, const std::vector<int32_t>& matched, int32_t drafted = 8) {
  for (size_t t = 0; t < matched.size(); ++t) {
    run.oracle.question.push_back(q);
    run.oracle.position.push_back(static_cast<int32_t>(t));
    run.oracle.matched.push_back(matched[t]);
    run.oracle.drafted.push_back(drafted);
  }
}

// A vanilla run: `tokens` one-token cycles per question.
inline RunRecord make_vanilla(const std::string& dataset, double temperature, const std::vector<int64_t>& ids,
                              const std::vector<double>& walls, int tokens = 4) {
  std::vector<QuestionSpec> qs;
  for (size_t i = 0; i < ids.size(); ++i) qs.push_back({ids[i], 0, walls[i], std::vector<CycleSpec>(tokens)});
  return make_run("vanilla", "vanilla", dataset, temperature, qs);
}

}  // namespace draftlab::testing
