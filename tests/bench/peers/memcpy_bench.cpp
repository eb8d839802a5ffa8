// One core copying buffers of each size: what the memory itself moves,
// printed beside the shared-memory peers in compare.sh.
//   memcpy_bench MIN_BYTES MAX_BYTES ITERS
// Prints one line per size: "bytes time_us GBps" (bytes copied per second).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MIN_BYTES MAX_BYTES ITERS\n", argv[0]);
    return 2;
  }
  const std::size_t min_bytes = std::strtoull(argv[1], nullptr, 10);
  const std::size_t max_bytes = std::strtoull(argv[2], nullptr, 10);
  const int iters = std::max(1, std::atoi(argv[3]));
  std::vector<char> src(max_bytes, 1), dst(max_bytes, 0);
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    for (int i = 0; i < 3; ++i)
      std::memcpy(dst.data(), src.data(), bytes);
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      std::memcpy(dst.data(), src.data(), bytes);
      asm volatile("" : : "r"(dst.data()) : "memory");  // keep every copy
    }
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters;
    std::printf("%zu %.3f %.3f\n", bytes, us, static_cast<double>(bytes) / (us * 1e3));
  }
  return 0;
}
