#include "strategies/eagle_tree/eagle_drafter.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>

#include "core/base/error.h"
#include "strategies/head_family.h"
#include "core/model/host_tensor.h"

namespace draftlab {

namespace {

// Head cache rows beyond the prompt at the start; the cache doubles when a sequence outgrows it.
constexpr int64_t kInitialSlack = 512;

at::Tensor long_tensor(const std::vector<int64_t>& v) { return at::tensor(v, at::TensorOptions().dtype(at::kLong)); }

}  // namespace

std::vector<Candidates> top_candidates(const at::Tensor& logits, int64_t k) {
  check(logits.dim() == 2, "top_candidates: logits must be [n, vocab]");
  const int64_t n = logits.size(0), V = logits.size(1);
  k = std::min<int64_t>(k, V);
  check(k > 0, "top_candidates: k must be positive");
  std::vector<int64_t> tokens(static_cast<size_t>(n * k));
  std::vector<float> probs(static_cast<size_t>(n * k));
  if (logits.device().is_cpu()) {  // read in place: no softmax and topk dispatch per draft step
    const at::Tensor host = to_host(logits, at::kFloat);
    top_k_softmax(host.data_ptr<float>(), n, V, k, tokens.data(), probs.data());
  } else {  // on an accelerator, only the k winners per row come back
    auto [p, t] = at::softmax(logits.to(at::kFloat), -1).topk(k, -1, /*largest=*/true, /*sorted=*/true);
    p = p.to(at::kCPU).contiguous();
    t = t.to(at::kCPU).contiguous();
    std::copy_n(p.data_ptr<float>(), n * k, probs.begin());
    std::copy_n(t.data_ptr<int64_t>(), n * k, tokens.begin());
  }
  std::vector<Candidates> out(static_cast<size_t>(n));
  for (int64_t r = 0; r < n; ++r) {
    out[r].tokens.assign(tokens.begin() + r * k, tokens.begin() + (r + 1) * k);
    out[r].probs.assign(probs.begin() + r * k, probs.begin() + (r + 1) * k);
  }
  return out;
}

EagleDrafter::EagleDrafter(std::shared_ptr<const FeatureHead> head) : head_(std::move(head)) {
  check(head_ != nullptr, "EagleDrafter: no head");
}

void EagleDrafter::ensure_room(int64_t rows) {
  const int64_t needed = cache_->length() + rows;
  if (needed <= cache_->capacity()) return;
  // Grow by doubling: copy the rows in use into a larger cache (rare: amortised over the whole sequence).
  KvCache bigger = head_->make_cache(std::max(needed + kInitialSlack, 2 * cache_->capacity()));
  const int64_t len = cache_->length();
  if (len > 0) bigger.write(0, 0, cache_->keys(0, len), cache_->values(0, len));
  bigger.advance_to(len);
  cache_ = std::move(bigger);
}

FeatureHead::Rows EagleDrafter::pair_rows(const std::vector<int64_t>& tokens, const at::Tensor& features,
                                        int64_t token_before) {
  const auto n = static_cast<int64_t>(tokens.size());
  cache_->truncate(committed_);  // whatever rows the last draft added are gone
  ensure_room(n);
  auto positions = at::arange(committed_, committed_ + n, at::TensorOptions().dtype(at::kLong));
  // Row tokens per input variant: t_{i+1} (the shifted pairs given) or t_i (the same sequence one step back).
  std::vector<int64_t> row_tokens = tokens;
  if (head_->reads_unshifted_token()) {
    row_tokens.insert(row_tokens.begin(), token_before);
    row_tokens.pop_back();
  }
  return {&*cache_, long_tensor(row_tokens), features, positions, {}};  // a chain: causal
}

void EagleDrafter::pairs_fed(const std::vector<int64_t>& tokens, const at::Tensor& out) {
  const auto n = static_cast<int64_t>(tokens.size());
  ++head_forwards_;
  committed_ += n;
  root_token_ = tokens.back();
  root_prediction_ = out.narrow(0, n - 1, 1);
}

void EagleDrafter::feed_pairs(const std::vector<int64_t>& tokens, const at::Tensor& features, int64_t token_before) {
  const FeatureHead::Rows r = pair_rows(tokens, features, token_before);
  pairs_fed(tokens, head_->forward(*r.cache, r.tokens, r.features, r.positions));
}

void EagleDrafter::begin(const std::vector<int64_t>& prompt, const at::Tensor& prompt_features, int64_t first_token) {
  const auto P = static_cast<int64_t>(prompt.size());
  check(P > 0, "EagleDrafter::begin: empty prompt");
  check(prompt_features.dim() == 2 && prompt_features.size(0) == P, [&] {
    return "EagleDrafter::begin: prompt_features must have one row per prompt token (" + std::to_string(P) + "), got " +
           std::to_string(prompt_features.dim() == 2 ? prompt_features.size(0) : -1);
  });
  cache_ = head_->make_cache(P + kInitialSlack);
  committed_ = 0;
  pending_tokens_.clear();
  pending_features_.clear();
  // Pairs (t_{i+1}, f_i) for i = 0 .. P-1: the prompt shifted by one, then the first root.
  std::vector<int64_t> shifted(prompt.begin() + 1, prompt.end());
  shifted.push_back(first_token);
  feed_pairs(shifted, prompt_features, prompt.front());
}

void EagleDrafter::check_observed(const VerifyResult& result) const {
  check(cache_.has_value(), "EagleDrafter::observe: begin() was not called");
  const auto n = static_cast<int64_t>(result.tokens.size());
  check(n == static_cast<int64_t>(result.accepted_nodes.size()) + 1 && result.features.defined() &&
            result.features.size(0) == n,
        [&] {
          return "EagleDrafter::observe: expected accepted + 1 tokens and features, got " + std::to_string(n) +
                 " tokens, " + std::to_string(result.accepted_nodes.size()) + " accepted and " +
                 std::to_string(result.features.defined() ? result.features.size(0) : 0) + " feature rows";
        });
}

void EagleDrafter::observe(const VerifyResult& result) {
  check_observed(result);
  catch_up();
  // (a_1, f_root), (a_2, f_{a_1}), ..., (next root, f_{a_m}): the k-th token with the k-th feature.
  feed_pairs(result.tokens, result.features, root_token_);
}

void EagleDrafter::observe_later(const VerifyResult& result) {
  check_observed(result);
  if (pending_tokens_.empty()) pending_token_before_ = root_token_;
  pending_tokens_.insert(pending_tokens_.end(), result.tokens.begin(), result.tokens.end());
  pending_features_.push_back(result.features);
}

void EagleDrafter::catch_up() {
  if (pending_tokens_.empty()) return;
  const at::Tensor features = at::cat(pending_features_, 0);
  const std::vector<int64_t> tokens = std::move(pending_tokens_);
  pending_tokens_.clear();
  pending_features_.clear();
  feed_pairs(tokens, features, pending_token_before_);
}

namespace {

// Whether drafters can share head forwards: one head, on the native path (the reference path's products round
// differently with the number of rows, so there each drafter keeps its own forwards and its drafts stay exactly
// those of decoding alone).
bool can_batch(const std::vector<EagleDrafter*>& drafters) {
  if (drafters.size() < 2 || !drafters[0]->head().target().native()) return false;
  for (const EagleDrafter* d : drafters)
    if (&d->head() != &drafters[0]->head()) return false;
  return true;
}

}  // namespace

void EagleDrafter::observe_batch(const std::vector<EagleDrafter*>& drafters,
                                 const std::vector<const VerifyResult*>& results) {
  check(drafters.size() == results.size(), "EagleDrafter::observe_batch: one result per drafter");
  if (!can_batch(drafters)) {
    for (size_t i = 0; i < drafters.size(); ++i) drafters[i]->observe(*results[i]);
    return;
  }
  std::vector<FeatureHead::Rows> rows;
  for (size_t i = 0; i < drafters.size(); ++i) {
    drafters[i]->check_observed(*results[i]);
    drafters[i]->catch_up();
    rows.push_back(drafters[i]->pair_rows(results[i]->tokens, results[i]->features, drafters[i]->root_token_));
  }
  const auto outs = drafters[0]->head_->forward_batch(rows);
  for (size_t i = 0; i < drafters.size(); ++i) drafters[i]->pairs_fed(results[i]->tokens, outs[i]);
}

void EagleDrafter::start_tree(const DraftRequest& request) {
  check(cache_.has_value(), "EagleDrafter: propose() before begin()");
  catch_up();
  const auto L = static_cast<int64_t>(request.sequence.size()) - 1;
  if (L != committed_ || request.sequence.back() != root_token_)
    throw Error("EagleDrafter: the head is out of step with the sequence (" + std::to_string(committed_) +
                " committed pairs, root " + std::to_string(root_token_) + "; the sequence has " +
                std::to_string(L + 1) + " tokens, root " + std::to_string(request.sequence.back()) +
                "): begin() and observe() must see every verification");
  cache_->truncate(committed_);
  node_row_.clear();
  node_block_.clear();
  node_slot_.clear();
  blocks_.clear();
}

EagleDrafter::Expansion EagleDrafter::plan_expansion(const DraftTree& tree, const std::vector<int32_t>& frontier) {
  check(cache_.has_value(), "EagleDrafter::expand: begin() was not called");
  check(!frontier.empty(), "EagleDrafter::expand: empty frontier");
  const auto size = static_cast<size_t>(tree.size());
  node_row_.resize(size, -1);
  node_block_.resize(size, -1);
  node_slot_.resize(size, -1);

  Expansion plan;
  std::vector<int32_t>& nodes = plan.nodes;
  for (int32_t f : frontier) {
    if (f == kRoot) continue;
    check(f >= 0 && f < tree.size(),
          [&] { return "EagleDrafter::expand: node " + std::to_string(f) + " is not in the tree"; });
    check(node_row_[f] < 0 && std::find(nodes.begin(), nodes.end(), f) == nodes.end(),
          [&] { return "EagleDrafter::expand: node " + std::to_string(f) + " expanded twice"; });
    const int32_t parent = tree.node(f).parent;
    check(parent < 0 || node_row_[parent] >= 0, [&] {
      return "EagleDrafter::expand: node " + std::to_string(f) + " before its parent " + std::to_string(parent) +
             " (a node enters with its parent's predicted feature, so parents are expanded first)";
    });
    nodes.push_back(f);
  }
  if (nodes.empty()) return plan;

  const auto n = static_cast<int64_t>(nodes.size());
  const int64_t start = cache_->length(), T = start + n;
  const int64_t root_position = committed_ - 1;  // the root pair's row
  ensure_room(n);
  plan.start = start;

  std::vector<int64_t> tokens(n), positions(n), slots(n);
  std::vector<int32_t> parent_blocks(n);
  // Visibility, built on the host: the committed rows, the node's ancestors' draft rows, itself.
  std::vector<uint8_t> visible(static_cast<size_t>(n * T), 0);
  bool all_visible = n == 1;
  const bool unshifted = head_->reads_unshifted_token();
  for (int64_t j = 0; j < n; ++j) {
    const DraftNode& node = tree.node(nodes[j]);
    // The node's row reads its own token (t_{i+1}), or, for feature_unshifted_token, its parent's (t_i): then
    // siblings get identical rows, which is that variant's weakness, not a bug.
    tokens[j] = !unshifted ? node.token : node.parent < 0 ? root_token_ : tree.node(node.parent).token;
    positions[j] = root_position + node.depth;
    parent_blocks[j] = node.parent < 0 ? -1 : node_block_[node.parent];
    slots[j] = node.parent < 0 ? 0 : node_slot_[node.parent];
    uint8_t* row = &visible[static_cast<size_t>(j * T)];
    std::memset(row, 1, static_cast<size_t>(committed_));
    int64_t ancestors = 0;
    for (int32_t a = node.parent; a >= 0; a = tree.node(a).parent, ++ancestors) row[node_row_[a]] = 1;
    row[start + j] = 1;
    all_visible = all_visible && ancestors == start - committed_;
  }

  // Inputs: the parents' predicted features, copied row by row on the host (a gather op on an accelerator).
  auto block_of = [&](int32_t b) -> const at::Tensor& { return b < 0 ? root_prediction_ : blocks_[b]; };
  at::Tensor features;
  const int64_t d = root_prediction_.size(1);
  const bool host = std::all_of(parent_blocks.begin(), parent_blocks.end(),
                                [&](int32_t b) { return is_host(block_of(b), at::kFloat); });
  if (host) {
    features = at::empty({n, d}, at::TensorOptions().dtype(at::kFloat));
    for (int64_t j = 0; j < n; ++j)
      std::memcpy(features.data_ptr<float>() + j * d, block_of(parent_blocks[j]).data_ptr<float>() + slots[j] * d,
                  static_cast<size_t>(d) * sizeof(float));
  } else if (std::all_of(parent_blocks.begin(), parent_blocks.end(),
                         [&](int32_t b) { return b == parent_blocks[0]; })) {
    features = block_of(parent_blocks[0]).index_select(0, long_tensor(slots).to(root_prediction_.device()));
  } else {
    std::vector<at::Tensor> rows;
    for (int64_t j = 0; j < n; ++j) rows.push_back(block_of(parent_blocks[j]).narrow(0, slots[j], 1));
    features = at::cat(rows, 0);
  }
  at::Tensor mask;
  if (!all_visible) {
    static_assert(sizeof(bool) == 1, "the visibility bytes are copied into a bool tensor");
    mask = at::empty({n, T}, at::TensorOptions().dtype(at::kBool));
    std::memcpy(mask.data_ptr<bool>(), visible.data(), visible.size());
  }
  plan.rows = {&*cache_, long_tensor(tokens), features, long_tensor(positions), mask};
  return plan;
}

at::Tensor EagleDrafter::finish_expansion(const Expansion& plan, const std::vector<int32_t>& frontier,
                                          const at::Tensor& out) {
  if (!plan.nodes.empty()) {
    ++head_forwards_;
    const auto block = static_cast<int32_t>(blocks_.size());
    blocks_.push_back(out);
    for (size_t j = 0; j < plan.nodes.size(); ++j) {
      node_row_[plan.nodes[j]] = plan.start + static_cast<int64_t>(j);
      node_block_[plan.nodes[j]] = block;
      node_slot_[plan.nodes[j]] = static_cast<int64_t>(j);
    }
  }
  // Predicted features in frontier order; the root's row comes from the last committed pair.
  if (plan.nodes.size() == frontier.size()) return out;
  if (plan.nodes.empty() && frontier.size() == 1) return root_prediction_;
  std::vector<at::Tensor> rows;
  int64_t j = 0;
  for (int32_t f : frontier) rows.push_back(f == kRoot ? root_prediction_ : out.narrow(0, j++, 1));
  return at::cat(rows, 0);
}

at::Tensor EagleDrafter::expand(const DraftTree& tree, const std::vector<int32_t>& frontier) {
  const Expansion plan = plan_expansion(tree, frontier);
  at::Tensor out;  // predicted features of plan.nodes
  if (!plan.nodes.empty())
    out = head_->forward_visible(*cache_, plan.rows.tokens, plan.rows.features, plan.rows.positions,
                                 plan.rows.visible);
  return head_->logits(finish_expansion(plan, frontier, out));
}

std::vector<at::Tensor> EagleDrafter::expand_batch(const std::vector<EagleDrafter*>& drafters,
                                                   const std::vector<const DraftTree*>& trees,
                                                   const std::vector<std::vector<int32_t>>& frontiers) {
  check(drafters.size() == trees.size() && drafters.size() == frontiers.size(),
        "EagleDrafter::expand_batch: one tree and frontier per drafter");
  std::vector<at::Tensor> logits;
  if (!can_batch(drafters)) {
    for (size_t i = 0; i < drafters.size(); ++i) logits.push_back(drafters[i]->expand(*trees[i], frontiers[i]));
    return logits;
  }
  // One head forward over every drafter's nodes, then one LM head product over every frontier's features.
  std::vector<Expansion> plans;
  std::vector<FeatureHead::Rows> rows;
  for (size_t i = 0; i < drafters.size(); ++i) {
    plans.push_back(drafters[i]->plan_expansion(*trees[i], frontiers[i]));
    if (!plans.back().nodes.empty()) rows.push_back(plans.back().rows);
  }
  std::vector<at::Tensor> outs;
  if (!rows.empty()) outs = drafters[0]->head_->forward_batch(rows);
  std::vector<at::Tensor> predicted;
  size_t next = 0;
  for (size_t i = 0; i < drafters.size(); ++i)
    predicted.push_back(drafters[i]->finish_expansion(plans[i], frontiers[i],
                                                      plans[i].nodes.empty() ? at::Tensor() : outs[next++]));
  const at::Tensor all = drafters[0]->head_->logits(at::cat(predicted, 0));
  int64_t row = 0;
  for (const at::Tensor& p : predicted) {
    logits.push_back(all.narrow(0, row, p.size(0)));
    row += p.size(0);
  }
  return logits;
}

std::vector<OptionSpec> eagle_head_options(const HeadFamily& f) {
  std::vector<OptionSpec> options{
      path_option("head", false, "a trained " + f.title + " of the target; absent: a random head (tests)"),
      integer_option("head_seed", 0, 0, 1000000, "the random head's seed")};
  options.insert(options.end(), f.random_head_options.begin(), f.random_head_options.end());
  options.push_back(
      integer_option("draft_vocab", 0, 0, 100000000, "the random head's draft vocabulary size (0: the target's)"));
  return options;
}

void check_eagle_head_options(const HeadFamily& family, const StrategyOptions& options) {
  const std::string path = options.get_string("head");
  if (path.empty()) return;
  for (const OptionSpec& o : eagle_head_options(family))
    if (o.key != "head" && options.given(o.key))
      throw Error("option " + o.key + ": shapes a random head, but head=" + path +
                  " was given (a trained head's config.json says what it is)");
}

namespace {

std::shared_ptr<const FeatureHead> make_eagle_head(const StrategyContext& context, const StrategyOptions& options,
                                                   const HeadFamily& family);

}  // namespace

std::shared_ptr<const FeatureHead> eagle_head_from_options(const StrategyContext& context,
                                                           const StrategyOptions& options, const HeadFamily& family) {
  // Strategies made with the same head options for the same target share one head while any of them lives: a
  // batch's sequences (one strategy object each) then share its forwards (EagleDrafter::expand_batch).
  static std::mutex mutex;
  static std::map<std::string, std::weak_ptr<const FeatureHead>> heads;
  std::string key = std::to_string(reinterpret_cast<uintptr_t>(&context.target)) + "|" + family.name;
  for (const OptionSpec& o : eagle_head_options(family)) key += "|" + options.get_string(o.key);
  std::lock_guard<std::mutex> lock(mutex);
  if (auto head = heads[key].lock()) return head;
  std::shared_ptr<const FeatureHead> head = make_eagle_head(context, options, family);
  heads[key] = head;
  return head;
}

namespace {

std::shared_ptr<const FeatureHead> make_eagle_head(const StrategyContext& context, const StrategyOptions& options,
                                                   const HeadFamily& f) {
  const std::string path = options.get_string("head");
  const int64_t draft_vocab = options.get_int("draft_vocab");
  const int64_t V = context.target.config().vocab_size;
  if (path.empty()) {
    check(draft_vocab >= 0 && draft_vocab <= V, [&] {
      return "option draft_vocab: expected an integer in [0, " + std::to_string(V) + "], got " +
             std::to_string(draft_vocab);
    });
    return f.random_feature_head(context.target, options);
  }
  // resolve_options checked the path's family and that no random-head option came with it.
  return f.load_feature_head(path, context.target);
}

}  // namespace

}  // namespace draftlab
