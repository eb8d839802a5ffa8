// Gloo's ring all_reduce (float sum) over its TCP transport, for the peer
// comparison in compare.sh. One process per rank; ranks meet through a
// Gloo FileStore directory.
//   gloo_allreduce RANK SIZE STORE_DIR MIN_BYTES MAX_BYTES ITERS
// Prints one line per size: "bytes time_us busbw_GBps" (nccl-tests'
// all_reduce bus bandwidth, 2(n-1)/n x bytes / time), rank 0 only.
#include <gloo/allreduce_ring.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr, "usage: %s RANK SIZE STORE_DIR MIN_BYTES MAX_BYTES ITERS\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]);
  const int size = std::atoi(argv[2]);
  const std::size_t min_bytes = std::strtoull(argv[4], nullptr, 10);
  const std::size_t max_bytes = std::strtoull(argv[5], nullptr, 10);
  const int iters = std::atoi(argv[6]);

  gloo::transport::tcp::attr attr("127.0.0.1");
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore store(argv[3]);
  auto context = std::make_shared<gloo::rendezvous::Context>(rank, size);
  context->connectFullMesh(store, device);

  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const std::size_t count = std::max<std::size_t>(bytes / sizeof(float), 1);
    std::vector<float> data(count, 1.0f);
    gloo::AllreduceRing<float> allreduce(context, {data.data()}, static_cast<int>(count));
    for (int i = 0; i < 3; ++i)
      allreduce.run();  // warm-up
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i)
      allreduce.run();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / iters;
    const double busbw = static_cast<double>(count * sizeof(float)) / (us * 1e3) * 2.0 * (size - 1) / size;
    if (rank == 0) std::printf("%zu %.2f %.3f\n", count * sizeof(float), us, busbw);
    std::fflush(stdout);
  }
  return 0;
}
