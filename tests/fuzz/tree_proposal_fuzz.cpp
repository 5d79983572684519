// Draft trees proposed from outside the library (strategies/tree_proposal.h: a Python drafter's tokens, parents,
// confidences and draft distributions q), checked against a plain statement of what a valid proposal is: the check
// must reject exactly the invalid ones (with draftlab::Error) and accept every valid one.
#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/base/error.h"
#include "strategies/tree_proposal.h"

namespace {

// A count: usually `n`, sometimes another (the lists of a proposal disagreeing in length).
size_t count_near(FuzzedDataProvider& in, size_t n) {
  const uint8_t how = in.ConsumeIntegral<uint8_t>();
  if (how < 200) return n;
  return in.ConsumeIntegralInRange<size_t>(0, n + 2);
}

// A number that is usually a probability, sometimes any bit pattern (NaN, infinities, negatives, huge).
template <typename T, typename Bits>
T fuzzed_number(FuzzedDataProvider& in) {
  if (in.ConsumeIntegral<uint8_t>() < 200) return in.ConsumeProbability<T>();
  const Bits bits = in.ConsumeIntegral<Bits>();
  T x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

bool proposal_is_valid(const draftlab::TreeProposal& p, int64_t vocab, int64_t max_nodes) {
  const size_t n = p.tokens.size();
  if (p.parents.size() != n || (!p.confidences.empty() && p.confidences.size() != n)) return false;
  if ((p.distributions != 0 && p.distributions != n) || static_cast<int64_t>(n) > max_nodes) return false;
  for (size_t i = 0; i < n; ++i) {
    if (p.tokens[i] < 0 || p.tokens[i] >= vocab) return false;
    if (!p.confidences.empty() && !(p.confidences[i] >= 0.0 && p.confidences[i] <= 1.0)) return false;
    if (p.parents[i] < -1 || p.parents[i] >= static_cast<int64_t>(i)) return false;
  }
  return true;
}

bool distribution_is_valid(const std::vector<float>& q, int64_t vocab, int64_t token) {
  if (static_cast<int64_t>(q.size()) != vocab) return false;
  double sum = 0;
  for (float x : q) {
    if (!std::isfinite(x) || x < 0) return false;
    sum += x;
  }
  return std::abs(sum - 1) <= 1e-3 && token >= 0 && token < vocab && q[token] > 0;
}

// Runs a check and compares its verdict with the plain statement's: a mismatch is a finding.
template <class Check>
void expect_verdict(bool valid, Check&& check) {
  bool accepted = true;
  try {
    check();
  } catch (const draftlab::Error&) {
    accepted = false;
  }
  if (accepted != valid) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace draftlab;
  FuzzedDataProvider in(data, size);
  const int64_t vocab = in.ConsumeIntegralInRange<int64_t>(1, 300);
  const int64_t max_nodes = in.ConsumeIntegralInRange<int64_t>(0, 40);
  const size_t n = in.ConsumeIntegralInRange<size_t>(0, 48);
  TreeProposal p;
  for (size_t i = 0; i < n; ++i) p.tokens.push_back(in.ConsumeIntegralInRange<int64_t>(-2, vocab + 1));
  for (size_t i = 0, m = count_near(in, n); i < m; ++i)
    p.parents.push_back(in.ConsumeIntegralInRange<int64_t>(-3, static_cast<int64_t>(i) + 1));
  if (in.ConsumeBool())
    for (size_t i = 0, m = count_near(in, n); i < m; ++i) p.confidences.push_back(fuzzed_number<double, uint64_t>(in));
  p.distributions = in.ConsumeBool() ? count_near(in, n) : 0;
  expect_verdict(proposal_is_valid(p, vocab, max_nodes), [&] { check_tree_proposal(p, vocab, max_nodes, "fuzz"); });

  // A few nodes' draft distributions: weights normalised (a valid q, when nothing else is off), then perhaps one
  // entry replaced by any float, the length changed, or the node's own token left without mass.
  for (int k = 0, nq = in.ConsumeIntegralInRange<int>(0, 3); k < nq && in.remaining_bytes() > 0; ++k) {
    const int64_t token = in.ConsumeIntegralInRange<int64_t>(-1, vocab);
    std::vector<float> q(static_cast<size_t>(vocab));
    double total = 0;
    for (float& x : q) total += (x = static_cast<float>(in.ConsumeIntegralInRange<int>(0, 3)));
    if (total == 0) q[0] = 1, total = 1;
    for (float& x : q) x = static_cast<float>(x / total);
    switch (in.ConsumeIntegralInRange<int>(0, 3)) {
      case 1: q[in.ConsumeIntegralInRange<size_t>(0, q.size() - 1)] = fuzzed_number<float, uint32_t>(in); break;
      case 2: q.resize(in.ConsumeIntegralInRange<size_t>(0, q.size() + 1)); break;
      case 3: if (token >= 0 && token < vocab) q[token] = 0; break;
      default: break;
    }
    expect_verdict(distribution_is_valid(q, vocab, token), [&] {
      check_draft_distribution(q.data(), static_cast<int64_t>(q.size()), vocab, token, "fuzz");
    });
  }
  return 0;
}
