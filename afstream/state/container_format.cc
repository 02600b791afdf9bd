// Internal: container payload headers (DESIGN.md sections 3 and 8).
#include "afstream/state/container_format.h"

#include <cstdio>
#include <string>

#include "afstream/core/errors.h"

namespace afs::detail {
namespace {

std::string hex16(std::uint16_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%04x", static_cast<unsigned>(v));
  return buf;
}

}  // namespace

const char* container_tag_name(std::uint16_t tag) {
  switch (tag) {
    case kTagArrayInt64 | kTagFull:
      return "TrackedArray<int64> full";
    case kTagArrayInt64 | kTagDelta:
      return "TrackedArray<int64> delta";
    case kTagArrayDouble | kTagFull:
      return "TrackedArray<double> full";
    case kTagArrayDouble | kTagDelta:
      return "TrackedArray<double> delta";
    case kTagMapInt64 | kTagFull:
      return "TrackedMap<int64> full";
    case kTagMapInt64 | kTagDelta:
      return "TrackedMap<int64> delta";
    case kTagMapDouble | kTagFull:
      return "TrackedMap<double> full";
    case kTagMapDouble | kTagDelta:
      return "TrackedMap<double> delta";
    case kTagVector | kTagFull:
      return "TrackedVector full";
    case kTagVector | kTagDelta:
      return "TrackedVector delta";
    default:
      return "unknown container payload";
  }
}

void write_container_header(ByteWriter& w, std::uint16_t tag, std::uint64_t size) {
  w.put<std::uint16_t>(tag);
  w.put<std::uint16_t>(kContainerFormatVersion);
  w.put<std::uint64_t>(size);
}

std::uint64_t read_container_header(ByteReader& r, std::uint16_t expected_tag) {
  const std::string want = container_tag_name(expected_tag);
  const auto tag = r.get<std::uint16_t>((want + " tag").c_str());
  if (tag != expected_tag) {
    throw FormatError("expected a " + want + " payload (tag " + hex16(expected_tag) + ") but found a " +
                      container_tag_name(tag) + " (tag " + hex16(tag) + ")");
  }
  const auto version = r.get<std::uint16_t>((want + " version").c_str());
  if (version != kContainerFormatVersion) {
    throw FormatError(want + ": unsupported container format version " + std::to_string(version) +
                      " (this build reads version " + std::to_string(kContainerFormatVersion) + ")");
  }
  return r.get<std::uint64_t>((want + " size").c_str());
}

}  // namespace afs::detail
