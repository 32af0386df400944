// Replays a fuzz harness's seed corpus and its regressions (inputs that once
// crashed it, kept by scripts/fuzz.sh): each must run through without a
// crash or an exception other than burst::Error (which the harness catches).
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

TEST(FuzzReplay, CorpusAndRegressionsRunClean) {
  int files = 0;
  for (const char* dir : {BURST_FUZZ_CORPUS, BURST_FUZZ_REGRESSIONS}) {
    if (!std::filesystem::is_directory(dir)) continue;
    for (auto& e : std::filesystem::directory_iterator(dir)) {
      if (!e.is_regular_file() || e.path().filename().string()[0] == '.') continue;
      std::ifstream in(e.path(), std::ios::binary);
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      try {
        LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      } catch (const std::exception& ex) {
        ADD_FAILURE() << e.path() << ": " << ex.what();
      }
      ++files;
    }
  }
  EXPECT_GT(files, 0) << "no inputs under " << BURST_FUZZ_CORPUS;
}
