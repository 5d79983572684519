#include "core/text/token_lines.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/base/error.h"

namespace draftlab {

namespace {

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

std::vector<MaskedSequence> read_token_lines(const std::string& path, int64_t vocab_size, bool* any_mask) {
  std::ifstream in(path);
  if (!in) throw Error::at(path, "cannot open the token-line file");
  std::vector<MaskedSequence> out;
  bool masked = false;
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    if (blank(line)) continue;
    const std::string where = path + ":" + std::to_string(number);
    MaskedSequence s;
    uint8_t mask = 1;
    std::istringstream words(line);
    std::string word;
    for (int64_t column = 1; words >> word; ++column) {
      if (word == "|") {
        if (mask == 2) throw Error::in_file(where, "\"|\"", "at most one per line", "a second one");
        // Everything read so far is the prompt.
        std::fill(s.mask.begin(), s.mask.end(), 0);
        mask = 2;
        masked = true;
        continue;
      }
      char* end = nullptr;
      errno = 0;
      const long long id = std::strtoll(word.c_str(), &end, 10);
      if (end == word.c_str() || *end != '\0' || errno != 0 || id < 0 || id >= vocab_size)
        throw Error::in_file(where, "token " + std::to_string(column),
                             "an id in 0.." + std::to_string(vocab_size - 1) + " or \"|\"", "\"" + word + "\"");
      s.tokens.push_back(static_cast<int32_t>(id));
      s.mask.push_back(1);
    }
    if (s.tokens.empty()) throw Error::in_file(where, "tokens", "at least one token id", "none");
    out.push_back(std::move(s));
  }
  if (out.empty()) throw Error::at(path, "no sequences (expected one line of token ids per sequence)");
  if (any_mask) *any_mask = masked;
  return out;
}

std::string format_token_line(const std::vector<int64_t>& prompt, const std::vector<int64_t>& continuation) {
  std::string line;
  for (int64_t id : prompt) line += std::to_string(id) + " ";
  line += "|";
  for (int64_t id : continuation) line += " " + std::to_string(id);
  return line;
}

}  // namespace draftlab
