// Corpus files parse, and malformed ones are refused with the file and line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "harness/runner/corpus.h"

namespace ulpcheck {
namespace {

namespace fs = std::filesystem;

class CorpusFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    root = fs::temp_directory_path() / ("ulpcheck-corpus-" + std::to_string(::getpid()));
    fs::create_directories(root / "rmsnorm" / "accuracy" / "regression");
  }
  void TearDown() override { fs::remove_all(root); }
  std::string write(const std::string& name, const std::string& text) {
    const fs::path p = root / "rmsnorm" / "accuracy" / "regression" / name;
    std::ofstream(p) << text;
    return p.string();
  }
  fs::path root;
};

TEST_F(CorpusFiles, ReadsCommentsAndTheCase) {
  write("a.case", "# why this case matters\n\n op=rmsnorm kernel=k dtype=fp16 M=2 N=9\n# trailing\n");
  const auto entries = loadCorpus(root.string(), "regression");
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].property, "accuracy");
  EXPECT_EQ(entries[0].spec.N, 9);
  EXPECT_EQ(entries[0].comments.size(), 2u);
}

TEST_F(CorpusFiles, RepeatLineSetsHowOftenTheCaseReplays) {
  write("race.case", "# a race: fails on some runs only\n#  repeat: 20 \nop=rmsnorm kernel=k dtype=fp32 M=7 N=9\n");
  write("plain.case", "# repeated measures are not a repeat line\nop=rmsnorm kernel=k dtype=fp32 M=7 N=9\n");
  const auto entries = loadCorpus(root.string(), "regression");
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].repeat, 1);   // plain.case
  EXPECT_EQ(entries[1].repeat, 20);  // race.case
}

TEST_F(CorpusFiles, MalformedFilesNameFileAndLine) {
  auto expectError = [&](const std::string& text, const std::string& mentions) {
    const std::string path = write("bad.case", text);
    try {
      loadCorpus(root.string(), "regression");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const CorpusError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(mentions), std::string::npos) << e.what();
    }
    fs::remove(path);
  };
  expectError("# only a comment\n", "no case line");
  expectError("op=rmsnorm kernel=k dtype=fp16 M=2 N=9\nop=rmsnorm kernel=k dtype=fp16 M=2 N=9\n", ":2:");
  expectError("# c\nop=rmsnorm kernel=k dtype=fp16 M=0 N=9\n", ":2: 'M' must be >= 1");
  expectError("op=layernorm kernel=k dtype=fp16 M=2 N=9\n", "lies under 'rmsnorm'");
  expectError(std::string("op=rmsnorm kernel=k dtype=fp16 M=2 N=9\x01garbage\n"), ":1:");
  expectError("# repeat: many\nop=rmsnorm kernel=k dtype=fp16 M=2 N=9\n", ":1: 'repeat:' takes a count");
  expectError("# repeat: 0\nop=rmsnorm kernel=k dtype=fp16 M=2 N=9\n", ":1: 'repeat:' takes a count");
  expectError("# repeat: 5000\nop=rmsnorm kernel=k dtype=fp16 M=2 N=9\n", ":1: 'repeat:' takes a count");
  expectError("# repeat: 3 times\nop=rmsnorm kernel=k dtype=fp16 M=2 N=9\n", ":1: 'repeat:' takes a count");
}

TEST_F(CorpusFiles, SavedCrashingCasesReadBack) {
  CaseSpec c = parseCaseString("op=rmsnorm kernel=host_separate dtype=bf16 M=3 N=17 seed=0x2a");
  const std::string path = saveCrashingCase(root.string(), "accuracy", c, {"found by a test", "second line"});
  EXPECT_NE(path.find("crashing"), std::string::npos);
  const CorpusEntry e = readCorpusFile(path, "rmsnorm", "accuracy");
  EXPECT_EQ(e.spec, c);
  EXPECT_EQ(e.comments.size(), 2u);
}

}  // namespace
}  // namespace ulpcheck
