// close_checked: a file a run writes whose writes failed (a full disk shows only when the buffer is flushed) is an
// error naming it and the reason, not an empty file and exit status 0.
#include "afstream/core/out_file.h"

#include <gtest/gtest.h>

#include <string>

#include "afstream/core/errors.h"
#include "tests/error_message.h"
#include "tests/temp_dir.h"

namespace afs {
namespace {

TEST(OutFile, AFullDiskIsAnErrorNamingTheFileAndTheReason) {
  std::ofstream f("/dev/full");
  f << std::string(100000, 'x');  // more than the buffer: some of it is written (and fails) before the close
  f << "the rest";
  // The write that failed was before the close: its reason is gone with it.
  EXPECT_EQ(testing::error_message<InputError>([&] { close_checked(f, "/dev/full"); }),
            "cannot write '/dev/full': a write failed");
  std::ofstream small("/dev/full");
  small << "a line, all in the buffer until the close";
  EXPECT_EQ(testing::error_message<InputError>([&] { close_checked(small, "/dev/full"); }),
            "cannot write '/dev/full': No space left on device");
}

TEST(OutFile, AFileThatCannotBeOpenedIsNamed) {
  afs::testing::TempDir d;
  const auto path = (d.path() / "no-such-dir" / "x.csv").string();
  std::ofstream f(path);
  EXPECT_EQ(testing::error_message<InputError>([&] { close_checked(f, path); }),
            "cannot write '" + path + "': No such file or directory");
  const auto good = (d.path() / "x.csv").string();
  std::ofstream g(good);
  g << "ok\n";
  EXPECT_NO_THROW(close_checked(g, good));
}

}  // namespace
}  // namespace afs
