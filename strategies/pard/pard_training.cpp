#include "strategies/pard/pard_training.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <sstream>

#include "core/base/error.h"
#include "core/model/training_forward.h"

namespace draftlab {

void check_parallel_draft_options(const ParallelDraftOptions& o, int64_t vocab_size) {
  check(o.k >= 2 && o.k <= 64, "--parallel: expected 2..64 tokens per draft forward, got " + std::to_string(o.k));
  check(o.cod_ratio > 0 && o.cod_ratio <= 1,
        "--cod: expected r in (0, 1], got " + std::to_string(o.cod_ratio));
  check(o.cod_min_ratio >= 0 && o.cod_min_ratio <= o.cod_ratio,
        "--cod: expected r_min in [0, r = " + std::to_string(o.cod_ratio) + "], got " + std::to_string(o.cod_min_ratio));
  check(o.mask_token >= 0 && o.mask_token < vocab_size, "--mask-token: expected an id in [0, " +
                                                            std::to_string(vocab_size) + "), got " +
                                                            std::to_string(o.mask_token));
}

ParallelDraftRows parallel_draft_rows(int64_t length, const ParallelDraftOptions& o, uint64_t seed) {
  ParallelDraftRows rows;
  std::vector<int64_t> kept(static_cast<size_t>(length));
  for (int64_t j = 0; j < length; ++j) kept[static_cast<size_t>(j)] = j;
  std::mt19937_64 random(seed);
  for (int64_t copy = 0; copy < o.k && !kept.empty(); ++copy) {
    if (copy > 0) {
      // The successors of the previous copy's rows that still predict inside the window.
      std::vector<int64_t> successors;
      for (int64_t j : kept)
        if (j + 1 < length) successors.push_back(j + 1);
      auto keep = static_cast<int64_t>(successors.size());
      if (o.cod_ratio < 1) {
        const double share = std::max(std::pow(o.cod_ratio, static_cast<double>(copy)), o.cod_min_ratio);
        keep = std::min(keep, static_cast<int64_t>(std::floor(static_cast<double>(length) * share)));
      }
      // A uniform subset of `keep` successors (partial Fisher-Yates), in position order.
      for (int64_t i = 0; i < keep; ++i) {
        std::uniform_int_distribution<int64_t> pick(i, static_cast<int64_t>(successors.size()) - 1);
        std::swap(successors[static_cast<size_t>(i)], successors[static_cast<size_t>(pick(random))]);
      }
      successors.resize(static_cast<size_t>(keep));
      std::sort(successors.begin(), successors.end());
      kept = std::move(successors);
    }
    for (int64_t j : kept) {
      rows.copy.push_back(copy);
      rows.position.push_back(j);
    }
  }
  return rows;
}

at::Tensor parallel_draft_mask(const ParallelDraftRows& rows) {
  const int64_t n = rows.size();
  at::Tensor mask = at::full({n, n}, -std::numeric_limits<float>::infinity(), at::kFloat);
  float* m = mask.data_ptr<float>();
  for (int64_t a = 0; a < n; ++a) {
    const int64_t i = rows.copy[static_cast<size_t>(a)], j = rows.position[static_cast<size_t>(a)];
    for (int64_t b = 0; b < n; ++b) {
      const int64_t ib = rows.copy[static_cast<size_t>(b)], jb = rows.position[static_cast<size_t>(b)];
      // The real prefix up to j - i, then the mask chain (1, j-i+1) .. (i, j).
      const bool sees = ib == 0 ? jb <= j - i : ib <= i && jb == j - i + ib;
      if (sees) m[a * n + b] = 0.0f;
    }
  }
  return mask;
}

at::Tensor parallel_draft_logits(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                                 const at::Tensor& windows, const ParallelDraftRows& rows, int32_t mask_token) {
  check(windows.dim() == 2 && windows.size(1) >= 2, "parallel draft loss: windows must be [batch, length + 1]");
  const int64_t B = windows.size(0), R = rows.size();
  const at::Tensor index = at::tensor(rows.position, at::kLong);
  const at::Tensor is_real = at::tensor(rows.copy, at::kLong).eq(0);
  at::Tensor tokens = windows.index_select(1, index).where(is_real.expand({B, R}), at::full({}, mask_token, at::kLong));
  return training_forward_masked(c, w, rope, tokens, index, parallel_draft_mask(rows));
}

namespace {

// The teacher's log-distributions at a batch's inputs, windows [B, L + 1] -> [B, L, vocab] float32, without a graph:
// row j is its distribution of x_{j+1} after x_0 .. x_j.
at::Tensor teacher_log_probs(const ParallelDraftTeacher& t, const at::Tensor& windows) {
  at::NoGradGuard no_grad;
  const LlamaModel& target = *t.target;
  const RotaryEmbedding rope(target.config(), target.options());
  const int64_t L = windows.size(1) - 1;
  return training_forward(target.config(), target.weights(), rope, windows.narrow(1, 0, L)).to(at::kFloat).log_softmax(-1);
}

// CAT's weight of each row, [B, R]: the teacher's probability of x_{j-i+1} .. x_j. With gold[:, t] = log p(x_t | x_0
// .. x_{t-1}) for t = 1 .. L and 0 for x_0, the product is exp(S[j] - S[j - i]) of gold's running sum S.
at::Tensor cat_row_weights(const at::Tensor& log_probs, const at::Tensor& windows, const at::Tensor& positions,
                           const ParallelDraftRows& rows) {
  const int64_t B = windows.size(0), L = windows.size(1) - 1;
  const at::Tensor tokens = windows.narrow(1, 1, L).to(log_probs.device());
  const at::Tensor gold = log_probs.gather(2, tokens.unsqueeze(-1)).squeeze(-1);
  const at::Tensor sums = at::cat({at::zeros({B, 1}, gold.options()), gold}, 1).cumsum(1);
  const at::Tensor first = positions - at::tensor(rows.copy, at::kLong).to(positions.device());
  return (sums.index_select(1, positions) - sums.index_select(1, first)).exp();
}

}  // namespace

void check_parallel_draft_teacher(const ParallelDraftTeacher& t, int64_t vocab_size) {
  check(t.ce_weight >= 0 && t.kd_weight >= 0 && t.ce_weight + t.kd_weight > 0,
        "--loss-weights: expected ce,kd >= 0, not both 0, got " + std::to_string(t.ce_weight) + "," +
            std::to_string(t.kd_weight));
  if (vocab_size <= 0) return;
  check(t.target != nullptr, "--teacher " + t.path + ": no model");
  const int64_t v = t.target->config().vocab_size;
  check(v == vocab_size, "--teacher " + t.path + ": vocab_size " + std::to_string(v) + ", expected the draft's " +
                             std::to_string(vocab_size) + " (a parallel draft shares its target's vocabulary)");
}

ParallelDraftObjective::ParallelDraftObjective(ParallelDraftOptions options,
                                               std::shared_ptr<const ParallelDraftTeacher> teacher)
    : options_(options), teacher_(std::move(teacher)) {
  if (teacher_) check_parallel_draft_teacher(*teacher_, 0);
}

std::string ParallelDraftObjective::describe() const {
  std::ostringstream s;
  s << "parallel draft (PARD): k " << options_.k << ", COD r " << options_.cod_ratio << " r_min "
    << options_.cod_min_ratio << ", mask token " << options_.mask_token;
  if (teacher_)
    s << "; teacher " << teacher_->path << " (PARD-2): " << teacher_->ce_weight << " CE + " << teacher_->kd_weight
      << " KL" << (teacher_->cat ? ", CAT-weighted rows" : ", rows unweighted");
  return s.str();
}

at::Tensor ParallelDraftObjective::loss(const ModelConfig& c, const LlamaWeights& w, const RotaryEmbedding& rope,
                                        const at::Tensor& windows, uint64_t seed) const {
  const int64_t L = windows.size(1) - 1;
  const ParallelDraftRows rows = parallel_draft_rows(L, options_, seed);
  const at::Tensor logits = parallel_draft_logits(c, w, rope, windows, rows, options_.mask_token);
  const at::Tensor positions = at::tensor(rows.position, at::kLong).to(logits.device());
  const at::Tensor targets = windows.to(logits.device()).index_select(1, positions + 1);
  const int64_t V = logits.size(-1);
  if (!teacher_) return at::cross_entropy_loss(logits.reshape({-1, V}), targets.reshape({-1}));
  check_parallel_draft_teacher(*teacher_, c.vocab_size);
  const at::Tensor taught = teacher_log_probs(*teacher_, windows).to(logits.device());
  const at::Tensor ce = at::cross_entropy_loss(logits.reshape({-1, V}), targets.reshape({-1}), {}, at::Reduction::None)
                            .view(targets.sizes());
  // Row (i, j) is taught the target's distribution after x_0 .. x_j: its row at input j.
  const at::Tensor log_p = taught.index_select(1, positions);
  const at::Tensor kl = (log_p.exp() * (log_p - logits.log_softmax(-1))).sum(-1);
  const at::Tensor weight = teacher_->cat ? cat_row_weights(taught, windows, positions, rows) : at::ones_like(ce);
  return ((teacher_->ce_weight * ce + teacher_->kd_weight * kl) * weight).sum() / weight.sum().clamp_min(1e-6);
}

int32_t unused_token(const std::vector<int64_t>& counts) {
  for (size_t id = counts.size(); id-- > 0;)
    if (counts[id] == 0) return static_cast<int32_t>(id);
  throw Error("--mask-token auto: every one of the " + std::to_string(counts.size()) +
              " token ids occurs in the corpus; give --mask-token ID");
}

}  // namespace draftlab
