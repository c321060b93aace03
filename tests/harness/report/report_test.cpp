// Reports people read: the text table's figures, the JUnit XML (validated
// against harness/report/junit.xsd with xmllint), the HTML page rendered by
// a real browser (headless Chromium: the page's scripts must finish without
// an error and the expected elements must be there), and bad report inputs
// refused clearly.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/report/html.h"
#include "harness/report/junit.h"
#include "harness/runner/exit_codes.h"
#include "properties/error_distribution.h"
#include "tests/support/cli_support.h"

namespace ulpcheck {
namespace {

namespace fs = std::filesystem;
using testing::cli;
using testing::Result;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A program on PATH (xmllint, chromium), or "".
std::string program(const std::vector<std::string>& names) {
  for (const auto& name : names) {
    const std::string cmd = "command -v " + name + " 2>/dev/null";
    FILE* p = popen(cmd.c_str(), "r");
    char buf[512] = {0};
    const bool found = fgets(buf, sizeof buf, p) != nullptr;
    pclose(p);
    if (found) {
      std::string path = buf;
      while (!path.empty() && (path.back() == '\n' || path.back() == '\r')) path.pop_back();
      return path;
    }
  }
  return "";
}

Result shell(const std::string& cmd) {
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

/// A small passing run and a failing one (a mutant), each with its JSON
/// lines, JUnit XML and HTML report, made once for the suite.
struct Runs {
  // Per process: ctest runs these tests side by side.
  std::string dir = ::testing::TempDir() + "ulpcheck_reports_" + std::to_string(getpid()) + "/";
  Result passing, failing;
  Runs() {
    fs::create_directories(dir);
    passing = cli("run --backend host --op rmsnorm --per-cell 4 --seed 0x51 --no-save --quiet --json " + dir +
                  "pass.jsonl --junit " + dir + "pass.xml --html " + dir + "pass.html");
    failing = cli("run --backend host --op rmsnorm --kernel host_bug_bf16_rowsum --cases 12 --seed 0x52 --no-save "
                  "--no-corpus --shrink-budget 2 --quiet --json " +
                  dir + "fail.jsonl --junit " + dir + "fail.xml --html " + dir + "fail.html");
  }
};

const Runs& runs() {
  static const Runs r;
  return r;
}

TEST(ReportTable, ShowsPercentilesOfErrOverBudgetAndUlpsAtTheElementsScale) {
  const Result& r = runs().passing;
  ASSERT_EQ(r.code, exit_code::kOk) << r.output;
  for (const char* column : {"p50 e/b", "p99 e/b", "max e/b", "ulp@scale", "inconcl", "skip"})
    EXPECT_NE(r.output.find(column), std::string::npos) << column << "\n" << r.output;
  // Only the properties that apply to rmsnorm's kernels have rows.
  EXPECT_EQ(r.output.find("rank_consistency"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("fused_vs_unfused"), std::string::npos) << r.output;
}

TEST(ReportErrors, PercentilesAndUlpAtScaleBehave) {
  ErrorDistribution d;
  for (int i = 0; i < 98; ++i) d.add(0.1, 0.5, 1.0, 0.0, 0.0);
  d.add(0.9, 3.0, 1.0, 0.99, 0.99);
  d.add(0.0, 0.0, 0.0, 0.5, 0.5);  // an exact zero with no scale: counted, not plotted against scale
  EXPECT_EQ(d.count, 100);
  EXPECT_GE(d.ratioQuantile(0.5), 0.1);
  EXPECT_LE(d.ratioQuantile(0.5), 0.1 * 1.25);  // a quarter-octave bucket's upper edge
  EXPECT_GE(d.ratioQuantile(1.0), 0.9);
  EXPECT_EQ(d.max_ulp_at_scale, 3.0);
  EXPECT_FLOAT_EQ(d.worst_where[ErrorDistribution::kGrid * ErrorDistribution::kGrid - 1], 0.9f);
  int64_t plotted = 0;
  for (int64_t n : d.scale_count) plotted += n;
  EXPECT_EQ(plotted, 99);
  // An element beyond its budget by an infinite error survives the JSON.
  d.add(INFINITY, INFINITY, 1.0, 0.0, 0.0);
  const ErrorDistribution back = ErrorDistribution::fromJson(nlohmann::json::parse(d.toJson().dump()));
  EXPECT_EQ(back.count, 101);
  EXPECT_TRUE(std::isinf(back.max_ulp_at_scale));
  EXPECT_TRUE(std::isinf(back.ratioQuantile(1.0)));
  EXPECT_EQ(back.ratio, d.ratio);
  EXPECT_EQ(back.worst_where, d.worst_where);
}

TEST(ReportJunit, ValidatesAgainstTheSchemaAndCarriesFailuresWithTheirRepro) {
  const std::string xmllint = program({"xmllint"});
  if (xmllint.empty()) GTEST_SKIP() << "xmllint not found (Debian: libxml2-utils, which ci/install-deps installs)";
  ASSERT_EQ(runs().passing.code, exit_code::kOk) << runs().passing.output;
  ASSERT_EQ(runs().failing.code, exit_code::kPropertyFailed) << runs().failing.output;
  const std::string xsd = std::string(ULPCHECK_SOURCE_DIR) + "/harness/report/junit.xsd";
  for (const char* name : {"pass.xml", "fail.xml"}) {
    const Result v = shell(xmllint + " --noout --schema " + xsd + " " + runs().dir + name);
    EXPECT_EQ(v.code, 0) << name << ": " << v.output;
  }
  const std::string pass = readFile(runs().dir + "pass.xml"), fail = readFile(runs().dir + "fail.xml");
  EXPECT_NE(pass.find("<testcase classname=\"ulpcheck.rmsnorm.host_separate\" name=\"accuracy bf16\""),
            std::string::npos)
      << pass.substr(0, 2000);
  EXPECT_EQ(pass.find("<failure"), std::string::npos);
  EXPECT_NE(fail.find("<failure message="), std::string::npos);
  EXPECT_NE(
      fail.find(std::string("reproduce: ") + ULPCHECK_CLI + " repro &apos;op=rmsnorm kernel=host_bug_bf16_rowsum"),
      std::string::npos)
      << fail.substr(0, 3000);
  // The schema is not a rubber stamp: a case without its name is refused.
  const std::string broken = runs().dir + "broken.xml";
  std::ofstream(broken) << "<?xml version=\"1.0\"?><testsuites tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" "
                           "time=\"0\"><testsuite name=\"x\" tests=\"1\" failures=\"0\" errors=\"0\" skipped=\"0\" "
                           "time=\"0\"><testcase classname=\"c\" time=\"0\"/></testsuite></testsuites>";
  EXPECT_NE(shell(xmllint + " --noout --schema " + xsd + " " + broken).code, 0);
}

TEST(ReportJunit, EscapesWhatXmlCannotHoldAsIs) {
  EXPECT_EQ(xmlEscape("a<b & 'c' \"d\"\x01"), "a&lt;b &amp; &apos;c&apos; &quot;d&quot;");
}

/// The page as Chromium renders it: its DOM after the scripts ran, and a
/// screenshot. The seconds it takes are printed (what it adds to CI).
void expectRendered(const std::string& html, const std::vector<std::string>& expected) {
  const std::string chromium = program({"chromium", "chromium-browser", "google-chrome"});
  if (chromium.empty()) GTEST_SKIP() << "no headless Chromium (Debian: chromium, which ci/install-deps installs)";
  const auto t0 = std::chrono::steady_clock::now();
  // A profile of its own: two Chromiums on one profile refuse to start.
  const std::string flags = " --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir=" + html +
                            ".profile ";
  const Result dom = shell("timeout 120 " + chromium + flags + "--dump-dom file://" + html + " 2>/dev/null");
  ASSERT_EQ(dom.code, 0) << dom.output.substr(0, 2000);
  // Set by the page's last script line; window.onerror sets "error".
  EXPECT_NE(dom.output.find("data-ready=\"ok\""), std::string::npos) << dom.output.substr(0, 2000);
  for (const auto& s : expected) EXPECT_NE(dom.output.find(s), std::string::npos) << s;
  const std::string png = html + ".png";
  fs::remove(png);
  const Result shot =
      shell("timeout 120 " + chromium + flags + "--screenshot=" + png + " --window-size=1300,2000 file://" + html);
  ASSERT_EQ(shot.code, 0) << shot.output.substr(0, 2000);
  ASSERT_TRUE(fs::exists(png)) << shot.output.substr(0, 2000);
  EXPECT_GT(fs::file_size(png), 20000u) << "a blank page is a few kilobytes";
  std::printf("Chromium rendered %s (DOM and screenshot) in %.1f s\n", html.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

TEST(ReportHtml, APassingRunRendersItsTablesAndPlotsInABrowser) {
  ASSERT_EQ(runs().passing.code, exit_code::kOk) << runs().passing.output;
  expectRendered(runs().dir + "pass.html", {"id=\"summary\"", "class=\"cells sortable\"", "class=\"verdict pass\"",
                                            "worst err/budget by position", "worst err/budget by scale", "<svg",
                                            "target met: each of the", ", seed 0x51"});
}

TEST(ReportHtml, AFailingRunPutsItsFailuresFirstWithTheirRepro) {
  ASSERT_EQ(runs().failing.code, exit_code::kPropertyFailed) << runs().failing.output;
  const std::string page = readFile(runs().dir + "fail.html");
  const size_t failing_row = page.find("<tr class=\"fail\">"), passing_row = page.find("<tr class=\"pass\">");
  ASSERT_NE(failing_row, std::string::npos);
  if (passing_row != std::string::npos) {
    EXPECT_LT(failing_row, passing_row) << "failing cells first";
  }
  EXPECT_NE(page.find("class=\"failure\""), std::string::npos);
  EXPECT_NE(page.find("<button class=\"copy\""), std::string::npos);
  // A failure's per-tensor figures, its rounding bias among them.
  EXPECT_NE(page.find("mean miss off the correctly rounded"), std::string::npos);
  expectRendered(runs().dir + "fail.html", {"class=\"verdict fail\"", "FAILED accuracy", "ulpcheck repro"});
}

TEST(ReportHtml, TheReportCommandRebuildsThePageFromJsonLinesAndRefusesBadInput) {
  const std::string out = runs().dir + "again.html";
  Result r = cli("report " + runs().dir + "pass.jsonl -o " + out + " --title 'nightly run'");
  ASSERT_EQ(r.code, exit_code::kOk) << r.output;
  EXPECT_NE(readFile(out).find("<title>nightly run</title>"), std::string::npos);
  const std::string bad = runs().dir + "bad.jsonl";
  std::ofstream(bad) << "{\"type\":\"summary\"}\nnot json at all\n";
  r = cli("report " + bad + " -o " + out);
  EXPECT_EQ(r.code, exit_code::kBadCase) << r.output;
  EXPECT_NE(r.output.find("bad.jsonl:2: not JSON"), std::string::npos) << r.output;
  r = cli("report " + runs().dir + "missing.jsonl -o " + out);
  EXPECT_EQ(r.code, exit_code::kBadCase) << r.output;
  EXPECT_NE(r.output.find("cannot read"), std::string::npos) << r.output;
  const std::string nothing = runs().dir + "nothing.jsonl";
  std::ofstream(nothing) << "{\"type\":\"hang\",\"timeout_s\":300}\n";
  r = cli("report " + nothing + " -o " + out);
  EXPECT_EQ(r.code, exit_code::kBadCase) << r.output;
  EXPECT_NE(r.output.find("no campaign summary"), std::string::npos) << r.output;
  // A run cut short (its JSON lines end before the summary: a crash, a
  // kill) is still reported, from its cases, and marked as such.
  const std::string cut = runs().dir + "cut.jsonl";
  {
    std::ifstream in(runs().dir + "pass.jsonl");
    std::ofstream keep(cut);
    int n = 0;
    for (std::string line; std::getline(in, line) && n < 40; ++n) keep << line << "\n";
  }
  r = cli("report " + cut + " -o " + out);
  ASSERT_EQ(r.code, exit_code::kOk) << r.output;
  const std::string page = readFile(out);
  EXPECT_NE(page.find("CUT SHORT"), std::string::npos);
  EXPECT_NE(page.find("class=\"verdict fail\""), std::string::npos) << "an unfinished run is not a pass";
}

TEST(ReportHtml, TheKillMatrixRendersWithItsBaselines) {
  const std::string dir = runs().dir;
  const Result r = cli("mutants --backend host --mutant host_bug_bf16_rowsum --mutant host_bug_rstd_bf16 "
                       "--time-per-mutant 3 --shrink-budget 1 --no-controls --html " +
                       dir + "matrix.html");
  ASSERT_EQ(r.code, exit_code::kOk) << r.output;
  const std::string page = readFile(dir + "matrix.html");
  EXPECT_NE(page.find("id=\"kill-matrix\""), std::string::npos);
  EXPECT_NE(page.find("host_bug_rstd_bf16"), std::string::npos);
  EXPECT_NE(page.find("torch_assert_close"), std::string::npos) << "the baselines' columns";
  EXPECT_NE(page.find("torch_assert_close misses"), std::string::npos) << "what each baseline missed, as the text says";
  expectRendered(dir + "matrix.html", {"Kill matrix", "2 of 2 mutants killed"});
}

}  // namespace
}  // namespace ulpcheck
