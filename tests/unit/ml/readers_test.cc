// Unit tests of the data readers (ml/readers.h): good CSV, LIBSVM, Vowpal Wabbit and IDX files parse to the right
// examples; every kind of malformed line is an InputError naming file:line, or is skipped and counted; the IDX
// writer and reader round-trip.
#include "ml/readers.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "afstream/core/errors.h"
#include "tests/temp_dir.h"

namespace afs::ml {
namespace {

class Readers : public ::testing::Test {
 protected:
  std::filesystem::path write(const std::string& name, const std::string& text) {
    const auto p = dir_.path() / name;
    std::ofstream(p, std::ios::binary) << text;
    return p;
  }
  testing::TempDir dir_{"afs-ml-readers"};
};

// Runs read(path) on a file of `text` and expects an InputError whose message starts with "path:line: " and
// mentions `needle`.
template <typename Read>
void expect_line_error(const std::filesystem::path& p, int line, const std::string& needle, Read read) {
  try {
    read(p);
    ADD_FAILURE() << "no InputError for " << needle;
  } catch (const InputError& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind(p.string() + ":" + std::to_string(line) + ": ", 0), 0u) << msg;
    EXPECT_NE(msg.find(needle), std::string::npos) << msg;
  }
}

TEST_F(Readers, CsvParsesLabelColumnAndHeader) {
  const auto p = write("a.csv", "f1,f2,y,f3\n1.5, -2 ,1,3e2\n\n0,0,0,+4\r\n");
  const ReadResult r = read_csv(p, {.label_column = 2, .header = true});
  ASSERT_EQ(r.data.size(), 2u);
  EXPECT_EQ(r.stats.lines, 4u);
  EXPECT_EQ(r.stats.examples, 2u);
  EXPECT_EQ(r.data.info().num_features, 3u);
  const Example a = r.data.example(0), b = r.data.example(1);
  EXPECT_EQ(a.dense, Eigen::Vector3d(1.5, -2, 300));
  EXPECT_EQ(a.label, 1.0);
  EXPECT_EQ(b.dense, Eigen::Vector3d(0, 0, 4));
  EXPECT_EQ(b.label, -1.0);  // binary 0 -> -1
  const ReadResult last =
      read_csv(write("b.csv", "1;2;3.5\n4;5;6\n"), {.label_column = -1, .delimiter = ';', .labels = LabelKind::kReal});
  EXPECT_EQ(last.data.example(0).label, 3.5);
  EXPECT_EQ(last.data.example(1).dense, Eigen::Vector2d(4, 5));
}

TEST_F(Readers, CsvNamesEveryMalformedLine) {
  auto read = [](const std::filesystem::path& p) { return read_csv(p); };
  expect_line_error(write("c1.csv", "1,2,3\n0,x,3\n"), 2, "'x' is not a finite number", read);
  expect_line_error(write("c2.csv", "1,2,3\n1,2\n"), 2, "expected 3 columns, found 2", read);
  expect_line_error(write("c3.csv", "1,2,3\n\n2,2,3\n"), 3, "binary label '2'", read);
  expect_line_error(write("c4.csv", "1,,3\n"), 1, "empty field in column 2", read);
  expect_line_error(write("c5.csv", "1,2,nan\n"), 1, "not a finite number", read);
  EXPECT_THROW(read_csv(write("c6.csv", "1,2\n"), {.label_column = 5}), ConfigError);
  EXPECT_THROW(read_csv(dir_.path() / "missing.csv"), InputError);
}

TEST_F(Readers, CsvSkipPolicyCountsMalformedLines) {
  const auto p = write("s.csv", "1,2,3\n1,x,3\n0,1\n1,5,6\n7,1,1\n");
  const ReadResult r = read_csv(p, {.on_error = OnError::kSkip});
  EXPECT_EQ(r.data.size(), 2u);
  EXPECT_EQ(r.stats.skipped, 3u);
  EXPECT_EQ(r.stats.lines, 5u);
  EXPECT_EQ(r.stats.first_error.rfind(p.string() + ":2: ", 0), 0u) << r.stats.first_error;
  EXPECT_EQ(r.data.example(1).dense, Eigen::Vector2d(5, 6));
}

// A malformed first line skipped under OnError::kSkip does not fix the column count: the well-formed lines after it
// were all skipped as "expected 7 columns, found 6" because of a trailing comma on line 1.
TEST_F(Readers, CsvSkippedFirstLineDoesNotFixTheColumnCount) {
  const auto p = write("first.csv", "1,2,3,\n1,5,6\n0,7,8\n");
  const ReadResult r = read_csv(p, {.on_error = OnError::kSkip});
  EXPECT_EQ(r.stats.skipped, 1u);
  ASSERT_EQ(r.data.size(), 2u);
  EXPECT_EQ(r.data.info().num_features, 2u);
  EXPECT_EQ(r.data.example(1).dense, Eigen::Vector2d(7, 8));
  EXPECT_EQ(r.stats.first_error.rfind(p.string() + ":1: ", 0), 0u) << r.stats.first_error;
  // Under fail the first line is still the error.
  expect_line_error(p, 1, "empty field in column 4", [](const std::filesystem::path& f) { return read_csv(f); });
}

// A UTF-8 byte order mark (spreadsheets write one) starts the first line of the file, not its label: it was
// "label '\xEF\xBB\xBF1' is not a finite number", printed as "label '1' is not a finite number".
TEST_F(Readers, Utf8ByteOrderMarkIsIgnored) {
  const std::string bom = "\xEF\xBB\xBF";
  const ReadResult c = read_csv(write("bom.csv", bom + "1,2,3\n0,4,5\n"));
  ASSERT_EQ(c.data.size(), 2u);
  EXPECT_EQ(c.data.example(0).label, 1.0);
  const ReadResult l = read_libsvm(write("bom.svm", bom + "1 1:2\n-1 2:3\n"));
  ASSERT_EQ(l.data.size(), 2u);
  EXPECT_EQ(l.data.example(0).label, 1.0);
  const ReadResult v = read_vw(write("bom.vw", bom + "1 |f a\n-1 |f b\n"));
  ASSERT_EQ(v.data.size(), 2u);
  EXPECT_EQ(v.data.example(0).label, 1.0);
  // Only at the start of the file.
  expect_line_error(write("bom2.csv", "1,2,3\n" + bom + "0,4,5\n"), 2, "not a finite number",
                    [](const std::filesystem::path& f) { return read_csv(f); });
}

// A long field is quoted up to 64 bytes, then its length: a UTF-16 file read as LIBSVM quoted a whole line (1,019
// characters of error).
TEST_F(Readers, ALongFieldIsQuotedInPart) {
  const std::string field(1000, 'x');
  try {
    (void)read_libsvm(write("long.svm", "1 " + field + "\n"));
    FAIL() << "accepted";
  } catch (const InputError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("feature '" + std::string(64, 'x') + "...' (1000 bytes) has no ':'"), std::string::npos) << m;
    EXPECT_LT(m.size(), 250u) << m;
  }
}

// One sign only: "+-1" was read as -1.
TEST_F(Readers, NumbersTakeOneSign) {
  auto read = [](const std::filesystem::path& p) { return read_csv(p); };
  expect_line_error(write("pm.csv", "1,2,3\n1,+-1,3\n"), 2, "'+-1' is not a finite number", read);
  expect_line_error(write("pm2.csv", "+-1,2,3\n"), 1, "label '+-1' is not a finite number", read);
  EXPECT_EQ(read_csv(write("p.csv", "+1,+2,-3\n")).data.example(0).dense, Eigen::Vector2d(2, -3));
  // Below the double range is the nearest double (0, as strtod reads it); above it is no finite number.
  EXPECT_EQ(read_csv(write("tiny.csv", "1,1e-400,-1e-400\n")).data.example(0).dense, Eigen::Vector2d(0, 0));
  expect_line_error(write("huge.csv", "1,1e400,3\n"), 1, "'1e400' is not a finite number", read);
}

// A directory given as the data file says so (it was "read error after line 0").
TEST_F(Readers, ADirectoryIsNamedAsOne) {
  const auto d = write("x.csv", "1,2\n").parent_path() / "subdir";
  std::filesystem::create_directories(d);
  try {
    (void)read_csv(d);
    ADD_FAILURE() << "no InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

TEST_F(Readers, LibsvmParsesSparseExamples) {
  const auto p = write("a.svm", "+1 1:0.5 3:2 # comment\n# only a comment\n-1 2:1\n0 10:-1.5\n");
  const ReadResult r = read_libsvm(p);
  ASSERT_EQ(r.data.size(), 3u);
  EXPECT_EQ(r.data.info().num_features, 10u);
  EXPECT_TRUE(r.data.info().sparse);
  const Example a = r.data.example(0);
  EXPECT_EQ(a.label, 1.0);
  EXPECT_EQ(a.indices, (std::vector<std::uint32_t>{0, 2}));
  EXPECT_EQ(a.values, (std::vector<double>{0.5, 2}));
  EXPECT_EQ(r.data.example(2).label, -1.0);
  const ReadResult hashed = read_libsvm(p, {.hash_bits = 8});
  EXPECT_EQ(hashed.data.info().num_features, 256u);
  EXPECT_EQ(hashed.data.example(0).indices[1], hash_index(3, 0, 8));
  const ReadResult multi = read_libsvm(write("m.svm", "0 1:1\n4 2:1\n"), {.labels = LabelKind::kClass});
  EXPECT_EQ(multi.data.info().num_classes, 5);
}

TEST_F(Readers, LibsvmNamesEveryMalformedLine) {
  auto read = [](const std::filesystem::path& p) { return read_libsvm(p); };
  expect_line_error(write("l1.svm", "1 1:1\n1 2\n"), 2, "has no ':'", read);
  expect_line_error(write("l2.svm", "1 0:1\n"), 1, "index '0'", read);
  expect_line_error(write("l3.svm", "1 3:1 2:1\n"), 1, "does not increase", read);
  expect_line_error(write("l4.svm", "1 1:abc\n"), 1, "feature value 'abc'", read);
  expect_line_error(write("l5.svm", "yes 1:1\n"), 1, "label 'yes'", read);
  expect_line_error(write("l6.svm", "1 x:1\n"), 1, "index 'x'", read);
  // A NUL byte (a binary file) is shown as \x00: it ended the message there.
  expect_line_error(write("l8.svm", std::string("1 1:1\0z more\n", 13)), 1,
                    "feature value '1\\x00z' is not a finite number", read);
  const ReadResult r = read_libsvm(write("l7.svm", "1 1:1\n1 0:1\n-1 2:2\n1 2\n"), {.on_error = OnError::kSkip});
  EXPECT_EQ(r.data.size(), 2u);
  EXPECT_EQ(r.stats.skipped, 2u);
}

// Raw indices and no feature on any line: a dataset of 0 features reached the learner ("learn.learner num_features 0
// is outside [1, 2^31]", naming neither file nor problem). The file is named; hashed, every example keeps its bias.
TEST_F(Readers, LibsvmWithOnlyLabelsIsNamed) {
  const auto p = write("labels.svm", "1\n-1 # no features\n1\n");
  try {
    (void)read_libsvm(p);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("labels.svm: no line has a feature"), std::string::npos) << e.what();
  }
  EXPECT_EQ(read_libsvm(p, {.hash_bits = 4}).data.size(), 3u);
}

// Raw indices make a weight per index up to the largest: one beyond 2^24 asks for hashing instead of gigabytes.
TEST_F(Readers, LibsvmRawIndicesHaveACeiling) {
  const auto big = write("big.svm", "+1 1:0.5 100000000:1\n");
  try {
    read_libsvm(big);
    FAIL() << "no error for an index of 1e8 taken as it is";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("hash-bits: " + big.string() + " has feature index 100000000"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(read_libsvm(big, {.hash_bits = 20}).data.info().num_features, std::size_t{1} << 20);
  EXPECT_EQ(read_libsvm(write("edge.svm", "+1 16777216:1\n")).data.info().num_features, kMaxRawLibsvmIndex);
}

TEST_F(Readers, VwHashesNamespacesAndFeatures) {
  const auto p = write("a.vw", "1 |a x:2 y |b z\n-1 2.0 'tag| w\n\n0 |c:0.5 q:4\n");
  const ReadResult r = read_vw(p, {.bits = 18});
  ASSERT_EQ(r.data.size(), 3u);
  EXPECT_EQ(r.data.info().num_features, std::size_t{1} << 18);
  const Example a = r.data.example(0);
  EXPECT_EQ(a.label, 1.0);
  const auto na = hash_namespace("a"), nb = hash_namespace("b");
  EXPECT_EQ(a.indices, (std::vector<std::uint32_t>{hash_feature(na, "x", 18), hash_feature(na, "y", 18),
                                                   hash_feature(nb, "z", 18)}));
  EXPECT_EQ(a.values, (std::vector<double>{2, 1, 1}));
  const Example b = r.data.example(1);
  EXPECT_EQ(b.label, -1.0);
  EXPECT_EQ(b.indices, (std::vector<std::uint32_t>{hash_feature(hash_namespace(" "), "w", 18)}));
  const Example c = r.data.example(2);
  EXPECT_EQ(c.label, -1.0);
  EXPECT_EQ(c.values, (std::vector<double>{2.0}));  // namespace scale 0.5 * value 4
  EXPECT_NE(hash_feature(na, "x", 18), hash_feature(nb, "x", 18));
  const ReadResult m = read_vw(write("m.vw", "3 | f\n1 | g\n"), {.labels = LabelKind::kClass});
  EXPECT_EQ(m.data.example(0).label, 2.0);  // VW classes 1..K become 0..K-1
  EXPECT_EQ(m.data.info().num_classes, 3);
}

TEST_F(Readers, VwNamesEveryMalformedLine) {
  auto read = [](const std::filesystem::path& p) { return read_vw(p); };
  expect_line_error(write("v1.vw", "1 |a x\n1 a x\n"), 2, "no '|'", read);
  expect_line_error(write("v2.vw", " |a x\n"), 1, "missing label", read);
  expect_line_error(write("v3.vw", "1 |a x:abc\n"), 1, "feature value 'abc'", read);
  expect_line_error(write("v4.vw", "1 |a :3\n"), 1, "empty name", read);
  expect_line_error(write("v5.vw", "1 1 2 3 |a x\n"), 1, "unexpected token '3'", read);
  expect_line_error(write("v6.vw", "1 -2 |a x\n"), 1, "importance '-2' is negative", read);
  expect_line_error(write("v7.vw", "5 |a x\n"), 1, "binary label '5'", read);
  expect_line_error(write("v8.vw", "0 |a x\n"), 1, "class label '0'",
                    [](const std::filesystem::path& p) { return read_vw(p, {.labels = LabelKind::kClass}); });
  const ReadResult r = read_vw(write("v9.vw", "1 | a\nbad\n-1 | b\n1 |a :1\n"), {.on_error = OnError::kSkip});
  EXPECT_EQ(r.data.size(), 2u);
  EXPECT_EQ(r.stats.skipped, 2u);
  EXPECT_NE(r.stats.first_error.find(":2: "), std::string::npos) << r.stats.first_error;
  EXPECT_THROW(read_vw(write("v10.vw", "1 | a\n"), {.bits = 0}), ConfigError);
}

TEST_F(Readers, IdxRoundTrip) {
  const std::vector<std::uint8_t> pixels = {0, 255, 51, 1, 2, 3, 10, 20, 30, 40, 50, 60, 7, 7, 7, 7, 7, 255};
  write_idx_images(dir_.path() / "img.idx3", 2, 3, pixels);
  write_idx_labels(dir_.path() / "lab.idx1", {3, 0, 9});
  const ReadResult r = read_idx(dir_.path() / "img.idx3", dir_.path() / "lab.idx1");
  ASSERT_EQ(r.data.size(), 3u);
  EXPECT_EQ(r.data.info().num_features, 6u);
  EXPECT_EQ(r.data.info().num_classes, 10);
  EXPECT_EQ(r.data.info().labels, LabelKind::kClass);
  for (std::uint64_t n = 0; n < 3; ++n) {
    const Example x = r.data.example(n);
    for (int j = 0; j < 6; ++j) EXPECT_DOUBLE_EQ(x.dense[j], pixels[n * 6 + j] / 255.0);
  }
  EXPECT_EQ(r.data.example(0).label, 3.0);
  EXPECT_EQ(r.data.example(2).label, 9.0);
  const ReadResult raw = read_idx(dir_.path() / "img.idx3", dir_.path() / "lab.idx1", {.scale = 1});
  EXPECT_EQ(raw.data.example(0).dense[1], 255.0);
}

TEST_F(Readers, IdxRejectsBadFilesNamingThem) {
  write_idx_images(dir_.path() / "img", 2, 2, std::vector<std::uint8_t>(8, 1));
  write_idx_labels(dir_.path() / "lab", {1, 2});
  write_idx_labels(dir_.path() / "lab3", {1, 2, 3});
  write_idx_labels(dir_.path() / "lab20", std::vector<std::uint8_t>(20, 1));
  auto expect_error = [&](const std::filesystem::path& img, const std::filesystem::path& lab,
                          const std::string& needle) {
    try {
      read_idx(img, lab);
      ADD_FAILURE() << "no InputError for " << needle;
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error(dir_.path() / "img", dir_.path() / "lab3", "3 labels");
  expect_error(dir_.path() / "lab20", dir_.path() / "lab", "is not 2051");
  expect_error(dir_.path() / "img", dir_.path() / "img", "is not 2049");
  std::ifstream in(dir_.path() / "img", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto cut = write("cut", bytes.substr(0, bytes.size() - 1));
  expect_error(cut, dir_.path() / "lab", "pixel bytes");
  expect_error(write("short", "abc"), dir_.path() / "lab", "too short");
  // A header whose n x rows x cols is 2^64 (2^22 x 2^21 x 2^21) wrapped to 0 and passed for an empty file's.
  const std::string huge{'\0', '\0',   '\x08', '\x03', '\0', '\x40', '\0', '\0',
                         '\0', '\x20', '\0',   '\0',   '\0', '\x20', '\0', '\0'};
  expect_error(write("huge", huge), dir_.path() / "lab", "holds 0 pixel bytes, the header promises 4194304 x 2097152");
  expect_error(dir_.path() / "none", dir_.path() / "lab", "cannot open");
  EXPECT_NO_THROW(read_idx(dir_.path() / "img", dir_.path() / "lab"));
}

}  // namespace
}  // namespace afs::ml
