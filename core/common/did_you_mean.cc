#include "core/common/did_you_mean.h"

#include <algorithm>

namespace tidal {

size_t EditDistance(std::string_view a, std::string_view b) {
  // Three rows of the dynamic programme: i-2, i-1 and i.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string ClosestName(std::string_view word, const std::vector<std::string_view>& known) {
  const size_t limit = std::max<size_t>(2, word.size() / 4);
  std::string_view best;
  size_t best_distance = limit + 1;
  for (std::string_view k : known) {
    const size_t d = EditDistance(word, k);
    if (d < best_distance) {
      best_distance = d;
      best = k;
    }
  }
  return std::string(best);
}

std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& known) {
  const std::string best = ClosestName(word, known);
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

}  // namespace tidal
