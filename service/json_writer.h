// Builds one JSON document as text, for the CLI's --json output.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace rpa {

// Appends tokens in order; commas and key/value separators are inserted automatically.
// Non-finite doubles, which JSON cannot hold, are written as the strings "nan", "inf",
// "-inf"; finite ones as Python's repr (always valid JSON, and exact).
class JsonWriter {
 public:
  JsonWriter& begin_object();
  JsonWriter& end_object();
  JsonWriter& begin_array();
  JsonWriter& end_array();
  JsonWriter& key(std::string_view k);
  JsonWriter& value(std::string_view v);
  JsonWriter& value(const char* v) { return value(std::string_view(v)); }
  JsonWriter& value(bool v);
  JsonWriter& value(int64_t v);
  JsonWriter& value(int v) { return value(int64_t{v}); }
  JsonWriter& value(double v);
  JsonWriter& null();

  const std::string& str() const { return out_; }

 private:
  void separate();
  std::string out_;
  bool need_comma_ = false;
};

// s as a quoted JSON string literal.
std::string json_quote(std::string_view s);

}  // namespace rpa
