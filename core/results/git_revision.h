// The source revision the binary was built from (`git describe --always --dirty` at build time, "unknown"
// outside a git checkout). Recorded in every results file.
#pragma once

namespace draftlab {
const char* git_revision();
}  // namespace draftlab
