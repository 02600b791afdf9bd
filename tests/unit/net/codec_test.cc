// Unit tests for the wire codec (afstream/net/codec.h): round trips (batches, acks, control, backup store requests
// and replies), encoder buffer reuse, and every kind of bad frame (truncated, unaligned, oversize, wrong version,
// inconsistent batch, malformed store message) failing with FormatError.
#include "afstream/net/codec.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>

#include <climits>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "afstream/core/errors.h"
#include "afstream/net/wire.capnp.h"

namespace afs::net {
namespace {

using Bytes = std::vector<std::uint8_t>;

std::vector<Item> make_items(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Item> items(n);
  for (std::size_t i = 0; i < n; ++i) {
    items[i] = Item{rng(), static_cast<std::int64_t>(rng()), static_cast<std::int64_t>(rng()), 0};
  }
  if (n >= 2) {
    items[0] = Item{0, std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(), 0};
    items[1] = Item{std::numeric_limits<std::uint64_t>::max(), -1, 0, 0};
  }
  return items;
}

Message batch_message(std::size_t n, std::uint64_t first_seq, bool eos, std::uint64_t seed = 1) {
  BatchMsg batch{.channel = 7, .first_seq = first_seq, .items = make_items(n, seed), .end_of_stream = eos};
  for (std::size_t i = 0; i < n; ++i) batch.items[i].seq = first_seq + i;  // what decoding fills in
  return Message{.sender = 3, .epoch = 2, .body = std::move(batch)};
}

Bytes to_bytes(std::span<const std::uint8_t> s) { return {s.begin(), s.end()}; }

// Builds a frame with capnp directly, for messages our encoder refuses to produce.
template <typename Fill>
Bytes raw_frame(Fill&& fill) {
  capnp::MallocMessageBuilder builder;
  fill(builder.initRoot<wire::Envelope>());
  auto words = capnp::messageToFlatArray(builder);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

// Asserts that decoding throws FormatError whose message contains every one of `needles`.
void expect_format_error(const Bytes& frame, const std::vector<std::string>& needles, const DecodeLimits& limits = {}) {
  try {
    decode(frame, limits);
    FAIL() << "decoding did not throw";
  } catch (const FormatError& e) {
    for (const auto& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << "'" << e.what() << "' lacks '" << needle << "'";
    }
  }
}

TEST(NetCodec, VersionMirrorsSchema) { EXPECT_EQ(kWireVersion, wire::WIRE_VERSION); }

class BatchRoundTrip : public ::testing::TestWithParam<std::tuple<std::size_t, bool>> {};

TEST_P(BatchRoundTrip, DecodesWhatWasEncoded) {
  const auto [n, eos] = GetParam();
  const Message original = batch_message(n, 1000, eos);
  Encoder encoder;
  const Bytes frame = to_bytes(encoder.encode(original));
  EXPECT_EQ(frame.size(), 8 * (12 + 3 * n)) << "a batch is one flat segment of the documented size";
  EXPECT_EQ(decode(frame), original);
  EXPECT_EQ(encode(original), frame) << "the convenience encoder produces the same bytes";

  BatchMsg reuse;
  const FrameHeader header = decode_batch_into(frame, {}, reuse);
  EXPECT_EQ(header.sender, 3u);
  EXPECT_EQ(header.epoch, 2u);
  EXPECT_EQ(reuse, std::get<BatchMsg>(original.body));
}

INSTANTIATE_TEST_SUITE_P(Sizes, BatchRoundTrip,
                         ::testing::Combine(::testing::Values(std::size_t{0}, std::size_t{1}, std::size_t{1000}),
                                            ::testing::Bool()));

TEST(NetCodec, EncodeBatchIgnoresItemSeqAndDecodeNumbersConsecutively) {
  std::vector<Item> items = make_items(5, 9);
  for (auto& item : items) item.seq = 123456;  // ignored
  Encoder encoder;
  const Message m = decode(encoder.encode_batch(1, 1, 4, 50, items, false));
  const auto& batch = std::get<BatchMsg>(m.body);
  ASSERT_EQ(batch.items.size(), 5u);
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(batch.items[i].seq, 50 + i);
    EXPECT_EQ(batch.items[i].key, items[i].key);
  }
}

// Ack mode: each item's root id travels in a parallel list, and tree acks as (root, xor) pairs.
TEST(NetCodec, RootsAndTreeAcksRoundTrip) {
  Message m = batch_message(7, 40, false);
  auto& b = std::get<BatchMsg>(m.body);
  for (std::size_t i = 0; i < b.items.size(); ++i) b.roots.push_back(0xabcdef0000000000ULL + i);
  b.emitted_ns = 123456789012345;
  EXPECT_EQ(decode(encode(m)), m);
  const Message a{.sender = 3,
                  .epoch = 2,
                  .body = AckMsg{.channel = 0, .seq = 0, .covered = 0, .trees = {1, 0xffffffffffffffffULL, 9, 5}}};
  EXPECT_EQ(decode(encode(a)), a);
  Encoder encoder;
  const std::vector<std::uint64_t> two = {1, 2};
  EXPECT_THROW((void)encoder.encode_batch(1, 1, 0, 1, std::get<BatchMsg>(m.body).items, false, two), FormatError);
  const std::vector<std::uint64_t> odd = {1, 2, 3};
  EXPECT_THROW((void)encoder.encode_ack(1, 1, 0, 0, 0, odd), FormatError);
}

TEST(NetCodec, AckRoundTrip) {
  const Message m{.sender = 9,
                  .epoch = 4,
                  .body = AckMsg{.channel = 12, .seq = std::numeric_limits<std::uint64_t>::max(), .covered = 77}};
  EXPECT_EQ(decode(encode(m)), m);
}

// Feedback (the upstream side channel of Emitter::feed_back): keys, values and times come back as sent, seq 0; an
// empty one too; encoding ignores Item::seq.
TEST(NetCodec, FeedbackRoundTrip) {
  std::vector<Item> items;
  for (std::uint64_t i = 0; i < 300; ++i) {
    items.push_back({i * 0x9E3779B97F4A7C15ull, -static_cast<std::int64_t>(i * 7),
                     std::numeric_limits<std::int64_t>::max() - static_cast<std::int64_t>(i), 0});
  }
  const Message m{.sender = 3, .epoch = 2, .body = FeedbackMsg{.items = items}};
  EXPECT_EQ(decode(encode(m)), m);
  Encoder encoder;
  auto with_seq = items;
  for (auto& it : with_seq) it.seq = 99;
  const auto frame = encoder.encode_feedback(3, 2, with_seq);
  const Message back = decode(frame);
  EXPECT_EQ(back, m);
  EXPECT_EQ(back.sender, 3u);
  const Message empty{.sender = 1, .epoch = 1, .body = FeedbackMsg{}};
  EXPECT_EQ(decode(encoder.encode(empty)), empty);
  // Truncated feedback frames are rejected, as every frame.
  const std::vector<std::uint8_t> bytes(frame.begin(), frame.end());
  EXPECT_THROW(decode(std::span<const std::uint8_t>(bytes.data(), bytes.size() - 8)), FormatError);
}

TEST(NetCodec, ControlRoundTripAllKinds) {
  Encoder encoder;
  for (ControlKind kind : {ControlKind::kPeerRestarted, ControlKind::kResendFrom, ControlKind::kStop,
                           ControlKind::kHeartbeat, ControlKind::kAsk, ControlKind::kBarrier}) {
    const Message m{
        .sender = 0, .epoch = 1, .body = ControlMsg{.kind = kind, .worker = 5, .epoch = 6, .seq = 77, .channel = 8}};
    EXPECT_EQ(decode(encoder.encode(m)), m) << to_string(kind);
  }
  // A barrier notice carries its checkpoint's id (round in the high 32 bits, checkpoint mode).
  const Message barrier{.sender = 3,
                        .epoch = 2,
                        .body = ControlMsg{.kind = ControlKind::kBarrier,
                                           .worker = 3,
                                           .epoch = 2,
                                           .seq = 123456789,
                                           .channel = 4,
                                           .checkpoint = (7ULL << 32) | 12}};
  const auto back = decode(encoder.encode(barrier));
  EXPECT_EQ(back, barrier);
  EXPECT_EQ(std::get<ControlMsg>(back.body).checkpoint, (7ULL << 32) | 12);
  EXPECT_EQ(to_string(ControlKind::kBarrier), "barrier");
}

TEST(NetCodec, EncoderReusesItsBufferCorrectly) {
  // A large message followed by smaller ones: the reused buffer must be fully re-zeroed in between.
  Encoder encoder;
  const Message big = batch_message(5000, 1, false, 11);
  const Message small = batch_message(3, 5001, true, 12);
  const Message ack{.sender = 1, .epoch = 1, .body = AckMsg{.channel = 2, .seq = 3}};
  const Message control{.sender = 1, .epoch = 1, .body = ControlMsg{.kind = ControlKind::kStop}};
  for (int round = 0; round < 3; ++round) {
    EXPECT_EQ(decode(encoder.encode(big)), big);
    EXPECT_EQ(decode(encoder.encode(small)), small);
    EXPECT_EQ(decode(encoder.encode(ack)), ack);
    EXPECT_EQ(decode(encoder.encode(control)), control);
    EXPECT_EQ(to_bytes(encoder.encode(small)), encode(small)) << "same bytes as a fresh encoder";
  }
  encoder.release_memory();
  EXPECT_EQ(decode(encoder.encode(big)), big);
  Encoder moved = std::move(encoder);
  EXPECT_EQ(decode(moved.encode(small)), small);
}

TEST(NetCodec, OutputIsAlignedForZeroCopyDecode) {
  Encoder encoder;
  auto frame = encoder.encode(batch_message(10, 0, false));
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(frame.data()) % 8, 0u);
}

TEST(NetCodec, DecodeIntoReusesItemStorage) {
  const Bytes large = encode(batch_message(1000, 0, false));
  const Bytes small = encode(batch_message(10, 1000, false));
  Message out;
  decode_into(large, {}, out);
  const Item* storage = std::get<BatchMsg>(out.body).items.data();
  decode_into(small, {}, out);
  EXPECT_EQ(std::get<BatchMsg>(out.body).items.data(), storage);
  EXPECT_EQ(out, batch_message(10, 1000, false));

  BatchMsg batch;
  decode_batch_into(large, {}, batch);
  storage = batch.items.data();
  decode_batch_into(small, {}, batch);
  EXPECT_EQ(batch.items.data(), storage);
  EXPECT_EQ(batch, std::get<BatchMsg>(batch_message(10, 1000, false).body));

  // Switching body kinds through the same Message works too.
  const Message ack{.sender = 1, .epoch = 1, .body = AckMsg{.channel = 2, .seq = 3}};
  decode_into(encode(ack), {}, out);
  EXPECT_EQ(out, ack);
  decode_into(small, {}, out);
  EXPECT_EQ(out, batch_message(10, 1000, false));
}

TEST(NetCodec, DecodeBatchIntoRejectsOtherKinds) {
  BatchMsg batch;
  const Bytes ack = encode(Message{.sender = 1, .epoch = 1, .body = AckMsg{.channel = 2, .seq = 3}});
  try {
    decode_batch_into(ack, {}, batch);
    FAIL() << "no throw";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("got ack"), std::string::npos) << e.what();
  }
}

TEST(NetCodec, UnalignedInputWorks) {
  for (const Message& m : {batch_message(0, 0, true), batch_message(1, 5, false), batch_message(1000, 9, true),
                           Message{.sender = 1, .epoch = 2, .body = AckMsg{.channel = 3, .seq = 4}}}) {
    const Bytes frame = encode(m);
    Bytes storage(frame.size() + 16);
    for (std::size_t offset = 0; offset < 8; ++offset) {
      std::memcpy(storage.data() + offset, frame.data(), frame.size());
      const std::span<const std::uint8_t> view(storage.data() + offset, frame.size());
      EXPECT_EQ(decode(view), m) << "offset " << offset;
    }
  }
  // A large unaligned frame takes the temporary-copy path.
  const Message big = batch_message(50000, 1, false);
  const Bytes frame = encode(big);
  Bytes storage(frame.size() + 1);
  std::memcpy(storage.data() + 1, frame.data(), frame.size());
  EXPECT_EQ(decode(std::span<const std::uint8_t>(storage.data() + 1, frame.size())), big);
}

TEST(NetCodec, EmptyAndOddSizedFramesThrow) {
  expect_format_error({}, {"empty"});
  Bytes frame = encode(batch_message(4, 0, false));
  frame.push_back(0);
  expect_format_error(frame, {std::to_string(frame.size()), "multiple of 8"});
}

TEST(NetCodec, EveryPrefixOfSmallMessagesThrows) {
  for (const Message& m :
       {batch_message(3, 10, true), Message{.sender = 1, .epoch = 2, .body = AckMsg{.channel = 3, .seq = 4}},
        Message{.sender = 1, .epoch = 2, .body = ControlMsg{.kind = ControlKind::kResendFrom, .seq = 4}}}) {
    const Bytes frame = encode(m);
    for (std::size_t len = 0; len < frame.size(); ++len) {
      const Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(len));
      EXPECT_THROW(decode(prefix), FormatError) << "prefix of " << len << " of " << frame.size() << " bytes";
    }
  }
}

TEST(NetCodec, RandomTruncationsOfLargeMessageThrow) {
  const Bytes frame = encode(batch_message(20000, 0, false));
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::size_t> len_dist(0, frame.size() - 1);
  for (int i = 0; i < 300; ++i) {
    std::size_t len = len_dist(rng);
    if (i % 2 == 0) len -= len % 8;  // half of them word-aligned, so capnp's own checks are exercised
    const Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(decode(prefix), FormatError) << "prefix of " << len << " bytes";
  }
}

TEST(NetCodec, TrailingBytesThrow) {
  Bytes frame = encode(batch_message(2, 0, false));
  frame.resize(frame.size() + 8, 0);
  expect_format_error(frame, {"8 trailing bytes"});
}

TEST(NetCodec, RandomCorruptionNeverCrashes) {
  // Flipped bytes either still decode (into something) or throw FormatError; never anything else.
  const Bytes original = encode(batch_message(64, 0, true));
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::size_t> pos(0, original.size() - 1);
  int thrown = 0;
  for (int i = 0; i < 3000; ++i) {
    Bytes frame = original;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) frame[pos(rng)] ^= static_cast<std::uint8_t>(1 + rng() % 255);
    try {
      decode(frame);
    } catch (const FormatError&) {
      ++thrown;
    }
  }
  EXPECT_GT(thrown, 0);
}

TEST(NetCodec, OtherVersionThrows) {
  // Version 1 (before workers announced their endpoints) and 2 (before local recovery) are other versions too.
  for (std::uint16_t version :
       {std::uint16_t{0}, std::uint16_t{1}, std::uint16_t{2}, std::uint16_t{4}, std::uint16_t{65535}}) {
    const Bytes frame = raw_frame([&](wire::Envelope::Builder env) {
      env.setVersion(version);
      env.initAck().setSeq(1);
    });
    expect_format_error(frame, {"version " + std::to_string(version), "expected version 3"});
  }
}

TEST(NetCodec, OversizeFrameThrowsNamingBothSizes) {
  const Bytes frame = encode(batch_message(1000, 0, false));
  DecodeLimits limits;
  limits.max_message_bytes = 4096;
  expect_format_error(frame, {std::to_string(frame.size()), "4096"}, limits);
  limits.max_message_bytes = frame.size();
  EXPECT_NO_THROW(decode(frame, limits));
}

TEST(NetCodec, NestingLimitIsApplied) {
  const Bytes frame = encode(batch_message(10, 0, false));
  DecodeLimits limits;
  limits.nesting_limit = 1;
  expect_format_error(frame, {"malformed wire message"}, limits);
}

TEST(NetCodec, MismatchedListLengthsThrow) {
  const Bytes frame = raw_frame([](wire::Envelope::Builder env) {
    env.setVersion(kWireVersion);
    auto batch = env.initBatch();
    batch.initKeys(3);
    batch.initValues(2);
    batch.initTimes(3);
  });
  expect_format_error(frame, {"3 keys", "2 values", "3 times"});
}

TEST(NetCodec, SeqOverflowThrows) {
  Encoder encoder;
  const auto items = make_items(2, 1);
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  expect_format_error(to_bytes(encoder.encode_batch(1, 1, 1, max, items, false)), {"overflow"});
  EXPECT_NO_THROW(decode(encoder.encode_batch(1, 1, 1, max - 1, items, false)));
}

TEST(NetCodec, UnsetOrUnknownControlKindThrows) {
  for (std::uint16_t kind : {std::uint16_t{0}, std::uint16_t{99}}) {
    const Bytes frame = raw_frame([&](wire::Envelope::Builder env) {
      env.setVersion(kWireVersion);
      env.initControl().setKind(static_cast<wire::Control::Kind>(kind));
    });
    expect_format_error(frame, {"unknown kind " + std::to_string(kind)});
  }
}

TEST(NetCodec, DecodesMultiSegmentMessages) {
  // Other encoders may split a message into segments; the decoder must not assume one.
  capnp::MallocMessageBuilder builder(1, capnp::AllocationStrategy::FIXED_SIZE);
  auto env = builder.initRoot<wire::Envelope>();
  env.setVersion(kWireVersion);
  env.setSender(5);
  auto batch = env.initBatch();
  batch.setFirstSeq(100);
  auto keys = batch.initKeys(4);
  auto values = batch.initValues(4);
  auto times = batch.initTimes(4);
  for (unsigned i = 0; i < 4; ++i) {
    keys.set(i, 10 + i);
    values.set(i, -static_cast<std::int64_t>(i));
    times.set(i, 1000 + i);
  }
  ASSERT_GT(builder.getSegmentsForOutput().size(), 1u);
  auto words = capnp::messageToFlatArray(builder);
  const Message m = decode(words.asBytes());
  EXPECT_EQ(m.sender, 5u);
  const auto& b = std::get<BatchMsg>(m.body);
  ASSERT_EQ(b.items.size(), 4u);
  EXPECT_EQ(b.items[3], (Item{13, -3, 1003, 103}));
}

TEST(NetCodec, MissingListsDecodeAsEmptyBatch) {
  const Bytes frame = raw_frame([](wire::Envelope::Builder env) {
    env.setVersion(kWireVersion);
    env.initBatch().setChannel(4);
  });
  const Message m = decode(frame);
  EXPECT_TRUE(std::get<BatchMsg>(m.body).items.empty());
  EXPECT_EQ(std::get<BatchMsg>(m.body).channel, 4u);
}

// --- backup store requests and replies -----------------------------------------------------------------------------

Bytes pattern(std::size_t n, std::uint8_t seed) {
  Bytes b(n);
  for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(seed + i * 31);
  return b;
}

Message request_message(StoreOp op, std::uint64_t id = 42, std::uint64_t session = 0xfeedface12345678) {
  return Message{.sender = 0, .epoch = 0, .body = StoreRequestMsg{.request_id = id, .session = session, .op = op}};
}

Message reply_message(decltype(StoreReplyMsg::result) result, std::uint64_t id = 42) {
  return Message{.sender = 0, .epoch = 0, .body = StoreReplyMsg{.request_id = id, .result = std::move(result)}};
}

// One of every request, with edge values.
std::vector<Message> every_request() {
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  return {
      request_message(PutStateReq{.worker = 3, .full = true, .record = pattern(100, 1), .covered = {}}),
      request_message(
          PutStateReq{.worker = 4, .full = false, .record = pattern(10, 3), .covered = {{1, 2}}, .digest = max}),
      request_message(PutStateReq{.worker = 5,
                                  .full = true,
                                  .record = {},
                                  .covered = {},
                                  .digest = 77,
                                  .in_copy = true,
                                  .copy_offset = max,
                                  .copy_size = 12345}),
      request_message(
          PutStateReq{
              .worker = INT_MIN, .full = false, .record = {}, .covered = {{0, 0}, {7, 12345}, {UINT32_MAX, max}}},
          max, 1),
      request_message(PutItemsReq{.worker = INT_MAX, .record = pattern(1000, 2), .infos = {{1, 1, 10}, {2, 5, 8}}}),
      request_message(PutItemsReq{.worker = -1, .record = {}, .infos = {}}, 0, 0),
      request_message(StateChainReq{7, {}}),
      request_message(StateChainReq{8, {0, 1, max, 0x1234567890abcdefULL}}),
      request_message(ItemRecordsReq{-256}),
      request_message(DropReq{0}),
      request_message(StatsReq{}),
      request_message(ConfirmCheckpointReq{.worker = 2, .checkpoint = (5ULL << 32) | 9, .workers = 4, .final = true}),
      request_message(CheckpointStatusReq{}),
      request_message(RejoinCheckpointsReq{3}),
  };
}

std::vector<Message> every_reply() {
  const std::uint64_t max = std::numeric_limits<std::uint64_t>::max();
  return {
      reply_message(StoreOkMsg{}),
      reply_message(StoreRecordsMsg{}),
      reply_message(StoreRecordsMsg{{pattern(100, 1), {}, pattern(7, 3)}}, max),
      reply_message(StoreStatsMsg{1, 2, 3, max}),
      reply_message(StoreChainMsg{max, 2, 3, 4}),
      reply_message(StoreCheckpointsMsg{(7ULL << 32) | 3, 7}),
      reply_message(StoreErrorMsg{StoreErrorKind::kCorruptRecord, "state backup of worker 6: checksum mismatch"}),
      reply_message(StoreErrorMsg{StoreErrorKind::kStoreFailure, "rocksdb: IO error \xc3\xa9"}),
      reply_message(StoreErrorMsg{StoreErrorKind::kBadRequest, ""}, 0),
      reply_message(StoreErrorMsg{StoreErrorKind::kStaleIncarnation, "worker 1: incarnation 1 is fenced off"}),
      reply_message(StoreErrorMsg{StoreErrorKind::kNoLocalCopy, "no local directory"}),
  };
}

TEST(NetCodecStore, EveryRequestRoundTrips) {
  Encoder encoder;
  for (const Message& m : every_request()) {
    const auto& r = std::get<StoreRequestMsg>(m.body);
    SCOPED_TRACE(std::string(op_name(r.op)));
    EXPECT_EQ(decode(encoder.encode(m)), m);
    EXPECT_EQ(decode(encode(m)), m);
    EXPECT_EQ(decode(encoder.encode_store_request(m.sender, m.epoch, r)), m);
  }
}

TEST(NetCodecStore, EveryReplyRoundTrips) {
  Encoder encoder;
  for (const Message& m : every_reply()) {
    SCOPED_TRACE(std::get<StoreReplyMsg>(m.body).result.index());
    EXPECT_EQ(decode(encoder.encode(m)), m);
    EXPECT_EQ(decode(encoder.encode_store_reply(0, 0, std::get<StoreReplyMsg>(m.body))), m);
  }
}

TEST(NetCodecStore, OperationNamesWorkersAndMutation) {
  EXPECT_EQ(op_name(PutStateReq{}), "put_state");
  EXPECT_EQ(op_name(PutItemsReq{}), "put_items");
  EXPECT_EQ(op_name(StateChainReq{}), "state_chain");
  EXPECT_EQ(op_name(ItemRecordsReq{}), "item_records");
  EXPECT_EQ(op_name(DropReq{}), "drop");
  EXPECT_EQ(op_name(StatsReq{}), "stats");
  EXPECT_EQ(op_worker(DropReq{-5}), -5);
  EXPECT_EQ(op_worker(StatsReq{}), std::nullopt);
  EXPECT_TRUE(op_mutates(PutStateReq{}));
  EXPECT_TRUE(op_mutates(PutItemsReq{}));
  EXPECT_TRUE(op_mutates(DropReq{}));
  EXPECT_FALSE(op_mutates(StateChainReq{}));
  EXPECT_FALSE(op_mutates(ItemRecordsReq{}));
  EXPECT_FALSE(op_mutates(StatsReq{}));
  // Checkpoint mode: a confirmation and a rejoin change the ledger (a rejoin resent must not open two rounds).
  EXPECT_EQ(op_name(ConfirmCheckpointReq{}), "confirm_checkpoint");
  EXPECT_EQ(op_name(CheckpointStatusReq{}), "checkpoint_status");
  EXPECT_EQ(op_name(RejoinCheckpointsReq{}), "rejoin_checkpoints");
  EXPECT_EQ(op_worker(RejoinCheckpointsReq{6}), 6);
  EXPECT_EQ(op_worker(CheckpointStatusReq{}), std::nullopt);
  EXPECT_TRUE(op_mutates(ConfirmCheckpointReq{}));
  EXPECT_TRUE(op_mutates(RejoinCheckpointsReq{}));
  EXPECT_FALSE(op_mutates(CheckpointStatusReq{}));
  EXPECT_EQ(to_string(StoreErrorKind::kCorruptRecord), "corrupt record");
  EXPECT_EQ(to_string(StoreErrorKind::kBadRequest), "bad request");
  EXPECT_EQ(to_string(StoreErrorKind::kStaleIncarnation), "stale incarnation");
}

// Large records travel whole up to the configured limit, in one segment (no copy on the encoder's side), and the
// limit is respected in both directions.
TEST(NetCodecStore, LargeRecordsUpToTheLimit) {
  const Bytes record = pattern(std::size_t{9} << 20, 5);
  const Message put = request_message(PutStateReq{.worker = 1, .full = true, .record = record, .covered = {{1, 2}}});
  const Message chain = reply_message(StoreRecordsMsg{{record, pattern(3 << 20, 6), {}}});
  Encoder encoder;
  for (const Message& m : {put, chain}) {
    const Bytes frame = to_bytes(encoder.encode(m));
    EXPECT_LT(frame.size(), record.size() + (std::size_t{4} << 20)) << "no slack beyond the records";
    DecodeLimits limits;
    limits.max_message_bytes = frame.size();
    EXPECT_EQ(decode(frame, limits), m);
    limits.max_message_bytes = frame.size() - 8;
    expect_format_error(frame, {std::to_string(frame.size()), std::to_string(frame.size() - 8)}, limits);
  }
  const Bytes frame = to_bytes(encoder.encode(put));
  EXPECT_LT(frame.size(), record.size() + 256) << "a put is one segment of the record plus a few words";
}

TEST(NetCodecStore, EveryPrefixOfSmallStoreMessagesThrows) {
  std::vector<Message> messages = every_request();
  for (auto& m : every_reply()) messages.push_back(m);
  for (const Message& m : messages) {
    const Bytes frame = encode(m);
    for (std::size_t len = 0; len < frame.size(); ++len) {
      const Bytes prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(len));
      EXPECT_THROW(decode(prefix), FormatError) << "prefix of " << len << " of " << frame.size() << " bytes";
    }
  }
}

TEST(NetCodecStore, RandomTruncationsOfLargeStoreMessagesThrow) {
  const Bytes put =
      encode(request_message(PutItemsReq{.worker = 2, .record = pattern(200000, 7), .infos = {{1, 1, 9}}}));
  const Bytes chain = encode(reply_message(StoreRecordsMsg{{pattern(50000, 1), pattern(70000, 2), pattern(10, 3)}}));
  std::mt19937_64 rng(43);
  for (const Bytes* frame : {&put, &chain}) {
    std::uniform_int_distribution<std::size_t> len_dist(0, frame->size() - 1);
    for (int i = 0; i < 200; ++i) {
      std::size_t len = len_dist(rng);
      if (i % 2 == 0) len -= len % 8;
      const Bytes prefix(frame->begin(), frame->begin() + static_cast<std::ptrdiff_t>(len));
      EXPECT_THROW(decode(prefix), FormatError) << "prefix of " << len << " bytes";
    }
  }
}

TEST(NetCodecStore, UnalignedStoreMessagesDecode) {
  for (const Message& m : {every_request()[1], every_reply()[2]}) {
    const Bytes frame = encode(m);
    Bytes storage(frame.size() + 8);
    for (std::size_t offset = 1; offset < 8; offset += 3) {
      std::memcpy(storage.data() + offset, frame.data(), frame.size());
      EXPECT_EQ(decode(std::span<const std::uint8_t>(storage.data() + offset, frame.size())), m) << offset;
    }
  }
}

TEST(NetCodecStore, UnsetOperationOrResultThrows) {
  const Bytes request = raw_frame([](wire::Envelope::Builder env) {
    env.setVersion(kWireVersion);
    env.initStoreRequest().setRequestId(9);
  });
  expect_format_error(request, {"store request 9", "no operation"});
  const Bytes reply = raw_frame([](wire::Envelope::Builder env) {
    env.setVersion(kWireVersion);
    env.initStoreReply().setRequestId(8);
  });
  expect_format_error(reply, {"store reply 8", "no result"});
}

TEST(NetCodecStore, UnsetOrUnknownErrorKindThrows) {
  for (std::uint16_t kind : {std::uint16_t{0}, std::uint16_t{6}, std::uint16_t{999}}) {
    const Bytes frame = raw_frame([&](wire::Envelope::Builder env) {
      env.setVersion(kWireVersion);
      auto reply = env.initStoreReply();
      reply.setRequestId(5);
      reply.initError().setKind(static_cast<wire::StoreError::Kind>(kind));
    });
    expect_format_error(frame, {"unknown kind " + std::to_string(kind)});
  }
}

TEST(NetCodecStore, CoveredChannelTwiceThrows) {
  const Bytes frame = encode(request_message(
      PutStateReq{.worker = 4, .full = false, .record = {1}, .covered = {{3, 10}, {1, 2}, {3, 11}}}, 77));
  expect_format_error(frame, {"store request 77", "worker 4", "channel 3 twice"});
}

TEST(NetCodecStore, APutInACopyWithARecordThrows) {
  const Bytes frame = encode(request_message(
      PutStateReq{.worker = 4, .full = false, .record = {1}, .covered = {}, .digest = 1, .in_copy = true}, 78));
  expect_format_error(frame, {"store request 78", "worker 4", "both a record and its place in a local copy"});
}

TEST(NetCodecStore, PeekReadsTheRequestIdOfFramesThatDoNotDecode) {
  const Bytes good = encode(request_message(DropReq{1}, 1234));
  EXPECT_EQ(peek_store_request_id(good), 1234u);
  // Another version.
  const Bytes other_version = raw_frame([](wire::Envelope::Builder env) {
    env.setVersion(2);
    env.initStoreRequest().setRequestId(55);
  });
  EXPECT_THROW(decode(other_version), FormatError);
  EXPECT_EQ(peek_store_request_id(other_version), 55u);
  // Over the limit.
  const Bytes big = encode(request_message(PutItemsReq{.worker = 1, .record = pattern(100000, 1), .infos = {}}, 66));
  DecodeLimits small;
  small.max_message_bytes = 1024;
  EXPECT_THROW(decode(big, small), FormatError);
  EXPECT_EQ(peek_store_request_id(big), 66u);
  // Invalid content after a readable id.
  const Bytes twice =
      encode(request_message(PutStateReq{.worker = 1, .full = true, .record = {}, .covered = {{1, 1}, {1, 2}}}, 77));
  EXPECT_EQ(peek_store_request_id(twice), 77u);
  // Unaligned.
  Bytes storage(good.size() + 1);
  std::memcpy(storage.data() + 1, good.data(), good.size());
  EXPECT_EQ(peek_store_request_id(std::span<const std::uint8_t>(storage.data() + 1, good.size())), 1234u);
  // Nothing to read: garbage, truncation, other kinds of message, replies.
  EXPECT_EQ(peek_store_request_id({}), std::nullopt);
  EXPECT_EQ(peek_store_request_id(Bytes{1, 2, 3}), std::nullopt);
  EXPECT_EQ(peek_store_request_id(Bytes(16, 0xff)), std::nullopt);
  EXPECT_EQ(peek_store_request_id(Bytes(good.begin(), good.begin() + 8)), std::nullopt);
  EXPECT_EQ(peek_store_request_id(encode(batch_message(3, 1, false))), std::nullopt);
  EXPECT_EQ(peek_store_request_id(encode(reply_message(StoreOkMsg{}, 3))), std::nullopt);
}

TEST(NetCodecStore, RandomCorruptionOfStoreMessagesNeverCrashes) {
  std::mt19937_64 rng(9);
  for (const Message& m : {every_request()[0], every_request()[2], every_reply()[2], every_reply()[4]}) {
    const Bytes original = encode(m);
    std::uniform_int_distribution<std::size_t> pos(0, original.size() - 1);
    for (int i = 0; i < 1000; ++i) {
      Bytes frame = original;
      frame[pos(rng)] ^= static_cast<std::uint8_t>(1 + rng() % 255);
      try {
        decode(frame);
      } catch (const FormatError&) {
      }
      (void)peek_store_request_id(frame);
    }
  }
}

TEST(NetCodecStore, BatchOfStoreFrameIsRejectedByDecodeBatchInto) {
  BatchMsg batch;
  try {
    decode_batch_into(encode(request_message(StatsReq{})), {}, batch);
    FAIL() << "no throw";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("got store request"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace afs::net

namespace afs::net {
namespace {

// Worker process <-> controller messages (afstream/runtime/process_cluster.h).
TEST(NetCodecCluster, WorkerReportsRoundTrip) {
  WorkerReportMsg status{ReportKind::kStatus,
                         {1,  2,         3,  4,  5,    6,     7,  8,  9,    10,    0.25, 11, 12,
                          41, {5, 0, 7}, 13, 14, 15.5, 16.25, 17, 18, 19.5, 20.75, 21,   22, 23},
                         {},
                         {},
                         {},
                         {},
                         {},
                         {},
                         {}};
  WorkerReportMsg hello{
      ReportKind::kHello, {}, {}, {3, 12.5, 7, 9, 1500, 1.5, 30.25, 17, -1, false, 4.75, 625}, {}, {}, {}, {}, {}};
  WorkerReportMsg caught_up = hello;  // a recovered worker process back where it crashed (its progress page)
  caught_up.recovery.first_item_ms = 33.5;
  caught_up.recovery.caught_up_ms = 41.25;
  caught_up.recovery.repeated_items = 5120;
  caught_up.recovery.lost_items = 250;
  caught_up.recovery.lost_outputs = 13;
  WorkerReportMsg finished{ReportKind::kFinished,
                           {},
                           std::vector<std::uint8_t>(10000, 0x5a),
                           {2, 1, 0, 0, 1, 0, 0, 0, 0, true, 0, 0},
                           {},
                           {},
                           {},
                           {},
                           {}};
  WorkerReportMsg announcing = hello;
  announcing.data_endpoint = "tcp://10.200.0.2:41234";
  announcing.ack_endpoint = "tcp://10.200.0.2:41235";
  announcing.curve_key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";                 // with CURVE on tcp
  announcing.job_config = "hh.width = 8000\nitems = 400000\njob = heavy-hitters\n";  // checked by the controller
  WorkerReportMsg registering;
  registering.kind = ReportKind::kRegister;
  WorkerReportMsg standing_by;
  standing_by.kind = ReportKind::kStandby;
  WorkerReportMsg failing;
  failing.kind = ReportKind::kFailed;
  failing.error = "remote store at tcp://10.0.0.1:7002: no reply to put_state for worker 1 after 10 s";
  for (const auto& r : {status, hello, caught_up, finished, announcing, registering, standing_by, failing}) {
    const Message m{.sender = 4, .epoch = 2, .body = r};
    EXPECT_EQ(decode(encode(m)), m);
  }
}

// Directories carry each incarnation's announced endpoints; workers that have not said hello yet have none.
TEST(NetCodecCluster, DirectoryCarriesAnnouncedEndpoints) {
  DirectoryMsg d;
  d.peers.push_back({0, 1, true, false, "ipc:///tmp/afs-x/w0-e1-data", "ipc:///tmp/afs-x/w0-e1-acks", ""});
  d.peers.push_back({1, 2, false, false, "", "", ""});
  d.peers.push_back({2, 7, true, true, "tcp://[::1]:40000", "tcp://[::1]:40001", ""});
  d.peers.push_back({3, 2, true, false, "tcp://10.0.0.2:4000", "tcp://10.0.0.2:4001",
                     "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"});  // CURVE: the key its sockets serve with
  for (int i = 4; i < 40; ++i) {  // long enough to need more than the encoder's first estimate would hold
    d.peers.push_back({static_cast<std::uint32_t>(i), 1, true, false, std::string(100, 'd'), std::string(90, 'a'),
                       std::string(40, 'k')});
  }
  const Message m{.sender = 0, .epoch = 0, .body = d};
  EXPECT_EQ(decode(encode(m)), m);
}

TEST(NetCodecCluster, AssignmentRoundTrips) {
  AssignmentMsg granted;
  granted.worker = 2;
  granted.epoch = 3;
  granted.failures = {1000, 250000};
  granted.job_args = {"--job=heavy-hitters", "--items=400000", "--ft.theta=10000", ""};
  granted.directory = "tcp://10.200.0.1:5001";
  granted.store = "tcp://10.200.0.1:5002";
  granted.heartbeat_ms = 100;
  AssignmentMsg curve = granted;
  curve.store_key = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
  AssignmentMsg refused;
  refused.worker = 9;
  refused.error = "worker.id: no worker 9 in this job (workers are 0..3)";
  for (const auto& a : {granted, curve, refused}) {
    const Message m{.sender = 0, .epoch = 0, .body = a};
    EXPECT_EQ(decode(encode(m)), m);
  }
}

TEST(NetCodecCluster, DirectoryRoundTripsAndPrefixesThrow) {
  const Message m{
      .sender = 0,
      .epoch = 0,
      .body = DirectoryMsg{
          {{0, 1, true, false, {}, {}, {}}, {1, 3, false, false, {}, {}, {}, true}, {2, 1, true, true, {}, {}, {}}}}};
  const auto frame = encode(m);
  EXPECT_EQ(decode(frame), m);
  for (std::size_t len = 0; len < frame.size(); len += 8) {
    const std::vector<std::uint8_t> prefix(frame.begin(), frame.begin() + static_cast<std::ptrdiff_t>(len));
    EXPECT_THROW(decode(prefix), FormatError) << len;
  }
}

}  // namespace
}  // namespace afs::net
