// Unit tests of the file source (afstream/runtime/file_source.h): what a line means (integer keys as they are,
// other keys hashed, values, comments, blank lines, spaces and CRLF), errors naming file and line or skipped and
// counted, instances splitting the lines, write then read giving the items back, and the per-process parse shared
// while the file stays as it was and done again once it changes.
#include "afstream/runtime/file_source.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <xxhash.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "afstream/core/errors.h"
#include "tests/temp_dir.h"

namespace afs {
namespace {

namespace fs = std::filesystem;

std::string write_file(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

TEST(FileSource, LinesMeanKeysAndValues) {
  testing::TempDir dir;
  const auto path = write_file(dir.path() / "in.txt",
                               "# a comment\n"
                               "42\n"
                               "\n"
                               "  7 , 1500 \r\n"
                               "apple,3\n"
                               "\t10.0.0.1\n"
                               "18446744073709551615,-2");
  const auto items = FileSource::read_all(path, false);
  ASSERT_EQ(items.size(), 5u);
  EXPECT_EQ(items[0].key, 42u);
  EXPECT_EQ(items[0].value, 1);
  EXPECT_EQ(items[1].key, 7u);
  EXPECT_EQ(items[1].value, 1500);
  EXPECT_EQ(items[2].key, XXH3_64bits("apple", 5));
  EXPECT_EQ(items[2].value, 3);
  EXPECT_EQ(items[3].key, XXH3_64bits("10.0.0.1", 8));
  EXPECT_EQ(items[4].key, 18446744073709551615ULL);
  EXPECT_EQ(items[4].value, -2);
  for (std::size_t i = 0; i < items.size(); ++i) EXPECT_EQ(items[i].time, static_cast<std::int64_t>(i));
}

TEST(FileSource, AMalformedLineIsNamedOrSkippedAndCounted) {
  testing::TempDir dir;
  const auto path = write_file(dir.path() / "bad.txt", "1,2\n,5\n3,x\n4\n5,\n");
  try {
    (void)FileSource::read_all(path, false);
    FAIL() << "a malformed line must be an error";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ":2: expected 'key' or 'key,integer value', got ',5'"),
              std::string::npos)
        << e.what();
  }
  std::uint64_t skipped = 0;
  const auto items = FileSource::read_all(path, true, &skipped);
  EXPECT_EQ(skipped, 3u);  // ",5", "3,x" and "5," (a comma and no value: not a weight of 1)
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[1].key, 4u);
  EXPECT_THROW((void)FileSource::read_all((dir.path() / "missing.txt").string(), false), InputError);
}

TEST(FileSource, InstancesSplitTheLinesAndWriteReadsBack) {
  testing::TempDir dir;
  std::vector<Item> written;
  for (std::uint64_t i = 0; i < 1001; ++i) {
    Item it;
    it.key = i * 0x9E3779B97F4A7C15ULL;
    it.value = static_cast<std::int64_t>(i % 1500) - 3;
    written.push_back(it);
  }
  const auto path = (dir.path() / "items.csv").string();
  {
    std::ofstream f(path);
    FileSource::write(f, written, path);
  }
  const auto all = FileSource::read_all(path, false);
  ASSERT_EQ(all.size(), written.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].key, written[i].key);
    EXPECT_EQ(all[i].value, written[i].value);
  }
  // Three instances: disjoint ranges that cover the file, in order.
  std::vector<Item> joined;
  for (int k = 0; k < 3; ++k) {
    FileSource s(Params().set("path", path), {k, 3});
    std::vector<Item> buf(100);
    for (std::uint64_t at = 0;;) {
      const auto n = s.read(at, buf.data(), buf.size());
      if (n == 0) break;
      joined.insert(joined.end(), buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(n));
      at += n;
    }
  }
  ASSERT_EQ(joined.size(), written.size());
  for (std::size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i].key, written[i].key);
  std::ostringstream broken;
  broken.setstate(std::ios::badbit);
  EXPECT_THROW(FileSource::write(broken, written, "x"), InputError);
}

TEST(FileSource, OneParseIsSharedWhileTheFileStaysAsItWas) {
  testing::TempDir dir;
  const auto path = write_file(dir.path() / "in.txt", "1\n2\n3\n");
  const auto a = FileSource::load(path, false), b = FileSource::load(path, false);
  EXPECT_EQ(a.get(), b.get());                             // the same parse
  EXPECT_NE(FileSource::load(path, true).get(), a.get());  // another policy, another parse
  // Changed (another size, and another modification time): parsed again.
  write_file(path, "1\n2\n3\n4\n");
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(1));
  const auto c = FileSource::load(path, false);
  EXPECT_NE(c.get(), a.get());
  EXPECT_EQ(c->items.size(), 4u);
  EXPECT_EQ(a->items.size(), 3u);  // a parse handed out stays as it was
  // A source built now reads the new lines.
  FileSource s(Params().set("path", path), {0, 1});
  EXPECT_EQ(s.size(), 4u);
}

// A pipe gives its lines once, but every source instance, worker process and recovery reads the input again: a
// process substitution (<(zcat items.gz)) ran the heavy-hitters job on no items and reported precision and recall 1,
// and a FIFO with no writer hung the run. Refused, naming the path, as is a directory (read as "no items").
TEST(FileSource, APipeOrADirectoryIsRefusedNamingIt) {
  testing::TempDir dir;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string lines = "1\n2\n";
  ASSERT_EQ(::write(fds[1], lines.data(), lines.size()), static_cast<ssize_t>(lines.size()));
  ::close(fds[1]);
  const auto pipe_path = "/proc/self/fd/" + std::to_string(fds[0]);
  try {
    (void)FileSource::load(pipe_path, false);
    ADD_FAILURE() << "a pipe must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("'" + pipe_path + "' is a pipe"), std::string::npos) << e.what();
  }
  ::close(fds[0]);
  try {
    (void)FileSource::load(dir.path().string(), false);
    ADD_FAILURE() << "a directory must be refused";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

TEST(FileSource, LineOfNamesTheLineOfAnItem) {
  testing::TempDir dir;
  const auto path = write_file(dir.path() / "in.txt", "# comment\n1,2\n\nbad,\napple,-3\nx,y\n7\n");
  // Skipping malformed lines ("bad,", "x,y"), the items are 1, apple, 7.
  EXPECT_EQ(FileSource::line_of(path, true, 0), std::make_pair(std::uint64_t{2}, std::string("1,2")));
  EXPECT_EQ(FileSource::line_of(path, true, 1), std::make_pair(std::uint64_t{5}, std::string("apple,-3")));
  EXPECT_EQ(FileSource::line_of(path, true, 2), std::make_pair(std::uint64_t{7}, std::string("7")));
  EXPECT_EQ(FileSource::line_of(path, true, 3).first, 0u);
}

}  // namespace
}  // namespace afs
