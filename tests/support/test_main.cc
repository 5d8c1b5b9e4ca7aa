// The main() of every test binary: GoogleTest's, plus defaults for the
// environment tests use to find the source tree and the built `tidal`, so a
// binary run by hand (outside ctest) behaves the same.
//
// Each test process also gets a temp dir of its own (TMPDIR, which
// std::filesystem::temp_directory_path, GoogleTest's TempDir and the servers
// and agents a test starts all use), removed when its tests end: scratch
// files, stores and agents' work dirs never pile up in /tmp.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

int main(int argc, char** argv) {
  setenv("TIDAL_SOURCE_DIR", TIDAL_TEST_SOURCE_DIR, /*overwrite=*/0);
  setenv("TIDAL_BINARY_DIR", TIDAL_TEST_BINARY_DIR, /*overwrite=*/0);
  std::string scratch = (std::filesystem::temp_directory_path() / "tidal-test-XXXXXX").string();
  const bool own_tmp = mkdtemp(scratch.data()) != nullptr;
  if (own_tmp) {
    // Others may pass through, as through /tmp: a pod run as another user
    // works in a directory below.
    std::filesystem::permissions(scratch, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                              std::filesystem::perms::others_exec);
    setenv("TMPDIR", scratch.c_str(), /*overwrite=*/1);
    setenv("TEST_TMPDIR", scratch.c_str(), /*overwrite=*/1);
  }
  ::testing::InitGoogleTest(&argc, argv);
  const int failed = RUN_ALL_TESTS();
  if (own_tmp) {
    std::error_code ignored;
    std::filesystem::remove_all(scratch, ignored);
  }
  return failed;
}
