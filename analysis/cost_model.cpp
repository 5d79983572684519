#include "analysis/cost_model.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "core/base/error.h"
#include "core/base/file_bytes.h"

namespace draftlab::analysis {

namespace {

constexpr const char* kCostFormat = "draftlab-cost/1";

// Seconds for n rows on one curve: linear between points, the last segment extended past the end.
double curve_seconds(const CostCurve& c, int64_t n) {
  const auto& pts = c.points;
  if (pts.size() == 1 || n <= 1) return pts.front().second * static_cast<double>(std::max<int64_t>(n, 1));
  size_t hi = 1;
  while (hi + 1 < pts.size() && pts[hi].first < n) ++hi;
  const auto& [n0, s0] = pts[hi - 1];
  const auto& [n1, s1] = pts[hi];
  return s0 + (s1 - s0) * static_cast<double>(n - n0) / static_cast<double>(n1 - n0);
}

}  // namespace

double CostModel::seconds(int64_t n, int64_t cached) const {
  check(!curves.empty(), "CostModel::seconds: no curves");
  if (cached <= curves.front().cached) return curve_seconds(curves.front(), n);
  if (cached >= curves.back().cached) return curve_seconds(curves.back(), n);
  size_t hi = 1;
  while (curves[hi].cached < cached) ++hi;
  const CostCurve& a = curves[hi - 1];
  const CostCurve& b = curves[hi];
  const double t = static_cast<double>(cached - a.cached) / static_cast<double>(b.cached - a.cached);
  return (1 - t) * curve_seconds(a, n) + t * curve_seconds(b, n);
}

CostModel parse_cost_model(const std::string& json_text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    throw Error(source + ": not JSON (" + e.what() + ")");
  }
  auto fail = [&](const std::string& field, const std::string& expected, const nlohmann::json& got) {
    throw Error(source + ": " + field + ": expected " + expected + ", got " + (got.is_null() ? "nothing" : got.dump()));
  };
  if (!j.is_object()) fail("(top level)", "an object", j);
  const nlohmann::json format = j.value("format", nlohmann::json());
  if (format != kCostFormat)
    fail("format", std::string("\"") + kCostFormat + "\" (a file of bench/forward_cost --out)", format);
  CostModel m;
  m.source = source;
  for (const char* key : {"model", "forward", "cpu", "isa", "dtype"})
    if (j.contains(key) && j[key].is_string()) m.description += std::string(m.description.empty() ? "" : ", ") + key + " " + j[key].get<std::string>();
  if (j.contains("threads") && j["threads"].is_number_integer())
    m.description += ", threads " + std::to_string(j["threads"].get<int64_t>());
  const nlohmann::json curves = j.value("curves", nlohmann::json());
  if (!curves.is_array() || curves.empty()) fail("curves", "a non-empty list", curves);
  for (size_t i = 0; i < curves.size(); ++i) {
    const std::string at = "curves[" + std::to_string(i) + "]";
    const nlohmann::json& c = curves[i];
    if (!c.is_object()) fail(at, "an object", c);
    const nlohmann::json cached = c.value("cached", nlohmann::json());
    if (!cached.is_number_integer() || cached.get<int64_t>() < 0) fail(at + ".cached", "an integer >= 0", cached);
    CostCurve curve;
    curve.cached = cached.get<int64_t>();
    if (!m.curves.empty() && curve.cached <= m.curves.back().cached)
      fail(at + ".cached", "more than the previous curve's " + std::to_string(m.curves.back().cached), cached);
    const nlohmann::json rows = c.value("results", nlohmann::json());
    if (!rows.is_array() || rows.empty()) fail(at + ".results", "a non-empty list", rows);
    for (size_t k = 0; k < rows.size(); ++k) {
      const std::string rat = at + ".results[" + std::to_string(k) + "]";
      if (!rows[k].is_object()) fail(rat, "an object", rows[k]);
      const nlohmann::json n = rows[k].value("n", nlohmann::json()), ms = rows[k].value("median_ms", nlohmann::json());
      const int64_t previous = curve.points.empty() ? 0 : curve.points.back().first;
      if (!n.is_number_integer() || n.get<int64_t>() <= previous)
        fail(rat + ".n", curve.points.empty() ? "an integer >= 1" : "an integer > " + std::to_string(previous), n);
      if (!ms.is_number() || !(ms.get<double>() > 0) || !std::isfinite(ms.get<double>()))
        fail(rat + ".median_ms", "a positive number", ms);
      curve.points.emplace_back(n.get<int64_t>(), ms.get<double>() * 1e-3);
    }
    if (curve.points.front().first != 1) fail(at + ".results[0].n", "1 (the plain decoding step)", curve.points.front().first);
    m.curves.push_back(std::move(curve));
  }
  return m;
}

CostModel read_cost_model(const std::string& path) { return parse_cost_model(read_text_file(path), path); }

std::optional<CostModel> recorded_cost_model(const ResultsFile& results, const std::string& path) {
  const auto it = results.attributes.find("cost_model");
  if (it == results.attributes.end() || it->second.empty()) return std::nullopt;
  return parse_cost_model(it->second, path + ": attribute cost_model");
}

}  // namespace draftlab::analysis
