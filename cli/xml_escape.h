// Text escaped for XML and HTML, in attributes and elements: & < > " ' as entities; control
// characters XML 1.0 does not allow, and bytes that are not well-formed UTF-8 (a path's
// stray byte), as '?'.
#pragma once

#include <string>

namespace rpa {

std::string xml_escape(const std::string& s);

}  // namespace rpa
