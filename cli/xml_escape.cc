#include "cli/xml_escape.h"

#include <cstdint>

namespace rpa {
namespace {

// The length of the well-formed UTF-8 sequence at s[i] that XML 1.0 allows (no surrogates,
// no U+FFFE / U+FFFF, at most U+10FFFF), or 0.
size_t utf8_char(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  size_t n = 0;
  uint32_t cp = 0;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2, cp = c & 0x1Fu;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3, cp = c & 0x0Fu;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4, cp = c & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
    cp = cp << 6 | (b(k) & 0x3Fu);
  }
  const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < least[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp == 0xFFFE ||
      cp == 0xFFFF) {
    return 0;
  }
  return n;
}

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const char ch = s[i];
    const auto u = static_cast<unsigned char>(ch);
    if (u >= 0x80) {  // multi-byte UTF-8 as is; anything else (a path's stray byte) as '?'
      const size_t n = utf8_char(s, i);
      out += n ? s.substr(i, n) : "?";
      i += n ? n : 1;
      continue;
    }
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // XML 1.0 allows no other control character, escaped or not.
        out += u < 0x20 && ch != '\n' && ch != '\t' ? '?' : ch;
    }
    ++i;
  }
  return out;
}

}  // namespace rpa
