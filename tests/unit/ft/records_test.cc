// Unit tests of the backup records (afstream/ft/records.h; DESIGN.md sections 5 and 8): state records and item
// records round trip exactly, and every truncated, corrupt or wrongly versioned record is rejected with FormatError.
#include "afstream/ft/records.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "tests/error_message.h"

namespace afs {
namespace {

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

void expect_same(const ChannelItem& a, const ChannelItem& b) {
  EXPECT_EQ(a.channel, b.channel);
  EXPECT_EQ(a.end_of_stream, b.end_of_stream);
  EXPECT_EQ(a.item, b.item);
}

void expect_same(const StateRecord& a, const StateRecord& b) {
  EXPECT_EQ(a.full, b.full);
  EXPECT_EQ(a.snapshot, b.snapshot);
  EXPECT_EQ(a.inputs, b.inputs);
  EXPECT_EQ(a.outputs, b.outputs);
  EXPECT_EQ(a.ended_inputs, b.ended_inputs);
  EXPECT_EQ(a.source_offset, b.source_offset);
  EXPECT_EQ(a.missing_by_failure, b.missing_by_failure);
  EXPECT_EQ(a.residual, b.residual);
  EXPECT_EQ(a.residual_by_failure, b.residual_by_failure);
  EXPECT_EQ(a.op_spec, b.op_spec);
  EXPECT_EQ(a.checkpoint, b.checkpoint);
  EXPECT_EQ(a.finished, b.finished);
  EXPECT_EQ(a.covered_outputs, b.covered_outputs);
  ASSERT_EQ(a.unacked_outputs.size(), b.unacked_outputs.size());
  for (std::size_t i = 0; i < a.unacked_outputs.size(); ++i) expect_same(a.unacked_outputs[i], b.unacked_outputs[i]);
}

std::vector<ChannelItem> some_items() {
  return {
      {3, false, Item{42, -7, 1000, 1}},
      {3, false, Item{~0ULL, INT64_MIN, INT64_MAX, 2}},
      {9, true, Item{0, 0, 0, 17}},  // punctuation
  };
}

StateRecord some_state() {
  StateRecord s;
  s.full = true;
  s.snapshot = {0x41, 0x46, 0x53, 0x4e, 1, 2, 3, 0, 255};
  s.inputs = {{0, 10}, {5, 1ULL << 40}, {0xFFFFFFFF, 3}};
  s.outputs = {{7, 99}};
  s.ended_inputs = {5, 0};
  s.source_offset = 123456789012345ULL;
  s.unacked_outputs = some_items();
  s.missing_by_failure = {0, 12, -1};
  s.residual = 2.5;
  s.residual_by_failure = {0, 1.25};
  s.op_spec = OperatorSpec{"count-min-hh", Params().set("width", 8000).set("phi", 0.01).set("weights", ""), 2, 3};
  s.checkpoint = (3ULL << 32) | 17;
  s.finished = true;
  s.covered_outputs = {{2, 40}, {5, 7}};
  return s;
}
// The version-6 tail of some_state(): the covered outputs, a u64 count and two (u32 channel, u64 number) entries.
constexpr std::size_t kCoveredTail = 8 + 2 * 12;

TEST(StateRecord, RoundTripsEveryField) {
  const StateRecord s = some_state();
  const Bytes b = s.encode();
  expect_same(StateRecord::decode(b), s);
  // An empty delta record.
  StateRecord empty;
  expect_same(StateRecord::decode(empty.encode()), empty);
  EXPECT_FALSE(StateRecord::decode(empty.encode()).full);
  // Encoding is deterministic.
  EXPECT_EQ(some_state().encode(), b);
}

TEST(StateRecord, EveryTruncationThrowsFormatError) {
  const Bytes b = some_state().encode();
  for (std::size_t len = 0; len < b.size(); ++len) {
    const Bytes prefix(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(len));
    const std::string e = testing::error_message<FormatError>([&] { StateRecord::decode(prefix); });
    EXPECT_FALSE(e.empty()) << "a " << len << "-byte prefix of " << b.size() << " was accepted";
  }
  EXPECT_TRUE(contains(testing::error_message<FormatError>([] { StateRecord::decode({}); }),
                       "truncated buffer while reading magic"));
}

TEST(StateRecord, RejectsBadMagicVersionAndTrailingBytes) {
  const Bytes good = some_state().encode();
  Bytes bad_magic = good;
  bad_magic[0] ^= 0xFF;
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(bad_magic); }), "state record: bad magic");
  Bytes v1 = good;
  const std::uint16_t one = 1;  // the format before missing_by_failure
  std::memcpy(v1.data() + 4, &one, sizeof one);
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(v1); }),
            "state record: unsupported version 1 (expected 4..6)");
  Bytes trailing = good;
  trailing.push_back(0);
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(trailing); }),
            "state record: 1 unexpected trailing bytes");
  // An item record is not a state record, and the other way round.
  EXPECT_EQ(testing::error_message<FormatError>([] { StateRecord::decode(encode_items(some_items())); }),
            "state record: bad magic");
  EXPECT_EQ(testing::error_message<FormatError>([&] { decode_items(good); }), "item record: bad magic");
}

// Version 5 added the checkpoint fields at the end, version 6 the covered outputs after them; a version-4 record
// (without either) still decodes, as a record of no checkpoint, and a bad finished flag is rejected.
TEST(StateRecord, ReadsVersion4RecordsAndChecksTheCheckpointFields) {
  StateRecord s = some_state();
  Bytes v4 = s.encode();
  v4.resize(v4.size() - 9 - kCoveredTail);
  const std::uint16_t four = 4;
  std::memcpy(v4.data() + 4, &four, sizeof four);
  const StateRecord old = StateRecord::decode(v4);
  EXPECT_EQ(old.checkpoint, 0u);
  EXPECT_FALSE(old.finished);
  s.checkpoint = 0;
  s.finished = false;
  s.covered_outputs.clear();
  expect_same(old, s);
  // A version-4 record with the version-5 tail has trailing bytes; a version-5 record without it is truncated.
  Bytes v4_long = some_state().encode();
  std::memcpy(v4_long.data() + 4, &four, sizeof four);
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(v4_long); }),
            "state record: 41 unexpected trailing bytes");
  Bytes bad_finished = some_state().encode();
  bad_finished[bad_finished.size() - kCoveredTail - 1] = 2;
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(bad_finished); }),
            "state record: bad finished flag 2");
}

// A version-5 record (without the covered outputs) decodes as one of a source that recorded none.
TEST(StateRecord, ReadsVersion5Records) {
  Bytes v5 = some_state().encode();
  v5.resize(v5.size() - kCoveredTail);
  const std::uint16_t five = 5;
  std::memcpy(v5.data() + 4, &five, sizeof five);
  StateRecord want = some_state();
  want.covered_outputs.clear();
  expect_same(StateRecord::decode(v5), want);
}

TEST(StateRecord, RejectsABadOperatorSpec) {
  StateRecord s;
  s.full = true;
  s.op_spec = OperatorSpec{"op", {}, 0, 1};
  const Bytes good = s.encode();
  // The spec comes last but the checkpoint fields (9 bytes) and the covered outputs (an empty map, 8 bytes): flag,
  // name (u64 length, bytes), index, parallelism, parameter count.
  const std::size_t end = good.size() - 9 - 8;
  const std::size_t index_at = end - 8 - 4 - 4;
  Bytes bad_index = good;
  const std::int32_t five = 5;
  std::memcpy(bad_index.data() + index_at, &five, sizeof five);
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(bad_index); }),
            "state record: operator index 5 outside parallelism 1");
  Bytes bad_flag = good;
  bad_flag[index_at - 8 - 2 - 1] = 7;
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(bad_flag); }),
            "state record: bad operator spec flag 7");
  Bytes many = good;
  const std::uint64_t n = 1000;
  std::memcpy(many.data() + end - 8, &n, sizeof n);
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(many); }),
            "state record: parameter count 1000 exceeds data");
}

TEST(StateRecord, RejectsImplausibleCounts) {
  // A channel count of 2^21 right after the snapshot.
  StateRecord s;
  Bytes b = s.encode();
  const std::size_t at = 4 + 2 + 1 + 8;  // magic, version, full flag, empty snapshot array
  const std::uint64_t n = 1u << 21;
  std::memcpy(b.data() + at, &n, sizeof n);
  EXPECT_EQ(testing::error_message<FormatError>([&] { StateRecord::decode(b); }),
            "state record: implausible channel count 2097152");
  // A snapshot claiming more bytes than follow.
  Bytes big = s.encode();
  const std::uint64_t huge = 1ULL << 60;
  std::memcpy(big.data() + 7, &huge, sizeof huge);
  EXPECT_TRUE(contains(testing::error_message<FormatError>([&] { StateRecord::decode(big); }), "snapshot claims"));
}

TEST(ItemRecord, RoundTrips) {
  const auto items = some_items();
  const auto back = decode_items(encode_items(items));
  ASSERT_EQ(back.size(), items.size());
  for (std::size_t i = 0; i < items.size(); ++i) expect_same(back[i], items[i]);
  EXPECT_TRUE(decode_items(encode_items({})).empty());
  // 14-byte header (magic, version, count), then 4 + 1 + 32 bytes per item.
  EXPECT_EQ(encode_items(items).size(), 4u + 2 + 8 + 3 * (4 + 1 + sizeof(Item)));
}

// Item records did not change in version 5: those of version 4 (an existing store's) still decode.
TEST(ItemRecord, ReadsVersion4Records) {
  Bytes v4 = encode_items(some_items());
  const std::uint16_t four = 4;
  std::memcpy(v4.data() + 4, &four, sizeof four);
  const auto back = decode_items(v4);
  ASSERT_EQ(back.size(), some_items().size());
  for (std::size_t i = 0; i < back.size(); ++i) expect_same(back[i], some_items()[i]);
}

TEST(ItemRecord, EveryTruncationThrowsFormatError) {
  const Bytes b = encode_items(some_items());
  for (std::size_t len = 0; len < b.size(); ++len) {
    const Bytes prefix(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_FALSE(testing::error_message<FormatError>([&] { decode_items(prefix); }).empty()) << len;
  }
}

TEST(ItemRecord, RejectsCorruption) {
  const Bytes good = encode_items(some_items());
  Bytes v0 = good;
  v0[4] = 0;
  EXPECT_EQ(testing::error_message<FormatError>([&] { decode_items(v0); }),
            "item record: unsupported version 0 (expected 4..6)");
  Bytes flag = good;
  flag[14 + 4] = 2;  // first item's end-of-stream flag
  EXPECT_EQ(testing::error_message<FormatError>([&] { decode_items(flag); }), "item record: bad end-of-stream flag");
  Bytes count = good;
  count[6] = 4;  // claims 4 items, 3 follow
  EXPECT_EQ(testing::error_message<FormatError>([&] { decode_items(count); }),
            "item record: item count 4 exceeds data");
  Bytes fewer = good;
  fewer[6] = 2;  // claims 2: the third is trailing garbage
  EXPECT_TRUE(contains(testing::error_message<FormatError>([&] { decode_items(fewer); }), "unexpected trailing bytes"));
}

}  // namespace
}  // namespace afs
