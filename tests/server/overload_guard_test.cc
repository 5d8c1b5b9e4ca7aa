// OverloadGuard's arithmetic, synchronously: seats, submit tokens and
// failure budgets with time handed in.
#include "server/overload_guard.h"

#include <string>

#include <gtest/gtest.h>

namespace tidal::server {
namespace {

using std::chrono::milliseconds;
using Clock = OverloadGuard::Clock;

OverloadLimits Seats(int seats) {
  OverloadLimits l;
  l.seats = seats;
  return l;
}

TEST(OverloadGuard, ALoneTenantUsesEverySeat) {
  // 8 seats, one tenant: contended from 6 taken on, where its share is
  // 8 / 1 = 8, so all 8 are its and the 9th is refused.
  OverloadGuard g(Seats(8));
  for (int i = 0; i < 8; ++i) EXPECT_TRUE(g.TryEnter("a")) << i;
  EXPECT_FALSE(g.TryEnter("a"));
  EXPECT_EQ(g.seats_taken(), 8);
}

TEST(OverloadGuard, AFloodingTenantIsHeldToItsShareAndTheOtherGetsSeats) {
  OverloadGuard g(Seats(8));
  for (int i = 0; i < 6; ++i) ASSERT_TRUE(g.TryEnter("a"));
  // 6 of 8 taken: contended. b holds none: share 8 / 2 = 4 > 0.
  EXPECT_TRUE(g.TryEnter("b"));
  // a holds 6 >= its share of 4: refused, though a seat is free.
  EXPECT_FALSE(g.TryEnter("a"));
  EXPECT_TRUE(g.TryEnter("b"));  // b: 1 < 4, taken 8
  // Every seat is taken, but b is below its share: it still gets one. The
  // guard bounds shares, not the total (the HTTP threads do), so a flood
  // never locks another tenant out.
  EXPECT_TRUE(g.TryEnter("b"));  // b: 2 < 4
  EXPECT_TRUE(g.TryEnter("b"));  // b: 3 < 4
  EXPECT_FALSE(g.TryEnter("b"));  // b: 4 >= 4
  // a gives back 4 seats: taken 10 - 4 = 6, still contended (6 * 4 >= 8 * 3).
  for (int i = 0; i < 4; ++i) g.Leave("a");
  EXPECT_TRUE(g.TryEnter("a"));   // a: 2 < 4
  EXPECT_FALSE(g.TryEnter("b"));  // b: 4 >= 4
}

TEST(OverloadGuard, BelowThreeQuartersNobodyIsRefused) {
  // 5 of 8 taken by a: 5 * 4 = 20 < 24, not contended; a's 6th passes even
  // though b holds a seat and a's share would be 4.
  OverloadGuard g(Seats(8));
  ASSERT_TRUE(g.TryEnter("b"));
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(g.TryEnter("a"));
  EXPECT_TRUE(g.TryEnter("a"));   // taken 5 before: not contended
  EXPECT_FALSE(g.TryEnter("a"));  // taken 6: contended, a holds 5 >= 4
  g.Leave("b");
  g.Leave("b");  // unmatched: ignored
  EXPECT_EQ(g.seats_taken(), 5);
}

TEST(OverloadGuard, SubmitRateIsPerTenantAndRefills) {
  OverloadLimits l;
  l.tenant_submit_rate_per_s = 2;  // burst defaults to 2 * 2 = 4
  OverloadGuard g(l);
  const Clock::time_point t0{};
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(g.TakeSubmit("a", t0)) << i;
  EXPECT_FALSE(g.TakeSubmit("a", t0));
  EXPECT_TRUE(g.TakeSubmit("b", t0));  // b's bucket is its own
  // 500 ms at 2/s = 1 token.
  EXPECT_TRUE(g.TakeSubmit("a", t0 + milliseconds(500)));
  EXPECT_FALSE(g.TakeSubmit("a", t0 + milliseconds(500)));
  EXPECT_EQ(g.RetryAfterS(Rejection::kSubmitRate), 1);  // ceil(1 / 2)
}

TEST(OverloadGuard, NoSubmitRateByDefault) {
  OverloadGuard g(OverloadLimits{});
  for (int i = 0; i < 100000; ++i) ASSERT_TRUE(g.TakeSubmit("a", Clock::time_point{}));
}

TEST(OverloadGuard, AuthFailureBudgetIsPerClient) {
  OverloadLimits l;
  l.auth_failure_burst = 3;
  l.auth_failure_rate_per_s = 0.5;
  OverloadGuard g(l);
  const Clock::time_point t0{};
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(g.NoteAuthFailure("10.0.0.1", t0));
  EXPECT_FALSE(g.NoteAuthFailure("10.0.0.1", t0));
  EXPECT_TRUE(g.NoteAuthFailure("10.0.0.2", t0));
  // 2 s at 0.5/s = 1 failure more.
  EXPECT_TRUE(g.NoteAuthFailure("10.0.0.1", t0 + milliseconds(2000)));
  EXPECT_FALSE(g.NoteAuthFailure("10.0.0.1", t0 + milliseconds(2000)));
  EXPECT_EQ(g.RetryAfterS(Rejection::kAuthFailures), 2);  // ceil(1 / 0.5)
}

TEST(OverloadGuard, TrackedClientsAreBounded) {
  OverloadLimits l;
  l.auth_failure_burst = 1;
  l.auth_failure_rate_per_s = 1;
  OverloadGuard g(l);
  const Clock::time_point t0{};
  for (size_t i = 0; i < OverloadGuard::kMaxTrackedClients; ++i) {
    ASSERT_TRUE(g.NoteAuthFailure("c" + std::to_string(i), t0));
  }
  // Full, and every tracked client is over budget: a new address starts
  // over budget too.
  EXPECT_FALSE(g.NoteAuthFailure("new", t0));
  // A second later every bucket is full again (1 token at 1/s): they are
  // forgotten, and the new address gets its budget.
  EXPECT_TRUE(g.NoteAuthFailure("new", t0 + milliseconds(1000)));
}

}  // namespace
}  // namespace tidal::server
