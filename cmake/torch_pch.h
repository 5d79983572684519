// Precompiled header shared by every translation unit that uses libtorch.
// Compiling <ATen/ATen.h> costs seconds per file; this is paid once per build. nlohmann/json comes through
// strategies/head_family.h into every strategy and most tests: about 2 s more per file when parsed each time.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Optional.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>
