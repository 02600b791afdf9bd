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
// Varints (LEB128): one byte below 128, ten for the largest u64; a buffer that ends inside one, or an eleventh byte,
// is a FormatError naming what was read.
TEST(Bytes, VarintsRoundTripAndRejectTruncatedOrOverlongOnes) {
  const std::vector<std::uint64_t> values{
      0, 1, 127, 128, 300, 16383, 16384, std::uint64_t{1} << 35, std::uint64_t{1} << 63, UINT64_MAX};
  ByteWriter w;
  for (const auto v : values) w.put_varint(v);
  const auto b = w.take();
  ByteReader r(b);
  for (const auto v : values) EXPECT_EQ(r.get_varint("v"), v);
  EXPECT_TRUE(r.at_end());

  ByteWriter small;
  small.put_varint(127);
  EXPECT_EQ(small.size(), 1u);
  ByteWriter largest;
  largest.put_varint(UINT64_MAX);
  EXPECT_EQ(largest.size(), 10u);

  auto truncated = largest.take();
  truncated.pop_back();
  ByteReader rt(truncated);
  try {
    (void)rt.get_varint("the key");
    FAIL() << "a truncated varint was read";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("the key"), std::string::npos) << e.what();
  }
  const std::vector<std::uint8_t> overlong(11, 0x80);
  ByteReader ro(overlong);
  EXPECT_THROW((void)ro.get_varint("the key"), FormatError);
  const std::vector<std::uint8_t> past64{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02};  // bit 64 set
  ByteReader rp(past64);
  EXPECT_THROW((void)rp.get_varint("the key"), FormatError);
}

}  // namespace afs
