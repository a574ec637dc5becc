#include "cli/xml_escape.h"

namespace rpa {

std::string xml_escape(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto u = static_cast<unsigned char>(ch);
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        if (u < 0x20 && ch != '\n' && ch != '\t') {
          out += "?";  // XML 1.0 allows no other control character, escaped or not
        } else {
          out += ch;
        }
    }
  }
  return out;
}

}  // namespace rpa
