#include "afstream/ft/records.h"

#include <cstring>
#include <type_traits>

#include "afstream/core/bytes.h"

namespace afs {

namespace {
constexpr std::uint32_t kStateMagic = 0x41465354;  // "AFST"
constexpr std::uint32_t kItemsMagic = 0x4146494d;  // "AFIM"
// 3: residual, residual_by_failure; 4: operator spec; 5: checkpoint; 6: a source's covered outputs.
constexpr std::uint16_t kRecordVersion = 6;
constexpr std::uint16_t kOldestStateVersion = 4;  // versions 4 and 5 are read too (without the later fields)

void put_seqs(ByteWriter& w, const SeqByChannel& m) {
  w.put<std::uint64_t>(m.size());
  for (const auto& [c, s] : m) {
    w.put(c);
    w.put(s);
  }
}

SeqByChannel get_seqs(ByteReader& r) {
  SeqByChannel m;
  auto n = r.get<std::uint64_t>("channel count");
  if (n > 1u << 20) throw FormatError("state record: implausible channel count " + std::to_string(n));
  for (std::uint64_t i = 0; i < n; ++i) {
    auto c = r.get<std::uint32_t>("channel");
    m[c] = r.get<std::uint64_t>("sequence number");
  }
  return m;
}

// Per item: channel (u32), end-of-stream flag (u8), the item as it lies in memory. Written into space made once (a
// put per field cost about 60 instructions an item, and item logs are exact mode's hot path).
void put_items(ByteWriter& w, const std::vector<ChannelItem>& items) {
  static_assert(std::is_trivially_copyable_v<Item>);
  constexpr std::size_t kPer = sizeof(std::uint32_t) + 1 + sizeof(Item);
  w.put<std::uint64_t>(items.size());
  auto& buf = w.buffer();
  std::size_t at = buf.size();
  buf.resize(at + items.size() * kPer);
  for (const auto& ci : items) {
    std::memcpy(buf.data() + at, &ci.channel, sizeof(std::uint32_t));
    buf[at + sizeof(std::uint32_t)] = ci.end_of_stream ? 1 : 0;
    std::memcpy(buf.data() + at + sizeof(std::uint32_t) + 1, &ci.item, sizeof(Item));
    at += kPer;
  }
}

std::vector<ChannelItem> get_items(ByteReader& r) {
  auto n = r.get<std::uint64_t>("item count");
  constexpr std::size_t kPer = sizeof(std::uint32_t) + 1 + sizeof(Item);
  if (n > r.rest().size() / kPer) throw FormatError("item record: item count " + std::to_string(n) + " exceeds data");
  std::vector<ChannelItem> v(n);
  for (auto& ci : v) {
    ci.channel = r.get<std::uint32_t>("channel");
    auto eos = r.get<std::uint8_t>("end-of-stream flag");
    if (eos > 1) throw FormatError("item record: bad end-of-stream flag");
    ci.end_of_stream = eos == 1;
    ci.item = r.get<Item>("item");
  }
  return v;
}

// Returns the record's version: kRecordVersion, or from `oldest` on.
std::uint16_t check_header(ByteReader& r, std::uint32_t magic, const char* what,
                           std::uint16_t oldest = kRecordVersion) {
  if (r.get<std::uint32_t>("magic") != magic) throw FormatError(std::string(what) + ": bad magic");
  auto v = r.get<std::uint16_t>("version");
  if (v < oldest || v > kRecordVersion) {
    throw FormatError(std::string(what) + ": unsupported version " + std::to_string(v) + " (expected " +
                      (oldest < kRecordVersion ? std::to_string(oldest) + ".." : std::string()) +
                      std::to_string(kRecordVersion) + ")");
  }
  return v;
}
}  // namespace

Bytes StateRecord::encode() const {
  // Reserved whole: a buffer that grows past the snapshot copies it again (a KDD-like learner's is 0.4-2 MB).
  std::size_t tail = 256 + 8 * (missing_by_failure.size() + residual_by_failure.size());
  if (op_spec) {
    tail += op_spec->kind.size();
    for (const auto& [k, v] : op_spec->params.values()) tail += 16 + k.size() + v.size();
  }
  ByteWriter w;
  w.buffer().reserve(tail + snapshot.size() + 12 * (inputs.size() + outputs.size() + ended_inputs.size()) +
                     unacked_outputs.size() * (5 + sizeof(Item)));
  w.put(kStateMagic);
  w.put(kRecordVersion);
  w.put<std::uint8_t>(full ? 1 : 0);
  w.put_bytes(snapshot);
  put_seqs(w, inputs);
  put_seqs(w, outputs);
  w.put_array<std::uint32_t>(ended_inputs);
  w.put(source_offset);
  put_items(w, unacked_outputs);
  w.put_array<std::int64_t>(missing_by_failure);
  w.put(residual);
  w.put_array<double>(residual_by_failure);
  w.put<std::uint8_t>(op_spec ? 1 : 0);
  if (op_spec) {
    w.put_string(op_spec->kind);
    w.put<std::int32_t>(op_spec->index);
    w.put<std::int32_t>(op_spec->parallelism);
    w.put<std::uint64_t>(op_spec->params.values().size());
    for (const auto& [k, v] : op_spec->params.values()) {
      w.put_string(k);
      w.put_string(v);
    }
  }
  w.put(checkpoint);
  w.put<std::uint8_t>(finished ? 1 : 0);
  put_seqs(w, covered_outputs);
  return w.take();
}

StateRecord StateRecord::decode(const Bytes& b) {
  std::span<const std::uint8_t> snapshot;
  StateRecord s = decode(b, &snapshot);
  s.snapshot.assign(snapshot.begin(), snapshot.end());
  return s;
}

StateRecord StateRecord::decode(const Bytes& b, std::span<const std::uint8_t>* snapshot_in_b) {
  ByteReader r(b);
  const auto version = check_header(r, kStateMagic, "state record", kOldestStateVersion);
  StateRecord s;
  s.full = r.get<std::uint8_t>("full flag") != 0;
  *snapshot_in_b = r.get_array_bytes<std::uint8_t>("snapshot");
  s.inputs = get_seqs(r);
  s.outputs = get_seqs(r);
  s.ended_inputs = r.get_array<std::uint32_t>("ended inputs");
  s.source_offset = r.get<std::uint64_t>("source offset");
  s.unacked_outputs = get_items(r);
  s.missing_by_failure = r.get_array<std::int64_t>("missing items by failure");
  s.residual = r.get<double>("residual");
  s.residual_by_failure = r.get_array<double>("residual by failure");
  const auto has_spec = r.get<std::uint8_t>("operator spec flag");
  if (has_spec > 1) throw FormatError("state record: bad operator spec flag " + std::to_string(has_spec));
  if (has_spec == 1) {
    OperatorSpec spec;
    spec.kind = r.get_string("operator name");
    spec.index = r.get<std::int32_t>("operator index");
    spec.parallelism = r.get<std::int32_t>("operator parallelism");
    if (spec.parallelism < 1 || spec.index < 0 || spec.index >= spec.parallelism) {
      throw FormatError("state record: operator index " + std::to_string(spec.index) + " outside parallelism " +
                        std::to_string(spec.parallelism));
    }
    const auto n = r.get<std::uint64_t>("parameter count");
    if (n > r.rest().size() / 16)
      throw FormatError("state record: parameter count " + std::to_string(n) + " exceeds data");
    for (std::uint64_t i = 0; i < n; ++i) {
      std::string k = r.get_string("parameter name");
      spec.params.set(k, r.get_string("parameter value"));
    }
    s.op_spec = std::move(spec);
  }
  if (version >= 5) {
    s.checkpoint = r.get<std::uint64_t>("checkpoint");
    const auto f = r.get<std::uint8_t>("finished flag");
    if (f > 1) throw FormatError("state record: bad finished flag " + std::to_string(f));
    s.finished = f == 1;
  }
  if (version >= 6) s.covered_outputs = get_seqs(r);
  r.expect_end("state record");
  return s;
}

Bytes encode_items(const std::vector<ChannelItem>& items) {
  ByteWriter w;
  w.buffer().reserve(16 + items.size() * (5 + sizeof(Item)));
  w.put(kItemsMagic);
  w.put(kRecordVersion);
  put_items(w, items);
  return w.take();
}

std::vector<ChannelItem> decode_items(const Bytes& b) {
  ByteReader r(b);
  check_header(r, kItemsMagic, "item record", kOldestStateVersion);  // item records did not change in versions 5, 6
  auto v = get_items(r);
  r.expect_end("item record");
  return v;
}

}  // namespace afs
