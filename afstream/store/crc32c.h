// CRC-32C (Castagnoli, RFC 3720; the checksum of RocksDB's write-ahead log records and table blocks), computed with
// the SSE4.2 crc32 instruction where the CPU has it and from tables otherwise.
//
// Why the project has its own: RocksDB checksums every byte it writes with rocksdb::crc32c::Extend, and Debian's
// librocksdb is built portable (without SSE4.2), so its Extend is the table-driven software CRC, 1.3 GB/s
// (store_benchmark's BM_Crc32c_Librocksdb): a quarter of the backup server's CPU in a perf record of a KDD-like
// learner's run on worker processes (155 MB of state records through the write-ahead log). rocksdb_store.cc defines
// rocksdb::crc32c::Extend in the program, which the dynamic linker binds librocksdb's own calls to (they go through its
// PLT), so RocksDB computes the same checksums with this code. Debian has no packaged CRC-32C library for C++
// (libcrc32c is not in bookworm).
#pragma once

#include <cstddef>
#include <cstdint>

namespace afs {

// The CRC-32C of A followed by data[0, n), given crc = the CRC-32C of A (0 for the empty A); as
// rocksdb::crc32c::Extend and leveldb::crc32c::Extend.
std::uint32_t crc32c_extend(std::uint32_t crc, const void* data, std::size_t n);
// The same from tables alone (what a CPU without SSE4.2 gets; for tests).
std::uint32_t crc32c_extend_portable(std::uint32_t crc, const void* data, std::size_t n);
// True when crc32c_extend uses the crc32 instruction.
bool crc32c_hardware();
// Calls of rocksdb::crc32c::Extend that reached the program's definition (rocksdb_store.cc; 0 where there is none,
// off x86-64): how a test sees that librocksdb's checksums run here.
std::uint64_t rocksdb_crc32c_calls();
void count_rocksdb_crc32c_call();

}  // namespace afs
