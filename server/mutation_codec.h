// Mutations as bytes: how the etcd store writes a batch of them as one
// journal entry in etcd, and how every replica reads it back. Both sides are
// in this file, so they cannot drift apart; the round trip is tested.
#ifndef TIDAL_SERVER_MUTATION_CODEC_H_
#define TIDAL_SERVER_MUTATION_CODEC_H_

#include <string>
#include <string_view>
#include <vector>

#include "core/common/status.h"
#include "server/store.h"

namespace tidal::server {

// A JSON array of the mutations, in order.
std::string EncodeMutation(const Mutation& m);
// `encoded`: EncodeMutation outputs, joined into one array.
std::string JoinMutations(const std::vector<std::string>& encoded);
// Strict: a field of the wrong type is an error naming it (a torn entry).
StatusOr<std::vector<Mutation>> DecodeMutations(std::string_view text);

}  // namespace tidal::server

#endif  // TIDAL_SERVER_MUTATION_CODEC_H_
