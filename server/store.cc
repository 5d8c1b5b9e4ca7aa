#include <fmt/format.h>

#include "server/etcd_store.h"
#include "server/store.h"

namespace tidal::server {

StatusOr<std::unique_ptr<Store>> OpenStore(const std::string& url) {
  if (url.starts_with("etcd://")) {
    TIDAL_ASSIGN_OR_RETURN(EtcdStoreUrl parsed, ParseEtcdStoreUrl(url));
    TIDAL_ASSIGN_OR_RETURN(std::unique_ptr<EtcdStore> store, EtcdStore::Open(parsed));
    return std::unique_ptr<Store>(std::move(store));
  }
  constexpr std::string_view kSqlite = "sqlite:";
  if (!url.starts_with(kSqlite) || url.size() == kSqlite.size()) {
    return InvalidArgument(fmt::format("--store: expected sqlite:PATH or etcd://HOST:PORT[,...], got \"{}\"", url));
  }
  return OpenSqliteStore(url.substr(kSqlite.size()), SqliteDurability::kFsync);
}

}  // namespace tidal::server
