// One rank of matrix_processes_test: joins the job its environment names
// (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) through the public API,
// runs all_reduce and reduce_scatter of COUNT elements for every dtype x op
// on the inputs matrix_slice.h defines, and writes each result to OUT_DIR.
//   collective_rank OUT_DIR COUNT
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <vector>

#include "matrix_slice.h"
#include "ringmaster/comm.h"
#include "ringmaster/config.h"

using namespace ringmaster;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: collective_rank OUT_DIR COUNT\n");
    return 2;
  }
  const std::string out = argv[1];
  const std::size_t count = std::strtoull(argv[2], nullptr, 10);
  try {
    const auto comm = Communicator::create(Config::from_env());
    const int n = comm->size();
    for (DataType t : matrix_slice::kTypes) {
      for (RedOp op : matrix_slice::kOps) {
        for (const std::string collective : {"all_reduce", "reduce_scatter"}) {
          const bool scatter = collective == "reduce_scatter";
          const std::size_t in_count = scatter ? count * static_cast<std::size_t>(n) : count;
          std::vector<unsigned char> send(in_count * size_of(t)), recv(count * size_of(t));
          for (std::size_t i = 0; i < in_count; ++i)
            matrix_slice::store(send.data(), i, t, matrix_slice::input_value(comm->rank(), i, t, op));
          (scatter ? comm->reduce_scatter(send.data(), recv.data(), count, t, op)
                   : comm->all_reduce(send.data(), recv.data(), count, t, op))
              .wait();
          std::ofstream(out + "/" + matrix_slice::file_name(collective, t, op, comm->rank()), std::ios::binary)
              .write(reinterpret_cast<const char*>(recv.data()), static_cast<std::streamsize>(recv.size()));
        }
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "collective_rank: %s\n", e.what());
    return 1;
  }
  return 0;
}
