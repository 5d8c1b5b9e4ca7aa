// "Did you mean ...?" for a misspelt name: the closest of the known names by
// edit distance (insertions, deletions, substitutions and swaps of two
// neighbours each cost 1), if it is close enough to be a typo.
#ifndef TIDAL_CORE_COMMON_DID_YOU_MEAN_H_
#define TIDAL_CORE_COMMON_DID_YOU_MEAN_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tidal {

// Optimal string alignment distance between `a` and `b`.
size_t EditDistance(std::string_view a, std::string_view b);

// The known name nearest to `word` when at most max(2, |word| / 4) edits
// away (the first of equals); "" when none is.
std::string ClosestName(std::string_view word, const std::vector<std::string_view>& known);

// " (did you mean 'x'?)", or "" when no name is close.
std::string DidYouMean(std::string_view word, const std::vector<std::string_view>& known);

}  // namespace tidal

#endif  // TIDAL_CORE_COMMON_DID_YOU_MEAN_H_
