#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/fake_gpu_probe.h"
#include "agent/gpu_probe.h"
#include "agent/nvml_probe.h"

namespace tidal::agent {
namespace {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("tidal_gpu_probe_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(FakeGpuSpecTest, ParsesCountModelMemoryAndDomains) {
  auto spec = ParseFakeGpuSpec("4xH100-80GB,nvlink=2x2,driver=550.54,uuid=n1");
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  const GpuInventory& inv = spec->inventory;
  ASSERT_EQ(inv.gpus.size(), 4u);
  EXPECT_EQ(inv.driver_version, "550.54");
  EXPECT_EQ(inv.gpus[3].model, "H100-80GB");
  EXPECT_EQ(inv.gpus[3].memory_mib, 80 * 1024);  // 80 GiB
  EXPECT_EQ(inv.gpus[3].uuid, "GPU-n1-0003");
  EXPECT_EQ(inv.gpus[0].nvlink_peers, std::vector<int>({1}));
  EXPECT_EQ(inv.gpus[2].nvlink_peers, std::vector<int>({3}));
  // Two domains of two: GPUs {0,1} = 0b0011, {2,3} = 0b1100.
  EXPECT_EQ(NvlinkDomains(inv), std::vector<GpuMask>({0x3, 0xc}));
}

TEST(FakeGpuSpecTest, DefaultsToOneDomainAndNoneToOnePerGpu) {
  auto all = ParseFakeGpuSpec("8xA100-40GB");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(NvlinkDomains(all->inventory), std::vector<GpuMask>({0xff}));
  auto none = ParseFakeGpuSpec("3xL4-24GB,nvlink=none");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(NvlinkDomains(none->inventory), std::vector<GpuMask>({0x1, 0x2, 0x4}));
}

TEST(FakeGpuSpecTest, BadSpecsNameWhatIsWrong) {
  EXPECT_NE(ParseFakeGpuSpec("H100-80GB").status().message().find("COUNTxMODEL"),
            std::string::npos);
  EXPECT_NE(ParseFakeGpuSpec("4xH100").status().message().find("-<GiB>GB"), std::string::npos);
  EXPECT_NE(ParseFakeGpuSpec("4xH100-80GB,nvlink=3x2").status().message().find("nvlink=3x2"),
            std::string::npos);
  EXPECT_NE(ParseFakeGpuSpec("4xH100-80GB,colour=red").status().message().find("colour"),
            std::string::npos);
  EXPECT_FALSE(ParseFakeGpuSpec("65xH100-80GB").ok());
}

TEST(FakeGpuSpecTest, ReadsYamlFileAndReportsLineOfBadField) {
  fs::path dir = TempDir("yaml");
  {
    std::ofstream(dir / "node.yaml") << "driver_version: \"535.1\"\n"
                                        "gpus:\n"
                                        "  count: 4\n"
                                        "  model: A100-40GB\n"
                                        "  mig: true\n"
                                        "  nvlink_domains: [[0, 3], [1, 2]]\n";
    std::ofstream(dir / "bad.yaml") << "gpus:\n  count: 0\n  model: A100-40GB\n";
  }
  auto spec = ParseFakeGpuSpec((dir / "node.yaml").string());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->inventory.driver_version, "535.1");
  EXPECT_TRUE(spec->inventory.gpus[1].mig_enabled);
  EXPECT_EQ(spec->inventory.gpus[1].memory_mib, 40 * 1024);
  // {0,3} = 0b1001 = 0x9, {1,2} = 0b0110 = 0x6, ordered by lowest GPU.
  EXPECT_EQ(NvlinkDomains(spec->inventory), std::vector<GpuMask>({0x9, 0x6}));
  auto bad = ParseFakeGpuSpec((dir / "bad.yaml").string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.yaml:2: gpus.count"), std::string::npos)
      << bad.status().message();
  fs::remove_all(dir);
}

// Busy is 2 % of a CPU; /proc's clock tick is 10 ms.
TEST(FakeGpuActivityTest, OneStrayTickIsNoiseRealUseIsNot) {
  const double tick = 0.01;
  // An idle process charged one tick in a 1 s sample: 0, not 0.01 / 0.02.
  EXPECT_DOUBLE_EQ(FakeGpuActivity(0.01, 1.0, 0.02, tick), 0);
  EXPECT_DOUBLE_EQ(FakeGpuActivity(0, 1.0, 0.02, tick), 0);
  // Two ticks: (0.02 - 0.01) / 1 s = 1 % of a CPU = half of busy.
  EXPECT_DOUBLE_EQ(FakeGpuActivity(0.02, 1.0, 0.02, tick), 0.5);
  // A trainer computing 10 % of the time: (0.1 - 0.01) / 1 = 9 %, capped at 1.
  EXPECT_DOUBLE_EQ(FakeGpuActivity(0.1, 1.0, 0.02, tick), 1);
  // A 200 ms sample of a spinning process: (0.2 - 0.01) / 0.2 = 95 %: busy.
  EXPECT_DOUBLE_EQ(FakeGpuActivity(0.2, 0.2, 0.02, tick), 1);
  EXPECT_DOUBLE_EQ(FakeGpuActivity(0.05, 0, 0.02, tick), 0);
}

TEST(FakeGpuProbeTest, ControlFileInjectsFaultsOnceAndOnlyWholeLines) {
  fs::path dir = TempDir("faults");
  auto spec = ParseFakeGpuSpec("4xH100-80GB,faults=" + (dir / "faults").string());
  ASSERT_TRUE(spec.ok());
  FakeGpuProbe probe(*spec);
  EXPECT_TRUE(probe.PollFaults().empty());  // no file yet
  { std::ofstream(dir / "faults", std::ios::app) << "xid 3 79\necc 1 2\nxid 2"; }
  auto faults = probe.PollFaults();
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].gpu_index, 3);
  EXPECT_EQ(faults[0].kind, GpuFaultKind::kXid);
  EXPECT_EQ(faults[0].code, 79);
  EXPECT_EQ(faults[1].kind, GpuFaultKind::kEccUncorrectable);
  EXPECT_EQ(faults[1].code, 2);
  EXPECT_TRUE(probe.PollFaults().empty());  // each line is reported once
  { std::ofstream(dir / "faults", std::ios::app) << " 48\n"; }  // completes "xid 2 48"
  faults = probe.PollFaults();
  ASSERT_EQ(faults.size(), 1u);
  EXPECT_EQ(faults[0].gpu_index, 2);
  EXPECT_EQ(faults[0].code, 48);
  probe.InjectFault({0, GpuFaultKind::kXid, 13});
  EXPECT_EQ(probe.PollFaults().size(), 1u);
  fs::remove_all(dir);
}

TEST(FakeGpuProbeTest, UtilizationFollowsLoadAndPins) {
  fs::path dir = TempDir("util");
  auto spec = ParseFakeGpuSpec("2xH100-80GB,faults=" + (dir / "ctl").string());
  ASSERT_TRUE(spec.ok());
  FakeGpuProbe probe(*spec, /*seed=*/7);
  probe.SetLoad(0, /*held=*/true, /*activity=*/1.0);
  auto samples = probe.Sample();
  ASSERT_TRUE(samples.ok());
  // Busy: 90% +- 5 jitter; held: 60% of 81920 MiB = 49152 MiB.
  EXPECT_NEAR((*samples)[0].utilization_pct, 90, 5.0001);
  EXPECT_EQ((*samples)[0].memory_used_mib, 49152);
  EXPECT_EQ((*samples)[1].utilization_pct, 0);
  EXPECT_EQ((*samples)[1].memory_used_mib, 0);
  { std::ofstream(dir / "ctl") << "util 0 12\n"; }
  EXPECT_EQ((*probe.Sample())[0].utilization_pct, 12);
  fs::remove_all(dir);
}

TEST(MakeGpuProbeTest, FakeProbeDefaultsItsControlFileIntoWorkDir) {
  auto probe = MakeGpuProbe("fake:2xH100-80GB", "/tmp/somewhere");
  ASSERT_TRUE(probe.ok());
  auto* fake = dynamic_cast<FakeGpuProbe*>(probe->get());
  ASSERT_NE(fake, nullptr);
  EXPECT_EQ(fake->faults_file(), "/tmp/somewhere/gpu-faults");
  EXPECT_NE(MakeGpuProbe("cuda", "").status().message().find("nvml or fake:SPEC"),
            std::string::npos);
}

TEST(NvmlProbeTest, AbsentLibraryGivesOneClearLine) {
  auto probe = NvmlGpuProbe::Load("libnvidia-ml-tidal-absent.so.1");
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().message().rfind(
                "NVML not available: libnvidia-ml-tidal-absent.so.1: cannot open shared object "
                "file", 0),
            0u)
      << probe.status().message();
}

TEST(NvmlProbeTest, CliProbeWithoutDriverFailsWithTheMessage) {
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
  if (nvml != nullptr) {
    dlclose(nvml);
    GTEST_SKIP() << "this machine has NVML; the absent-driver message cannot be seen here";
  }
  const char* bin = std::getenv("TIDAL_BINARY_DIR");
  if (bin == nullptr) GTEST_SKIP() << "TIDAL_BINARY_DIR not set";
  const std::string cmd = std::string(bin) + "/tidal agent --gpus nvml --probe 2>&1";
  FILE* pipe = popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof(buf), pipe)) out += buf;
  const int status = pclose(pipe);
  EXPECT_NE(WEXITSTATUS(status), 0);
  EXPECT_EQ(out.rfind("NVML not available: libnvidia-ml.so.1: cannot open shared object file", 0),
            0u)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
}

// A fake NVML: 4 GPUs, NVLink pairs {0,1} and {2,3}, one queued XID on GPU 2,
// GPU 1's uncorrectable ECC count rising from 0 to 3 after init.
struct FakeNvml {
  static inline int device_ids[4] = {0, 1, 2, 3};
  static inline unsigned long long ecc[4] = {0, 0, 0, 0};
  static inline bool xid_pending = false;
  static nvml::Device Dev(int i) { return reinterpret_cast<nvml::Device>(&device_ids[i]); }
  static int Idx(nvml::Device d) { return *reinterpret_cast<int*>(d); }
  static nvml::Api Api() {
    nvml::Api api;
    api.init = [] { return nvml::kSuccess; };
    api.shutdown = [] { return nvml::kSuccess; };
    api.error_string = [](nvml::Return) { return "fake error"; };
    api.system_get_driver_version = [](char* buf, unsigned n) {
      snprintf(buf, n, "550.54.15");
      return nvml::kSuccess;
    };
    api.device_get_count = [](unsigned* n) {
      *n = 4;
      return nvml::kSuccess;
    };
    api.device_get_handle_by_index = [](unsigned i, nvml::Device* d) {
      *d = Dev(static_cast<int>(i));
      return nvml::kSuccess;
    };
    api.device_get_uuid = [](nvml::Device d, char* buf, unsigned n) {
      snprintf(buf, n, "GPU-real-%d", Idx(d));
      return nvml::kSuccess;
    };
    api.device_get_name = [](nvml::Device, char* buf, unsigned n) {
      snprintf(buf, n, "NVIDIA H100 80GB HBM3");
      return nvml::kSuccess;
    };
    api.device_get_memory_info = [](nvml::Device d, nvml::Memory* m) {
      m->total = 80ULL << 30;
      m->used = static_cast<unsigned long long>(Idx(d)) << 30;
      m->free = m->total - m->used;
      return nvml::kSuccess;
    };
    api.device_get_mig_mode = [](nvml::Device d, unsigned* current, unsigned* pending) {
      *current = *pending = Idx(d) == 3 ? 1 : 0;
      return nvml::kSuccess;
    };
    api.device_get_p2p_status = [](nvml::Device a, nvml::Device b, int index, int* status) {
      *status = (index == nvml::kP2pCapsIndexNvlink && Idx(a) / 2 == Idx(b) / 2) ? 0 : 5;
      return nvml::kSuccess;
    };
    api.device_get_total_ecc_errors = [](nvml::Device d, int, int, unsigned long long* c) {
      *c = ecc[Idx(d)];
      return nvml::kSuccess;
    };
    api.device_get_utilization_rates = [](nvml::Device d, nvml::Utilization* u) {
      u->gpu = 10u * static_cast<unsigned>(Idx(d));
      u->memory = 0;
      return nvml::kSuccess;
    };
    api.event_set_create = [](nvml::EventSet* s) {
      *s = reinterpret_cast<nvml::EventSet>(&device_ids[0]);
      return nvml::kSuccess;
    };
    api.device_register_events = [](nvml::Device, unsigned long long, nvml::EventSet) {
      return nvml::kSuccess;
    };
    api.event_set_wait = [](nvml::EventSet, nvml::EventData* data, unsigned) {
      if (!xid_pending) return nvml::kErrorTimeout;
      xid_pending = false;
      data->device = Dev(2);
      data->event_type = nvml::kEventTypeXidCriticalError;
      data->event_data = 79;
      return nvml::kSuccess;
    };
    api.event_set_free = [](nvml::EventSet) { return nvml::kSuccess; };
    return api;
  }
};

TEST(NvmlProbeTest, InventoryFaultsAndSamplesThroughTheApiTable) {
  FakeNvml::ecc[1] = 0;
  FakeNvml::xid_pending = false;
  auto probe = NvmlGpuProbe::FromApi(FakeNvml::Api());
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto inv = (*probe)->Inventory();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->driver_version, "550.54.15");
  ASSERT_EQ(inv->gpus.size(), 4u);
  EXPECT_EQ(inv->gpus[2].uuid, "GPU-real-2");
  EXPECT_EQ(inv->gpus[2].model, "H100-80GB-HBM3");
  EXPECT_EQ(inv->gpus[2].memory_mib, 81920);
  EXPECT_TRUE(inv->gpus[3].mig_enabled);
  EXPECT_FALSE(inv->gpus[0].mig_enabled);
  EXPECT_EQ(NvlinkDomains(*inv), std::vector<GpuMask>({0x3, 0xc}));

  EXPECT_TRUE((*probe)->PollFaults().empty());
  FakeNvml::xid_pending = true;
  FakeNvml::ecc[1] = 3;
  auto faults = (*probe)->PollFaults();
  ASSERT_EQ(faults.size(), 2u);
  EXPECT_EQ(faults[0].gpu_index, 2);
  EXPECT_EQ(faults[0].code, 79);
  EXPECT_EQ(faults[1].gpu_index, 1);
  EXPECT_EQ(faults[1].kind, GpuFaultKind::kEccUncorrectable);
  EXPECT_EQ(faults[1].code, 3);
  EXPECT_TRUE((*probe)->PollFaults().empty());  // the count did not rise again

  auto samples = (*probe)->Sample();
  ASSERT_TRUE(samples.ok());
  EXPECT_EQ((*samples)[3].utilization_pct, 30);   // 10 * index
  EXPECT_EQ((*samples)[3].memory_used_mib, 3072);  // 3 GiB
}

TEST(InventoryJsonTest, CarriesDomainsAsGpuLists) {
  auto spec = ParseFakeGpuSpec("4xH100-80GB,nvlink=2x2");
  ASSERT_TRUE(spec.ok());
  nlohmann::json j = InventoryToJson(spec->inventory);
  EXPECT_EQ(j["nvlink_domains"], nlohmann::json::parse("[[0,1],[2,3]]"));
  EXPECT_EQ(j["gpus"][1]["memory_mib"], 81920);
}

}  // namespace
}  // namespace tidal::agent
