#include "harness/report/junit.h"

#include <cmath>

#include <fmt/format.h>

#include "harness/report/table.h"

namespace ulpcheck {

std::string xmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no control characters but tab, newline and return.
        if (c >= 0x20 || ch == '\t' || ch == '\n' || ch == '\r') out += ch;
    }
  }
  return out;
}

namespace {

std::string seconds(double s) { return fmt::format("{:.3f}", std::isfinite(s) && s > 0 ? s : 0.0); }

/// The failures of a campaign that belong to one cell.
std::vector<const FailureRecord*> failuresOf(const CampaignResult& r, const std::string& kernel,
                                             const std::string& property, const std::string& dtype) {
  std::vector<const FailureRecord*> out;
  for (const FailureRecord& f : r.failures)
    if (f.original.kernel == kernel && f.property == property && dtypeName(f.original.dtype) == dtype)
      out.push_back(&f);
  return out;
}

}  // namespace

std::string junitXml(const std::vector<std::pair<std::string, CampaignResult>>& ops) {
  std::string suites;
  int64_t all_tests = 0, all_failures = 0, all_errors = 0, all_skipped = 0;
  double all_seconds = 0;
  for (const auto& [op, r] : ops) {
    std::string cases;
    int64_t tests = 0, failures = 0, errors = 0, skipped = 0;
    for (const auto& [key, c] : r.cells) {
      const auto& [kernel, property, dtype] = key;
      ++tests;
      cases += fmt::format("    <testcase classname=\"{}\" name=\"{}\" time=\"{}\">\n",
                           xmlEscape(fmt::format("ulpcheck.{}.{}", op, kernel)),
                           xmlEscape(fmt::format("{} {}", property, dtype)), seconds(c.seconds));
      const auto failing = failuresOf(r, kernel, property, dtype);
      if (c.failed > 0) {
        ++failures;
        const std::string message = failing.empty() ? fmt::format("{} of {} cases failed", c.failed, c.cases)
                                                    : failing.front()->outcome.summary;
        std::string body = fmt::format("{} of {} cases failed\n", c.failed, c.cases);
        for (const FailureRecord* f : failing)
          body += fmt::format("\n{}", f->as_found ? formatFailureBriefly(*f) : formatFailure(*f));
        cases += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n", xmlEscape(message),
                             xmlEscape(property), xmlEscape(body));
      } else if (c.judged() == 0) {
        // Never a pass: nothing was judged.
        ++skipped;
        cases += fmt::format("      <skipped message=\"{}\"/>\n",
                             xmlEscape(fmt::format("no case judged: {} inconclusive, {} skipped of {}", c.inconclusive,
                                                   c.skipped, c.cases)));
      }
      const ErrorDistribution e = c.allErrors();
      std::string figures = fmt::format("cases {}, judged {}, expected {}, inconclusive {}, skipped {}", c.cases,
                                        c.judged(), c.expected, c.inconclusive, c.skipped);
      if (e.count)
        figures += fmt::format("; err/budget p50 <= {:.3g}, p99 <= {:.3g}, max {:.3g}; max ulp@scale {:.3g}",
                               e.ratioQuantile(0.5), e.ratioQuantile(0.99), c.max_ratio, e.max_ulp_at_scale);
      cases += fmt::format("      <system-out>{}</system-out>\n    </testcase>\n", xmlEscape(figures));
    }
    if (!r.fatal_error.empty()) {  // the campaign ended early: an error of its own
      ++tests;
      ++errors;
      cases += fmt::format("    <testcase classname=\"ulpcheck.{}\" name=\"campaign\" time=\"{}\">\n"
                           "      <error message=\"{}\" type=\"fatal\">{}</error>\n    </testcase>\n",
                           xmlEscape(op), seconds(r.seconds),
                           xmlEscape(r.fatal_error.substr(0, r.fatal_error.find('\n'))), xmlEscape(r.fatal_error));
    }
    suites += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">\n{}  "
        "</testsuite>\n",
        xmlEscape("ulpcheck " + op), tests, failures, errors, skipped, seconds(r.seconds), cases);
    all_tests += tests, all_failures += failures, all_errors += errors, all_skipped += skipped;
    all_seconds += r.seconds;
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"ulpcheck\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" time=\"{}\">\n{}"
      "</testsuites>\n",
      all_tests, all_failures, all_errors, all_skipped, seconds(all_seconds), suites);
}

}  // namespace ulpcheck
