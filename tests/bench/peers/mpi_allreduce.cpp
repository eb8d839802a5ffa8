// Open MPI's MPI_Allreduce (float sum), for the peer comparison in
// compare.sh; run under mpirun with --mca btl tcp,self.
//   mpirun -np N mpi_allreduce MIN_BYTES MAX_BYTES ITERS
// Prints one line per size on rank 0: "bytes time_us busbw_GBps".
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc != 4) {
    if (rank == 0) std::fprintf(stderr, "usage: %s MIN_BYTES MAX_BYTES ITERS\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  const std::size_t min_bytes = std::strtoull(argv[1], nullptr, 10);
  const std::size_t max_bytes = std::strtoull(argv[2], nullptr, 10);
  const int iters = std::atoi(argv[3]);
  for (std::size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2) {
    const std::size_t count = std::max<std::size_t>(bytes / sizeof(float), 1);
    std::vector<float> in(count, 1.0f), out(count);
    for (int i = 0; i < 3; ++i)
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const double start = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    }
    const double us = (MPI_Wtime() - start) * 1e6 / iters;
    const double busbw = static_cast<double>(count * sizeof(float)) / (us * 1e3) * 2.0 * (size - 1) / size;
    if (rank == 0) std::printf("%zu %.2f %.3f\n", count * sizeof(float), us, busbw);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
