// Precompiled header: torch's headers dominate compile time, so every target shares this one.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "recall/core/torch.h"
