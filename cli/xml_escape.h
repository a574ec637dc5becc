// Text escaped for XML and HTML, in attributes and elements: & < > " ' and the control
// characters XML 1.0 does not allow (as '?').
#pragma once

#include <string>

namespace rpa {

std::string xml_escape(const std::string& s);

}  // namespace rpa
