#include "protocol/leader_redirect.h"

#include <algorithm>

#include <string>

namespace tidal::protocol {

using nlohmann::json;

namespace {

bool IsServerUrl(std::string_view url) {
  for (std::string_view scheme : {"http://", "https://"}) {
    if (url.starts_with(scheme)) {
      const std::string_view rest = url.substr(scheme.size());
      return !rest.empty() && rest.front() != '/' && rest.find_first_of(" \t\r\n,") == std::string_view::npos;
    }
  }
  return false;
}

}  // namespace

json NotLeaderReplyToJson(const NotLeaderReply& reply) {
  json j = {{"error", {{"code", kNotLeaderCode}, {"message", reply.message}, {"field", nullptr}}}};
  j["leader"] = reply.leader_url.empty() ? json(nullptr) : json(reply.leader_url);
  return j;
}

std::optional<NotLeaderReply> NotLeaderReplyFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  auto error = j.find("error");
  if (error == j.end() || !error->is_object()) return std::nullopt;
  auto code = error->find("code");
  if (code == error->end() || !code->is_string() || code->get<std::string>() != kNotLeaderCode) return std::nullopt;
  NotLeaderReply reply;
  if (auto m = error->find("message"); m != error->end() && m->is_string()) reply.message = m->get<std::string>();
  if (auto l = j.find("leader"); l != j.end() && l->is_string() && l->get<std::string>().size() <= 1024 &&
                                 IsServerUrl(l->get<std::string>())) {
    reply.leader_url = l->get<std::string>();
  }
  return reply;
}

StatusOr<std::vector<std::string>> ParseServerList(std::string_view list, std::string_view flag) {
  std::vector<std::string> urls;
  size_t start = 0;
  while (start <= list.size()) {
    size_t end = list.find(',', start);
    if (end == std::string_view::npos) end = list.size();
    std::string_view url = list.substr(start, end - start);
    while (!url.empty() && url.front() == ' ') url.remove_prefix(1);
    while (!url.empty() && (url.back() == ' ' || url.back() == '/')) url.remove_suffix(1);
    if (url.empty()) {
      return InvalidArgument(std::string(flag) + ": an empty address in '" + std::string(list) + "'");
    }
    if (!IsServerUrl(url)) {
      return InvalidArgument(std::string(flag) + " '" + std::string(url) +
                             "': expected http://HOST:PORT or https://HOST:PORT");
    }
    if (std::find(urls.begin(), urls.end(), url) == urls.end()) urls.emplace_back(url);
    if (urls.size() > kMaxServerUrls) {
      return InvalidArgument(std::string(flag) + ": more than " + std::to_string(kMaxServerUrls) + " addresses");
    }
    start = end + 1;
  }
  return urls;
}

}  // namespace tidal::protocol
