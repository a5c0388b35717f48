#pragma once
#include <chrono>
#include <cstdint>

namespace trainsim::bench {

double seconds_since(std::chrono::steady_clock::time_point start);
// A field of /proc/self/status ("VmRSS:", "VmHWM:") in KiB.
std::int64_t resident_kib(const char* field);

void collectives();
void engine();
void scale();
void sweep();

}  // namespace trainsim::bench
