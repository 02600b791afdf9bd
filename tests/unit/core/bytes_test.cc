// Unit tests of the byte writer and reader (afstream/core/bytes.h): values and arrays round-trip, an array read in
// place (ArrayView) equals the copied one at any alignment, and a truncated buffer is a FormatError naming what was
// being read, never a partial value.
#include "afstream/core/bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "afstream/core/errors.h"

namespace afs {
namespace {

TEST(Bytes, ValuesAndArraysRoundTrip) {
  ByteWriter w;
  w.put<std::uint8_t>(7);
  w.put<double>(-2.5);
  const std::vector<std::uint32_t> idx{3, 1, 4, 1, 5};
  w.put_array<std::uint32_t>(idx);
  w.put_string("afs");
  const auto b = w.take();
  ByteReader r(b);
  EXPECT_EQ(r.get<std::uint8_t>(), 7);
  EXPECT_EQ(r.get<double>(), -2.5);
  EXPECT_EQ(r.get_array<std::uint32_t>(), idx);
  EXPECT_EQ(r.get_string(), "afs");
  EXPECT_TRUE(r.at_end());
}

// After a u8 (and 0..7 more) the arrays lie at every alignment: the view reads what the copy reads.
TEST(Bytes, AnArrayViewReadsInPlaceAtAnyAlignment) {
  const std::vector<double> v{1.5, -0.25, 1e300, 0.0, 42.0};
  for (std::size_t pad = 0; pad < 8; ++pad) {
    ByteWriter w;
    for (std::size_t k = 0; k < pad; ++k) w.put<std::uint8_t>(0xAB);
    w.put_array<double>(v);
    w.put_array<double>(std::vector<double>{});
    const auto b = w.take();
    ByteReader copy(b), view(b);
    for (std::size_t k = 0; k < pad; ++k) {
      (void)copy.get<std::uint8_t>();
      (void)view.get<std::uint8_t>();
    }
    const auto c = copy.get_array<double>();
    const ArrayView<double> a = view.get_array_view<double>();
    ASSERT_EQ(a.size(), c.size()) << pad;
    for (std::size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k], c[k]) << pad << " element " << k;
    EXPECT_TRUE(view.get_array_view<double>("empty").empty());
    EXPECT_EQ(view.position(), copy.position() + 8);
    EXPECT_TRUE(view.at_end());
  }
}

TEST(Bytes, TruncatedBuffersNameWhatWasRead) {
  ByteWriter w;
  w.put_array<std::uint32_t>(std::vector<std::uint32_t>{1, 2, 3});
  auto b = w.take();
  b.pop_back();  // the last element's last byte
  const auto message = [&](auto read) {
    ByteReader r(b);
    try {
      read(r);
    } catch (const FormatError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([](ByteReader& r) { (void)r.get_array<std::uint32_t>("the indices"); }).find("the indices"),
            std::string::npos);
  EXPECT_NE(message([](ByteReader& r) { (void)r.get_array_view<std::uint32_t>("the view"); }).find("the view"),
            std::string::npos);
  b.resize(3);  // not even the count
  EXPECT_NE(message([](ByteReader& r) { (void)r.get<std::uint64_t>("a count"); }).find("a count"), std::string::npos);
}

}  // namespace
}  // namespace afs
