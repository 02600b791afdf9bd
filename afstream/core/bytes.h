// Bounds-checked little-endian byte writer/reader used by every snapshot and backup record.
// Reading past the end throws FormatError naming what was being read, so a truncated buffer never yields a
// partially decoded value.
#pragma once

#include <cassert>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "afstream/core/errors.h"

namespace afs {

class ByteWriter {
 public:
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void put(const T& v) {
    const auto* p = reinterpret_cast<const std::uint8_t*>(&v);
    buf_.insert(buf_.end(), p, p + sizeof(T));
  }
  template <typename T>
  requires std::is_trivially_copyable_v<T>
  void put_array(std::span<const T> v) {
    put<std::uint64_t>(v.size());
    const auto* p = reinterpret_cast<const std::uint8_t*>(v.data());
    buf_.insert(buf_.end(), p, p + v.size_bytes());
  }
  void put_bytes(std::span<const std::uint8_t> b) { put_array<std::uint8_t>(b); }
  // v in LEB128 (7 bits a byte, low first; 1 byte below 128, at most kMaxVarint): for logs of small numbers.
  static constexpr std::size_t kMaxVarint = 10;
  void put_varint(std::uint64_t v) {
    std::uint8_t bytes[kMaxVarint];
    buf_.insert(buf_.end(), bytes, encode_varint(bytes, v));
  }
  // The same into memory the caller sized (kMaxVarint bytes free at out, e.g. a buffer() resized for a whole log);
  // returns the end of what it wrote.
  static std::uint8_t* encode_varint(std::uint8_t* out, std::uint64_t v) {
    while (v >= 0x80) {
      *out++ = static_cast<std::uint8_t>(v | 0x80);
      v >>= 7;
    }
    *out++ = static_cast<std::uint8_t>(v);
    return out;
  }
  void put_string(std::string_view s) { put_array<char>(std::span<const char>(s.data(), s.size())); }
  std::vector<std::uint8_t>& buffer() { return buf_; }
  std::vector<std::uint8_t> take() { return std::move(buf_); }
  std::size_t size() const { return buf_.size(); }

 private:
  std::vector<std::uint8_t> buf_;
};

// An array of T inside a byte buffer, read in place (the buffer need not be aligned for T); valid while the buffer
// is. For a reader that uses each element once, e.g. to apply a delta, where a copy into a vector would cost a
// value-initialization and a memcpy of the whole array (30% of a KDD-like learner's restore).
template <typename T>
requires std::is_trivially_copyable_v<T>
class ArrayView {
 public:
  ArrayView() = default;
  explicit ArrayView(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::size_t size() const { return bytes_.size() / sizeof(T); }
  bool empty() const { return bytes_.empty(); }
  T operator[](std::size_t k) const {
    T v;
    std::memcpy(&v, bytes_.data() + k * sizeof(T), sizeof(T));
    return v;
  }
  // All the elements into out (out.size() == size()), in one copy.
  void copy_to(std::span<T> out) const {
    assert(out.size() == size());
    if (!bytes_.empty()) std::memcpy(out.data(), bytes_.data(), bytes_.size());
  }

 private:
  std::span<const std::uint8_t> bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(std::span<const std::uint8_t> data) : data_(data) {}

  template <typename T>
  requires std::is_trivially_copyable_v<T> T get(const char* what = "value") {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  template <typename T>
  requires std::is_trivially_copyable_v<T> std::vector<T> get_array(const char* what = "array") {
    const auto bytes = get_array_bytes<T>(what);
    std::vector<T> v(bytes.size() / sizeof(T));
    if (!v.empty()) std::memcpy(v.data(), bytes.data(), bytes.size());
    return v;
  }
  // The bytes of an array of T in place, without a copy (valid while the buffer is): for a reader that copies them
  // straight into their destination, or that only passes them on.
  template <typename T>
  requires std::is_trivially_copyable_v<T> std::span<const std::uint8_t> get_array_bytes(const char* what = "array") {
    const auto n = get<std::uint64_t>(what);
    if (n > (data_.size() - pos_) / sizeof(T)) {
      throw FormatError(std::string("truncated buffer: ") + what + " claims " + std::to_string(n) +
                        " elements but only " + std::to_string(data_.size() - pos_) + " bytes remain");
    }
    const auto v = data_.subspan(pos_, n * sizeof(T));
    pos_ += n * sizeof(T);
    return v;
  }
  // An array of T in place, without a copy (valid while the buffer is).
  template <typename T>
  requires std::is_trivially_copyable_v<T> ArrayView<T> get_array_view(const char* what = "array") {
    return ArrayView<T>(get_array_bytes<T>(what));
  }
  // A put_varint value; FormatError if the buffer ends inside it or it runs past 10 bytes / 64 bits.
  std::uint64_t get_varint(const char* what = "varint") {
    std::uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      const auto byte = get<std::uint8_t>(what);
      if (shift == 63 && byte > 1) throw FormatError(std::string(what) + ": varint exceeds 64 bits");
      v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
  }
  std::string get_string(const char* what = "string") {
    auto v = get_array<char>(what);
    return std::string(v.begin(), v.end());
  }
  std::span<const std::uint8_t> rest() const { return data_.subspan(pos_); }
  bool at_end() const { return pos_ == data_.size(); }
  std::size_t position() const { return pos_; }
  void expect_end(const char* what) const {
    if (!at_end()) {
      throw FormatError(std::string(what) + ": " + std::to_string(data_.size() - pos_) + " unexpected trailing bytes");
    }
  }

 private:
  void need(std::size_t n, const char* what) const {
    if (data_.size() - pos_ < n) {
      throw FormatError(std::string("truncated buffer while reading ") + what + ": need " + std::to_string(n) +
                        " bytes, have " + std::to_string(data_.size() - pos_));
    }
  }
  std::span<const std::uint8_t> data_;
  std::size_t pos_ = 0;
};

}  // namespace afs
