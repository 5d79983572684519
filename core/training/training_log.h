// The training log of a run: TrainingCurves (core/results/training_curves.h: the curves, the declared metrics and
// their one HDF5 codec) written as DIR/training_log.h5 by every trainer, plus the timestamp they record.
#pragma once

#include <string>

#include "core/results/training_curves.h"

namespace draftlab {

// The current UTC time as ISO 8601, for the "date" attribute.
std::string utc_timestamp();

}  // namespace draftlab
