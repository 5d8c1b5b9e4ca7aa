// The main() of every test binary: GoogleTest's, plus defaults for the
// environment tests use to find the source tree and the built `tidal`, so a
// binary run by hand (outside ctest) behaves the same.
#include <gtest/gtest.h>

#include <cstdlib>

int main(int argc, char** argv) {
  setenv("TIDAL_SOURCE_DIR", TIDAL_TEST_SOURCE_DIR, /*overwrite=*/0);
  setenv("TIDAL_BINARY_DIR", TIDAL_TEST_BINARY_DIR, /*overwrite=*/0);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
