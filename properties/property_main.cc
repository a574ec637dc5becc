// main() of the property binaries: GoogleTest, with a larger default RapidCheck budget.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  // RapidCheck runs 100 cases per property by default; the whole suite then takes ~7 s,
  // far inside its two-minute budget, so 300 buy more search. RC_PARAMS, when set, wins
  // whole (RapidCheck reads it when the first property starts).
  if (std::getenv("RC_PARAMS") == nullptr) setenv("RC_PARAMS", "max_success=300", 0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
