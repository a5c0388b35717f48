#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace trainsim::bench {

double seconds_since(std::chrono::steady_clock::time_point start);
// A field of /proc/self/status ("VmRSS:", "VmHWM:") in KiB.
std::int64_t resident_kib(const char* field);

// Runs `body` in a child process, so that its peak resident memory is its own, and waits for it.
template <class F>
void in_child(F&& body) {
  std::fflush(stdout);
  const pid_t child = fork();
  if (child != 0) {
    int status = 0;
    waitpid(child, &status, 0);
    return;
  }
  body();
  std::fflush(stdout);
  _exit(0);
}

void collectives();
void engine();
void scale();
void sweep();
void traces();
void specs();

}  // namespace trainsim::bench
