#include "core/decoding/speculative_decoder.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/base/error.h"
#include "core/model/forward_clock.h"

namespace draftlab {

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// Rows the target cache gets beyond prompt + max_new_tokens: room for the last cycles' trees.
constexpr int64_t kTreeRoom = 512;

// One sequence while the batch runs (not movable: its verifier holds its sampler).
struct Slot {
  Slot(const LlamaModel& target, const BatchSequence& in, int64_t capacity, const GenerationConfig& config,
       DraftStrategy& strategy, RejectionUpdate on_rejection)
      : cache(target.make_cache(capacity)),
        sampler(config.sampling, in.seed),
        verifier(target, sampler, on_rejection, strategy.target_feature_layers()),
        strategy(strategy),
        on_token(in.on_token),
        sequence(in.prompt) {}
  KvCache cache;
  Sampler sampler;
  Verifier verifier;
  DraftStrategy& strategy;
  const TokenCallback& on_token;
  std::vector<int64_t> sequence;  // prompt + generated; back() is the next root
  SpeculativeResult result;
  bool going = true;
  // This cycle's draft.
  DraftTree tree;
  VerifyRows rows;
  CycleStats stats;
};

// One generate() call: the slots, the prefill and the cycles.
class BatchRun {
 public:
  BatchRun(const LlamaModel& target, const std::vector<BatchSequence>& sequences,
           const std::vector<DraftStrategy*>& strategies, const GenerationConfig& config, int64_t context,
           RejectionUpdate on_rejection, int32_t commit_limit)
      : target_(target), config_(config), context_(context), start_(Clock::now()) {
    for (size_t b = 0; b < sequences.size(); ++b) {
      const auto P = static_cast<int64_t>(sequences[b].prompt.size());
      slots_.push_back(std::make_unique<Slot>(target, sequences[b],
                                              speculative_cache_capacity(context, P, config.max_new_tokens), config,
                                              *strategies[b], on_rejection));
      slots_.back()->verifier.set_commit_limit(commit_limit);
      slots_.back()->result.stop_reason = "max_new_tokens";
    }
    // The target features the strategies read: one descriptor and options for the whole batch, asked once.
    verify_options_.feature_layers = slots_[0]->strategy.target_feature_layers();
  }

  // Every prompt in one forward; each first token from its prompt's last logits with its own sampler. A strategy's
  // prefill rows (DraftStrategy::prefill_rows) follow its prompt; their logits come back (one sequence: just those
  // rows and the prompt's last, Logits::Rows; several: every row) and the caches drop those rows.
  void prefill() {
    const size_t B = slots_.size();
    std::vector<SequenceRows> rows;
    std::vector<std::vector<int64_t>> chains(B), positions(B);
    std::vector<int64_t> extra(B, 0);
    bool any_extra = false;
    for (size_t b = 0; b < B; ++b) {
      Slot& s = *slots_[b];
      const auto P = static_cast<int64_t>(s.sequence.size());
      chains[b] = prompt_with_prefill_rows(s.strategy, s.sequence, s.cache.capacity() - P);
      extra[b] = static_cast<int64_t>(chains[b].size()) - P;
      any_extra = any_extra || extra[b] > 0;
      positions[b].resize(chains[b].size());
      for (size_t i = 0; i < chains[b].size(); ++i) positions[b][i] = static_cast<int64_t>(i);
      rows.push_back({&s.cache, chains[b].data(), positions[b].data(), static_cast<int64_t>(chains[b].size()),
                      nullptr});
    }
    ForwardOptions options;
    options.feature_layers = verify_options_.feature_layers;
    options.logits = !any_extra ? ForwardOptions::Logits::Last
                                : (B == 1 ? ForwardOptions::Logits::Rows : ForwardOptions::Logits::All);
    if (options.logits == ForwardOptions::Logits::Rows) {
      const auto P = static_cast<int64_t>(slots_[0]->sequence.size());
      options.rows = at::arange(P - 1, P + extra[0], at::kLong);
    }
    const auto out = target_.forward_batch(rows, options);
    forwards_ = 1;
    prefill_seconds_ = seconds(start_, Clock::now());
    for (size_t b = 0; b < B; ++b) {
      Slot& s = *slots_[b];
      const auto P = static_cast<int64_t>(s.sequence.size());
      if (extra[b] > 0) s.cache.truncate(P);
      // The row of the prompt's last logits: 0 unless every row came back.
      const int64_t last = options.logits == ForwardOptions::Logits::All ? P - 1 : 0;
      const int64_t first = s.sampler.sample(out[b].logits[last]);
      s.result.forwards = 1;
      s.result.prefill_seconds = prefill_seconds_;
      const std::vector<int64_t> prompt = s.sequence;
      s.sequence.push_back(first);
      if (emit(s, first)) {
        s.strategy.begin(prompt, extra[b] > 0 ? out[b].features.narrow(0, 0, P) : out[b].features, first);
        if (extra[b] > 0) s.strategy.observe_prefill_rows(out[b].logits.narrow(0, last + 1, extra[b]));
      } else {
        finish(s);
      }
    }
  }

  // One cycle of every sequence still going; false when none is.
  bool cycle() {
    active_.clear();
    for (auto& s : slots_) {
      if (s->going && s->cache.length() >= context_) {  // the root cannot be fed: same bound as vanilla
        s->result.stop_reason = "context";
        finish(*s);
      }
      if (s->going) active_.push_back(s.get());
    }
    if (active_.empty()) return false;
    draft();
    verify();
    accept();
    return true;
  }

  BatchResult result() {
    BatchResult batch;
    batch.prefill_seconds = prefill_seconds_;
    batch.decode_seconds = seconds(start_, Clock::now()) - prefill_seconds_;
    batch.forwards = forwards_;
    batch.batch_rows = std::move(batch_rows_);
    batch.batch_active = std::move(batch_active_);
    for (auto& s : slots_) batch.sequences.push_back(std::move(s->result));
    return batch;
  }

 private:
  // Every sequence's request to one strategy (DraftStrategy::propose_batch), which may share its forwards; each
  // sequence is charged its 1/B share of the time.
  void draft() {
    const auto B = static_cast<int32_t>(active_.size());
    requests_.clear();
    peers_.clear();
    for (Slot* s : active_) {
      s->stats = CycleStats{};
      const int64_t room = s->cache.capacity() - s->cache.length() - 1;
      const int64_t wanted = config_.max_new_tokens - static_cast<int64_t>(s->result.tokens.size());
      requests_.push_back({s->sequence, static_cast<int32_t>(std::min<int64_t>(room, INT32_MAX)),
                           static_cast<int32_t>(std::min<int64_t>(wanted, INT32_MAX)), s->sampler, B});
      peers_.push_back(&s->strategy);
    }
    const double forwards_before = ForwardClock::seconds();
    const auto t0 = Clock::now();
    std::vector<DraftTree> trees = peers_[0]->propose_batch(peers_, requests_);
    const double share = seconds(t0, Clock::now()) / B;
    const double forward_share = (ForwardClock::seconds() - forwards_before) / B;
    check(trees.size() == active_.size(), [&] {
      return "strategy " + peers_[0]->name() + ": propose_batch returned " + std::to_string(trees.size()) +
             " trees for " + std::to_string(active_.size()) + " sequences";
    });
    for (size_t i = 0; i < active_.size(); ++i) {
      Slot& s = *active_[i];
      s.tree = std::move(trees[i]);
      s.stats.draft_seconds = share;
      s.stats.forward_seconds = forward_share;
      const int64_t room = requests_[i].max_nodes;
      if (s.tree.size() + s.tree.extra_size() > room)
        throw Error("strategy " + s.strategy.name() + " drafted " + std::to_string(s.tree.size()) + " nodes and " +
                    std::to_string(s.tree.extra_size()) + " extra rows, but only " + std::to_string(room) +
                    " fit the context");
      s.rows = Verifier::rows(s.cache, s.sequence.back(), s.tree);
    }
  }

  // Every tree in one target forward, then each sequence accepts on its own (Verifier::accept).
  void verify() {
    const auto B = static_cast<int32_t>(active_.size());
    rows_.clear();
    int32_t total_rows = 0;
    for (Slot* s : active_) {
      rows_.push_back(s->rows.sequence(s->cache));
      total_rows += static_cast<int32_t>(rows_.back().n);
    }
    const auto t0 = Clock::now();
    const auto outs = target_.forward_batch(rows_, verify_options_);
    const double share = seconds(t0, Clock::now()) / B;
    ++forwards_;
    batch_rows_.push_back(total_rows);
    batch_active_.push_back(B);
    verified_.resize(active_.size());
    for (size_t i = 0; i < active_.size(); ++i) {
      Slot& s = *active_[i];
      const double forwards_before = ForwardClock::seconds();
      const auto a = Clock::now();
      verified_[i] = s.verifier.accept(s.cache, s.tree, s.rows, outs[i]);
      s.stats.verify_seconds = share + seconds(a, Clock::now());
      s.stats.forward_seconds += ForwardClock::seconds() - forwards_before + share;
    }
  }

  // Every strategy learns its result (observe_batch, shared likewise); each sequence records the cycle and emits.
  void accept() {
    const auto B = static_cast<int32_t>(active_.size());
    results_.clear();
    for (size_t i = 0; i < active_.size(); ++i) results_.push_back(&verified_[i]);
    const double forwards_before = ForwardClock::seconds();
    const auto t0 = Clock::now();
    peers_[0]->observe_batch(peers_, results_);
    const double share = seconds(t0, Clock::now()) / B;
    const double forward_share = (ForwardClock::seconds() - forwards_before) / B;
    for (size_t i = 0; i < active_.size(); ++i) {
      Slot& s = *active_[i];
      const VerifyResult& v = verified_[i];
      s.stats.draft_seconds += share;
      s.stats.forward_seconds += forward_share;
      s.stats.drafted = s.tree.size();
      s.stats.accepted = static_cast<int32_t>(v.accepted_nodes.size());
      s.stats.rejected = v.rejections;
      s.stats.matched = v.matched();
      s.stats.experts_read = static_cast<int32_t>(v.experts_read);
      ++s.result.forwards;
      for (const auto& r : v.records) {
        s.result.records.push_back(r);
        s.result.record_cycle.push_back(static_cast<int32_t>(s.result.cycles.size()));
      }
      s.result.cycles.push_back(s.stats);
      for (int64_t token : v.tokens) {
        s.sequence.push_back(token);
        if (!emit(s, token)) {
          finish(s);
          break;
        }
      }
    }
  }

  // Emits a token unless it stops the sequence; returns false when the sequence is over.
  bool emit(Slot& s, int64_t token) {
    const auto& stops = config_.stop_tokens;
    if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
      s.result.stop_reason = "stop_token";
      return false;
    }
    s.result.tokens.push_back(token);
    if (s.on_token) s.on_token(token);
    return static_cast<int64_t>(s.result.tokens.size()) < config_.max_new_tokens;
  }
  void finish(Slot& s) {
    s.going = false;
    s.result.decode_seconds = seconds(start_, Clock::now()) - prefill_seconds_;
  }

  const LlamaModel& target_;
  const GenerationConfig& config_;
  const int64_t context_;
  const Clock::time_point start_;
  std::vector<std::unique_ptr<Slot>> slots_;
  ForwardOptions verify_options_;  // every row's logits, the strategies' features
  double prefill_seconds_ = 0.0;
  int64_t forwards_ = 0;
  std::vector<int32_t> batch_rows_, batch_active_;
  // This cycle's (kept across cycles for their capacity).
  std::vector<Slot*> active_;
  std::vector<DraftRequest> requests_;
  std::vector<DraftStrategy*> peers_;
  std::vector<SequenceRows> rows_;
  std::vector<VerifyResult> verified_;
  std::vector<const VerifyResult*> results_;
};

}  // namespace

int64_t speculative_cache_capacity(int64_t context, int64_t prompt_tokens, int64_t max_new_tokens) {
  return std::min(context, prompt_tokens + max_new_tokens + kTreeRoom);
}

double SpeculativeResult::tau() const {
  if (cycles.empty()) return 0.0;
  double total = 0.0;
  for (const auto& c : cycles) total += c.accepted + 1;
  return total / static_cast<double>(cycles.size());
}

double SpeculativeResult::draft_seconds() const {
  double s = 0.0;
  for (const auto& c : cycles) s += c.draft_seconds;
  return s;
}

double SpeculativeResult::verify_seconds() const {
  double s = 0.0;
  for (const auto& c : cycles) s += c.verify_seconds;
  return s;
}

double SpeculativeResult::forward_seconds() const {
  double s = 0.0;
  for (const auto& c : cycles) s += c.forward_seconds;
  return s;
}

double SpeculativeResult::overhead_per_cycle() const {
  if (cycles.empty()) return 0.0;
  return (draft_seconds() + verify_seconds() - forward_seconds()) / static_cast<double>(cycles.size());
}

int64_t BatchResult::tokens() const {
  int64_t n = 0;
  for (const auto& s : sequences) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

double BatchResult::tokens_per_second() const {
  const double wall = prefill_seconds + decode_seconds;
  return wall > 0 ? static_cast<double>(tokens()) / wall : 0.0;
}

SpeculativeDecoder::SpeculativeDecoder(const LlamaModel& target, std::vector<DraftStrategy*> strategies,
                                       RejectionUpdate on_rejection)
    : target_(target), strategies_(std::move(strategies)), on_rejection_(on_rejection) {}

BatchResult SpeculativeDecoder::generate(const std::vector<BatchSequence>& sequences, const GenerationConfig& config) {
  check(sequences.size() == strategies_.size(), [&] {
    return "speculative decoding: " + std::to_string(sequences.size()) + " sequences for " +
           std::to_string(strategies_.size()) + " strategies (expected one strategy per sequence)";
  });
  check(!sequences.empty(), "speculative decoding: no sequences");
  const int64_t context = generation_context(target_, config);
  for (size_t b = 0; b < sequences.size(); ++b) {
    try {
      check_prompt_fits(sequences[b].prompt, context);
    } catch (const Error& e) {
      if (sequences.size() == 1) throw;
      throw Error("batch sequence " + std::to_string(b) + ": " + e.what());
    }
  }
  check_generation_config(config);
  if (config.max_new_tokens == 0) {
    BatchResult empty;
    empty.sequences.resize(sequences.size());
    for (auto& r : empty.sequences) r.stop_reason = "max_new_tokens";
    return empty;
  }
  BatchRun run(target_, sequences, strategies_, config, context, on_rejection_, commit_limit_);
  run.prefill();
  while (run.cycle()) {
  }
  return run.result();
}

SpeculativeResult SpeculativeDecoder::generate(const std::vector<int64_t>& prompt, const GenerationConfig& config,
                                               const TokenCallback& on_token) {
  return std::move(generate({BatchSequence{prompt, config.seed, on_token}}, config).sequences[0]);
}

}  // namespace draftlab
