// The HTML report: one self-contained page (inline CSS, SVG drawn here, a
// few lines of script; nothing fetched from the network) of a run's or a
// kill matrix's JSON lines (`ulpcheck report run.jsonl -o report.html`,
// `ulpcheck run --html`, `ulpcheck mutants --html`):
//   - per op the summary table, failing cells first, each failure with its
//     shrunk case, worst elements and a repro command to copy;
//   - per kernel x tensor: histograms of err/budget and of ulp@scale, the
//     worst err/budget over a 16 x 16 grid of (row, column) positions, and
//     the worst err/budget against the element's scale (the condition the
//     budget measures), from the distributions the JSON lines carry
//     (properties/error_distribution.h);
//   - the kill matrix with its baselines, as the text prints it.
// The page sets <body data-ready="ok"> once its scripts ran without an
// error (window.onerror sets "error"): a headless browser checks it.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ulpcheck {

/// A JSON-lines file that cannot be read, naming the file and line.
struct ReportInputError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::vector<nlohmann::json> readJsonLines(const std::string& path);

std::string htmlReport(const std::vector<nlohmann::json>& records, const std::string& title);

/// Writes the HTML report of `records` to `path`, saying where; throws
/// std::runtime_error if it cannot be written.
void writeHtmlReport(const std::string& path, const std::vector<nlohmann::json>& records, const std::string& title);

/// `ulpcheck report`: the page of the JSON-lines files `inputs` (their
/// input notes said as they are read) written to `output`. A UsageError for
/// an output that cannot be written or is one of the inputs.
void reportJsonLinesFiles(const std::vector<std::string>& inputs, const std::string& output, const std::string& title);

/// Text made safe for HTML content and attributes.
std::string htmlEscape(const std::string& text);

}  // namespace ulpcheck
