// An example load generator for the example inference server. It finds the
// ready replicas of a service in the agents' pods.json files (or takes
// --url), and sends GET /infer at --rps, spread round-robin, switching to
// --surge-rps between --surge-at-s and --surge-at-s + --surge-for-s.
//
//   loadgen --service NAME --discover DIR[,DIR...] | --url http://H:P
//           [--rps R] [--duration-s S] [--surge-at-s T] [--surge-rps R]
//           [--surge-for-s S]
// Prints one line per 5 s: sent, ok, errors, targets.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>
#include <nlohmann/json.hpp>

namespace {

std::atomic<bool> g_stop{false};
void OnTerm(int) { g_stop = true; }

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep)) {
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

// Ports of the service's ready replicas, from each agent's pods.json.
std::vector<int> Discover(const std::vector<std::string>& dirs, const std::string& service) {
  std::vector<int> ports;
  for (const std::string& dir : dirs) {
    std::ifstream in(dir + "/pods.json");
    if (!in) continue;
    nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("pods")) continue;
    for (const auto& pod : j["pods"]) {
      if (pod.value("name", "") == service && pod.value("phase", "") == "ready" &&
          pod.value("port", 0) > 0) {
        ports.push_back(pod["port"].get<int>());
      }
    }
  }
  return ports;
}

}  // namespace

int main(int argc, char** argv) {
  std::string service, url;
  std::vector<std::string> dirs;
  double rps = 10, duration_s = 1e9, surge_at_s = -1, surge_rps = 0, surge_for_s = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i];
    const std::string value = argv[i + 1];
    if (arg == "--service") service = value;
    else if (arg == "--discover") dirs = Split(value, ',');
    else if (arg == "--url") url = value;
    else if (arg == "--rps") rps = std::atof(value.c_str());
    else if (arg == "--duration-s") duration_s = std::atof(value.c_str());
    else if (arg == "--surge-at-s") surge_at_s = std::atof(value.c_str());
    else if (arg == "--surge-rps") surge_rps = std::atof(value.c_str());
    else if (arg == "--surge-for-s") surge_for_s = std::atof(value.c_str());
    else {
      std::fprintf(stderr, "loadgen: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  if (url.empty() && (service.empty() || dirs.empty())) {
    std::fprintf(stderr, "loadgen: need --url, or --service and --discover\n");
    return 2;
  }
  signal(SIGTERM, OnTerm);
  signal(SIGINT, OnTerm);
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::atomic<long> sent{0}, ok{0}, errors{0};
  std::vector<int> ports;
  std::mutex ports_mu;
  // Requests block for the replica's latency, so a few senders share the
  // rate; each sleeps its own share of the interval.
  const int senders = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < senders; ++t) {
    threads.emplace_back([&, t] {
      std::map<int, std::unique_ptr<httplib::Client>> clients;
      long n = t;
      auto next = Clock::now() + std::chrono::milliseconds(t * 10);
      while (!g_stop) {
        const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
        if (elapsed > duration_s) break;
        const bool surge = surge_at_s >= 0 && elapsed >= surge_at_s && elapsed < surge_at_s + surge_for_s;
        const double rate = std::max(0.1, surge ? surge_rps : rps) / senders;
        next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(1.0 / rate));
        if (next < Clock::now()) next = Clock::now();  // fell behind: do not burst
        std::this_thread::sleep_until(next);
        int port = 0;
        {
          std::lock_guard lock(ports_mu);
          if (!ports.empty()) port = ports[static_cast<size_t>(n++) % ports.size()];
        }
        httplib::Result res{nullptr, httplib::Error::Unknown};
        ++sent;
        if (!url.empty()) {
          httplib::Client client(url);
          client.set_read_timeout(5, 0);
          res = client.Get("/infer");
        } else if (port > 0) {
          auto& client = clients[port];
          if (!client) {
            client = std::make_unique<httplib::Client>("127.0.0.1", port);
            client->set_read_timeout(5, 0);
            client->set_keep_alive(true);
          }
          res = client->Get("/infer");
        }
        if (res && res->status == 200) {
          ++ok;
        } else {
          ++errors;
        }
      }
    });
  }
  long last_report = -1;
  while (!g_stop) {
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    if (elapsed > duration_s) break;
    if (url.empty()) {
      std::vector<int> found = Discover(dirs, service);
      std::lock_guard lock(ports_mu);
      ports = found;
    }
    const long slot = static_cast<long>(elapsed / 5);
    if (slot != last_report) {
      last_report = slot;
      std::lock_guard lock(ports_mu);
      std::printf("loadgen: t=%.0fs sent=%ld ok=%ld errors=%ld replicas=%zu\n", elapsed, sent.load(),
                  ok.load(), errors.load(), url.empty() ? ports.size() : size_t{1});
      std::fflush(stdout);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  g_stop = true;
  for (auto& t : threads) t.join();
  std::printf("loadgen: done sent=%ld ok=%ld errors=%ld\n", sent.load(), ok.load(), errors.load());
  return 0;
}
