// A profiler recording as a Chrome trace (the "Trace Event Format" that Perfetto, ui.perfetto.dev,
// and chrome://tracing open): {"traceEvents": [...]} with one complete event (ph "X": ts and dur
// in microseconds) per span on its host thread, process "host" with a row per recording thread,
// and, for CUDA spans, one more on its stream, process "cuda:N" with a row per stream, at the
// times the stream reached the span's marks. Metadata events (ph "M") name the processes and rows.
#pragma once
#include <nlohmann/json.hpp>

#include "engine/profiler.h"

namespace cnn::train {

nlohmann::json chrome_trace(const profiler::Recording& recording);

}  // namespace cnn::train
