#include "properties/error_distribution.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace ulpcheck {

namespace {

using error_buckets::bucketOf;

double quantile(const int64_t* counts, int buckets, int64_t total, double q, int low_octave) {
  if (total <= 0) return 0;
  const auto need = std::max<int64_t>(1, int64_t(std::ceil(q * double(total))));
  int64_t seen = 0;
  for (int b = 0; b < buckets; ++b)
    if ((seen += counts[b]) >= need) return ErrorDistribution::upperEdge(b, low_octave, buckets);
  return INFINITY;
}

template <size_t N, typename T>
nlohmann::json sparse(const std::array<T, N>& a, int offset = 0) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t i = 0; i < N; ++i)
    if (a[i] != T(0)) out.push_back({int(i) + offset, a[i]});
  return out;
}

template <size_t N, typename T>
void unsparse(const nlohmann::json& j, std::array<T, N>& a, int offset = 0) {
  for (const auto& e : j) {
    const int i = e.at(0).get<int>() - offset;
    if (i >= 0 && size_t(i) < N) a[size_t(i)] = e.at(1).get<T>();
  }
}

}  // namespace

void ErrorDistribution::add(double ratio_value, double ulp_value, double scale, double row_fraction,
                            double col_fraction) {
  ++count;
  ++ratio[size_t(bucketOf(ratio_value, kRatioLow, kRatioHigh))];
  const float shown = error_buckets::shownRatio(ratio_value);
  float& where = worst_where[size_t(error_buckets::gridCell(row_fraction, col_fraction))];
  where = std::max(where, shown);
  // An element whose value and terms are all zero has no scale: its error
  // in ulps of nothing says nothing (a LayerNorm y = xhat gamma of a
  // constant row, whose exact xhat is 0 while the kernel's is its rounding
  // noise times a large rstd, read 1e42). It has its err/budget only.
  if (!(scale > 0)) return;
  ++ulp_at_scale[size_t(bucketOf(ulp_value, kUlpLow, kUlpHigh))];
  if (ulp_value > max_ulp_at_scale || std::isnan(ulp_value)) max_ulp_at_scale = ulp_value;
  const int slot = error_buckets::scaleSlot(scale);
  ++scale_count[size_t(slot)];
  float& worst = scale_worst[size_t(slot)];
  worst = std::max(worst, shown);
}

void ErrorDistribution::merge(const ErrorDistribution& o) {
  count += o.count;
  if (o.max_ulp_at_scale > max_ulp_at_scale || std::isnan(o.max_ulp_at_scale)) max_ulp_at_scale = o.max_ulp_at_scale;
  for (size_t i = 0; i < ratio.size(); ++i) ratio[i] += o.ratio[i];
  for (size_t i = 0; i < ulp_at_scale.size(); ++i) ulp_at_scale[i] += o.ulp_at_scale[i];
  for (size_t i = 0; i < worst_where.size(); ++i) worst_where[i] = std::max(worst_where[i], o.worst_where[i]);
  for (size_t i = 0; i < scale_count.size(); ++i) {
    scale_count[i] += o.scale_count[i];
    scale_worst[i] = std::max(scale_worst[i], o.scale_worst[i]);
  }
}

double ErrorDistribution::upperEdge(int bucket, int low_octave, int buckets) {
  if (bucket <= 0) return 0;
  if (bucket == 1) return std::ldexp(1.0, low_octave);
  if (bucket >= buckets - 1) return INFINITY;
  const int k = bucket - 2;
  return std::ldexp(1.0 + double(k % kPerOctave + 1) / kPerOctave, low_octave + k / kPerOctave);
}

double ErrorDistribution::lowerEdge(int bucket, int low_octave) {
  if (bucket <= 1) return 0;
  const int k = bucket - 2;
  return std::ldexp(1.0 + double(k % kPerOctave) / kPerOctave, low_octave + k / kPerOctave);
}

double ErrorDistribution::ratioQuantile(double q) const {
  return quantile(ratio.data(), kRatioBuckets, count, q, kRatioLow);
}

double ErrorDistribution::ulpQuantile(double q) const {
  int64_t scaled = 0;  // the elements with a scale (see add)
  for (int64_t n : ulp_at_scale) scaled += n;
  return quantile(ulp_at_scale.data(), kUlpBuckets, scaled, q, kUlpLow);
}

nlohmann::json ErrorDistribution::toJson() const {
  // Infinity has no JSON: a max that is not finite is written as null.
  return {{"count", count},
          {"max_ulp_at_scale", std::isfinite(max_ulp_at_scale) ? nlohmann::json(max_ulp_at_scale) : nlohmann::json()},
          {"ratio", sparse(ratio)},
          {"ulp_at_scale", sparse(ulp_at_scale)},
          {"where", sparse(worst_where)},
          {"scale_count", sparse(scale_count, kScaleLow)},
          {"scale_worst", sparse(scale_worst, kScaleLow)}};
}

ErrorDistribution ErrorDistribution::fromJson(const nlohmann::json& j) {
  ErrorDistribution d;
  d.count = j.value("count", int64_t{0});
  const auto& m = j.value("max_ulp_at_scale", nlohmann::json());
  d.max_ulp_at_scale = m.is_null() ? (d.count ? INFINITY : 0.0) : m.get<double>();
  unsparse(j.value("ratio", nlohmann::json::array()), d.ratio);
  unsparse(j.value("ulp_at_scale", nlohmann::json::array()), d.ulp_at_scale);
  unsparse(j.value("where", nlohmann::json::array()), d.worst_where);
  unsparse(j.value("scale_count", nlohmann::json::array()), d.scale_count, kScaleLow);
  unsparse(j.value("scale_worst", nlohmann::json::array()), d.scale_worst, kScaleLow);
  return d;
}

}  // namespace ulpcheck
