// prefetch(p): asks the CPU to bring the cache line at p into its caches, for a caller that knows a scattered address
// well before it reads or writes it (a learner's example lists the weights its update will touch).
//
// Why not __builtin_prefetch alone: GCC deletes a loop whose only statements are __builtin_prefetch calls (it has no
// side effects, so the loop is dead code), which is exactly the shape "prefetch every index of this list" takes. On
// x86-64 the hint is an asm volatile statement, which the optimizer keeps; elsewhere the builtin.
#pragma once

namespace afs {

inline void prefetch(const void* p) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1);
#endif
}

}  // namespace afs
