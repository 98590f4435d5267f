// RECALL_SKIP_WHEN_SANITIZED(why): a test that trains a model until it learns skips itself in the
// AddressSanitizer build (scripts/fuzz.sh), where it runs 5 to 7x slower. It still runs in every
// other build; the trainer's own code runs sanitized in the shorter runs of TrainRuns.
#pragma once
#include <gtest/gtest.h>

#if defined(__SANITIZE_ADDRESS__)
#define RECALL_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RECALL_TEST_SANITIZED 1
#endif
#endif

#ifdef RECALL_TEST_SANITIZED
#define RECALL_SKIP_WHEN_SANITIZED(why) GTEST_SKIP() << "sanitized build: " << why
#else
#define RECALL_SKIP_WHEN_SANITIZED(why) (void)0
#endif
