// Precompiled header shared by every translation unit that uses libtorch.
// Compiling <ATen/ATen.h> costs seconds per file; this is paid once per build.
#pragma once
#include <ATen/ATen.h>
#include <c10/util/Optional.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>
