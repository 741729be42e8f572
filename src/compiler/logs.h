// SMELT_LOGS: a comma list of artifacts (graph, fusion, output_code,
// recompiles, guards, graph_breaks, perf, or all) printed to stderr, each
// under one header line "[smelt:<artifact>] <title>".
#pragma once
#include <string>

namespace smelt::compiler {

bool log_enabled(const std::string& artifact);
void log_artifact(const std::string& artifact, const std::string& title,
                  const std::string& body = "");

}  // namespace smelt::compiler
