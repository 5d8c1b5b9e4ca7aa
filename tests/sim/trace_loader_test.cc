#include "sim/trace_loader.h"

#include <zlib.h>

#include <gtest/gtest.h>

#include "sim/text_reader.h"
#include "tests/support/sim_fixtures.h"

namespace tidal::sim {
namespace {

using ::tidal::testing::MakeScratchDir;
using ::tidal::testing::SourceDir;
using ::tidal::testing::WriteScratchFile;

TEST(TextReaderTest, ParsesDateTimesWithAndWithoutFractions) {
  // 2017-10-09 is day 17448 since 1970-01-01: 17448 * 86400 + 7*3600 + 60 + 55.
  auto t = ParseDateTime("2017-10-09 07:01:55");
  ASSERT_TRUE(t.has_value());
  EXPECT_DOUBLE_EQ(*t, 17448.0 * 86400 + 7 * 3600 + 60 + 55);
  auto f = ParseDateTime("2023-11-16 18:17:03.9799600");
  ASSERT_TRUE(f.has_value());
  // Seconds since 1970 in a double keep about 0.2 us of resolution.
  EXPECT_NEAR(*f - *ParseDateTime("2023-11-16 18:17:03"), 0.97996, 1e-6);
  EXPECT_FALSE(ParseDateTime("2017-13-09 07:01:55").has_value());
  EXPECT_FALSE(ParseDateTime("2017-10-09").has_value());
  EXPECT_FALSE(ParseDateTime("2017-10-09 07:01:5x").has_value());
}

TEST(TextReaderTest, ParsesNumbersStrictly) {
  EXPECT_EQ(ParseDouble("2951.0"), 2951.0);
  EXPECT_FALSE(ParseDouble("12abc").has_value());
  EXPECT_FALSE(ParseDouble("").has_value());
  EXPECT_EQ(ParseInt("8"), 8);
  EXPECT_FALSE(ParseInt("8.5").has_value());
}

TEST(SplitIntoPodsTest, UsesTheLargestDivisorThatFitsANode) {
  int pods = 0, per = 0;
  SplitIntoPods(4, 8, pods, per);
  EXPECT_EQ(pods, 1);
  EXPECT_EQ(per, 4);
  SplitIntoPods(32, 8, pods, per);  // 4 nodes x 8
  EXPECT_EQ(pods, 4);
  EXPECT_EQ(per, 8);
  SplitIntoPods(12, 8, pods, per);  // 8 does not divide 12; 6 does: 2 x 6
  EXPECT_EQ(pods, 2);
  EXPECT_EQ(per, 6);
}

constexpr char kPhillyHeader[] = "timestamp,duration,num_gpus,gpu_time,cluster\n";

TEST(PhillyLoaderTest, SortsByArrivalAndSplitsGangs) {
  const std::string dir = MakeScratchDir("philly");
  const std::string path = WriteScratchFile(dir, "p.csv",
                                            std::string(kPhillyHeader) +
                                                "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
                                                "2017-10-09 06:13:03,2951.0,16,47216.0,6214e9\n"
                                                "2017-10-09 06:13:03,10.0,2,20.0,6214e9\n"
                                                "\n");
  auto jobs = LoadPhillyTrace(path, TraceOptions{});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 3u);
  // 06:13:03 twice (file order kept), then 07:01:55 = 48 min 52 s later.
  EXPECT_EQ((*jobs)[0].line, 3);
  EXPECT_EQ((*jobs)[0].pods, 2);  // 16 GPUs on 8-GPU nodes: a 2-node gang
  EXPECT_EQ((*jobs)[0].gpus_per_pod, 8);
  EXPECT_EQ((*jobs)[1].line, 4);
  EXPECT_DOUBLE_EQ((*jobs)[2].submit_s, 48 * 60 + 52);
  EXPECT_EQ((*jobs)[2].group, "11cb48");
  EXPECT_DOUBLE_EQ((*jobs)[0].duration_s, 2951.0);
}

TEST(PhillyLoaderTest, AppliesScalesWindowAndLimit) {
  const std::string dir = MakeScratchDir("philly");
  const std::string path = WriteScratchFile(dir, "p.csv",
                                            std::string(kPhillyHeader) +
                                                "2017-10-09 00:00:00,100,1,100,a\n"
                                                "2017-10-09 00:10:00,100,1,100,a\n"
                                                "2017-10-09 00:20:00,100,1,100,a\n"
                                                "2017-10-09 00:30:00,100,1,100,a\n");
  TraceOptions o;
  o.start_s = 600;      // drops the first job
  o.limit = 2;          // keeps 00:10 and 00:20
  o.time_scale = 0.5;   // 600 s apart -> 300 s apart
  o.duration_scale = 3;
  auto jobs = LoadPhillyTrace(path, o);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_DOUBLE_EQ((*jobs)[0].submit_s, 0);
  EXPECT_DOUBLE_EQ((*jobs)[1].submit_s, 300);
  EXPECT_DOUBLE_EQ((*jobs)[1].duration_s, 300);
}

TEST(PhillyLoaderTest, MalformedLinesNameFileLineAndField) {
  const std::string dir = MakeScratchDir("philly");
  struct Case {
    std::string row;
    std::string field;
  };
  for (const Case& c : {Case{"2017-10-09 07:01:55,66.0,0,66.0,a", "num_gpus"},
                        Case{"2017-10-09 07:01:55,-3,1,66.0,a", "duration"},
                        Case{"yesterday,66.0,1,66.0,a", "timestamp"},
                        Case{"2017-10-09 07:01:55,66.0,1,x,a", "gpu_time"},
                        Case{"2017-10-09 07:01:55,66.0,1,66.0,", "cluster"},
                        Case{"2017-10-09 07:01:55,66.0,1", "row"}}) {
    const std::string path = WriteScratchFile(
        dir, "bad.csv", std::string(kPhillyHeader) + "2017-10-09 07:00:00,1,1,1,a\n" + c.row + "\n");
    auto jobs = LoadPhillyTrace(path, TraceOptions{});
    ASSERT_FALSE(jobs.ok()) << c.row;
    EXPECT_NE(jobs.status().message().find(path + ":3: field '" + c.field + "'"), std::string::npos)
        << jobs.status().message();
  }
  const std::string bad_header = WriteScratchFile(dir, "h.csv", "when,duration,num_gpus,gpu_time,cluster\n");
  auto jobs = LoadPhillyTrace(bad_header, TraceOptions{});
  ASSERT_FALSE(jobs.ok());
  EXPECT_NE(jobs.status().message().find(":1: header"), std::string::npos);
  EXPECT_FALSE(LoadPhillyTrace(dir + "/missing.csv", TraceOptions{}).ok());
}

TEST(PhillyLoaderTest, ReadsTheCommittedSample) {
  auto jobs = LoadPhillyTrace(SourceDir() + "/tests/data/philly_head50.csv", TraceOptions{});
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ(jobs->size(), 50u);
  for (size_t i = 1; i < jobs->size(); ++i) EXPECT_LE((*jobs)[i - 1].submit_s, (*jobs)[i].submit_s);
}

constexpr char kOpenbHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n";

TEST(OpenbLoaderTest, MapsQosToKindsAndSkipsCpuPodsAndPodsThatNeverRan) {
  const std::string dir = MakeScratchDir("openb");
  const std::string path = WriteScratchFile(dir, "pods.csv",
                                            std::string(kOpenbHeader) +
                                                "pod-a,12000,16384,1,1000,,LS,Running,100,1100,150\n"
                                                "pod-b,6000,12288,1,460,,BE,Pending,40,540,\n"
                                                "pod-c,4000,8192,0,0,,BE,Running,60,90,60\n"
                                                "pod-d,32000,65536,8,1000,,Burstable,Running,200,900,200\n"
                                                "pod-e,6000,12288,1,460,,BE,Failed,300,400,310\n");
  auto r = LoadOpenbPods(path, TraceOptions{});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->skipped_cpu_only, 1u);
  // pod-b was never scheduled: 540 - 40 s is how long it waited, not ran.
  EXPECT_EQ(r->skipped_never_ran, 1u);
  ASSERT_EQ(r->jobs.size(), 3u);
  // Sorted by creation: pod-a (100), pod-d (200), pod-e (300); rebased to 0.
  EXPECT_EQ(r->jobs[0].name, "pod-a");
  EXPECT_EQ(r->jobs[0].kind, WorkloadKind::kInference);
  EXPECT_DOUBLE_EQ(r->jobs[0].submit_s, 0);
  EXPECT_DOUBLE_EQ(r->jobs[0].duration_s, 950);  // 1100 - 150
  EXPECT_EQ(r->jobs[1].gpus_per_pod, 8);
  EXPECT_DOUBLE_EQ(r->jobs[1].submit_s, 100);
  EXPECT_EQ(r->jobs[2].name, "pod-e");
  EXPECT_EQ(r->jobs[2].kind, WorkloadKind::kTraining);
  EXPECT_EQ(r->jobs[2].gpus_per_pod, 1);  // 460 milli-GPU rounds up to one GPU
  EXPECT_DOUBLE_EQ(r->jobs[2].duration_s, 90);  // 400 - 310
}

TEST(OpenbLoaderTest, MalformedLinesNameFileLineAndField) {
  const std::string dir = MakeScratchDir("openb");
  struct Case {
    std::string row;
    std::string field;
  };
  for (const Case& c : {Case{"p,1,1,9x,1000,,LS,Running,1,2,1", "num_gpu"},
                        Case{"p,1,1,1,1200,,LS,Running,1,2,1", "gpu_milli"},
                        Case{"p,1,1,1,1000,,XX,Running,1,2,1", "qos"},
                        Case{"p,1,1,1,1000,,LS,Running,5,2,1", "deletion_time"},
                        Case{"p,1,1,1,1000,,LS,Running,1,9,x", "scheduled_time"},
                        Case{"p,1,1,1,1000", "row"}}) {
    const std::string path = WriteScratchFile(dir, "bad.csv", std::string(kOpenbHeader) + c.row + "\n");
    auto r = LoadOpenbPods(path, TraceOptions{});
    ASSERT_FALSE(r.ok()) << c.row;
    EXPECT_NE(r.status().message().find(path + ":2: field '" + c.field + "'"), std::string::npos)
        << r.status().message();
  }
}

TEST(AzureLoaderTest, CountsRequestsPerWindow) {
  const std::string dir = MakeScratchDir("azure");
  const std::string path = WriteScratchFile(dir, "a.csv",
                                            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                            "2023-11-16 18:17:03.9799600,4808,10\n"
                                            "2023-11-16 18:17:30.0000000,100,10\n"
                                            "2023-11-16 18:18:10.0000000,100,10\n"
                                            "2023-11-16 18:19:20.0000000,100,10\n");
  TraceOptions o;
  o.load_scale = 3;
  o.time_scale = 24;
  auto s = LoadAzureLlmTrace(path, o);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Offsets 0, 26.02, 66.02, 136.02 s -> minutes 0, 0, 1, 2: {2, 1, 1} / 60 s x 3.
  ASSERT_EQ(s->rps.size(), 3u);
  EXPECT_DOUBLE_EQ(s->rps[0], 2.0 / 60 * 3);
  EXPECT_DOUBLE_EQ(s->rps[2], 1.0 / 60 * 3);
  EXPECT_DOUBLE_EQ(s->step_s, 60 * 24);
}

TEST(AzureLoaderTest, ReadsTheCommittedSampleAndRejectsBadLines) {
  auto s = LoadAzureLlmTrace(SourceDir() + "/tests/data/azure_code_head300.csv", TraceOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  double total = 0;
  for (double r : s->rps) total += r * 60;
  EXPECT_NEAR(total, 300, 1e-6);  // every request counted once
  const std::string dir = MakeScratchDir("azure");
  const std::string path = WriteScratchFile(dir, "bad.csv",
                                            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                            "2023-11-16 18:17:03.97,48,10\n"
                                            "2023-11-16 18:17:04.97,-1,10\n");
  auto bad = LoadAzureLlmTrace(path, TraceOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(path + ":3: field 'ContextTokens'"), std::string::npos);
}

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

TEST(GenaiQpsLoaderTest, SumsValuesPerWindowFromGzip) {
  const std::string dir = MakeScratchDir("genai");
  const std::string path = dir + "/qps.csv.gz";
  WriteGzip(path,
            "timestamp_anon,value,container_ip,request_type\n"
            "1000.0,0.5,,API Requests\n"
            "1030.0,1.5,abc,Generative Requests\n"
            "1130.0,2.0,abc,Generative Requests\n");
  auto s = LoadGenaiQps(path, TraceOptions{});
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  // Window 0 (offsets 0 and 30): 0.5 + 1.5; window 2 (offset 130): 2.
  ASSERT_EQ(s->rps.size(), 3u);
  EXPECT_DOUBLE_EQ(s->rps[0], 2.0);
  EXPECT_DOUBLE_EQ(s->rps[1], 0.0);
  EXPECT_DOUBLE_EQ(s->rps[2], 2.0);
  WriteGzip(path, "timestamp_anon,value,container_ip,request_type\n1000.0,abc,,API Requests\n");
  auto bad = LoadGenaiQps(path, TraceOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(":2: field 'value'"), std::string::npos);
}

// A load curve holds a window per step from the first sample to the last:
// one far-off timestamp (found by the fuzzer: a year 6524 in an Azure
// trace, which hung the loader allocating a window a minute for 4,500
// years) or an infinite one is an error naming its line, not an allocation.
TEST(LoadTraceBoundsTest, AFarOffOrInfiniteTimestampIsAnErrorNotAnAllocation) {
  const std::string dir = MakeScratchDir("load-bounds");
  const std::string azure = WriteScratchFile(dir, "far.csv",
                                             "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                             "2023-11-16 18:17:03.97,48,10\n"
                                             "6524-11-16 18:17:04.97,48,10\n");
  auto far = LoadAzureLlmTrace(azure, TraceOptions{});
  ASSERT_FALSE(far.ok());
  EXPECT_NE(far.status().message().find(azure + ":3: field 'TIMESTAMP'"), std::string::npos)
      << far.status().message();
  // Within the bound (4,194,304 minutes is about 8 years) a trace still loads.
  const std::string year = WriteScratchFile(dir, "year.csv",
                                            "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                                            "2023-11-16 18:17:03.97,48,10\n"
                                            "2024-11-16 18:17:03.97,48,10\n");
  auto ok = LoadAzureLlmTrace(year, TraceOptions{});
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->rps.size(), 366u * 24 * 60 + 1);  // 2024 is a leap year
  const std::string qps = dir + "/inf.csv.gz";
  WriteGzip(qps, "timestamp_anon,value,container_ip,request_type\n1000.0,1,,API Requests\ninf,1,,API Requests\n");
  auto inf = LoadGenaiQps(qps, TraceOptions{});
  ASSERT_FALSE(inf.ok());
  EXPECT_NE(inf.status().message().find(":3: field 'timestamp_anon'"), std::string::npos) << inf.status().message();
  WriteGzip(qps, "timestamp_anon,value,container_ip,request_type\n1000.0,inf,,API Requests\n");
  auto value = LoadGenaiQps(qps, TraceOptions{});
  ASSERT_FALSE(value.ok());
  EXPECT_NE(value.status().message().find(":2: field 'value'"), std::string::npos) << value.status().message();
}

}  // namespace
}  // namespace tidal::sim
