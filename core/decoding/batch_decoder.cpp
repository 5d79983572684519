#include "core/decoding/batch_decoder.h"

#include <algorithm>
#include <chrono>
#include <memory>

#include "core/base/error.h"
#include "core/model/forward_clock.h"

namespace draftlab {

namespace {

using Clock = std::chrono::steady_clock;
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// One sequence while the batch runs (not movable: its verifier holds its sampler).
struct Slot {
  Slot(const LlamaModel& target, const BatchSequence& in, int64_t capacity, const GenerationConfig& config,
       DraftStrategy& strategy, RejectionUpdate on_rejection)
      : cache(target.make_cache(capacity)),
        sampler(config.sampling, in.seed),
        verifier(target, sampler, on_rejection, strategy.target_feature_layers()),
        strategy(strategy),
        sequence(in.prompt) {}
  KvCache cache;
  Sampler sampler;
  Verifier verifier;
  DraftStrategy& strategy;
  std::vector<int64_t> sequence;  // prompt + generated; back() is the next root
  SpeculativeResult result;
  bool going = true;
  // This cycle's draft.
  DraftTree tree;
  VerifyRows rows;
  CycleStats stats;
};

}  // namespace

int64_t BatchResult::tokens() const {
  int64_t n = 0;
  for (const auto& s : sequences) n += static_cast<int64_t>(s.tokens.size());
  return n;
}

double BatchResult::tokens_per_second() const {
  const double wall = prefill_seconds + decode_seconds;
  return wall > 0 ? static_cast<double>(tokens()) / wall : 0.0;
}

BatchSpeculativeDecoder::BatchSpeculativeDecoder(const LlamaModel& target, std::vector<DraftStrategy*> strategies,
                                                 RejectionUpdate on_rejection)
    : target_(target), strategies_(std::move(strategies)), on_rejection_(on_rejection) {}

BatchResult BatchSpeculativeDecoder::generate(const std::vector<BatchSequence>& sequences,
                                              const GenerationConfig& config) {
  check(sequences.size() == strategies_.size(), [&] {
    return "batch decoding: " + std::to_string(sequences.size()) + " sequences for " +
           std::to_string(strategies_.size()) + " strategies (expected one strategy per sequence)";
  });
  check(!sequences.empty(), "batch decoding: no sequences");
  check(config.max_new_tokens >= 0, "max_new_tokens must be >= 0");
  const int64_t context = generation_context(target_, config);
  for (size_t b = 0; b < sequences.size(); ++b) {
    try {
      check_prompt_fits(sequences[b].prompt, context);
    } catch (const Error& e) {
      throw Error("batch sequence " + std::to_string(b) + ": " + e.what());
    }
  }
  const size_t B = sequences.size();
  BatchResult batch;
  batch.sequences.resize(B);
  if (config.max_new_tokens == 0) {
    for (auto& r : batch.sequences) r.stop_reason = "max_new_tokens";
    return batch;
  }

  std::vector<std::unique_ptr<Slot>> slots;
  for (size_t b = 0; b < B; ++b) {
    const int64_t P = static_cast<int64_t>(sequences[b].prompt.size());
    slots.push_back(std::make_unique<Slot>(target_, sequences[b],
                                           speculative_cache_capacity(context, P, config.max_new_tokens), config,
                                           *strategies_[b], on_rejection_));
    slots.back()->result.stop_reason = "max_new_tokens";
  }
  const auto t_start = Clock::now();
  auto finish = [&](Slot& s) {
    s.going = false;
    s.result.decode_seconds = seconds(t_start, Clock::now()) - batch.prefill_seconds;
  };
  // Emits a token unless it stops the sequence; returns false when the sequence is over.
  auto emit = [&](Slot& s, int64_t token) {
    if (std::find(config.stop_tokens.begin(), config.stop_tokens.end(), token) != config.stop_tokens.end()) {
      s.result.stop_reason = "stop_token";
      return false;
    }
    s.result.tokens.push_back(token);
    return static_cast<int64_t>(s.result.tokens.size()) < config.max_new_tokens;
  };

  // The target features the strategies read: one descriptor and options for the whole batch, asked once.
  const std::vector<int64_t> feature_layers = slots[0]->strategy.target_feature_layers();
  ForwardOptions all_rows;
  all_rows.feature_layers = feature_layers;

  // Prefill: every prompt in one forward; each first token from its prompt's last logits with its own sampler.
  // A strategy's prefill rows (DraftStrategy::prefill_rows) follow its prompt; then every row's logits come back
  // (Logits::Rows takes one sequence) and the caches drop those rows.
  {
    std::vector<SequenceRows> rows;
    std::vector<std::vector<int64_t>> chains(B), positions(B);
    std::vector<int64_t> extra(B, 0);
    bool any_extra = false;
    for (size_t b = 0; b < B; ++b) {
      Slot& s = *slots[b];
      const auto P = static_cast<int64_t>(s.sequence.size());
      chains[b] = prompt_with_prefill_rows(s.strategy, s.sequence, s.cache.capacity() - P);
      extra[b] = static_cast<int64_t>(chains[b].size()) - P;
      any_extra = any_extra || extra[b] > 0;
      positions[b].resize(chains[b].size());
      for (size_t i = 0; i < chains[b].size(); ++i) positions[b][i] = static_cast<int64_t>(i);
      rows.push_back({&s.cache, chains[b].data(), positions[b].data(), static_cast<int64_t>(chains[b].size()),
                      nullptr});
    }
    ForwardOptions prefill;
    prefill.logits = any_extra ? ForwardOptions::Logits::All : ForwardOptions::Logits::Last;
    prefill.feature_layers = feature_layers;
    const auto out = target_.forward_batch(rows, prefill);
    batch.forwards = 1;
    batch.prefill_seconds = seconds(t_start, Clock::now());
    for (size_t b = 0; b < B; ++b) {
      Slot& s = *slots[b];
      const auto P = static_cast<int64_t>(s.sequence.size());
      if (extra[b] > 0) s.cache.truncate(P);
      const int64_t first = s.sampler.sample(out[b].logits[any_extra ? P - 1 : 0]);
      s.result.forwards = 1;
      s.result.prefill_seconds = batch.prefill_seconds;
      const std::vector<int64_t> prompt = s.sequence;
      s.sequence.push_back(first);
      if (emit(s, first)) {
        s.strategy.begin(prompt, extra[b] > 0 ? out[b].features.narrow(0, 0, P) : out[b].features, first);
        if (extra[b] > 0) s.strategy.observe_prefill_rows(out[b].logits.narrow(0, P, extra[b]));
      } else {
        finish(s);
      }
    }
  }

  std::vector<Slot*> active;
  std::vector<SequenceRows> rows;
  while (true) {
    active.clear();
    for (auto& s : slots) {
      if (s->going && s->cache.length() >= context) {  // the root cannot be fed: same bound as vanilla
        s->result.stop_reason = "context";
        finish(*s);
      }
      if (s->going) active.push_back(s.get());
    }
    if (active.empty()) break;
    const auto batch_size = static_cast<int32_t>(active.size());

    // Draft: every sequence's request to one strategy (DraftStrategy::propose_batch), which may share its forwards.
    rows.clear();
    std::vector<DraftRequest> requests;
    std::vector<DraftStrategy*> peers;
    for (Slot* s : active) {
      s->stats = CycleStats{};
      const int64_t room = s->cache.capacity() - s->cache.length() - 1;
      const int64_t wanted = config.max_new_tokens - static_cast<int64_t>(s->result.tokens.size());
      requests.push_back({s->sequence, static_cast<int32_t>(std::min<int64_t>(room, INT32_MAX)),
                          static_cast<int32_t>(std::min<int64_t>(wanted, INT32_MAX)), s->sampler, batch_size});
      peers.push_back(&s->strategy);
    }
    const double draft_forwards_before = ForwardClock::seconds();
    const auto d0 = Clock::now();
    std::vector<DraftTree> trees = peers[0]->propose_batch(peers, requests);
    const double draft_share = seconds(d0, Clock::now()) / batch_size;
    const double draft_forward_share = (ForwardClock::seconds() - draft_forwards_before) / batch_size;
    check(trees.size() == active.size(), "strategy " + peers[0]->name() + ": propose_batch returned " +
                                             std::to_string(trees.size()) + " trees for " +
                                             std::to_string(active.size()) + " sequences");
    for (size_t i = 0; i < active.size(); ++i) {
      Slot* s = active[i];
      s->tree = std::move(trees[i]);
      s->stats.draft_seconds = draft_share;
      s->stats.forward_seconds = draft_forward_share;
      const int64_t room = requests[i].max_nodes;
      if (s->tree.size() + s->tree.extra_size() > room)
        throw Error("strategy " + s->strategy.name() + " drafted " + std::to_string(s->tree.size()) +
                    " nodes and " + std::to_string(s->tree.extra_size()) + " extra rows, but only " +
                    std::to_string(room) + " fit the context");
      s->rows = Verifier::rows(s->cache, s->sequence.back(), s->tree);
      rows.push_back(s->rows.sequence(s->cache));
    }

    // Verify: every tree in one target forward.
    const auto v0 = Clock::now();
    const auto outs = target_.forward_batch(rows, all_rows);
    const double shared = seconds(v0, Clock::now()) / batch_size;
    ++batch.forwards;
    int32_t total_rows = 0;
    for (const auto& r : rows) total_rows += static_cast<int32_t>(r.n);
    batch.batch_rows.push_back(total_rows);
    batch.batch_active.push_back(batch_size);

    // Accept: each sequence on its own; then every strategy learns its result (observe_batch, shared likewise).
    std::vector<VerifyResult> verified(active.size());
    for (size_t i = 0; i < active.size(); ++i) {
      Slot& s = *active[i];
      const double forwards_before = ForwardClock::seconds();
      const auto a = Clock::now();
      verified[i] = s.verifier.accept(s.cache, s.tree, s.rows, outs[i]);
      s.stats.verify_seconds = shared + seconds(a, Clock::now());
      s.stats.forward_seconds += ForwardClock::seconds() - forwards_before + shared;
    }
    std::vector<const VerifyResult*> results;
    for (const auto& v : verified) results.push_back(&v);
    const double observe_forwards_before = ForwardClock::seconds();
    const auto o0 = Clock::now();
    peers[0]->observe_batch(peers, results);
    const double observe_share = seconds(o0, Clock::now()) / batch_size;
    const double observe_forward_share = (ForwardClock::seconds() - observe_forwards_before) / batch_size;

    for (size_t i = 0; i < active.size(); ++i) {
      Slot& s = *active[i];
      s.stats.draft_seconds += observe_share;
      s.stats.forward_seconds += observe_forward_share;
      s.stats.drafted = s.tree.size();
      s.stats.accepted = static_cast<int32_t>(verified[i].accepted_nodes.size());
      s.stats.rejected = verified[i].rejections;
      s.stats.experts_read = static_cast<int32_t>(verified[i].experts_read);
      ++s.result.forwards;
      for (const auto& r : verified[i].records) {
        s.result.records.push_back(r);
        s.result.record_cycle.push_back(static_cast<int32_t>(s.result.cycles.size()));
      }
      s.result.cycles.push_back(s.stats);
      for (int64_t token : verified[i].tokens) {
        s.sequence.push_back(token);
        if (!emit(s, token)) {
          finish(s);
          break;
        }
      }
    }
  }
  batch.decode_seconds = seconds(t_start, Clock::now()) - batch.prefill_seconds;
  for (size_t b = 0; b < B; ++b) batch.sequences[b] = std::move(slots[b]->result);
  return batch;
}

}  // namespace draftlab
