// Two ranks as threads of one process sum 1 MiB of floats through the
// installed library; prints the versions and whether every element is 3.
#include <ringmaster/ringmaster.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s PORT\n", argv[0]);
    return 2;
  }
  std::printf("headers %s (%d), library %d\n", RINGMASTER_VERSION_STRING, RINGMASTER_VERSION_CODE,
              ringmaster::linked_version_code());
  constexpr std::size_t count = 256 * 1024;
  int wrong[2] = {0, 0};
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.emplace_back([&, r] {
      ringmaster::Config config;
      config.rank = r;
      config.world_size = 2;
      config.master_addr = "127.0.0.1";
      config.master_port = static_cast<std::uint16_t>(std::atoi(argv[1]));
      auto comm = ringmaster::Communicator::create(config);
      std::vector<float> data(count, static_cast<float>(r + 1));
      comm->all_reduce(data.data(), data.data(), count, ringmaster::DataType::fp32, ringmaster::RedOp::sum).wait();
      for (float v : data)
        wrong[r] += v != 3.0f;
    });
  }
  for (auto& t : ranks)
    t.join();
  std::printf("all_reduce over 2 ranks: %d wrong\n", wrong[0] + wrong[1]);
  return wrong[0] + wrong[1] == 0 ? 0 : 1;
}
