// libFuzzer harness: the token-file readers. The first input byte picks
// the reader and its settings (bin uint16/uint32 with or without an
// end-of-document id, byte-level text, in-memory tokens with document
// offsets taken from the input), the rest is the file. After a corpus is
// accepted, sequences are packed from it at random windows, so an index
// the checks let through out of range is an ASan report. Bad input must end
// in burst::Error; anything else escaping is a bug.
#include "core/error.hpp"
#include "data/token_files.hpp"

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

namespace {
std::string path() {
  static const std::string p = "/tmp/burst_fuzz_tokens_" + std::to_string(getpid()) + ".bin";
  return p;
}

void exercise(burst::data::TokenCorpus c, long seq_len, std::uint8_t mode) {
  auto sp = std::make_shared<const burst::data::TokenCorpus>(std::move(c));
  burst::data::CorpusSampler s(sp, seq_len, (mode & 0x20) ? 0.25 : 0.0, (mode & 0x40) != 0);
  for (std::uint64_t i = 0; i < 4; ++i) {
    burst::data::Sequence q = s.make(1, i % 2, i);
    if (long(q.tokens.size()) != seq_len) __builtin_trap();
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using burst::data::TokenCorpus;
  if (size == 0) return 0;
  const std::uint8_t mode = data[0];
  const long seq_len = 1 + (mode >> 2 & 7);  // 1..8
  const std::string body(reinterpret_cast<const char*>(data + 1), size - 1);
  try {
    switch (mode & 3) {
      case 0:
      case 1: {
        {
          std::ofstream out(path(), std::ios::binary | std::ios::trunc);
          out.write(body.data(), std::streamsize(body.size()));
        }
        const bool u32 = (mode & 1) != 0;
        const long vocab = (mode & 0x80) ? 300 : 70000;
        const long eos = (mode & 0x10) ? long(data[size - 1]) : -1;
        exercise(TokenCorpus::open_bin(path(), u32 ? 4 : 2, vocab, eos), seq_len, mode);
        break;
      }
      case 2: {
        {
          std::ofstream out(path(), std::ios::binary | std::ios::trunc);
          out.write(body.data(), std::streamsize(body.size()));
        }
        exercise(TokenCorpus::open_text(path(), 257), seq_len, mode);
        break;
      }
      default: {  // tokens are the bytes; offsets are every byte pair's value, as given
        std::vector<std::uint32_t> tok;
        std::vector<long> starts;
        const std::size_t half = body.size() / 2;
        for (std::size_t i = 0; i < half; ++i) tok.push_back(std::uint8_t(body[i]));
        for (std::size_t i = half; i + 1 < body.size(); i += 2)
          starts.push_back(long(std::uint8_t(body[i])) - long(std::uint8_t(body[i + 1]) & 1));
        exercise(TokenCorpus::from_tokens(tok, starts, 256, "fuzz tokens"), seq_len, mode);
        break;
      }
    }
  } catch (const burst::Error&) {
  }
  return 0;
}
