#pragma once
// The C library's allocator, tuned for a process that builds and drops task graphs of tens of
// megabytes again and again (a sweep simulates plan after plan).

namespace trainsim {

// Keeps freed memory in the process for the next allocation instead of returning it to the
// system: glibc maps each block of over 128 KiB to fresh pages of its own (raising the threshold
// as blocks are freed, up to 32 MiB) and gives the heap's free top back once it passes 128 KiB, so
// every plan's task arrays were page-faulted in anew (a fifth of a sweep's time). Blocks up to
// 32 MiB now come from the heap, and the heap keeps up to 1 GiB free. Results are unchanged;
// only where memory comes from. Call once, first thing in main(); a no-op where the C library is
// not glibc (and under the sanitizers, whose allocator ignores it).
void keep_freed_memory_for_reuse();

}  // namespace trainsim
