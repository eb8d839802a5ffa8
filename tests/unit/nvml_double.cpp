// A stand-in for libnvidia-ml.so.1 with NVML's C entry points, for the
// inventory's test on machines without a driver (the real library is read
// by tests/device/check.sh on a GPU machine). Two GPUs: GPU 0 healthy with
// two active NVLinks; GPU 1 with its PCIe link trained at x8 of x16, ECC
// pending a reboot and uncorrected errors; nvmlDeviceGetMigMode is "not
// supported" on both.
#include <cstring>

extern "C" {

struct nvmlDevice_st;
using nvmlDevice_t = nvmlDevice_st*;

struct nvmlPciInfo_t {
  char busIdLegacy[16];
  unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
struct nvmlMemory_t {
  unsigned long long total, free, used;
};

namespace {
nvmlDevice_st* handle(unsigned i) {
  return reinterpret_cast<nvmlDevice_st*>(static_cast<unsigned long>(i + 1));
}
unsigned index_of(nvmlDevice_t d) {
  return static_cast<unsigned>(reinterpret_cast<unsigned long>(d)) - 1;
}
}  // namespace

int nvmlInit_v2() {
  return 0;
}
int nvmlShutdown() {
  return 0;
}
const char* nvmlErrorString(int) {
  return "stand-in error";
}
int nvmlSystemGetDriverVersion(char* v, unsigned n) {
  std::strncpy(v, "580.1.2", n);
  return 0;
}
int nvmlSystemGetCudaDriverVersion_v2(int* v) {
  *v = 13000;
  return 0;
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, nvmlDevice_t* d) {
  if (i >= 2) return 2;
  *d = handle(i);
  return 0;
}
int nvmlDeviceGetName(nvmlDevice_t, char* v, unsigned n) {
  std::strncpy(v, "NVIDIA H100 80GB HBM3", n);
  return 0;
}
int nvmlDeviceGetUUID(nvmlDevice_t d, char* v, unsigned n) {
  std::strncpy(v, index_of(d) == 0 ? "GPU-aaaa" : "GPU-bbbb", n);
  return 0;
}
int nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->busId, index_of(d) == 0 ? "00000000:18:00.0" : "00000000:2A:00.0");
  return 0;
}
int nvmlDeviceGetCudaComputeCapability(nvmlDevice_t, int* major, int* minor) {
  *major = 9;
  *minor = 0;
  return 0;
}
int nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t* m) {
  m->total = 85520809984ULL;
  m->used = 1ULL << 30;
  m->free = m->total - m->used;
  return 0;
}
int nvmlDeviceGetEccMode(nvmlDevice_t d, int* current, int* pending) {
  *current = index_of(d) == 0 ? 1 : 0;
  *pending = 1;
  return 0;
}
int nvmlDeviceGetTotalEccErrors(nvmlDevice_t d, int type, int, unsigned long long* count) {
  *count = index_of(d) == 1 && type == 1 ? 3 : 0;
  return 0;
}
int nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t, unsigned* v) {
  *v = 5;
  return 0;
}
int nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t, unsigned* v) {
  *v = 5;
  return 0;
}
int nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned* v) {
  *v = index_of(d) == 1 ? 8 : 16;
  return 0;
}
int nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t, unsigned* v) {
  *v = 16;
  return 0;
}
int nvmlDeviceGetPersistenceMode(nvmlDevice_t, int* v) {
  *v = 1;
  return 0;
}
int nvmlDeviceGetMigMode(nvmlDevice_t, unsigned*, unsigned*) {
  return 3;  // not supported
}
int nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned link, int* active) {
  if (link >= 4) return 2;  // a link this GPU does not have
  *active = index_of(d) == 0 && link < 2 ? 1 : 0;
  return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t, unsigned link, nvmlPciInfo_t* p) {
  std::memset(p, 0, sizeof *p);
  std::strcpy(p->busId, link == 0 ? "00000000:C1:00.0" : "00000000:C2:00.0");
  return 0;
}

}  // extern "C"
