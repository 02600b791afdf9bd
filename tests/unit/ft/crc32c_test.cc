// afstream/store/crc32c.h: the CRC-32C of RFC 3720's test vectors, the crc32 instruction's against the tables' on
// every length and alignment, Extend's chaining, the same checksums as librocksdb's own rocksdb::crc32c::Extend
// (so stores written before and after agree), and the binding that makes librocksdb's calls run on ours.
#include "afstream/store/crc32c.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "afstream/store/rocksdb_store.h"
#include "tests/temp_dir.h"

namespace rocksdb::crc32c {
std::uint32_t Extend(std::uint32_t init_crc, const char* data, std::size_t n);  // rocksdb_store.cc's
}

namespace afs {
namespace {

constexpr const char* kExtendSymbol = "_ZN7rocksdb6crc32c6ExtendEjPKcm";  // rocksdb::crc32c::Extend
using ExtendFn = std::uint32_t (*)(std::uint32_t, const char*, std::size_t);

std::vector<std::uint8_t> random_bytes(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint8_t> b(n);
  for (auto& x : b) x = static_cast<std::uint8_t>(rng());
  return b;
}

TEST(Crc32c, Rfc3720TestVectors) {
  const std::string digits = "123456789";
  std::vector<std::uint8_t> zeros(32, 0), ones(32, 0xff), ascending(32), descending(32);
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<std::uint8_t>(i);
    descending[i] = static_cast<std::uint8_t>(31 - i);
  }
  for (auto* f : {&crc32c_extend, &crc32c_extend_portable}) {
    EXPECT_EQ(f(0, digits.data(), digits.size()), 0xe3069283u);
    EXPECT_EQ(f(0, zeros.data(), zeros.size()), 0x8a9136aau);
    EXPECT_EQ(f(0, ones.data(), ones.size()), 0x62a8ab43u);
    EXPECT_EQ(f(0, ascending.data(), ascending.size()), 0x46dd794eu);
    EXPECT_EQ(f(0, descending.data(), descending.size()), 0x113fdb5cu);
    EXPECT_EQ(f(0, nullptr, 0), 0u);
  }
}

TEST(Crc32c, InstructionAndTablesAgreeOnEveryLengthAndAlignment) {
  const auto data = random_bytes(300, 1);
  for (std::size_t offset = 0; offset < 8; ++offset) {
    for (std::size_t n = 0; offset + n <= data.size(); ++n) {
      ASSERT_EQ(crc32c_extend(0x1234u, data.data() + offset, n),
                crc32c_extend_portable(0x1234u, data.data() + offset, n))
          << "offset " << offset << ", " << n << " bytes";
    }
  }
}

TEST(Crc32c, ExtendChains) {
  const auto data = random_bytes(10000, 2);
  const std::uint32_t whole = crc32c_extend(0, data.data(), data.size());
  for (const std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{4096}, data.size()}) {
    EXPECT_EQ(crc32c_extend(crc32c_extend(0, data.data(), cut), data.data() + cut, data.size() - cut), whole) << cut;
  }
}

// librocksdb's own definition, found in the library itself (not in the program, which binds its calls elsewhere).
ExtendFn librocksdbs_extend() {
  void* lib = dlopen("librocksdb.so.7.8", RTLD_NOW | RTLD_NOLOAD);
  if (lib == nullptr) return nullptr;
  auto* fn = reinterpret_cast<ExtendFn>(dlsym(lib, kExtendSymbol));
  dlclose(lib);
  return fn;
}

TEST(Crc32c, TheSameChecksumsAsLibrocksdbsOwn) {
  const ExtendFn theirs = librocksdbs_extend();
  ASSERT_NE(theirs, nullptr) << "librocksdb.so.7.8 is not loaded or has no rocksdb::crc32c::Extend: " << dlerror();
  ASSERT_NE(theirs, &rocksdb::crc32c::Extend);
  for (std::uint64_t seed = 0; seed < 50; ++seed) {
    const auto data = random_bytes(seed * 997 % 5000, seed);
    const auto init = static_cast<std::uint32_t>(seed * 0x9e3779b9u);
    const auto* p = reinterpret_cast<const char*>(data.data());
    EXPECT_EQ(crc32c_extend(init, p, data.size()), theirs(init, p, data.size())) << "seed " << seed;
  }
}

// librocksdb calls rocksdb::crc32c::Extend through its procedure linkage table, which the dynamic linker binds to the
// first definition in the program's global scope: the program's own (rocksdb_store.cc), which counts its calls. So
// a write and a flush through RocksDB must reach it, and RocksDB must read back what it checksummed with it (its
// write-ahead log's and tables' checksums are verified on reopen).
TEST(RocksDbStore, LibrocksdbsChecksumsRunOnTheCrc32Instruction) {
#if !defined(__x86_64__)
  GTEST_SKIP() << "the program defines RocksDB's CRC-32C on x86-64 only";
#endif
  EXPECT_EQ(dlsym(RTLD_DEFAULT, kExtendSymbol), reinterpret_cast<void*>(&rocksdb::crc32c::Extend));
  testing::TempDir dir;
  const std::uint64_t before = rocksdb_crc32c_calls();
  {
    RocksDbStore s(dir.str() + "/db", {false, 0});
    s.put_state(1, true, random_bytes(300000, 3), {});
  }
  EXPECT_GT(rocksdb_crc32c_calls(), before) << "librocksdb computed its checksums without the program's function";
  RocksDbStore s(dir.str() + "/db");
  EXPECT_EQ(s.state_chain(1), std::vector<Bytes>{random_bytes(300000, 3)});
}

}  // namespace
}  // namespace afs
